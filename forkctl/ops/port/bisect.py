"""`status --onto --first-break`: by bisection of old_base..target (first parent), the upstream commit on
which a patch first stops porting, for each patch that conflicts on the target.

A step asks one question of a candidate commit: does the series, up to this patch, still port there?
The answer is the series' merges on that candidate, patch by patch as `preview` judges them (a
conflicting patch left out of the head the later ones meet). Nothing else decides it: patch-ids and
provenance only name the upstream commit a verdict cites, so a step computes none (they used to be
recomputed for base..candidate on every step, the most of a step's time on real history). Each
candidate's merges are kept: a later step, or the bisection of a later patch, that meets the candidate
again reuses them and only merges the patches not merged there yet. The candidates and their trees are
read once, in two processes.
"""

from __future__ import annotations

import msgspec

from forkctl.git.commits import CommitInfo
from forkctl.git.objects import EMPTY_TREE
from forkctl.git.repo import GitRepo
from forkctl.git.sha import TreeSha
from forkctl.ops.port.judge import fate, merge_patch, old_series
from forkctl.ops.port.preview import PreviewEntry
from forkctl.series import Series


class FirstBreak(msgspec.Struct, frozen=True):
    """The first upstream commit (first-parent order) in base..target on which a patch stops porting."""

    commit: str
    subject: str
    author: str
    date: str
    files: list[str]
    tested: int  # how many candidate commits bisection had to judge


class FirstBreaks:
    """The bisections of one (old base, target, series), sharing their work across steps and patches."""

    def __init__(self, repo: GitRepo, series: Series, old_base: str, target: str) -> None:
        self.repo, self.series, self.old_base, self.target = repo, series, old_base, target
        self.old_commits, _ = old_series(repo, old_base, series)  # the same for every candidate
        self._candidates: list[CommitInfo] | None = None
        # candidate commit -> the fate of each patch merged there so far, and the head tree after it
        self._merged: dict[str, list[tuple[str, TreeSha]]] = {}

    def know_target(self, entries: list[PreviewEntry]) -> None:
        """What `preview` judged on the target (every patch, in order): those merges are not made again."""
        candidates = self.candidates()
        if not candidates or candidates[-1].sha != self.target:
            return
        tree, done = candidates[-1].tree, []
        for entry in entries:
            if entry.verdict.kind == "applied" and entry.verdict.tree is not None:
                tree = entry.verdict.tree
            done.append((entry.verdict.kind, tree))
        self._merged[self.target] = done

    def candidates(self) -> list[CommitInfo]:
        """old_base..target, first parent, oldest first, each with its tree."""
        if self._candidates is None:
            shas = self.repo.rev_list(f"{self.old_base}..{self.target}", "--first-parent")
            self._candidates = self.repo.commit_infos(shas)
        return self._candidates

    def fate_on(self, candidate: CommitInfo, position: int) -> str:
        """The fate of patch `position` on `candidate` with the patches before it ported there."""
        done = self._merged.setdefault(candidate.sha, [])
        while len(done) <= position:
            index = len(done)
            head_tree = done[-1][1] if done else candidate.tree
            merged = merge_patch(
                self.repo,
                self.old_base,
                self.old_commits,
                index,
                self.series.patches[index],
                candidate.sha,
                head_tree,
            )
            kind = fate(merged, head_tree)
            done.append((kind, merged.tree if kind == "applied" else head_tree))
        return done[position][0]

    def find(self, position: int) -> FirstBreak | None:
        """The first candidate on which patch `position` conflicts (None: it does not on the target)."""
        candidates = self.candidates()
        tested: set[str] = set()

        def breaks(candidate: CommitInfo) -> bool:
            tested.add(candidate.sha)
            return self.fate_on(candidate, position) == "conflict"

        if not candidates or not breaks(candidates[-1]):
            return None
        low, high = -1, len(candidates) - 1  # candidates[high] breaks; low is the last known good (-1: base)
        while high - low > 1:
            middle = (low + high) // 2
            if breaks(candidates[middle]):
                high = middle
            else:
                low = middle
        culprit = candidates[high]
        parent = culprit.parents[0] if culprit.parents else EMPTY_TREE
        return FirstBreak(
            commit=culprit.sha,
            subject=culprit.subject,
            author=f"{culprit.author.name} <{culprit.author.email}>",
            date=culprit.author.date,
            files=sorted(self.repo.changed_paths(parent, culprit.sha)),
            tested=len(tested),
        )
