"""A resumable series build: the state kept between a conflict and `--continue` / `--abort`.

The fast path (replay.build_series) needs no state at all. Only when a patch does not apply cleanly does
forkctl keep something on disk, all of it inside the repository's git dir and owned by forkctl:

- `<git-dir>/forkctl/build-state.json`: what was being built (base, series digest, the patches done
  and their commits, the conflicting patch, the branch to set and its tip when we started);
- `<git-dir>/forkctl/build-worktree`: a detached scratch worktree where the merge left the conflict
  for a person to resolve. It is never the user's checkout.

No ref is created or moved until the whole series is built, so `--abort` only has to delete these two.
A stop the previous version left (`apply-state.json`, `apply-worktree`) goes on under those names.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from forkctl.errors import BadInput
from forkctl.files import atomic_write_text, remove_temporaries
from forkctl.git.repo import GitRepo
from forkctl.git.sha import FULL_SHA_WORDS, FullShaText, Sha, TreeSha, is_full_sha
from forkctl.git.worktree import Worktree
from forkctl.manifest.schema import DroppedEntry
from forkctl.ops import markers, progress
from forkctl.ops.replay import identity_of
from forkctl.series import Patch

if TYPE_CHECKING:
    from forkctl.git.merge import MergeResult  # a port's stop carries it; apply never imports merges


class Partial(msgspec.Struct, frozen=True, omit_defaults=True):
    """Applied, but upstream already had part of it: the lines changed on the old base, those still
    needed; the upstream commit a rule names (`named_by`); an amended pick's own lines, if only merged."""

    changed_lines: int
    still_needed: int
    upstream_commit: str | None = None
    named_by: str | None = None
    own_lines: str | None = None


class Reapplied(msgspec.Struct, frozen=True):
    """Applied although upstream reverted the commit it picks (by `reverted_by`), as the person asked."""

    upstream_commit: str
    reverted_by: str


class Step(msgspec.Struct):
    """One patch handled: its commit, or why it has none (port: absorbed upstream, or skipped)."""

    file: str
    commit: FullShaText | None
    # A commit made from a person's conflict resolution is not a pure function of (base, series).
    resolved: bool = False
    absorbed: DroppedEntry | None = None  # what goes under the manifest's `dropped:`
    partial: Partial | None = None
    reapplied: Reapplied | None = None


class PortData(msgspec.Struct, forbid_unknown_fields=True):
    """What only a port keeps, typed like the rest: a hand-edited value that is not a SHA (or the
    wrong type) makes the state unreadable, never a commit message or a patch file."""

    old_base: FullShaText
    # The commit each patch was built as on the old base (None: not built there), for its provenance.
    old_commits: list[FullShaText | None]
    old_head: FullShaText | None
    backport: bool
    # Set together once the files may be half written (transaction.finish): the manifest's `dropped:`
    # as it was, and {original path: its backup copy, None for a file the port creates}.
    finishing: bool = False
    dropped_before: list[DroppedEntry] = msgspec.field(default_factory=list)
    backup: dict[str, str | None] = msgspec.field(default_factory=dict)
    # `--reapply-reverted` given at the start: picks of reverted upstream commits are merged, not stopped.
    reapply_reverted: bool = False
    # Stopped at a pick whose upstream commit (the first) was reverted by the second: a decision.
    reverted: tuple[FullShaText, FullShaText] | None = None


class State(msgspec.Struct):
    operation: Literal["apply", "port"]
    manifest: str
    base: FullShaText  # the base the series is being built on
    series_digest: str
    files: list[str]  # the series, in order, relative to the manifest's folder
    branch: str
    force: bool
    old_tip: FullShaText | None  # the branch's tip when we started (compare-and-swap on finish)
    worktree: str
    steps: list[Step] = msgspec.field(default_factory=list)
    conflict_index: int = -1
    conflict_parent: str = ""  # a full SHA while stopped at a conflict
    conflict_paths: list[str] = msgspec.field(default_factory=list)
    port: PortData | None = None  # a port's own data (None for apply)

    def __post_init__(self) -> None:
        # Checked on decode (msgspec calls this): a port without its data, or a stop at no commit, is
        # a state forkctl did not write. A port state from before the typed `port` field kept that data
        # in `extra`: it is refused the same way, not read by guessing.
        if (self.operation == "port") != (self.port is not None):
            raise ValueError(
                f"a {self.operation} state {'without' if self.port is None else 'with'} `port` data"
                + (" (written by an older forkctl?)" if self.port is None else "")
            )
        if self.conflict_parent and not is_full_sha(self.conflict_parent):
            raise ValueError(f"conflict_parent {self.conflict_parent!r} is not {FULL_SHA_WORDS}")

    @property
    def port_data(self) -> PortData:
        assert self.port is not None, "a port state always has its data (checked on load)"
        return self.port

    @property
    def head(self) -> str:
        commits = [step.commit for step in self.steps if step.commit]
        return commits[-1] if commits else self.base


