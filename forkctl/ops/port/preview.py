"""What a port onto a target would do, moving nothing (`status --onto`, `sync`): each patch's verdict
(the upstream commit on which a patch first stops porting is `bisect.py`'s).
"""

from __future__ import annotations

import msgspec

from forkctl.git.repo import GitRepo
from forkctl.ops import replay
from forkctl.ops.port.judge import Judge, PatchVerdict, old_series, start_quick
from forkctl.series import Patch, Series


class PreviewEntry(msgspec.Struct, frozen=True):
    position: int
    patch: Patch
    verdict: PatchVerdict
    plain: bool = False  # applies with plain `git apply` (no 3-way needed)


def preview(
    repo: GitRepo,
    series: Series,
    old_base: str,
    target: str,
    upto: int | None = None,
    old_commits: list[str | None] | None = None,
) -> list[PreviewEntry]:
    """Judge every patch (or the first `upto` + 1) on `target` as port would. Objects only: no ref, file or
    manifest moves. A conflicting patch is left out of the head the later patches are judged on.
    `old_commits`: apply(old base, series), when the caller already has it."""
    return _walk(repo, series, old_base, target, upto, old_commits)[0]


class ObjectPort(msgspec.Struct, frozen=True):
    """A port onto a target made on objects only (`forkctl sync`): each patch's verdict, and the commits
    `forkctl port --onto` would make (absorbed patches left out), head last; `commits` is empty when a
    patch conflicts (there is no ported head to show then)."""

    entries: list[PreviewEntry]
    commits: list[str]

    @property
    def conflicts(self) -> list[PreviewEntry]:
        return [entry for entry in self.entries if entry.verdict.kind == "conflict"]


def port_objects(repo: GitRepo, series: Series, old_base: str, target: str) -> ObjectPort:
    """Port the series onto `target` as `forkctl port --onto` does (the same merges, the same messages:
    the patches' own), writing commit objects and moving nothing."""
    entries, commits = _walk(repo, series, old_base, target, None, None)
    clean = all(entry.verdict.kind != "conflict" for entry in entries)
    return ObjectPort(entries=entries, commits=commits if clean else [])


def _walk(
    repo: GitRepo,
    series: Series,
    old_base: str,
    target: str,
    upto: int | None,
    old_commits: list[str | None] | None,
) -> tuple[list[PreviewEntry], list[str]]:
    if old_commits is None:
        old_commits, _ = old_series(repo, old_base, series)
    judge = Judge(repo, old_base, target, old_commits)
    head, head_tree = target, repo.trees.commit_tree_id(target)
    entries: list[PreviewEntry] = []
    made: list[str] = []
    last = len(series.patches) if upto is None else upto + 1
    judge.know_series(series.patches[:last])
    start_quick(judge, 0, target)
    batch = replay.CommitBatch(repo)
    for position, patch in enumerate(series.patches[:last]):
        verdict = judge.judge(position, patch, head, head_tree)
        plain = False
        if judge.quick is not None:  # a conflict is left out of the head: it moves the parent alone
            moved = verdict.tree if verdict.kind == "applied" and verdict.tree is not None else head_tree
            plain = judge.quick.picked(position, verdict.tree)
            if not judge.quick.advance(position, head_tree, moved):
                judge.quick = None
        if verdict.kind == "applied":
            if not plain:
                with repo.indexes.private_index(head_tree) as index:
                    plain = index.apply_check(patch.diff)
            assert verdict.tree is not None
            head, head_tree = batch.make(head, verdict.tree, patch), verdict.tree  # port's message too
            made.append(head)
        entries.append(PreviewEntry(position=position, patch=patch, verdict=verdict, plain=plain))
    batch.flush()
    return entries, made
