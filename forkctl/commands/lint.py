"""forkctl lint: the manifest and the patch files agree, one line per problem."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput, ForkctlError
from forkctl.manifest import PATCHES_ROOT, Manifest
from forkctl.manifest.schema import SeriesEntry
from forkctl.report import Level, Problem, Report
from forkctl.series import NAME_RE, Patch, listed_provenance, parse_patch, parse_patches

if TYPE_CHECKING:  # --repo alone reads git objects
    from forkctl.git.repo import GitRepo


def _unlisted(manifest: Manifest) -> list[Path]:
    listed = {(manifest.root / entry.file).resolve() for entry in manifest.series}
    on_disk = sorted((manifest.root / PATCHES_ROOT).rglob("*.patch"))
    return [path for path in on_disk if path.resolve() not in listed]


def signed_off_by_author(patch: Patch) -> bool:
    """Does a line of the message read `Signed-off-by: <author name> <author email>`? (As the DCO check
    of GitHub reads it: anywhere in the message, the key in any case.)"""
    wanted = f"signed-off-by: {patch.author_name} <{patch.author_email}>".casefold()
    return any(line.strip().casefold() == wanted for line in patch.body.splitlines())


def _signoff_problem(
    manifest: Manifest, entry: SeriesEntry, patch: Patch, clone: Callable[[], GitRepo] | None
) -> Problem | None:
    """Under fork.require_signoff: the patch's author signed it off, or (proved in the --repo clone) it
    is a verbatim pick of an upstream commit, whose trailers are upstream's own; else which sign-off is
    missing, why the patch does not count as upstream's, and how to fix it."""
    if signed_off_by_author(patch):
        return None
    wanted = f"Signed-off-by: {patch.author_name} <{patch.author_email}>"
    branches = [manifest.upstream.branch, manifest.fork.mirror_branch]
    pick = None
    if clone is not None and patch.provenance:
        from forkctl.ops import upstreampick  # only --repo reads git objects

        pick = upstreampick.check_pick(clone(), branches, patch)
    if pick is not None and pick.verbatim:
        return None
    message = f"no '{wanted}' trailer (fork.require_signoff: the upstream takes patches under the DCO)"
    hint = (
        f"sign it off on the branch (git commit --amend -s, or git rebase --signoff) so it carries '{wanted}', "
        "and re-export it with forkctl export"
    )
    if pick is not None:
        message += f"; not a verbatim upstream pick: {pick.why_not}"
    elif patch.provenance and clone is None:
        origin = patch.provenance[0]
        message += f"; its provenance names {origin[:12]}, unchecked without --repo"
        hint += (
            f"; if it is upstream's commit {origin[:12]} picked verbatim (git cherry-pick -x), "
            f"forkctl lint --repo <a clone with upstream's {manifest.upstream.branch}> checks that and accepts it"
        )
    return Problem(message, file=entry.file, hint=hint)


def _clone_opener(manifest: Manifest, repo_path: Path) -> Callable[[], GitRepo]:
    """The --repo clone, opened (and checked for the base) on first use: a series whose patches are all
    signed off reads no repository for it."""
    opened: list[GitRepo] = []

    def clone() -> GitRepo:
        if not opened:
            from forkctl.ops import replay

            opened.append(replay.base_in_clone(repo_path, manifest.upstream.base)[0])
        return opened[0]

    return clone


def _own_paths(
    manifest: Manifest,
    patches: list[Patch],
    clone: Callable[[], GitRepo] | None,
    manifest_rel: str,
    result: Report,
) -> None:
    """Each fork.own_paths entry that touches a path the series changes or the package tree holds (with
    --repo, where tree_include is every path: the base's tree and the series' paths) is a problem."""
    from forkctl.chain.ownfiles import OWN_PATHS_HINT, own_path_conflicts

    def tree_paths() -> list[str]:
        assert clone is not None
        return [
            *clone().objects.all_entries(manifest.upstream.base),
            *(p for patch in patches for p in patch.paths),
        ]

    for found in own_path_conflicts(manifest, patches, tree_paths if clone is not None else None):
        message = (
            f"fork.own_paths entry {found}: the fork's own files never touch the series' or the package's"
        )
        result.fail(Problem(message, file=manifest_rel, hint=OWN_PATHS_HINT))


def _check_name(position: int, rel: str, patch: Patch | None) -> list[str]:
    name = Path(rel).name
    match = NAME_RE.match(name)
    if not match:
        return [
            "name must be NNNN-<slug>.patch (four digits or more, a dash, a slug of letters, digits, dots, "
            "dashes)"
        ]
    problems = []
    if match.group(1) != f"{position + 1:04d}":
        problems.append(
            f"number {match.group(1)} but it is patch {position + 1} in the series order "
            f"(rename it to {position + 1:04d}-{match.group(2)}.patch, or run forkctl export)"
        )
    return problems


