"""forkctl apply: build the fork branch from (base, series), or patch a plain directory tree.

Two targets:
- a repository (`--base`): each patch becomes a reproducible commit made without a checkout, and the
  integration branch is set to the result; a stale patch (one that does not apply as written on the
  base) is refused with the fix, nothing written; `--continue` / `--abort` finish or undo a stop an
  earlier forkctl left in its private worktree.
- a directory tree (`--tree`): the series is applied to the files in place, all or nothing, and a tree
  that already carries the series is left alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from forkctl import report
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options, toolkit_locked
from forkctl.errors import BadInput
from forkctl.git.repo import GitRepo
from forkctl.manifest import Manifest
from forkctl.ops import apply, progress, replay
from forkctl.ops.state import SPARSE_NOTE, ConflictReport, MarkersRemain, State
from forkctl.report import Problem, Report, Table
from forkctl.series import load_series

if TYPE_CHECKING:
    from forkctl.ops.patch_dir import TreePlan


def _tree_report(tree_plan: TreePlan, reverse: bool, changed: list[str]) -> Report:

    result = Report(command="apply")
    rows = []
    patches_json = []
    for verdict in tree_plan.verdicts:
        name = verdict.patch.path.name
        rows.append([name, verdict.patch.subject, str(verdict.status), ", ".join(verdict.paths) or "-"])
        patches_json.append(
            {
                "file": name,
                "subject": verdict.patch.subject,
                "status": str(verdict.status),
                "paths": verdict.paths,
                **({"message": verdict.message} if verdict.message else {}),
            }
        )
    result.tables.append(
        Table(
            title=f"{tree_plan.tree} ({tree_plan.include}): series {tree_plan.state}",
            columns=["patch", "subject", "status in the tree before", "paths"],
            rows=rows,
        )
    )
    result.data = {
        "target": "tree",
        "tree": str(tree_plan.tree),
        "include": tree_plan.include,
        "direction": "reverse" if reverse else "apply",
        "state": str(tree_plan.state),
        "changed": changed,
        "patches": patches_json,
    }
    return result


def _apply_tree(ctx: Context, tree: Path, include: str, reverse: bool) -> Report:
    if not tree.is_dir():
        raise BadInput(
            f"{tree} is not a directory", hint="pass the folder that holds the package the series patches"
        )
    from forkctl.ops import patch_dir  # --tree only: the repository mode never loads it

    series = load_series(ctx.manifest())
    finished = patch_dir.recover(tree)  # an earlier run killed mid-swap is completed first
    tree_plan = patch_dir.plan(tree, series.patches, include, reverse=reverse)
    if tree_plan.state == patch_dir.TreeState.PARTIAL and not patch_dir.holds_any(
        tree, series.patches, include
    ):
        # A file a patch needs (its verdict is a conflict there), not one the series creates.
        needing = [v for v in tree_plan.verdicts if v.status == patch_dir.PatchStatus.CONFLICT]
        example = next(p for v in [*needing, *tree_plan.verdicts] for p in v.paths)
        raise BadInput(
            f"{tree} holds none of the files the series patches (no {example}): nothing to patch",
            hint="pass the folder that holds the package (paths are relative to it: "
            f"DIR/{example}), e.g. site-packages for an installed megatron-core",
        )
    changed = [p.path.name for p in patch_dir.execute(tree_plan, reverse=reverse)]
    result = _tree_report(tree_plan, reverse, changed)
    if finished.finished:
        result.lines.append(f"finished the swap of an earlier apply --tree that was interrupted in {tree}")
    elif finished.removed:
        result.lines.append(
            f"removed {finished.removed} file(s) an earlier apply --tree, interrupted, had staged in {tree}"
        )
    trivial = [v.patch.path.name for v in tree_plan.verdicts if v.status == patch_dir.PatchStatus.NO_PATHS]
    if trivial:
        result.lines.append(f"no path matches {include} in: {', '.join(trivial)} (counted as applied)")
    verb = "took out" if reverse else "applied"
    if changed:
        result.lines.append(f"{verb} {len(changed)} patch(es) to {tree}")
    elif tree_plan.state == patch_dir.TreeState.PARTIAL:
        carried = [v.patch.path.name for v in tree_plan.verdicts if v.status == patch_dir.PatchStatus.APPLIED]
        missing = [v.patch.path.name for v in tree_plan.verdicts if v.status != patch_dir.PatchStatus.APPLIED]
        missing = [name for name in missing if name not in trivial]
        result.fail(
            Problem(
                f"{tree} carries part of the series: applied: {', '.join(carried) or 'none'}; "
                f"not applied: {', '.join(missing) or 'none'}; nothing was changed",
                hint="start from a clean copy of the package, or take the series out with --reverse "
                "on the copy that carries all of it",
            )
        )
    elif reverse:
        result.lines.append(f"{tree} does not carry the series: nothing to take out")
    else:
        result.lines.append(f"{tree} already carries every patch: left alone")
    return result


def _store(manifest: Manifest, repo_path: Path | None, url: str | None, revs: list[str]) -> GitRepo:
    if repo_path is not None:  # the user's clone as it is: the cache of partial clones is not loaded
        return GitRepo(repo_path)
    from forkctl.git import clonecache

    return clonecache.cached_objects(url or manifest.upstream.url, revs)


def _stopped(
    result: Report, state: State, conflict: ConflictReport, rows: list[list[str]], ways: dict[str, str]
) -> None:
    """An apply stopped on a conflict: the row, the data, and the ways on (`ways`: verb -> command)."""
    name = Path(state.files[state.conflict_index]).name
    rows.append([name, "-", "conflict"])
    result.data |= {
        "head": None,
        "conflict": {
            "file": state.files[state.conflict_index],
            "subject": conflict.patch.subject,
            "parent": conflict.parent,
            "paths": conflict.paths,
            "message": conflict.message,
            "worktree": str(conflict.worktree),
            "commands": ways,
            "checked_out": conflict.checked_out,
        },
    }
    result.fail(
        Problem(
            f"{name} ({conflict.patch.subject}) does not apply on {conflict.parent[:12]}: conflicts in "
            f"{', '.join(conflict.paths) or '(see git output)'}\n{conflict.message}",
            file=state.files[state.conflict_index],
            hint=f"resolve the files in {conflict.worktree} ({SPARSE_NOTE}), then run {ways['continue']}; "
            f"or {ways['abort']} to leave everything as it was",
        )
    )


def _refused_stale(result: Report, state: State, stale: replay.Conflict) -> None:
    """An apply refused because a patch is stale on its own base: nothing was written anywhere."""
    file = state.files[stale.index]
    result.data |= {
        "head": None,
        "stale": {
            "file": file,
            "subject": stale.patch.subject,
            "parent": stale.parent,
            "message": stale.message.strip(),
        },
    }
    result.fail(
        Problem(
            f"{Path(file).name} ({stale.patch.subject}) is stale: it does not apply as written on "
            f"{stale.parent[:12]} (the base plus the patches before it); nothing was written, no branch "
            f"moved\n{stale.message.strip()}",
            file=file,
            hint=replay.stale_fix(state.base),
        )
    )


def _branch_line(state: State) -> str:
    """What happened to the branch: moved (old tip shown), already there, or created."""
    if state.old_tip and state.old_tip != state.head:
        return f"moved {state.branch} from {state.old_tip} (old tip) to {state.head}"
    if state.old_tip == state.head:
        return f"{state.branch} already at {state.head}"
    return f"created {state.branch} at {state.head}"


def _outcome_report(outcome: apply.Outcome, repo: GitRepo, ways: dict[str, str]) -> Report:
    state = outcome.state
    result = Report(command="apply")
    rows = [
        [Path(step.file).name, step.commit or "-", "resolved by hand" if step.resolved else "applied"]
        for step in state.steps
    ]
    result.data = {
        "target": "repo",
        "repo": str(repo.git_dir),
        "base": state.base,
        "branch": state.branch,
        "series_digest": state.series_digest,
        "commits": [
            {"file": step.file, "commit": step.commit, "resolved": step.resolved} for step in state.steps
        ],
        # A hand resolution makes the head a product of that resolution, not of (base, series) alone.
        "reproducible": not any(step.resolved for step in state.steps),
    }
    if outcome.stale is not None:
        _refused_stale(result, state, outcome.stale)
    elif outcome.conflict is not None:
        _stopped(result, state, outcome.conflict, rows, ways)
    else:
        result.data |= {"head": state.head, "old_tip": state.old_tip}
        result.lines += [_branch_line(state), state.head]
    result.tables.insert(
        0,
        Table(
            title=f"{state.branch} = {state.base[:12]} + series",
            columns=["patch", "commit", "how"],
            rows=rows,
        ),
    )
    return result


TREE_ONLY = ("reverse", "include")
REPOSITORY_ONLY = ("base", "repo", "upstream_repo", "branch", "force", "resume", "abort")
FLAG = {"resume": "--continue"}  # parameters whose option is spelled otherwise


def _refuse_ignored_options(tree: Path | None, **given: bool) -> None:
    """apply has two modes (a plain --tree, or a repository); an option of the other mode would be
    ignored without a word, so it is refused instead."""
    other = REPOSITORY_ONLY if tree is not None else TREE_ONLY
    ignored = [FLAG.get(name, f"--{name.replace('_', '-')}") for name in other if given[name]]
    if not ignored:
        return
    verb = "has" if len(ignored) == 1 else "have"
    if tree is not None:
        raise BadInput(
            f"{', '.join(ignored)} {verb} no effect with --tree",
            hint="drop it: --tree patches a plain directory and builds no branch",
        )
    raise BadInput(
        f"{', '.join(ignored)} {verb} no effect without --tree",
        hint="pass --tree PATH to patch a plain directory, or drop it",
    )


@click.command("apply", short_help=verbs.summary("apply"))
@click.option(
    "--base", "base_rev", help="Upstream commit (full SHA or abbreviation) to build on: the manifest's base."
)
@options.repo("An existing clone (bare or not) with the upstream objects; the branch is created there.")
@options.upstream_repo(
    "Where to fetch upstream objects into the cache from (default: manifest upstream.url).",
    retired=("--upstream-url",),
)
@options.branch("Branch to create (default: manifest fork.branch).")
@click.option("--force", is_flag=True, help="Move an existing branch (its old tip is printed).")
@options.resume("Go on after resolving a stopped apply's conflict in its worktree.")
@options.abort("Give up a stopped apply: remove its worktree and state; no ref moves.")
@click.option(
    "--tree",
    type=click.Path(path_type=Path, file_okay=False),
    help="Apply to this plain directory (e.g. a copy of site-packages holding megatron/) instead of a repository.",
)
@click.option("--reverse", is_flag=True, help="With --tree: take the series back out, last patch first.")
@click.option(
    "--include",
    metavar="GLOB",
    help="With --tree: only paths matching this glob are patched, others ignored (default: the "
    "manifest's fork.tree_include, ** when unset).",
)
@output_options()
@forkctl_command
@toolkit_locked
def command(
    ctx: Context,
    tree: Path | None,
    reverse: bool,
    include: str | None,
    base_rev: str | None,
    repo_path: Path | None,
    upstream_repo: str | None,
    branch: str | None,
    force: bool,
    resume: bool,
    abort: bool,
) -> Report:
    """Apply the patch series.

    \b
    With --base SHA: build the integration branch (default fork.branch) as one reproducible commit
    per patch (author = committer = the patch's author and date, so every machine gets the same SHAs),
    without a checkout. Objects come from --repo or from a cache of partial clones ($FORKCTL_CACHE or
    ~/.cache/forkctl). The user's HEAD, index and files are never touched. A patch that does not
    apply as written (no 3-way) is stale: nothing is written and it exits 1 with the fix (forkctl
    port --onto the base, or re-export the branch). --continue / --abort finish or undo a stop that
    an earlier forkctl left in a scratch worktree inside the git dir.

    \b
    With --tree PATH: patch the files under PATH in place. All or nothing: the whole series is first
    rehearsed on a scratch copy, so a failure changes no file. A tree that already carries every patch
    is left alone (exit 0); a tree that carries only part of the series is refused (exit 1) with the
    lists of patches that are and are not in it. --reverse takes the series back out.
    """
    _refuse_ignored_options(
        tree,
        reverse=reverse,
        include=include is not None,
        base=base_rev is not None,
        repo=repo_path is not None,
        upstream_repo=upstream_repo is not None,
        branch=branch is not None,
        force=force,
        resume=resume,
        abort=abort,
    )
    if tree is not None:
        return _apply_tree(ctx, tree, include or ctx.manifest().fork.tree_include, reverse)
    if resume and abort:
        raise BadInput("--continue and --abort exclude each other", hint="pass one of them")
    manifest = ctx.manifest()
    # The ways on after a stop, with what this run was given: printed, they work as printed.
    where = str(repo_path) if repo_path else None
    ways = progress.ways_on("apply", True, where, str(manifest.path), upstream_repo=upstream_repo)
    if abort or resume:
        repo = _store(manifest, repo_path, upstream_repo, [])
        if abort:
            state = apply.abort(repo, manifest.path)
            branch = state.branch if state else None
            result = Report(command="apply", data={"aborted": True, "branch": branch})
            result.lines.append(
                f"aborted: removed the worktree and state; {branch} left as it was"
                if state
                else "aborted: the state file was unreadable; removed it and the scratch worktree, no ref moved"
            )
            return result
        try:
            resumed = apply.resume(repo, manifest, load_series(manifest))
        except MarkersRemain as exc:
            raise exc.with_ways(ways) from None
        return _outcome_report(resumed, repo, ways)
    if base_rev is None:
        raise BadInput(
            "nothing to apply to", hint="pass --base SHA (the manifest's base), --tree PATH, or --continue"
        )
    repo = _store(manifest, repo_path, upstream_repo, [base_rev, manifest.upstream.base])
    base = apply.resolve_base(repo, base_rev, manifest)
    series = load_series(manifest)
    target = manifest.fork.branch if branch is None else branch
    with report.progress(f"applying {len(series.patches)} patches", len(series.patches)) as advance:
        outcome = apply.start(repo, manifest, series, base, target, force, on_patch=advance)
    return _outcome_report(outcome, repo, ways)
