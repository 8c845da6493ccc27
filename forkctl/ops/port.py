"""port(series, new base): move every patch onto a new upstream commit, dropping what upstream absorbed.

Each patch is first rebuilt on the old base (apply(old base, series) is a pure function, so its commits
are known), then judged on top of the new base plus the patches already ported, rules in this order:

- absorbed, "patch-id": a commit in old-base..new-base makes the same change (any message);
- absorbed, "patch-id-zero-context": the same added and removed lines, whatever upstream did around them
  (`git diff -U0 | git patch-id --stable`);
- absorbed, "provenance": the patch says `(cherry picked from commit X)` and X is in the new base;
- otherwise the patch is cherry-picked on objects (`git/merge.py`: git's rename-aware 3-way merge, as
  `git rebase` does it). Clean and changing something: applied (reproducibly; "partial" when upstream
  already had some of its lines). Clean and changing nothing: absorbed, "empty";
- a real conflict whose reverse applies on the new head: absorbed, "reverse-applies";
- any other conflict stops in the scratch worktree (session.py), resumable with --continue / --skip.

No patch is ever dropped silently: each absorbed or skipped patch becomes a `dropped:` entry with its
evidence. The target need not descend from the base (`backport`: e.g. a release branch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forkctl import git, locking
from forkctl.errors import BadInput
from forkctl.files import atomic_write, remove_temporaries
from forkctl.git import GitRepo
from forkctl.git.merge import MergeMessage, MergeResult, cherry_pick
from forkctl.manifest import Manifest, plain
from forkctl.ops import export as exporting
from forkctl.ops import replay as build
from forkctl.ops import state as session
from forkctl.ops.apply import refuse_checked_out
from forkctl.series import Patch, Series

OnPatch = Callable[[str], None]  # told each patch's subject as it is done (a progress bar)


@dataclass
class PortOutcome:
    state: session.State
    conflict: session.ConflictReport | None = None
    range_diff: str = ""
    exported: list[exporting.ExportedPatch] | None = None


@dataclass(frozen=True)
class Verdict:
    """What happens to one patch on a given head."""

    kind: str  # "applied", "absorbed" or "conflict"
    reason: str = ""  # for absorbed: the rule; for applied: "clean" or "partial"
    upstream_commit: str | None = None
    tree: str | None = None  # applied: the new tree
    merged: MergeResult | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class Judge:
    """Decides each patch's fate on a target; holds what is computed once per (old base, target).

    What can be asked for the whole series at once is (patch-ids, provenance, line counts, the paths
    upstream changed): per patch a clean port costs two git processes (the stand-in commit and the
    merge), where one per question made a 100-patch port spawn 1,700 processes.
    """

    def __init__(self, repo: GitRepo, old_base: str, target: str, old_commits: list[str | None]) -> None:
        self.repo = repo
        self.old_base = old_base
        self.target = target
        self.old_commits = old_commits
        self._ids: dict[bool, dict[str, str]] = {}
        self._old_zero_ids: dict[str, str] | None = None
        self._old_line_counts: dict[str, int] | None = None
        self._upstream_paths: set[str] | None = None
        self._provenance: dict[str, str | None] = {}
        self._ancestry: dict[str, bool] = {}

    def upstream_ids(self, zero_context: bool) -> dict[str, str]:
        if zero_context not in self._ids:
            self._ids[zero_context] = git.patch_ids_in_range(
                self.repo, f"{self.old_base}..{self.target}", zero_context=zero_context
            )
        return self._ids[zero_context]

    @property
    def _old_range(self) -> str | None:
        built = [c for c in self.old_commits if c is not None]
        return f"{self.old_base}..{built[-1]}" if built else None

    def old_zero_context_id(self, old: str) -> str:
        """The zero-context patch-id of an old series commit (all of them computed in one go)."""
        if self._old_zero_ids is None:
            spec = self._old_range
            self._old_zero_ids = git.commit_patch_ids(self.repo, spec, zero_context=True) if spec else {}
        return self._old_zero_ids.get(old, "")

    def old_changed_lines(self, old: str) -> int:
        if self._old_line_counts is None:
            spec = self._old_range
            self._old_line_counts = git.changed_lines_per_commit(self.repo, spec) if spec else {}
        return self._old_line_counts[old]

    def upstream_touched(self, paths: list[str]) -> bool:
        """Did upstream change any of `paths` between the old base and the target?"""
        if self._upstream_paths is None:
            self._upstream_paths = git.changed_paths_between(self.repo, self.old_base, self.target)
        return any(path in self._upstream_paths for path in paths)

    def resolve_provenance(self, names: list[str]) -> dict[str, str | None]:
        missing = [name for name in names if name not in self._provenance]
        if missing:
            self._provenance.update(self.repo.resolve_commits(missing))
        return {name: self._provenance[name] for name in names}

    def parent_of(self, position: int, base: str) -> str | None:
        """The old commit the patch at `position` was built on (`base` for the first)."""
        if self.old_commits[position] is None:
            return None
        return self.old_commits[position - 1] if position > 0 else base

    def absorbed_by_identity(self, position: int, patch: Patch) -> Verdict | None:
        if patch.patch_id and patch.patch_id in self.upstream_ids(False):
            return Verdict("absorbed", "patch-id", self.upstream_ids(False)[patch.patch_id])
        old = self.old_commits[position]
        if old is not None:
            zero = self.old_zero_context_id(old)
            if zero and zero in self.upstream_ids(True):
                return Verdict("absorbed", "patch-id-zero-context", self.upstream_ids(True)[zero])
        resolved = self.resolve_provenance(list(patch.provenance))
        contained = self._in_target([sha for sha in resolved.values() if sha])
        for origin in reversed(patch.provenance):
            full = resolved[origin]
            if full and full in contained:
                return Verdict("absorbed", "provenance", full)
        return None

    def know_provenance(self, patches: list[Patch]) -> None:
        """Resolve every provenance SHA of the series, and which the target contains: two processes
        for the whole series (what is not asked here is asked patch by patch)."""
        resolved = self.resolve_provenance([name for patch in patches for name in patch.provenance])
        self._in_target([sha for sha in resolved.values() if sha])

    def _in_target(self, commits: list[str]) -> set[str]:
        """Those of `commits` that the target contains (each asked once, the unknown ones together)."""
        unknown = sorted({sha for sha in commits if sha not in self._ancestry})
        if unknown:
            inside = self.repo.ancestors_among(unknown, self.target)
            self._ancestry.update({sha: sha in inside for sha in unknown})
        return {sha for sha in commits if self._ancestry[sha]}

    def judge(self, position: int, patch: Patch, head: str, head_tree: str | None = None) -> Verdict:
        found = self.absorbed_by_identity(position, patch)
        if found is not None:
            return found
        head_tree = head_tree or self.repo.commit_info(head).tree
        old, parent = self.old_commits[position], self.parent_of(position, self.old_base)
        if old is not None and parent is not None:
            # The old commits were built by forkctl: committer date = the patch's date.
            merged = cherry_pick(
                self.repo, old, parent, head, onto_tree=head_tree, date=patch.date.isoformat()
            )
        else:
            merged = self._apply_3way(patch, head_tree)
        if merged.clean:
            if merged.tree == head_tree:
                return Verdict(
                    "absorbed", "empty", git.last_commit_touching(self.repo, self._range, patch.paths)
                )
            return self._applied(merged, head_tree, old, parent, patch)
        with self.repo.private_index(head_tree) as index:
            if git.index_apply_check(index, patch.diff, reverse=True):
                evidence = git.last_commit_touching(self.repo, self._range, patch.paths)
                return Verdict("absorbed", "reverse-applies", evidence)
        return Verdict("conflict", merged=merged)

    @property
    def _range(self) -> str:
        return f"{self.old_base}..{self.target}"

    def _applied(
        self, merged: MergeResult, head_tree: str, old: str | None, parent: str | None, patch: Patch
    ) -> Verdict:
        """Applied; "partial" when the ported change is smaller than the original (upstream had some).
        When upstream left every file of the patch alone, the port is the same change: nothing to count."""
        if old is None or parent is None or not self.upstream_touched(patch.paths):
            return Verdict("applied", "clean", tree=merged.tree, merged=merged)
        before = self.old_changed_lines(old)
        after = git.changed_line_count(self.repo, head_tree, merged.tree)
        if after < before:
            detail = {"changed_lines": before, "still_needed": after}
            return Verdict("applied", "partial", tree=merged.tree, merged=merged, detail=detail)
        return Verdict("applied", "clean", tree=merged.tree, merged=merged)

    def _apply_3way(self, patch: Patch, head_tree: str) -> MergeResult:
        """No old commit to cherry-pick (the series does not build on its base): apply with --3way."""
        with self.repo.private_index(head_tree) as index:
            ok, message = index.apply(patch.diff)
            if not ok:
                ok, message = index.apply_3way(patch.diff, head_tree)
            tree = index.write_tree() if ok else head_tree
        messages = [] if ok else [MergeMessage(kind="apply", paths=list(patch.paths), text=message.strip())]
        return MergeResult(tree=tree, clean=ok, conflicted=[] if ok else list(patch.paths), messages=messages)


def old_series(
    repo: GitRepo, old_base: str, series: Series, branch_tip: str | None = None
) -> tuple[list[str | None], str | None]:
    """apply(old base, series): the old commit of each patch (None past a failure) and the old head.
    When `branch_tip` already is that (the usual case: the branch forkctl built), it is taken as is."""
    reused = build.built_by_apply(repo, old_base, series.patches, branch_tip) if branch_tip else None
    if reused is not None:
        return list(reused), reused[-1] if reused else old_base
    old = build.build_series(repo, old_base, series.patches)
    commits: list[str | None] = [a.commit for a in old.applied]
    commits += [None] * (len(series.patches) - len(commits))
    return commits, (old.head if old.complete else None)


def _message(patch: Patch, old_commit: str | None) -> str:
    return exporting.with_provenance(patch.message, old_commit) if old_commit else patch.message


def _absorbed(state: session.State, position: int, patch: Patch, verdict: Verdict, **extra: Any) -> None:
    evidence: dict[str, Any] = {
        "subject": patch.subject,
        "file": state.files[position],
        "reason": verdict.reason,
        "upstream_commit": verdict.upstream_commit,
        "base": state.base,
        "provenance": patch.provenance,
        **extra,
    }
    state.steps.append(session.Step(file=state.files[position], commit=None, absorbed=evidence))


def _judge(repo: GitRepo, state: session.State) -> Judge:
    return Judge(repo, state.extra["old_base"], state.base, state.extra["old_commits"])


def _run(
    repo: GitRepo, series: Series, state: session.State, start: int, on_patch: OnPatch | None = None
) -> session.ConflictReport | None:
    judge = _judge(repo, state)
    judge.know_provenance(series.patches[start:])
    head, head_tree = state.head, None
    commits = build.Commits(repo)  # written together, before anything names them
    for position in range(start, len(series.patches)):
        patch = series.patches[position]
        verdict = judge.judge(position, patch, head, head_tree)
        if on_patch:
            on_patch(patch.subject)
        if verdict.kind == "absorbed":
            _absorbed(state, position, patch, verdict)
            continue
        if verdict.kind == "applied":
            assert verdict.tree is not None
            message = _message(patch, state.extra["old_commits"][position])
            head, head_tree = commits.make(head, verdict.tree, patch, message), verdict.tree
            partial = verdict.detail if verdict.reason == "partial" else None
            state.steps.append(session.Step(file=state.files[position], commit=head, partial=partial))
            continue
        commits.flush()
        return session.open_conflict(repo, state, position, patch, head, verdict.merged)
    commits.flush()
    return None


def _dropped_entries(state: session.State) -> list[dict[str, Any]]:
    """The manifest's `dropped:` as it was when the port started, plus this port's drops."""
    dropped = list(state.extra["dropped_before"])
    dropped += [
        {k: v for k, v in step.absorbed.items() if v is not None} for step in state.steps if step.absorbed
    ]
    return dropped


def _backup(repo: GitRepo, manifest: Manifest, state: session.State, written: list[str]) -> None:
    """Keep the bytes of the manifest and of every file the port may rewrite or delete (for --abort).

    `written`: the files of the new series. One that does not exist yet is recorded as None: --abort
    deletes it, as the port created it."""
    folder = session.state_path(repo).parent / "backup"
    folder.mkdir(parents=True, exist_ok=True)
    saved: dict[str, str | None] = {}
    paths = [manifest.path, *(manifest.root / entry.file for entry in manifest.series)]
    paths += [manifest.root / file for file in written]
    for number, path in enumerate(dict.fromkeys(paths)):
        copy = folder / f"{number:04d}"
        if path.is_file():
            atomic_write(copy, path.read_bytes())
            saved[str(path)] = str(copy)
        else:
            saved[str(path)] = None
    state.extra["backup"] = saved


def _backed_up(state: session.State) -> dict[str, str | None]:
    return state.extra.get("backup") or {}


def restore_backup(state: session.State) -> None:
    """Put the manifest and series files back as they were before the port started writing them, and
    remove the files it created and the temp files a kill left behind."""
    saved = _backed_up(state)
    remove_temporaries(Path(original) for original in saved)
    for original, copy in saved.items():
        if copy is None:
            Path(original).unlink(missing_ok=True)
        elif Path(copy).is_file():
            atomic_write(Path(original), Path(copy).read_bytes())


def _finish(repo: GitRepo, manifest: Manifest, state: session.State) -> PortOutcome:
    """Files first (atomically, with a backup for --abort), the branch last (compare-and-swap)."""
    commits = [step.commit for step in state.steps if step.commit]
    exported = exporting.render(repo, manifest, commits)
    resumed = state.extra.get("phase") == "finishing"
    if not resumed:
        state.extra["phase"] = "finishing"
        state.extra["dropped_before"] = [plain(d, drop_none=True) for d in manifest.model.dropped]
        _backup(repo, manifest, state, [patch.file for patch in exported])
        session.save(repo, state)
    else:
        remove_temporaries(Path(original) for original in _backed_up(state))  # a kill mid-write
    exporting.write(
        manifest,
        exported,
        exporting.compare(manifest, exported),
        {("upstream", "base"): state.base, ("dropped",): _dropped_entries(state)},
    )
    if resumed:
        # Killed after the manifest was rewritten, compare() no longer knows the old series: its files
        # that the new one does not keep are those backed up and not written.
        kept = {str(manifest.path), *(str(manifest.root / patch.file) for patch in exported)}
        for original in _backed_up(state):
            if original not in kept:
                Path(original).unlink(missing_ok=True)
    if repo.branch_sha(state.branch) != state.head:
        session.set_branch(repo, state.branch, state.head, state.old_tip)
    old_head = state.extra.get("old_head")
    shown = ""
    if old_head:
        shown = git.range_diff(repo, f"{state.extra['old_base']}..{old_head}", f"{state.base}..{state.head}")
    session.clear(repo)
    return PortOutcome(state=state, range_diff=shown, exported=exported)


@locking.repository_locked
def start(
    repo: GitRepo,
    manifest: Manifest,
    series: Series,
    old_base: str,
    new_base: str,
    branch: str,
    backport: bool = False,
    on_patch: OnPatch | None = None,
) -> PortOutcome:
    git.check_branch_name(branch)
    session.refuse_if_in_progress(repo)
    session.remove_leftovers(repo)
    refuse_checked_out(repo, branch)
    descends = repo.is_ancestor(old_base, new_base)
    if not descends and not backport:
        raise BadInput(
            f"{new_base[:12]} does not descend from the current base {old_base[:12]}",
            hint="to carry the series to an older line (e.g. a release branch), pass --backport",
        )
    old_tip = repo.branch_sha(branch)
    old_commits, old_head = old_series(repo, old_base, series, old_tip)
    state = session.State(
        operation="port",
        manifest=str(manifest.path),
        base=new_base,
        series_digest=series.digest,
        files=[entry.file for entry in manifest.series],
        branch=branch,
        force=True,
        old_tip=old_tip,
        worktree=str(session.worktree_path(repo)),
        extra={
            "old_base": old_base,
            "old_commits": old_commits,
            "old_head": old_head,
            "backport": not descends,
        },
    )
    conflict = _run(repo, series, state, 0, on_patch)
    if conflict is not None:
        return PortOutcome(state=state, conflict=conflict)
    return _finish(repo, manifest, state)


def _resumable(repo: GitRepo, series: Series) -> session.State:
    state = session.require(repo, "port")
    if series.digest != state.series_digest:
        raise BadInput("the patch series changed since the port stopped", hint="run forkctl port --abort")
    return state


@locking.repository_locked
def resume(repo: GitRepo, manifest: Manifest, load_series: Callable[[], Series]) -> PortOutcome:
    """Go on after a conflict was resolved, or finish a port that was killed while writing its results
    (then the series files may be half rewritten: they are not read, the state has everything)."""
    state = session.require(repo, "port")
    if state.extra.get("phase") == "finishing":
        return _finish(repo, manifest, state)
    series = load_series()
    state = _resumable(repo, series)
    index = state.conflict_index
    patch = series.patches[index]
    message = _message(patch, state.extra["old_commits"][index])
    commit = session.commit_resolution(repo, state, patch, message)
    state.steps.append(session.Step(file=state.files[index], commit=commit, resolved=True))
    return _go_on(repo, manifest, series, state, index)


@locking.repository_locked
def skip(repo: GitRepo, manifest: Manifest, load_series: Callable[[], Series], who: str) -> PortOutcome:
    """Drop the conflicting patch on purpose: recorded under `dropped:` as skipped, by whom and when."""
    if session.require(repo, "port").extra.get("phase") == "finishing":
        raise BadInput("the port is writing its results; nothing to skip", hint="run forkctl port --continue")
    series = load_series()
    state = _resumable(repo, series)
    index = state.conflict_index
    when = datetime.now(UTC).replace(microsecond=0).isoformat()
    _absorbed(
        state, index, series.patches[index], Verdict("absorbed", "skipped"), skipped_by=who, skipped_at=when
    )
    return _go_on(repo, manifest, series, state, index)


def _go_on(
    repo: GitRepo, manifest: Manifest, series: Series, state: session.State, index: int
) -> PortOutcome:
    state.conflict_index, state.conflict_parent, state.conflict_paths = -1, "", []
    session.save(repo, state)
    conflict = _run(repo, series, state, index + 1)
    if conflict is not None:
        return PortOutcome(state=state, conflict=conflict)
    return _finish(repo, manifest, state)


@locking.repository_locked
def abort(repo: GitRepo) -> session.State | None:
    """Undo a stopped or interrupted port: files and manifest restored, the branch put back.

    None when the state was unreadable: only forkctl's scratch is removed (a port moves the branch last,
    and only after its state, with the backups, was written in full, so no ref needs moving back)."""
    try:
        state = session.require(repo, "port")
    except session.CorruptState:
        session.discard(repo)
        return None
    if state.extra.get("phase") == "finishing":
        restore_backup(state)
        current = repo.branch_sha(state.branch)
        if current == state.head and current != state.old_tip:
            if state.old_tip is None:
                repo.delete_ref(f"refs/heads/{state.branch}", current)
            else:
                repo.update_ref(f"refs/heads/{state.branch}", state.old_tip, current, "port --abort")
    session.clear(repo)
    return state


# --- preview and blame: what a port onto a target would do, moving nothing -------------------------


@dataclass(frozen=True)
class PreviewEntry:
    position: int
    patch: Patch
    verdict: Verdict
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
    if old_commits is None:
        old_commits, _ = old_series(repo, old_base, series)
    judge = Judge(repo, old_base, target, old_commits)
    head, head_tree = target, repo.commit_info(target).tree
    entries: list[PreviewEntry] = []
    last = len(series.patches) if upto is None else upto + 1
    judge.know_provenance(series.patches[:last])
    commits = build.Commits(repo)
    for position, patch in enumerate(series.patches[:last]):
        verdict = judge.judge(position, patch, head, head_tree)
        plain = False
        if verdict.kind == "applied":
            with repo.private_index(head_tree) as index:
                plain = git.index_apply_check(index, patch.diff)
            assert verdict.tree is not None
            head, head_tree = commits.make(head, verdict.tree, patch), verdict.tree
        entries.append(PreviewEntry(position=position, patch=patch, verdict=verdict, plain=plain))
    commits.flush()
    return entries


@dataclass(frozen=True)
class FirstBreak:
    """The first upstream commit (first-parent order) in base..target on which a patch stops porting."""

    commit: str
    subject: str
    author: str
    date: str
    files: list[str]
    tested: int  # how many candidate commits bisection had to judge


def first_break(
    repo: GitRepo, series: Series, old_base: str, target: str, position: int
) -> FirstBreak | None:
    """Bisect old_base..target (first parent) for the first commit where patch `position` conflicts."""
    candidates = repo.rev_list(f"{old_base}..{target}", "--first-parent")
    old_commits, _ = old_series(repo, old_base, series)  # the same for every candidate
    tested = 0

    def breaks(commit: str) -> bool:
        nonlocal tested
        tested += 1
        entries = preview(repo, series, old_base, commit, upto=position, old_commits=old_commits)
        return entries[-1].verdict.kind == "conflict"

    if not candidates or not breaks(candidates[-1]):
        return None
    low, high = -1, len(candidates) - 1  # candidates[high] breaks; low is the last known good (-1: base)
    while high - low > 1:
        middle = (low + high) // 2
        if breaks(candidates[middle]):
            high = middle
        else:
            low = middle
    culprit = repo.commit_info(candidates[high])
    parent = culprit.parents[0] if culprit.parents else git.EMPTY_TREE
    files = repo.changed_paths(parent, culprit.sha)
    return FirstBreak(
        commit=culprit.sha,
        subject=culprit.subject,
        author=f"{culprit.author.name} <{culprit.author.email}>",
        date=culprit.author.date,
        files=files,
        tested=tested,
    )