def _parsed(manifest: Manifest, result: Report) -> list[Patch | None]:
    """Every listed patch parsed (all in one go when they all parse), None for each that does not."""
    try:
        return list(parse_patches(manifest.patch_paths()))
    except ForkctlError:
        pass
    parsed: list[Patch | None] = []
    for entry in manifest.series:
        try:
            parsed.append(parse_patch(manifest.root / entry.file))
        except ForkctlError as exc:
            result.fail(Problem(exc.message, file=entry.file))
            parsed.append(None)
    return parsed


def _stale(manifest: Manifest, clone: Path, parsed: list[Patch | None], result: Report) -> None:
    """Each patch that does not apply as written on the base in `clone` (plain git apply, no 3-way: the
    answer is the same in every clone that has the base) is a problem: stale, with the fix."""
    from forkctl.ops import replay  # only --repo reads git objects

    patches = [patch for patch in parsed if patch is not None]
    for patch, message in zip(
        patches, replay.check_in_clone(clone, manifest.upstream.base, patches), strict=True
    ):
        if message is not None:
            result.fail(
                Problem(
                    replay.stale_text(manifest.upstream.base, message),
                    file=str(patch.path.relative_to(manifest.root)),
                    hint=replay.stale_fix(manifest.upstream.base),
                )
            )
    _edited(manifest, clone, patches, result)


def _edited(manifest: Manifest, clone: Path, patches: list[Patch], result: Report) -> None:
    """Each file a patch makes otherwise than its index line promises (an edit by hand, a truncation)
    is a problem, with the command that rewrites the patch from what it does."""
    import shlex

    from forkctl.ops import refresh, replay

    for unkept in refresh.unkept_in_clone(clone, manifest.upstream.base, patches):
        result.fail(
            Problem(
                f"the index line of {unkept.path} promises blob {unkept.promised[:12]}, but applying the "
                f"patch on the base gives {unkept.got[:12]}: it was edited by hand (or truncated)",
                file=str(unkept.patch.path.relative_to(manifest.root)),
                hint=f"if the edit is meant, {replay.refresh_fix(unkept.patch)} --repo "
                f"{shlex.quote(str(clone))} rewrites the file from what it does; otherwise restore it "
                "from git",
            )
        )


def _provenance_problems(entry: SeriesEntry, patch: Patch, manifest_rel: str) -> list[Problem]:
    """The manifest's `provenance:` against the patch's provenance lines: when it names any, it names
    each line's commit, in order (an own patch has none, a squash of picks several: both are fine)."""
    listed = listed_provenance(entry)
    if not listed:
        return []
    lines = patch.provenance
    if len(listed) == len(lines) and all(
        line.startswith(name) for name, line in zip(listed, lines, strict=True)
    ):
        return []
    return [
        Problem(
            f"manifest says provenance {', '.join(listed)} but the patch's lines name "
            + (", ".join(lines) or "no commit"),
            file=manifest_rel,
            hint="run forkctl export to bring the manifest in line",
        )
    ]


def _upstream_lint(manifest: Manifest, repo_path: Path | None, trust_local: bool) -> Report:
    """Upstream's own pre-commit hooks on the fork head, against the base: what is new is a problem."""
    from forkctl import report
    from forkctl.git.repo import repo_holding
    from forkctl.series import load_series
    from forkctl.upstreamlint.check import check

    series = load_series(manifest)
    repo = repo_holding(repo_path, manifest.upstream.url, [series.base])
    base = _resolved_base(repo, series.base)
    with report.phases("lint --upstream") as step:
        outcome = check(repo, base, series.patches, step, trust_local)
    result = Report(command="lint")
    for hook in outcome.hooks:
        result.lines.append(
            f"{hook.tool} ({hook.id}): {len(hook.files)} file(s); messages on the base {hook.base_findings}, "
            f"on the fork head {hook.head_findings}, new {len(hook.new)}"
        )
        for finding in hook.new:
            result.fail(
                Problem(
                    f"{finding.tool} ({finding.hook}): {finding.message}",
                    file=finding.file,
                    line=finding.line,
                    hint="upstream's CI runs this hook on a pull request: fix the patch (forkctl edit, then "
                    "forkctl export) so that the fork head passes it as the base does",
                )
            )
    for skipped in outcome.skipped:
        result.fail(
            Problem(
                f"upstream's hook {skipped.id} ({skipped.repo}) not run: {skipped.why}", level=Level.WARNING
            )
        )
    result.data = {
        "base": outcome.base,
        "fork_head": outcome.head,
        "files": outcome.touched,
        "hooks": [
            {
                "id": h.id,
                "tool": h.tool,
                "files": h.files,
                "base_findings": h.base_findings,
                "head_findings": h.head_findings,
                "new": len(h.new),
            }
            for h in outcome.hooks
        ],
        "skipped": [{"id": s.id, "repo": s.repo, "why": s.why} for s in outcome.skipped],
        "new": [
            {"hook": f.hook, "tool": f.tool, "file": f.file, "line": f.line, "message": f.message}
            for f in outcome.new
        ],
        "problems_found": len(result.problems),
    }
    if result.ok:
        result.lines.append(
            f"lint --upstream: ok (no new message from {len(outcome.hooks)} upstream hook(s) on "
            f"{len(outcome.touched)} file(s) the series touches)"
        )
    return result


