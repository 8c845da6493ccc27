"""The per-patch judge of a port: absorbed (by which rule and upstream commit), applied (clean or
partial), or conflict; and the port's walk with it (`walk_series`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from forkctl.errors import BadInput
from forkctl.git.merge import MergeMessage, MergeResult, cherry_pick, pick_change
from forkctl.git.repo import GitRepo, repo_holding
from forkctl.git.sha import TreeSha
from forkctl.ops import replay
from forkctl.ops.port.provenance import PickProof, prove_pick
from forkctl.ops.port.walk import Aligned, Judged, QuickPicks, Tell, walk
from forkctl.ops.state import Partial, Reapplied
from forkctl.series import Patch

if TYPE_CHECKING:
    from forkctl.git.index import Indexes


class PatchVerdict(msgspec.Struct, frozen=True):
    """What happens to one patch on a given head."""

    kind: str  # "applied", "absorbed" or "conflict"
    # absorbed: the rule that names the upstream commit ("empty": none did); applied: "clean" or
    # "partial"; conflict: the rule naming an upstream commit that may hold the change, or "", or
    # "reverted": the upstream commit the patch picks was reverted in the range (a stop for a decision).
    reason: str = ""
    upstream_commit: str | None = None
    tree: TreeSha | None = None  # applied: the new tree
    merged: MergeResult | None = None
    proof: str | None = None  # absorbed as a pick proved to be `upstream_commit`: how it was proved
    partial: Partial | None = None  # applied "partial": the lines upstream already had
    # An amended pick of `upstream_commit`: its own lines, the only ones merged (a partial, or the stop).
    own_lines: str | None = None
    reverted_by: str | None = None  # "reverted": the commit of the range that reverted `upstream_commit`
    reapplied: Reapplied | None = None  # applied although upstream reverted what it picks, as asked


class Judge:
    """Decides each patch's fate on a target; holds what is computed once per (old base, target).

    What can be asked for the whole series at once is (patch-ids, provenance, line counts, the paths
    upstream changed): per patch a clean port costs two git processes (the stand-in commit and the
    merge), where one per question made a 100-patch port spawn 1,700 processes.
    """

    def __init__(
        self,
        repo: GitRepo,
        old_base: str,
        target: str,
        old_commits: list[str | None],
        reapply_reverted: bool = False,
    ) -> None:
        self.repo = repo
        self.reapply_reverted = reapply_reverted  # a pick of a reverted upstream commit: merge it anyway
        self.old_base = old_base
        self.target = target
        self.old_commits = old_commits
        self._ids: dict[tuple[bool, bool], dict[str, str]] = {}
        self._series_paths: list[str] = []  # the files of the patches `know_series` was told of
        self._old_zero_ids: dict[str, str] | None = None
        self._old_line_counts: dict[str, int] | None = None
        self._upstream_paths: set[str] | None = None
        self._provenance: dict[str, str | None] = {}
        self._ancestry: dict[str, bool] = {}
        self.proofs: dict[int, PickProof | None] = {}  # `pick_proof`'s answers, by position
        self.quick: QuickPicks | None = None  # the in-process picks of the walk (`start_quick`)

    def upstream_ids(self, zero_context: bool, patch: Patch) -> dict[str, str]:
        """{patch-id: upstream commit} for old_base..target: of the commits touching the series' files
        (`know_series`) when `patch` is among them, else of every commit."""
        limited = bool(patch.paths) and set(patch.paths) <= set(self._series_paths)
        key = (zero_context, limited)
        if key not in self._ids:
            self._ids[key] = self.repo.patches.patch_ids_in_range(
                f"{self.old_base}..{self.target}",
                zero_context=zero_context,
                touching=self._series_paths if limited else None,
            )
        return self._ids[key]

    @property
    def _old_range(self) -> str | None:
        built = [c for c in self.old_commits if c is not None]
        return f"{self.old_base}..{built[-1]}" if built else None

    def old_zero_context_id(self, old: str) -> str:
        """The zero-context patch-id of an old series commit (all of them computed in one go)."""
        if self._old_zero_ids is None:
            spec = self._old_range
            self._old_zero_ids = self.repo.patches.commit_patch_ids(spec, zero_context=True) if spec else {}
        return self._old_zero_ids.get(old, "")

    def old_changed_lines(self, old: str) -> int:
        if self._old_line_counts is None:
            spec = self._old_range
            self._old_line_counts = self.repo.diffs.changed_lines_per_commit(spec) if spec else {}
        return self._old_line_counts[old]

    def upstream_touched(self, paths: list[str]) -> bool:
        return any(path in self.upstream_paths() for path in paths)

    def upstream_paths(self) -> set[str]:
        """The paths upstream changed between the old base and the target (asked once)."""
        if self._upstream_paths is None:
            self._upstream_paths = self.repo.diffs.changed_paths(self.old_base, self.target)
        return self._upstream_paths

    def resolve_provenance(self, names: list[str]) -> dict[str, str | None]:
        missing = [name for name in names if name not in self._provenance]
        if missing:
            self._provenance.update(self.repo.objects.resolve_commits(missing))
        return {name: self._provenance[name] for name in names}

    def parent_of(self, position: int, base: str) -> str | None:
        """The old commit the patch at `position` was built on (`base` for the first)."""
        if self.old_commits[position] is None:
            return None
        return self.old_commits[position - 1] if position > 0 else base

    def named_upstream(self, position: int, patch: Patch) -> tuple[str, str] | None:
        """(rule, upstream commit) when a hash or the patch's provenance names an upstream commit that
        makes this change. A name is evidence, never a verdict: it names what absorbed a patch whose
        merge changed nothing, or hints at `--skip` on a conflict; the same lines added elsewhere in a
        file have the same zero-context patch-id, and an amended `-x` pick has more than upstream's."""
        if patch.patch_id and patch.patch_id in self.upstream_ids(False, patch):
            return "patch-id", self.upstream_ids(False, patch)[patch.patch_id]
        old = self.old_commits[position]
        if old is not None:
            zero = self.old_zero_context_id(old)
            if zero and zero in self.upstream_ids(True, patch):
                return "patch-id-zero-context", self.upstream_ids(True, patch)[zero]
        resolved = self.resolve_provenance(list(patch.provenance))
        contained = self.in_target([sha for sha in resolved.values() if sha])
        for origin in reversed(patch.provenance):
            full = resolved[origin]
            if full and full in contained:
                return "provenance", full
        return None

    def know_series(self, patches: list[Patch]) -> None:
        """What is asked for the patches to judge at once: their provenance (two processes for them
        all; what is not asked here is asked patch by patch) and their files, the only ones whose
        upstream commits can share a patch-id with one of them."""
        self._series_paths = sorted({path for patch in patches for path in patch.paths})
        resolved = self.resolve_provenance([name for patch in patches for name in patch.provenance])
        self.in_target([sha for sha in resolved.values() if sha])

    def in_target(self, commits: list[str]) -> set[str]:
        """Those of `commits` that the target contains (each asked once, the unknown ones together)."""
        unknown = sorted({sha for sha in commits if sha not in self._ancestry})
        if unknown:
            inside = self.repo.history.ancestors_among(unknown, self.target)
            self._ancestry.update({sha: sha in inside for sha in unknown})
        return {sha for sha in commits if self._ancestry[sha]}

    def judge(self, position: int, patch: Patch, head: str, head_tree: TreeSha | None = None) -> PatchVerdict:
        """The patch's 3-way result on `head` decides: nothing changed is absorbed, a change is applied
        (partial when smaller than the original), a conflict stops; the named upstream commit is the
        evidence each verdict carries. A pick whose provenance names a commit of the target is first
        compared with it (`by_provenance`)."""
        head_tree = head_tree or self.repo.commits.commit_info(head).tree
        proof = pick_proof(self, position, patch)
        if proof is not None:
            return by_provenance(self, position, patch, (head, head_tree), proof)
        return self.merged(position, patch, head, head_tree)

    def merged(self, position: int, patch: Patch, head: str, head_tree: TreeSha) -> PatchVerdict:
        """The verdict of the patch's merge on `head` (made here when git has nothing to decide,
        `walk.py`); the upstream commit a hash or provenance names is asked only for a verdict that
        shows it (absorbed, partial, conflict): a clean pick asks nothing more."""
        old, parent = self.old_commits[position], self.parent_of(position, self.old_base)
        merged = (self.quick.pick(position, head_tree) if self.quick else None) or merge_patch(
            self.repo, self.old_base, self.old_commits, position, patch, head, head_tree
        )
        kind = fate(merged, head_tree)
        if kind == "absorbed":
            named = self.named_upstream(position, patch)
            rule, commit = named or ("empty", self.repo.history.last_commit_touching(self.range, patch.paths))
            return PatchVerdict("absorbed", rule, commit)
        if kind == "applied":
            return applied_verdict(self, merged, head_tree, (old, parent), patch, position)
        named = self.named_upstream(position, patch)
        rule, commit = named or ("", None)
        if named is None:
            # Only a hint for the person resolving: upstream may hold the change in another shape.
            with self.repo.indexes.private_index(head_tree) as index:
                if index.apply_check(patch.diff, reverse=True):
                    touched = self.repo.history.last_commit_touching(self.range, patch.paths)
                    rule, commit = "reverse-applies", touched
        return PatchVerdict("conflict", rule, commit, merged=merged)

    @property
    def range(self) -> str:
        return f"{self.old_base}..{self.target}"