def state_path(repo: GitRepo) -> Path:
    return progress.state_file(repo.git_dir)


def worktree_path(repo: GitRepo) -> Path:
    """Where a new build's scratch worktree goes (a state names the one it uses: `State.worktree`)."""
    return repo.git_dir / progress.STATE_DIR / progress.WORKTREE_DIR


def load(repo: GitRepo) -> State | None:
    path = state_path(repo)
    if not path.is_file():
        return None
    try:
        # Typed: a field of the wrong type is refused here, as unreadable, not later as a crash.
        return msgspec.json.decode(path.read_bytes(), type=State)
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested past msgspec's depth
        raise CorruptState(
            f"the state of an interrupted forkctl operation ({path}) is unreadable: {exc}",
            hint="forkctl apply --abort (or port --abort) removes it and its scratch worktree; "
            "no ref was moved",
        ) from None


class CorruptState(BadInput):
    """The state file exists but cannot be read (a crash mid-write, or an edit by hand)."""


def discard(repo: GitRepo) -> None:
    """--abort with an unreadable state: remove what forkctl owns in the git dir, move no ref."""
    clear(repo)


def require_owner(state: State, repo: GitRepo, manifest_path: Path) -> None:
    """The state belongs to the checkout (manifest) that started it: another checkout sharing the
    repository (the same cache clone or --repo) must not continue, skip or abort it, or the first
    checkout's resolution in the scratch worktree is lost."""
    if Path(state.manifest).resolve() != manifest_path.resolve():
        raise BadInput(
            f"the forkctl {state.operation} in progress in {repo.git_dir} was started from {state.manifest}, "
            f"not from {manifest_path}",
            hint=f"run forkctl {state.operation} --continue or --abort with --manifest {state.manifest} "
            "(in that checkout)",
        )


def require(repo: GitRepo, operation: str, manifest_path: Path | None = None) -> State:
    """The operation in progress; with `manifest_path`, only if that manifest's checkout started it."""
    state = load(repo)
    if state is None:
        raise BadInput(
            f"no {operation} in progress in {repo.git_dir}",
            # The state lives in the repository the operation ran in: the same --repo (for apply,
            # the same --upstream-repo when it ran in that URL's cache clone) finds it.
            hint=f"start one with forkctl {operation}; pass the same "
            + ("--repo or --upstream-repo" if operation == "apply" else "--repo")
            + " as then",
        )
    if state.operation != operation:
        raise BadInput(
            f"the interrupted operation in {repo.git_dir} is a {state.operation}, not a {operation}",
            hint=f"use forkctl {state.operation} --continue or --abort",
        )
    if manifest_path is not None:
        require_owner(state, repo, manifest_path)
    return state


def refuse_if_in_progress(repo: GitRepo) -> None:
    state = load(repo)
    if state is not None:
        at = Path(state.files[state.conflict_index]).name if state.conflict_index >= 0 else ""
        raise BadInput(
            f"a forkctl {state.operation} (started from {state.manifest}) is already in progress in "
            f"{repo.git_dir} " + (f"(stopped at {at})" if at else "(interrupted while writing its results)"),
            hint=f"finish it with forkctl {state.operation} --continue, or undo it with --abort",
        )


def save(repo: GitRepo, state: State) -> None:
    # atomic: a crash never leaves half a state file
    atomic_write_text(
        state_path(repo), msgspec.json.format(msgspec.json.encode(state), indent=2).decode() + "\n"
    )
    progress.remember(state.manifest, repo.git_dir, repo.path)  # for `forkctl status` in that checkout


