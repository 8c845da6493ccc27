"""What a port onto a target would do, moving nothing (`status --onto`, `sync`): each patch's verdict
(the upstream commit on which a patch first stops porting is `bisect.py`'s).
"""

from __future__ import annotations

import msgspec

from forkctl.git.repo import GitRepo
from forkctl.ops import replay
from forkctl.ops.port.judge import Judge, walk_series
from forkctl.ops.port.walk import Judged, old_series
from forkctl.series import Series


def preview(
    repo: GitRepo,
    series: Series,
    old_base: str,
    target: str,
    upto: int | None = None,
    old_commits: list[str | None] | None = None,
) -> list[Judged]:
    """Judge every patch (or the first `upto` + 1) on `target` as port would. Objects only: no ref, file or
    manifest moves. A conflicting patch is left out of the head the later patches are judged on.
    `old_commits`: apply(old base, series), when the caller already has it."""
    return _walk(repo, series, old_base, target, upto, old_commits)


class ObjectPort(msgspec.Struct, frozen=True):
    """A port onto a target made on objects only (`forkctl sync`): each patch's verdict, and the commits
    `forkctl port --onto` would make (absorbed patches left out), head last; `commits` is empty when a
    patch conflicts (there is no ported head to show then)."""

    entries: list[Judged]
    commits: list[str]

    @property
    def conflicts(self) -> list[Judged]:
        return [entry for entry in self.entries if entry.verdict.kind == "conflict"]


def port_objects(repo: GitRepo, series: Series, old_base: str, target: str) -> ObjectPort:
    """Port the series onto `target` as `forkctl port --onto` does (the same merges, the same messages:
    the patches' own), writing commit objects and moving nothing."""
    entries = _walk(repo, series, old_base, target, None, None)
    clean = all(entry.verdict.kind != "conflict" for entry in entries)
    made = [entry.head for entry in entries if entry.verdict.kind == "applied"]
    return ObjectPort(entries=entries, commits=made if clean else [])


def _walk(
    repo: GitRepo,
    series: Series,
    old_base: str,
    target: str,
    upto: int | None,
    old_commits: list[str | None] | None,
) -> list[Judged]:
    if old_commits is None:
        old_commits, _ = old_series(repo, old_base, series)
    judge = Judge(repo, old_base, target, old_commits)
    last = len(series.patches) if upto is None else upto + 1
    batch = replay.CommitBatch(repo)
    entries = list(walk_series(judge, series.patches[:last], 0, target, batch, plain=True))
    batch.flush()
    return entries