def walk_series(
    judge: Judge,
    patches: list[Patch],
    start: int,
    head: str,
    batch: replay.CommitBatch | None = None,
    plain: bool = False,
    tell: Tell | None = None,
) -> Iterator[Judged]:
    """The port's walk (`walk.walk`) of `patches[start:]` from the commit `head`: what can be asked for
    them at once asked first, the in-process picks started."""
    judge.know_series(patches[start:])
    start_quick(judge, start, head)
    return walk(judge, patches, start, (head, judge.repo.trees.commit_tree_id(head)), batch, plain, tell)


def start_quick(judge: Judge, start: int, head: str) -> None:
    """In-process picks from the patch at `start` on, picked onto `head` (`walk.py`): from the paths
    that differ between that patch's old parent and `head` (upstream's, on a fresh port)."""
    parent = judge.parent_of(start, judge.old_base) if start < len(judge.old_commits) else None
    if parent is None:
        return
    fresh = parent == judge.old_base and head == judge.target
    aligned = Aligned(judge.repo, parent, head, judge.upstream_paths() if fresh else None)
    judge.quick = QuickPicks(judge.repo, aligned, judge.old_base, judge.old_commits)


def pick_proof(judge: Judge, position: int, patch: Patch) -> PickProof | None:
    """The comparison of the pick at `position` with the upstream commit its provenance names (newest
    line first) when the target holds it and the pick was built on the old base (asked once)."""
    old, parent = judge.old_commits[position], judge.parent_of(position, judge.old_base)
    if old is None or parent is None or not patch.provenance:
        return None
    if position not in judge.proofs:
        resolved = judge.resolve_provenance(list(patch.provenance))
        contained = judge.in_target([sha for sha in resolved.values() if sha])
        named = [sha for name in reversed(patch.provenance) if (sha := resolved[name]) and sha in contained]
        proof = prove_pick(judge.repo, named[0], old, parent, patch.patch_id, judge.range) if named else None
        judge.proofs[position] = proof
    return judge.proofs[position]


