"""Files on disk: the scratch worktrees forkctl makes for conflict resolution (apply --continue, port),
and plain directory trees that `apply --tree` patches in place (no repository at all)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from forkctl.git.gitdir import Part
from forkctl.git.runner import GitFailed, git
from forkctl.git.sha import TreeSha, printed_tree

if TYPE_CHECKING:
    from forkctl.git.merge import Stage


class Worktrees(Part):
    """Linked worktrees of this repository: scratch ones for conflict resolution, and the one
    `forkctl edit` makes for a person to edit the series in."""

    def add_worktree(self, path: Path, commit: str, checkout: bool = True) -> None:
        """A detached worktree at `commit`; without `checkout`, no file and an empty index (the caller
        fills it: `Worktree.show_sparse`)."""
        args = ["worktree", "add", "--detach", *([] if checkout else ["--no-checkout"])]
        self.repo.git([*args, str(Path(path).resolve()), commit])

    def add_branch_worktree(self, path: Path, branch: str, commit: str) -> None:
        """A worktree at `path` on a new branch `branch` made at `commit` (git refuses an existing
        branch: nothing is overwritten). `branch` must have passed `check_branch_name`."""
        self.repo.git(["worktree", "add", "--quiet", "-b", branch, str(path.resolve()), commit])

    def remove_worktree(self, path: Path) -> None:
        self.repo.git(["worktree", "remove", "--force", str(Path(path).resolve())], check=False)
        self.repo.git(["worktree", "prune"], check=False)

    def checked_out_branches(self) -> dict[str, Path]:
        """{branch name: worktree path} for every worktree (the main one included) that has one checked out."""
        if self.repo.bare and not (self.repo.git_dir / "worktrees").is_dir():
            # A bare repository's HEAD is no checkout, and every linked worktree is registered under
            # worktrees/ (`git worktree add` makes it): with none there, no branch is checked out, and a
            # re-apply or a cache build is spared a git process.
            return {}
        out = self.repo.git(["worktree", "list", "--porcelain"]).text
        branches: dict[str, Path] = {}
        current: Path | None = None
        for line in out.splitlines():
            if line.startswith("worktree "):
                current = Path(line.removeprefix("worktree "))
            elif line.startswith("branch refs/heads/") and current is not None:
                branches[line.removeprefix("branch refs/heads/")] = current
        return branches


# --- plain directory trees (no repository) -----------------------------------------------------


def _tree_env(tree: Path) -> dict[str, str]:
    # Stop git from finding a repository above the tree: paths must be taken relative to `tree`.
    return {"GIT_CEILING_DIRECTORIES": str(tree.resolve().parent)}


class Worktree:
    """A checked-out worktree forkctl reads or owns, addressed by its path: git runs in it (its files and
    index), never with `--git-dir` alone."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def apply_3way(self, diff: bytes) -> tuple[bool, str]:
        """`git apply --3way` in a worktree (its files and index): conflicts are left as markers."""
        status, out, err = git(
            ["apply", "--3way", "--whitespace=nowarn", "-"], cwd=self.path, stdin=diff, check=False
        ).parts()
        return status == 0, "\n".join(part for part in (out.strip(), err.strip()) if part)

    def unmerged_paths(self) -> list[str]:
        return git(["diff", "--name-only", "--diff-filter=U"], cwd=self.path).text.splitlines()

    def empty_at(self, commit: str) -> None:
        """Point a (forkctl-owned, scratch) worktree's HEAD at `commit` and delete every file it holds
        (what a previous stop left, already committed): `show_sparse` then fills it."""
        import shutil  # only a second stop in one port needs it

        git(["update-ref", "--no-deref", "HEAD", commit], cwd=self.path)
        for entry in self.path.iterdir():
            if entry.name == ".git":
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def show_sparse(self, tree: TreeSha, paths: list[str]) -> list[str]:
        """Put `tree` into a (forkctl-owned, scratch, emptied) worktree's index and only `paths` on disk:
        every other entry is marked skip-worktree, as a sparse checkout leaves it, so git sees those files
        as unchanged and the index still holds the whole tree (`write_tree` commits all of it). Returns
        the paths checked out (those of `paths` that the tree has), in the index's order. Cost grows
        with the paths shown, not the repository: a full checkout of Megatron-LM took 2 s."""
        git(["read-tree", tree], cwd=self.path)
        listed = git(["ls-files", "-z"], cwd=self.path).stdout.split(b"\x00")
        wanted = {path.encode("utf-8", errors="surrogateescape") for path in paths}
        shown = [path for path in listed if path in wanted]
        hidden = [path for path in listed if path and path not in wanted]
        if shown:
            git(
                ["checkout-index", "-u", "-f", "-z", "--stdin"],
                cwd=self.path,
                stdin=b"".join(p + b"\x00" for p in shown),
            )
        if hidden:
            stdin = b"".join(path + b"\x00" for path in hidden)
            git(["update-index", "-z", "--skip-worktree", "--stdin"], cwd=self.path, stdin=stdin)
        return [path.decode("utf-8", errors="surrogateescape") for path in shown]

    def set_unmerged(self, stages: list[Stage]) -> None:
        """Give a (forkctl-owned, scratch) worktree's index the unmerged entries of a conflict, stages 1-3
        as a stopped `git rebase` leaves them, so that `git status`, `git diff`, `git mergetool` and
        `git checkout --ours/--theirs` see the conflict. The files are left as they are."""
        zero = "0" * 40
        paths = list(dict.fromkeys(stage.path for stage in stages))
        # A mode-0 record removes the path's entry; then the stages go in (`ls-files --stage` form).
        records = [f"0 {zero}\t{path}" for path in paths]
        records += [f"{stage.mode} {stage.sha} {stage.stage}\t{stage.path}" for stage in stages]
        if records:
            stdin = "".join(f"{record}\x00" for record in records).encode("utf-8", errors="surrogateescape")
            git(["update-index", "-z", "--index-info"], cwd=self.path, stdin=stdin)

    def write_tree(self) -> TreeSha:
        """Stage every file of a worktree (resolutions included) in its own index and write the tree.

        `core.sparseCheckout` on for this `git add` alone: a file the person brought out of a sparse
        stop (`show_sparse`) and edited loses its skip-worktree mark and is staged; plain `git add -A`
        would keep the index's entry and drop the edit silently."""
        git(["-c", "core.sparseCheckout=true", "add", "-A", "."], cwd=self.path)
        return printed_tree(git(["write-tree"], cwd=self.path).text, "write-tree")

    def has_uncommitted_changes(self, relpath: str) -> bool:
        """Whether `relpath` in the worktree differs from HEAD: modified, staged, added, or untracked.

        The path is a literal pathspec, so a name with glob characters never matches other files.
        """
        out = git(
            ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--", f":(literal){relpath}"],
            cwd=self.path,
        ).text
        return bool(out.strip("\0"))

    def differs_from_head(self, relpaths: list[str]) -> list[str]:
        """Which of `relpaths` (relative to `self.path`, the root or a folder of a working tree) are not
        exactly as HEAD holds them: modified, staged, added, deleted, untracked or ignored; sorted, named
        as git names them, from the working tree's root. One `git status` for all, literal pathspecs
        (the runner sets GIT_OPTIONAL_LOCKS=0: the user's index is left as it is)."""
        if not relpaths:
            return []
        args = ["status", "--porcelain=v1", "-z", "--untracked-files=all"]
        args += ["--ignored=matching", "--no-renames", "--", *(f":(literal){path}" for path in relpaths)]
        records = git(args, cwd=self.path).text.split("\0")
        # Each record is "XY path"; --no-renames: no record carries a second path.
        return sorted({record[3:] for record in records if len(record) > 3})

    def is_tracked(self, relpath: str) -> bool:
        """Whether git tracks `relpath` (it is in the index); False for an untracked or ignored file."""
        out = git(["ls-files", "-z", "--cached", "--", f":(literal){relpath}"], cwd=self.path).text
        return bool(out.strip("\0"))


class PlainTree:
    """A plain directory tree, no repository at all: `apply --tree` patches it in place with `git
    apply`, its index kept out of the way (`_tree_env`)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def apply_check(self, diff: bytes, include: str, reverse: bool = False) -> tuple[bool, str]:
        """Would `diff` (restricted to `include`) apply to the files under `tree`? (reverse: un-apply)"""
        args = ["apply", "--check", f"--include={include}", "--whitespace=nowarn"]
        if reverse:
            args.append("--reverse")
        status, _, err = git(
            [*args, "-"], cwd=self.path, env=_tree_env(self.path), stdin=diff, check=False
        ).parts()
        return status == 0, err

    def apply(self, diff: bytes, include: str, reverse: bool = False) -> None:
        args = ["apply", f"--include={include}", "--whitespace=nowarn"]
        if reverse:
            args.append("--reverse")
        status, _, err = git(
            [*args, "-"], cwd=self.path, env=_tree_env(self.path), stdin=diff, check=False
        ).parts()
        if status != 0:
            raise GitFailed(f"git apply failed in {self.path}", err)