class ConflictReport(msgspec.Struct, frozen=True):
    patch: Patch
    parent: str
    paths: list[str]  # files with conflicts left in the worktree
    message: str  # git apply's own words (which hunks failed)
    worktree: Path
    # port: an upstream commit that may hold the change (named by `named_by`, a port drop rule), for the
    # hint that `--skip` exists; a name alone never drops a patch.
    upstream_commit: str | None = None
    named_by: str = ""
    # port: an amended pick's own lines beyond the upstream commit (the stop merged only them)
    own_lines: str = ""
    # port: the commit of the range that reverted the upstream commit this patch picks
    reverted_by: str | None = None
    # the files on disk in the worktree (the conflicted ones and the patch's): the rest is in its index
    checked_out: list[str] = msgspec.field(default_factory=list)


def open_conflict(
    repo: GitRepo, state: State, index: int, patch: Patch, parent: str, merged: MergeResult | None = None
) -> ConflictReport:
    """Show a real conflict in the scratch worktree at `parent`, save the state, report it.

    `merged`: the object-level merge (port): the worktree gets its tree, conflict markers at the paths
    git's rename-aware merge chose, and its unmerged entries in the index. Without it, or when the port
    had no commit to pick (a patch stale on the old base), `git apply --3way` runs in the worktree.
    Either way the worktree is conflicted as after a stopped `git rebase`, its markers named.

    Only the conflicted files and the patch's own files are checked out (`Worktree.show_sparse`): the
    rest of the tree is in the worktree's index, skip-worktree, and `--continue` commits all of it.
    """
    scratch = _scratch_at(repo, Path(state.worktree), parent)
    if merged is not None and merged.stages:
        shown = scratch.show_sparse(merged.tree, [*merged.conflicted, *patch.paths])
        scratch.set_unmerged(merged.stages)
        paths, message, sides = merged.conflicted, merged.text(), merged.sides
    elif merged is not None and merged.clean:
        # A stop for a decision, not a conflict (a pick upstream reverted): the merge, for a look.
        shown = scratch.show_sparse(merged.tree, list(patch.paths))
        paths, message, sides = list(patch.paths), "", merged.sides
    else:
        shown = scratch.show_sparse(repo.commits.commit_info(parent).tree, list(patch.paths))
        _, message = scratch.apply_3way(patch.diff)
        paths, sides = scratch.unmerged_paths(), ("ours", "theirs")
        if not paths:
            # --3way could not even start (e.g. a file the patch edits is missing): name the patch's files.
            paths = [p for p in patch.paths if (scratch.path / p).exists() or p in message]
        shown = list(dict.fromkeys([*shown, *paths]))
    _name_sides(repo, state, (patch, index, parent), paths, sides)
    state.conflict_index = index
    state.conflict_parent = parent
    state.conflict_paths = paths
    save(repo, state)
    return ConflictReport(
        patch=patch, parent=parent, paths=paths, message=message, worktree=scratch.path, checked_out=shown
    )


SPARSE_NOTE = (
    "only the conflicted files and the patch's files are checked out there, the rest of the tree is in "
    "its index: git checkout --ignore-skip-worktree-bits -- PATH brings another file out, and --continue "
    "commits every file you change or add"
)


def _scratch_at(repo: GitRepo, worktree: Path, parent: str) -> Worktree:
    """The scratch worktree, emptied, its HEAD at `parent` (made without a checkout the first time)."""
    scratch = Worktree(worktree)
    if worktree.exists():
        scratch.empty_at(parent)
    else:
        worktree.parent.mkdir(parents=True, exist_ok=True)
        repo.worktrees.add_worktree(worktree, parent, checkout=False)
    return scratch


def _name_sides(
    repo: GitRepo, state: State, conflict: tuple[Patch, int, str], paths: list[str], sides: tuple[str, str]
) -> None:
    """Markers labelled `upstream <sha> (subject)` and `<patch file> (subject)` instead of git's names.
    `conflict`: (the patch, its position, the commit it was applied to)."""
    patch, index, parent = conflict
    done = [step.file for step in state.steps if step.commit]
    last_done = done[-1] if done and parent != state.base else None
    ours = markers.ours_label(state.base, repo.commits.commit_info(state.base).subject, last_done)
    theirs = markers.theirs_label(state.files[index], patch.subject)
    markers.relabel(Path(state.worktree), paths, {sides[0]: ours, sides[1]: theirs})