def by_provenance(
    judge: Judge, position: int, patch: Patch, head: tuple[str, TreeSha], proof: PickProof
) -> PatchVerdict:
    """A pick proved equal to the upstream commit it names, which the target holds, is absorbed
    whatever the merge; an amended one ports its own lines when the whole pick conflicts; a pick of a
    commit upstream reverted stops, unless the person asked to apply it again (`provenance.py`)."""
    commit, tree = head
    if proof.reverted_by and not judge.reapply_reverted:
        merged = merge_patch(judge.repo, judge.old_base, judge.old_commits, position, patch, commit, tree)
        return PatchVerdict(
            "conflict", "reverted", proof.upstream_commit, merged=merged, reverted_by=proof.reverted_by
        )
    if proof.proof and not proof.reverted_by:
        return PatchVerdict("absorbed", "provenance", proof.upstream_commit, proof=proof.proof)
    verdict = judge.merged(position, patch, commit, tree)
    if proof.own is not None and verdict.kind == "conflict":
        verdict = own_lines_verdict(judge, position, patch, head, proof)
    elif proof.own is not None and verdict.partial is not None:
        partial = msgspec.structs.replace(verdict.partial, own_lines=proof.own_lines)
        verdict = msgspec.structs.replace(verdict, partial=partial, own_lines=proof.own_lines)
    if proof.reverted_by:  # re-applied, as the person asked
        reapplied = Reapplied(upstream_commit=proof.upstream_commit, reverted_by=proof.reverted_by)
        return msgspec.structs.replace(verdict, reapplied=reapplied)
    return verdict


def applied_verdict(
    judge: Judge,
    merged: MergeResult,
    head_tree: TreeSha,
    built: tuple[str | None, str | None],
    patch: Patch,
    position: int,
) -> PatchVerdict:
    """Applied; "partial" when the ported change is smaller than the original (upstream had some,
    the named upstream commit in the detail when there is one). When upstream left every file of the
    patch alone, the port is the same change: nothing to count. `built`: the patch's old commit and
    its parent on the old base; `position`: the patch's, for the upstream commit a partial names."""
    old, parent = built
    if old is None or parent is None or not judge.upstream_touched(patch.paths):
        return PatchVerdict("applied", "clean", tree=merged.tree, merged=merged)
    before = judge.old_changed_lines(old)
    after = judge.repo.diffs.changed_line_count(head_tree, merged.tree)
    if after < before:
        named = judge.named_upstream(position, patch)
        rule, commit = named or (None, None)
        partial = Partial(changed_lines=before, still_needed=after, upstream_commit=commit, named_by=rule)
        return PatchVerdict("applied", "partial", tree=merged.tree, merged=merged, partial=partial)
    return PatchVerdict("applied", "clean", tree=merged.tree, merged=merged)


