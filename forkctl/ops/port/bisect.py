"""`status --onto --first-break`: by bisection of a line of descent from the old base to the target, the
upstream commit on which a patch first stops porting, for each patch that conflicts on the target.

The line bisected: the descendants of the base that the target reaches (`rev-list --ancestry-path`),
stepping from the target to its first parent wherever that stays among them, else to the parent that does
(`History.ancestry_chain`). A merge whose first parent is a line the base is not on (upstream's
`main2dev/*`: a dev line forked before the base takes main in) is left by its parent on main, so every
commit named descends from the base and its parent on the line is known to port the patch: the base
itself, or a commit the bisection judged. A culprit that is a merge says which side came in with it.
A target that does not descend from the base (a backport) is bisected from its merge base with the base,
which is judged first: a patch that conflicts there already has no first break in that range.

A step asks one question of a candidate commit: does the series, up to this patch, still port there?
The answer is the series' merges on that candidate, patch by patch on the port's walk (`walk.py`) with
a judge of merges alone (`MergesOnly`; a conflicting patch left out of the head the later ones meet).
Nothing else decides it: patch-ids and provenance only name the upstream commit a verdict cites, so a
step computes none (they used to be recomputed for base..candidate on every step, the most of a step's
time on real history). Each candidate's merges are kept: a later step, or the bisection of a later
patch, that meets the candidate again reuses them and only merges the patches not merged there yet.
The candidates and their trees are read once, in two processes.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from forkctl.git.commits import CommitInfo
from forkctl.git.repo import GitRepo
from forkctl.git.sha import TreeSha
from forkctl.ops.port.judge import PatchVerdict, fate, merge_patch
from forkctl.ops.port.walk import Judged, QuickPicks, old_series, walk
from forkctl.series import Patch, Series

Tell = Callable[[str], None]  # told each commit a bisection judges (progress)


class FirstBreak(msgspec.Struct, frozen=True):
    """The first upstream commit on the line from the base to the target on which a patch stops porting."""

    commit: str
    subject: str
    author: str
    date: str
    files: list[str]  # what it changes against `parent`
    tested: int  # how many candidate commits bisection had to judge
    parent: str = ""  # its parent on the line, on which the patch still ports
    merged: list[str] = []  # a merge's other parents: the side that came in with it


class MergesOnly:
    """A judge (`walk.Judging`) of a patch by its merge alone: the fate a bisection step asks, no
    upstream commit named (no patch-id, no provenance) and no pick made in this process."""

    quick: QuickPicks | None = None  # every patch merged by git

    def __init__(self, repo: GitRepo, old_base: str, old_commits: list[str | None]) -> None:
        self.repo, self.old_base, self.old_commits = repo, old_base, old_commits

    def judge(self, position: int, patch: Patch, head: str, head_tree: TreeSha) -> PatchVerdict:
        merged = merge_patch(self.repo, self.old_base, self.old_commits, position, patch, head, head_tree)
        kind = fate(merged, head_tree)
        return PatchVerdict(kind, tree=merged.tree if kind == "applied" else None, merged=merged)


class FirstBreaks:
    """The bisections of one (old base, target, series), sharing their work across steps and patches."""

    def __init__(self, repo: GitRepo, series: Series, old_base: str, target: str) -> None:
        self.repo, self.series, self.old_base, self.target = repo, series, old_base, target
        self.old_commits, _ = old_series(repo, old_base, series)  # the same for every candidate
        self._merges = MergesOnly(repo, old_base, self.old_commits)
        # the anchor (None: none), the candidates after it, each candidate's parent on the line
        self._line: tuple[CommitInfo | None, list[CommitInfo], list[str]] | None = None
        # candidate commit -> the fate of each patch merged there so far, and the head tree after it
        self._merged: dict[str, list[tuple[str, TreeSha]]] = {}

    def know_target(self, entries: list[Judged]) -> None:
        """What `preview` judged on the target (every patch, in order): those merges are not made again."""
        candidates = self.candidates()
        if candidates and candidates[-1].sha == self.target:
            self._merged[self.target] = [(entry.verdict.kind, entry.head_tree) for entry in entries]

    @property
    def anchor(self) -> str:
        """Where the line starts: the old base, or for a target that does not descend from it, their
        merge base ("" when there is none, or more than one)."""
        anchor = self._read_line()[0]
        return anchor.sha if anchor is not None else ""

    def candidates(self) -> list[CommitInfo]:
        """The line from the anchor to the target, oldest first, each with its tree (the anchor left out)."""
        return self._read_line()[1]

    def _read_line(self) -> tuple[CommitInfo | None, list[CommitInfo], list[str]]:
        if self._line is None:
            anchor = self.old_base
            if not self.repo.history.is_ancestor(anchor, self.target):
                bases = self.repo.history.merge_bases(self.old_base, self.target)
                anchor = bases[0] if len(bases) == 1 else ""
            chain = self.repo.history.ancestry_chain(anchor, self.target) if anchor else []
            infos = self.repo.commits.commit_infos([anchor, *(sha for sha, _ in chain)] if anchor else [])
            self._line = (infos[0] if infos else None, infos[1:], [parent for _, parent in chain])
        return self._line

    def starts_broken(self, position: int) -> bool:
        """Did patch `position` conflict where the line starts (a backport's merge base), as judged by
        `find`?"""
        anchor = self._read_line()[0]
        done = self._merged.get(anchor.sha, []) if anchor is not None else []
        return len(done) > position and done[position][0] == "conflict"

    def fate_on(self, candidate: CommitInfo, position: int) -> str:
        """The fate of patch `position` on `candidate` with the patches before it ported there."""
        done = self._merged.setdefault(candidate.sha, [])
        if len(done) <= position:  # the patches not merged there yet, on the head the others made
            head = (candidate.sha, done[-1][1] if done else candidate.tree)
            steps = walk(self._merges, self.series.patches[: position + 1], len(done), head)
            done += [(step.verdict.kind, step.head_tree) for step in steps]
        return done[position][0]

    def find(self, position: int, tell: Tell | None = None) -> FirstBreak | None:
        """The first candidate on which patch `position` conflicts (None: it does not on the target, or
        it already does where the line starts, so no commit of the line breaks it)."""
        anchor, candidates, parents = self._read_line()
        tested: set[str] = set()

        def breaks(candidate: CommitInfo) -> bool:
            tested.add(candidate.sha)
            if tell is not None:
                subject = self.series.patches[position].subject
                tell(
                    f"first break of {subject}: {len(tested)} judged, at {candidate.sha[:12]} {candidate.subject}"
                )
            return self.fate_on(candidate, position) == "conflict"

        if not candidates or not breaks(candidates[-1]):
            return None
        if anchor is None or (anchor.sha != self.old_base and breaks(anchor)):
            return None  # the line starts where the patch conflicts already: no commit of it breaks it
        low, high = (
            -1,
            len(candidates) - 1,
        )  # candidates[high] breaks; low is the last known good (-1: anchor)
        while high - low > 1:
            middle = (low + high) // 2
            if breaks(candidates[middle]):
                high = middle
            else:
                low = middle
        return self._named(candidates[high], parents[high], len(tested))

    def _named(self, culprit: CommitInfo, parent: str, tested: int) -> FirstBreak:
        return FirstBreak(
            commit=culprit.sha,
            subject=culprit.subject,
            author=f"{culprit.author.name} <{culprit.author.email}>",
            date=culprit.author.date,
            files=sorted(self.repo.diffs.changed_paths(parent, culprit.sha)),
            tested=tested,
            parent=parent,
            merged=[sha for sha in culprit.parents if sha != parent],
        )
