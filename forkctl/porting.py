"""port(series, new base): move every patch onto a new upstream commit, dropping what upstream absorbed.

Per patch, in order, on top of the new base plus the patches already ported:
- absorbed, reason "patch-id": a commit in old-base..new-base makes the same change (any message);
- applied: it applies, and changes something; the new commit's message gains a provenance line naming
  the old fork commit (apply(old base, series)), so the chain of origins is kept;
- absorbed, reason "empty": it applies but changes nothing;
- absorbed, reason "reverse-applies": it does not apply, but its reverse does: the change is there;
- otherwise a conflict: stop in the scratch worktree (session.py), resumable with --continue.
Absorbed patches are never dropped silently: each becomes a `dropped:` entry with its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forkctl import build, exporting, git, session
from forkctl import manifest as manifest_mod
from forkctl.applying import refuse_checked_out
from forkctl.errors import BadInput
from forkctl.git import GitRepo
from forkctl.manifest import Manifest
from forkctl.series import Patch, Series


@dataclass
class PortOutcome:
    state: session.State
    conflict: session.ConflictReport | None = None
    range_diff: str = ""
    exported: list[exporting.ExportedPatch] | None = None


def _upstream_patch_ids(repo: GitRepo, old_base: str, new_base: str) -> dict[str, str]:
    ids: dict[str, str] = {}
    for sha in repo.rev_list(f"{old_base}..{new_base}", "--no-merges"):
        ids.setdefault(repo.commit_patch_id(sha), sha)
    return ids


def _message(patch: Patch, old_commit: str | None) -> str:
    return exporting.with_provenance(patch.message, old_commit) if old_commit else patch.message


def _absorbed(state: session.State, position: int, patch: Patch, reason: str, upstream: str | None) -> None:
    evidence: dict[str, Any] = {
        "subject": patch.subject,
        "file": state.files[position],
        "reason": reason,
        "upstream_commit": upstream,
        "base": state.base,
        "provenance": patch.provenance,
    }
    state.steps.append(session.Step(file=state.files[position], commit=None, absorbed=evidence))


def _run(repo: GitRepo, series: Series, state: session.State, start: int) -> session.ConflictReport | None:
    old_base, old_commits = state.extra["old_base"], state.extra["old_commits"]
    upstream_ids = _upstream_patch_ids(repo, old_base, state.base)
    head = state.head
    for position in range(start, len(series.patches)):
        patch = series.patches[position]
        if patch.patch_id in upstream_ids:
            _absorbed(state, position, patch, "patch-id", upstream_ids[patch.patch_id])
            continue
        with repo.private_index(head) as index:
            ok, _ = index.apply(patch.diff)
            if ok:
                tree = index.write_tree()
                if tree == repo.commit_info(head).tree:
                    _absorbed(state, position, patch, "empty", None)
                    continue
                message = _message(patch, old_commits[position])
                head = repo.commit_tree(tree, [head], message, build.identity_of(patch))
                state.steps.append(session.Step(file=state.files[position], commit=head))
                continue
            if git.index_apply_check(index, patch.diff, reverse=True):
                evidence = git.last_commit_touching(repo, f"{old_base}..{state.base}", patch.paths)
                _absorbed(state, position, patch, "reverse-applies", evidence)
                continue
        return session.open_conflict(repo, state, position, patch, head)
    return None


def _finish(repo: GitRepo, manifest: Manifest, state: session.State) -> PortOutcome:
    session.set_branch(repo, state.branch, state.head, state.old_tip)
    commits = [step.commit for step in state.steps if step.commit]
    exported = exporting.render(repo, manifest, commits)
    exporting.write(manifest, exported, exporting.compare(manifest, exported))
    dropped = [d.model_dump() for d in manifest.model.dropped]
    dropped += [
        {k: v for k, v in step.absorbed.items() if v is not None} for step in state.steps if step.absorbed
    ]
    manifest_mod.rewrite(manifest.path, {("upstream", "base"): state.base, ("dropped",): dropped})
    old_head = state.extra.get("old_head")
    shown = ""
    if old_head:
        shown = git.range_diff(repo, f"{state.extra['old_base']}..{old_head}", f"{state.base}..{state.head}")
    session.clear(repo)
    return PortOutcome(state=state, range_diff=shown, exported=exported)


def start(
    repo: GitRepo, manifest: Manifest, series: Series, old_base: str, new_base: str, branch: str
) -> PortOutcome:
    session.refuse_if_in_progress(repo)
    refuse_checked_out(repo, branch)
    if not repo.is_ancestor(old_base, new_base):
        raise BadInput(
            f"{new_base[:12]} does not descend from the current base {old_base[:12]}",
            hint="the base only moves forward: pick a newer upstream commit",
        )
    # The old fork commits are a pure function of (old base, series): rebuild them to name them.
    old = build.build_series(repo, old_base, series.patches)
    old_commits: list[str | None] = [a.commit for a in old.applied] + [None] * (
        len(series.patches) - len(old.applied)
    )
    state = session.State(
        operation="port",
        manifest=str(manifest.path),
        base=new_base,
        series_digest=series.digest,
        files=[entry.file for entry in manifest.series],
        branch=branch,
        force=True,
        old_tip=repo.branch_sha(branch),
        worktree=str(session.worktree_path(repo)),
        extra={
            "old_base": old_base,
            "old_commits": old_commits,
            "old_head": old.head if old.complete else None,
        },
    )
    conflict = _run(repo, series, state, 0)
    if conflict is not None:
        return PortOutcome(state=state, conflict=conflict)
    return _finish(repo, manifest, state)


def resume(repo: GitRepo, manifest: Manifest, series: Series) -> PortOutcome:
    state = session.require(repo, "port")
    if series.digest != state.series_digest:
        raise BadInput("the patch series changed since the port stopped", hint="run forkctl port --abort")
    index = state.conflict_index
    patch = series.patches[index]
    message = _message(patch, state.extra["old_commits"][index])
    commit = session.commit_resolution(repo, state, patch, message)
    state.steps.append(session.Step(file=state.files[index], commit=commit, resolved=True))
    state.conflict_index, state.conflict_parent, state.conflict_paths = -1, "", []
    session.save(repo, state)
    conflict = _run(repo, series, state, index + 1)
    if conflict is not None:
        return PortOutcome(state=state, conflict=conflict)
    return _finish(repo, manifest, state)