def own_lines_verdict(
    judge: Judge, position: int, patch: Patch, head: tuple[str, TreeSha], proof: PickProof
) -> PatchVerdict:
    """An amended pick whose whole merge conflicts: the target holds U, so only the pick's own lines
    (the interdiff) are merged on `head` (commit, tree); clean, they are the port (partial), else the
    stop shows only them."""
    old, parent = judge.old_commits[position], judge.parent_of(position, judge.old_base)
    assert proof.own is not None and old is not None and parent is not None
    commit, tree = head
    merged = pick_change(judge.repo, proof.own, parent, commit, patch.date.isoformat(), onto_tree=tree)
    kind = fate(merged, tree)
    if kind == "absorbed":
        words = f"interdiff: beyond {proof.upstream_commit}, the patch's own lines are on the new base too"
        return PatchVerdict("absorbed", "provenance", proof.upstream_commit, proof=words)
    own = proof.own_lines
    if kind == "applied":
        partial = Partial(
            changed_lines=judge.old_changed_lines(old),
            still_needed=judge.repo.diffs.changed_line_count(tree, merged.tree),
            upstream_commit=proof.upstream_commit,
            named_by="provenance",
            own_lines=own,
        )
        return PatchVerdict(
            "applied", "partial", tree=merged.tree, merged=merged, partial=partial, own_lines=own
        )
    return PatchVerdict("conflict", "provenance", proof.upstream_commit, merged=merged, own_lines=own)


def merge_patch(
    repo: GitRepo,
    old_base: str,
    old_commits: list[str | None],
    position: int,
    patch: Patch,
    head: str,
    head_tree: TreeSha,
) -> MergeResult:
    """The patch's 3-way result on commit `head` (tree `head_tree`), as `git rebase` would merge it:
    its old commit (apply(old base, series)) cherry-picked, else `git apply --3way`. Its fate (`fate`)
    depends on this alone; hashes and provenance only name an upstream commit."""
    old = old_commits[position]
    parent = (old_commits[position - 1] if position > 0 else old_base) if old is not None else None
    if old is not None and parent is not None:
        # The old commits were built by forkctl: committer date = the patch's date.
        return cherry_pick(repo, old, parent, head, onto_tree=head_tree, date=patch.date.isoformat())
    return _apply_3way(repo.indexes, patch, head_tree)


def fate(merged: MergeResult, head_tree: TreeSha) -> str:
    """ "absorbed" (clean and changing nothing), "applied" (clean) or "conflict": a PatchVerdict's kind."""
    if not merged.clean:
        return "conflict"
    return "absorbed" if merged.tree == head_tree else "applied"


def _apply_3way(repo: Indexes, patch: Patch, head_tree: TreeSha) -> MergeResult:
    """No old commit to cherry-pick (the series does not build on its base): apply with --3way."""
    with repo.private_index(head_tree) as index:
        ok, message = index.apply(patch.diff)
        if not ok:
            ok, message = index.apply_3way(patch.diff, head_tree)
        tree = index.write_tree() if ok else head_tree
    messages = [] if ok else [MergeMessage(kind="apply", paths=list(patch.paths), text=message.strip())]
    return MergeResult(tree=tree, clean=ok, conflicted=[] if ok else list(patch.paths), messages=messages)


_NAMED_BY = {
    "patch-id": "makes a change with the same patch-id",
    "patch-id-zero-context": "adds and removes the same lines (perhaps elsewhere)",
    "provenance": "is the commit this patch was picked from",
    "reverse-applies": "last touched these files, and the patch reverse-applies on the new base",
}


def upstream_hint(rule: str, commit: str | None) -> str:
    """A conflict's pointer to the upstream commit a rule named ("" without one): never a verdict,
    so the person decides whether upstream holds the change and the patch can be skipped."""
    if not commit or rule not in _NAMED_BY:
        return ""
    return (
        f"upstream {commit[:12]} {_NAMED_BY[rule]}: if it already holds this change, "
        "forkctl port --skip drops the patch (recorded under dropped:)"
    )


def resolve_endpoints(
    repo_path: Path | None, url: str, target: str, old_base: str
) -> tuple[GitRepo, str, str]:
    """The repository holding both ends of a port, with the target and the old base as full SHAs."""
    repo = repo_holding(repo_path, url, [target, old_base])
    new, old = repo.objects.resolve_commit(target), repo.objects.resolve_commit(old_base)
    if new is None or old is None:
        missing = target if new is None else old_base
        raise BadInput(
            f"unknown commit {missing!r} in {repo.git_dir}", hint="fetch upstream, or check the SHA"
        )
    return repo, new, old