def _resolved_base(repo: GitRepo, base_rev: str) -> str:
    base = repo.objects.resolve_commit(base_rev)
    if base is None:
        raise BadInput(
            f"{repo.git_dir} does not have the base commit {base_rev}",
            hint="fetch upstream into that clone first (git fetch origin)",
        )
    return base


@click.command("lint", short_help=verbs.summary("lint"))
@options.repo(
    "A clone of upstream that has the base commit: also check that each patch applies as written on it "
    "(no 3-way; one that does not is stale) and makes the blobs its index lines promise. With --upstream: "
    "where the base and the fork head are read (default: forkctl's cache of upstream.url)."
)
@click.option(
    "--upstream",
    is_flag=True,
    help="Run the formatters and linters upstream's own .pre-commit-config.yaml pins at the base, with "
    "upstream's config files, on the files the series touches, on the base and on the fork head; report "
    "what is new on the fork head (exit 1). Tools are installed once into forkctl's cache (package index "
    "needed the first time only).",
)
@click.option(
    "--trust-local-hooks/--no-trust-local-hooks",
    "trust_local",
    default=False,
    help="With --upstream: also run upstream's `repo: local` hooks, whose commands (and python packages) "
    "upstream's configuration names. Off by default: such a hook is listed as not run.",
)
@output_options(github=True)
@forkctl_command
def command(ctx: Context, repo_path: Path | None, upstream: bool, trust_local: bool) -> Report:
    """Check that manifest and patch files agree: every listed file parses and has a provenance tag,
    every patch file is listed, and names follow NNNN-<slug>.patch in series order. With --repo, also
    that each patch applies as written on the base in that clone (a patch that does not is stale) and
    that each file comes out as the patch's index line promises (one edited by hand does not: forkctl
    refresh rewrites it).

    \b
    With --upstream: upstream's own lint instead. The hooks of upstream's .pre-commit-config.yaml at
    the base (black, isort, pylint, ruff, flake8 at the versions pinned there; local python or
    system hooks only with --trust-local-hooks) run on the files the series touches, in trees written from git objects (never a
    checkout), on the base and on the fork head (apply(series, base)); a message the fork head has and
    the base has not (same hook, file, message and line text) is a problem. Each tool is installed as
    pinned into its own venv under $FORKCTL_CACHE/upstream-lint/, once: later runs work offline."""
    if trust_local and not upstream:
        raise BadInput("--trust-local-hooks goes with --upstream", hint="add --upstream, or drop it")
    manifest = ctx.manifest()
    if upstream:
        return _upstream_lint(manifest, repo_path, trust_local)
    result = Report(command="lint")
    parsed = _parsed(manifest, result)
    manifest_rel = str(manifest.path.relative_to(manifest.root))
    clone = _clone_opener(manifest, repo_path) if repo_path is not None else None
    for position, (entry, patch) in enumerate(zip(manifest.series, parsed, strict=True)):
        for message in _check_name(position, entry.file, patch):
            result.fail(Problem(message, file=entry.file))
        if patch is None:
            continue
        unsigned = _signoff_problem(manifest, entry, patch, clone) if manifest.fork.require_signoff else None
        if unsigned is not None:
            result.fail(unsigned)
        for problem in _provenance_problems(entry, patch, manifest_rel):
            result.fail(problem)
    for path in _unlisted(manifest):
        rel = str(path.relative_to(manifest.root))
        result.fail(
            Problem(
                "patch file is not listed in the manifest's series",
                file=rel,
                hint=f"add it to `series:` in {manifest_rel} or delete it",
            )
        )
    _own_paths(manifest, [patch for patch in parsed if patch is not None], clone, manifest_rel, result)
    if repo_path is not None:
        _stale(manifest, repo_path, parsed, result)
    # `patches` is the list of patch files, as in every command's JSON; the count has its own key.
    result.data = {
        "patches": [{"file": entry.file} for entry in manifest.series],
        "patch_count": len(manifest.series),
        "problems_found": len(result.problems),
    }
    if result.ok:
        result.lines.append(f"lint: ok ({len(manifest.series)} patches, manifest {manifest_rel})")
    return result