class MarkersRemain(BadInput):
    """--continue while conflict markers remain; the command, knowing the run's options, says the way on."""

    def with_ways(self, ways: dict[str, str]) -> BadInput:
        """The same refusal, its hint naming the run's own continue and abort (`progress.ways_on`)."""
        return BadInput(self.message, hint=f"resolve them, then run {ways['continue']} (or {ways['abort']})")


def unresolved_paths(state: State) -> list[str]:
    """Conflict paths that still hold conflict markers in the worktree."""
    worktree = Path(state.worktree)
    left = []
    for rel in state.conflict_paths:
        target = worktree / rel
        if target.is_file() and markers.CONFLICT_MARKER_RE.search(target.read_bytes()):
            left.append(rel)
    return left


def resolved_tree(repo: GitRepo, state: State) -> TreeSha:
    """The worktree's tree once no conflict markers remain; refuses a resolution that changes nothing."""
    left = unresolved_paths(state)
    if left:
        raise MarkersRemain(
            f"conflict markers remain in {', '.join(left)} (in {state.worktree})",
            hint=f"resolve them, then run forkctl {state.operation} --continue again (or --abort)",
        )
    return Worktree(Path(state.worktree)).write_tree()


def commit_resolution(repo: GitRepo, state: State, patch: Patch, message: str) -> Sha:
    """Commit the resolved worktree as the conflicting patch (its identity, date and message).

    A resolution whose tree equals the parent's would record the patch as applied while it changes
    nothing (a silent loss): it is refused, with the ways out.
    """
    tree = resolved_tree(repo, state)
    if tree == repo.commits.commit_info(state.conflict_parent).tree:
        skip = "forkctl port --skip (drops it, recorded under dropped:)" if state.operation == "port" else ""
        raise BadInput(
            f"the resolution of {Path(state.files[state.conflict_index]).name} changes nothing: "
            "committing it would record the patch as applied while it is lost",
            hint=(f"if upstream already has this change, run {skip}; " if skip else "")
            + f"otherwise edit the files in {state.worktree} and run --continue again, or --abort",
        )
    return repo.commits.commit_tree(tree, [state.conflict_parent], message, identity_of(patch))


def refuse_checked_out(repo: GitRepo, branch: str) -> None:
    """Apply and port build a branch and move it last: never one a checkout has out."""
    holders = repo.worktrees.checked_out_branches()
    if branch in holders:
        raise BadInput(
            f"branch {branch} is checked out in {holders[branch]}: forkctl never moves a checked-out branch",
            hint="pass --branch OTHER, or switch that checkout to another branch first",
        )


def set_branch(repo: GitRepo, branch: str, head: str, old_tip: str | None) -> None:
    """Move refs/heads/<branch> to `head`, only if it still is where it was when we started."""
    if old_tip == head:
        return
    repo.refs.update_ref(f"refs/heads/{branch}", head, old_tip, f"build {branch}")


def clear(repo: GitRepo) -> None:
    """Remove the state file, then the scratch worktree and the backups; touches no ref.

    The state goes first: while it exists, --continue and --abort need every backup it names. A kill
    after it leaves only scratch, which remove_leftovers sweeps before the next operation starts."""
    path = state_path(repo)
    started_from = _manifest_of(path)
    path.unlink(missing_ok=True)
    if started_from:
        progress.forget(started_from, repo.git_dir)
    remove_leftovers(repo)


def _manifest_of(path: Path) -> str | None:
    """The manifest a state file names (None when it is missing or unreadable: nothing to forget)."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=State).manifest
    except (OSError, ValueError, RecursionError):
        return None


def remove_leftovers(repo: GitRepo) -> None:
    """Remove forkctl's scratch in the git dir (no operation is in progress: the caller checked)."""
    folder = repo.git_dir / progress.STATE_DIR
    scratch = [folder / progress.WORKTREE_DIR, folder / progress.OLD_WORKTREE_DIR]  # the previous version's
    for worktree in scratch:
        if worktree.exists() or (repo.git_dir / "worktrees" / worktree.name).exists():
            repo.worktrees.remove_worktree(worktree)
    for left in [path for path in (*scratch, folder / "backup") if path.is_dir()]:
        import shutil  # only the leftovers of a killed run need it

        shutil.rmtree(left)
    remove_temporaries([folder / progress.STATE_FILE, folder / progress.OLD_STATE_FILE])
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
