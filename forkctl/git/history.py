"""Questions about the commit graph: ancestry, merge bases, the commits of a range."""

from __future__ import annotations

from collections.abc import Mapping

from forkctl.errors import BadInput
from forkctl.git.gitdir import Part
from forkctl.git.runner import NO_LAZY_FETCH
from forkctl.git.sha import is_full_sha


class History(Part):
    """Ancestry and ranges, answered by rev-list and merge-base."""

    def ancestors_among(self, commits: list[str], tip: str) -> set[str]:
        """Those of `commits` (full SHAs present here) that are ancestors of `tip`, in one process:
        `rev-list <commits> ^<tip>` lists what `tip` cannot reach, so the rest can."""
        if not commits:
            return set()
        stdin = "".join(f"{sha}\n" for sha in commits) + f"^{tip}\n"  # git 2.39: no --not in --stdin
        unreachable = set(self.repo.git(["rev-list", "--stdin"], stdin=stdin.encode()).text.split())
        return {sha for sha in commits if sha not in unreachable}

    def is_ancestor(self, older: str, newer: str) -> bool:
        """Is `older` an ancestor of (or equal to) `newer`? A yes between two full SHAs is kept on
        this repository object: history is only ever added to while forkctl runs, so it stays a yes."""
        return self._ask_ancestry(older, newer)

    def known_ancestor(self, older: str, newer: str) -> bool:
        """A yes to `is_ancestor(older, newer)` given before (to this object, or recorded by an earlier one in
        this cache repository), without asking git: False means only "not known"."""
        full = is_full_sha(older) and is_full_sha(newer)
        if (older, newer) in self.repo.ancestry:
            return True
        return (
            full and self.repo.facts is not None and self.repo.facts.get(f"ancestor {older} {newer}") is True
        )

    def _ask_ancestry(self, older: str, newer: str, env: Mapping[str, str] | None = None) -> bool:
        key = (older, newer)
        if self.known_ancestor(older, newer):  # a yes is a fact of the history: it holds for every later run
            self.repo.ancestry.add(key)
            return True
        yes = (
            self.repo.git(
                ["merge-base", "--is-ancestor", "--end-of-options", older, newer], env=env, check=False
            ).status
            == 0
        )
        if yes and is_full_sha(older) and is_full_sha(newer):
            self.repo.ancestry.add(key)
            if self.repo.facts is not None:
                self.repo.facts.put(f"ancestor {older} {newer}", True)
        return yes

    def ahead_behind(self, base: str, commit: str) -> tuple[int, int] | None:
        """(commits of `commit` not in `base`, commits of `base` not in `commit`) in one `rev-list`:
        (n, 0) is `commit` n ahead of `base` (base its ancestor), (0, n) n behind. None when git
        cannot walk the two (a commit is not here: never a download)."""
        args = ["rev-list", "--left-right", "--count", "--end-of-options", f"{base}...{commit}", "--"]
        status, out, _ = self.repo.git(args, env=NO_LAZY_FETCH, check=False).parts()
        counts = out.split()
        if status != 0 or len(counts) != 2 or not all(c.isdigit() for c in counts):
            return None
        return int(counts[1]), int(counts[0])

    def _left_right(self, base: str, commit: str) -> list[str] | None:
        """`rev-list --left-right base...commit`: '<sha' only `base` reaches, '>sha' only `commit`."""
        args = ["rev-list", "--left-right", "--end-of-options", f"{base}...{commit}", "--"]
        status, out, _ = self.repo.git(args, env=NO_LAZY_FETCH, check=False).parts()
        return out.split() if status == 0 else None

    def merge_bases(self, a: str, b: str) -> list[str]:
        status, out, _ = self.repo.git(["merge-base", "--all", "--end-of-options", a, b], check=False).parts()
        return out.split() if status == 0 else []

    def rev_list(self, range_spec: str, *extra: str) -> list[str]:
        """Commits in `range_spec`, oldest first."""
        out = self.repo.git(["rev-list", "--reverse", *extra, "--end-of-options", range_spec, "--"]).text
        return out.split()

    def ancestry_chain(self, base: str, tip: str) -> list[tuple[str, str]]:
        """A line of descent from `base` to `tip` (full SHAs): (commit, its parent on the line), oldest
        first, the first commit's parent `base`. Only descendants of `base` that `tip` reaches
        (`rev-list --ancestry-path`), stepping from `tip` to its first parent wherever that stays on
        them, else to the first parent that does. Empty when `tip` does not descend from `base`."""
        out = self.repo.git(
            ["rev-list", "--ancestry-path", "--parents", "--end-of-options", f"{base}..{tip}", "--"]
        ).text
        parents = {words[0]: words[1:] for words in (line.split() for line in out.splitlines()) if words}
        chain: list[tuple[str, str]] = []
        at = tip
        while at in parents:
            step = next((p for p in parents[at] if p == base or p in parents), None)
            if step is None:  # not reached: every commit of an ancestry path has such a parent
                return []
            chain.append((at, step))
            at = step
        chain.reverse()
        return chain if at == base else []

    def commits_not_in(self, tip: str, excluded: list[str]) -> list[str]:
        """Commits reachable from `tip` and from none of `excluded`, oldest first (topological)."""
        return self.repo.git(
            ["rev-list", "--reverse", "--topo-order", tip, "--not", *excluded, "--"]
        ).text.split()

    def count(self, range_spec: str) -> int:
        return int(self.repo.git(["rev-list", "--count", "--end-of-options", range_spec, "--"]).text)

    def commits_saying_they_revert(self, commit: str, range_spec: str) -> set[str]:
        """Commits in `range_spec` whose message says "This reverts commit <commit>" (`git revert`'s
        words, with the full SHA): a name, to be confirmed by the diff."""
        if not is_full_sha(commit):
            raise BadInput(f"commits_saying_they_revert needs a full commit SHA, got {commit!r}")
        out = self.repo.git(
            [
                "log",
                "--format=%H",
                "--fixed-strings",
                f"--grep=This reverts commit {commit}",
                "--end-of-options",
                range_spec,
                "--",
            ]
        ).text
        return set(out.split())

    def last_commit_touching(self, range_spec: str, paths: list[str]) -> str | None:
        """The newest commit in `range_spec` that changed any of `paths` (evidence for an absorbed patch)."""
        if not paths:
            return None
        out = self.repo.git(["log", "-1", "--format=%H", range_spec, "--", *paths]).text.strip()
        return out or None
