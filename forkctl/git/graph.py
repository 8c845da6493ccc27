"""A URL's commit graph in the cache: commits only (`--filter=tree:0`), for history questions
(ancestry, counts, which branch contains a commit), possibly bounded in time.

A graph made for a check is fetched `--shallow-since` a date a little before the manifest base's
commit date (Megatron-LM's main: ~250 commits instead of ~9,600, a sixth of the time). Every answer
that the bound could falsify deepens the graph to full history first and asks again:

- a "yes" to an ancestry question is exact: a path inside the bounded graph is a path in the whole one;
- a "no", or a commit the graph lacks, may only mean the bound cut the path: deepened, asked again;
- a count `a..b` is exact when none of the commits it lists is a boundary commit (one whose parents
  the bound left out): a commit missing from the list would be reached only through such a commit.
  (Overcounting would need a commit dated after the bound below one dated before it: a clock
  running backwards by more than the margin.)

A graph that once held full history is never bounded again. Newer git (2.41+) could answer some of
this without the network (`rev-list --missing=print` on a partial clone), not across a shallow bound.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from forkctl.git.history import History
from forkctl.git.remote import talk
from forkctl.git.repo import GitRepo
from forkctl.git.runner import NO_LAZY_FETCH
from forkctl.git.sha import is_full_sha

FETCHED_REFS = "refs/forkctl/fetched/"  # single commits fetched by SHA; never a URL's branch or tag
BOUND_MARGIN_S = 30 * 86400  # how far before the base's commit date a bounded graph starts

Since = Callable[[], "int | None"]  # the bound (a Unix time) for a new graph, asked only when fetching


class CommitGraph(GitRepo):
    """A cache repository holding a URL's commits only; its answers deepen a bounded graph whenever
    the bound could make them wrong (see the module docstring)."""

    url: str
    # {URL's branch ref: the graph's copy's tip}, read once while this object is open, again after a
    # fetch into it (forkctl alone writes a cache's refs).
    held_tips: dict[str, str | None]

    @classmethod
    def at(cls, git_dir: Path, url: str) -> CommitGraph:
        graph = cls.cache_at(git_dir)
        graph.url = url
        return graph

    @classmethod
    def addressed(cls, git_dir: Path, path: Path | None = None, bare: bool = False) -> CommitGraph:
        graph = super().addressed(git_dir, path, bare)
        graph.held_tips = {}
        return graph

    def bounded(self) -> bool:
        return (self.git_dir / "shallow").is_file()

    def boundary(self) -> set[str]:
        """The commits whose parents the bound left out (git's `shallow` file)."""
        path = self.git_dir / "shallow"
        return set(path.read_text().split()) if path.is_file() else set()

    def deepen(self) -> bool:
        """Fetch the full history of every branch the graph holds (`--unshallow`); True when done."""
        out = self.git(["for-each-ref", "--format=%(refname)", "refs/forkctl/heads/"]).text
        refspecs = [f"+{ref.replace('refs/forkctl/', 'refs/', 1)}:{ref}" for ref in out.split()]
        args = ["fetch", "--quiet", "--no-tags", "--filter=tree:0", "--unshallow"]
        status = talk(args, self.url, refspecs, repo=self, fetch=True).status
        forget_tips(self)
        return status == 0 and not self.bounded()

    @property
    def history(self) -> GraphHistory:
        return GraphHistory(self)


class GraphHistory(History):
    """History's answers in a commit graph: a bounded graph is deepened wherever the bound could make
    an answer wrong (see the module docstring)."""

    def __init__(self, graph: CommitGraph) -> None:
        super().__init__(graph)
        self.graph = graph

    def is_ancestor(self, older: str, newer: str) -> bool:
        if super().is_ancestor(older, newer):
            return True  # exact, bound or not
        return self.graph.bounded() and self.graph.deepen() and super().is_ancestor(older, newer)

    def reaches(self, tip: str, sha: str) -> bool:
        """Is commit `sha` here and an ancestor of `tip`? One `merge-base` (git's lazy fetch refused: a
        commit not here fails it, never downloads). A no is final in a graph the bound does not cut (it
        holds the branch's whole history, so a commit it lacks is not on it); a bounded graph is deepened
        and asked again."""
        # A yes (now, or recorded by an earlier run: a fact of the history) needs no presence question.
        if self._ask_ancestry(sha, tip, env=NO_LAZY_FETCH):
            return True
        return (
            self.graph.bounded() and self.graph.deepen() and self._ask_ancestry(sha, tip, env=NO_LAZY_FETCH)
        )

    def ahead_behind(self, base: str, commit: str) -> tuple[int, int] | None:
        """History's answer, exact under the bound: one side empty (an ancestry yes) and no boundary
        commit listed (as for `count`); otherwise deepened and asked again."""
        fact = f"ahead-behind {base} {commit}"  # exact answers only: they hold for every later run
        recorded = self.repo.facts.get(fact) if self.repo.facts is not None else None
        if isinstance(recorded, list) and len(recorded) == 2 and all(isinstance(n, int) for n in recorded):
            return recorded[0], recorded[1]
        counts = self._exact_ahead_behind(base, commit)
        if counts is not None and self.repo.facts is not None and is_full_sha(base) and is_full_sha(commit):
            self.repo.facts.put(fact, list(counts))
        return counts

    def _exact_ahead_behind(self, base: str, commit: str) -> tuple[int, int] | None:
        if not self.graph.bounded():
            return super().ahead_behind(base, commit)
        listed = self._left_right(base, commit)
        if listed is not None:
            behind = sum(1 for line in listed if line.startswith("<"))
            ahead = len(listed) - behind
            cut = self.graph.boundary().intersection(line[1:] for line in listed)
            if not cut and (ahead == 0 or behind == 0):
                return ahead, behind
        if not self.graph.deepen():
            return None  # still cut: counting now would miss commits, and the answer would be recorded
        return super().ahead_behind(base, commit)

    def count(self, range_spec: str) -> int:
        if self.graph.bounded():
            listed = self.repo.git(["rev-list", "--end-of-options", range_spec, "--"]).text.split()
            if not self.graph.boundary().intersection(listed):
                return len(listed)
            self.graph.deepen()
        return super().count(range_spec)


def bound_before(repo: GitRepo, commit: str) -> int | None:
    """Where a bounded graph for questions about `commit` starts: its committer date less the
    margin (None when `repo` cannot read the commit: then the graph is fetched whole)."""
    status, out, _ = repo.git(["cat-file", "commit", commit], env=NO_LAZY_FETCH, check=False).parts()
    for line in out.splitlines() if status == 0 else []:
        if not line:
            break  # the headers end here
        if line.startswith("committer ") and len(line.split()) >= 3:
            stamp = line.split()[-2]
            return int(stamp) - BOUND_MARGIN_S if stamp.isdigit() else None
    return None


def forget_tips(graph: GitRepo) -> None:
    """After a fetch into `graph`: every branch tip read before may have moved (or gone)."""
    if isinstance(graph, CommitGraph):
        graph.held_tips.clear()


def _new_or_bounded(graph: GitRepo) -> bool:
    """True for a graph never fetched into, or one already bounded: a full graph stays full (a
    bounded fetch into it would cut its history)."""
    git_dir = graph.git_dir
    fetched = (git_dir / "refs" / "forkctl").is_dir() or (git_dir / "packed-refs").is_file()
    return not fetched or (git_dir / "shallow").is_file()


def graph_fetch(graph: GitRepo, url: str, refspecs: list[str], since: Since | None = None) -> int:
    """One commits-only fetch into a commit graph: bounded at `since()` for a new or bounded graph,
    else full depth.

    A commit the tree cache fetched at depth 1 arrives here again (one commit object each, no tree).
    Telling the server the graph has it (borrowing the tree cache's objects, listing the commit as
    shallow, fetching with `--unshallow`) avoids that, but the deepening fetch took 1.6-1.8x as long
    as this one for Megatron-LM's main (9,632 commits) on git 2.39: measured, and not worth one
    commit object per pin."""
    args = ["fetch", "--quiet", "--no-tags", "--filter=tree:0"]
    bound = since() if since is not None and _new_or_bounded(graph) else None
    if bound is not None:
        status = talk([*args, f"--shallow-since={bound}"], url, refspecs, repo=graph, fetch=True).status
        if status == 0:
            return 0
        # "no commits selected for shallow requests": every wanted tip is older than the bound.
    return talk(args, url, refspecs, repo=graph, fetch=True).status


def fetch_graph(graph: GitRepo, url: str, wanted: dict[str, str], since: Since | None = None) -> bool:
    """Bring the commit graph of the branches `wanted` ({refs/heads/B: tip as listed}) into `graph`
    (commits only: exact ancestry, a fraction of the bytes of the trees; bounded at `since()` when
    the graph is new or bounded), under refs/forkctl/heads/. Branches already held at the listed tip
    are not fetched (a warm cache works offline). True when every wanted branch is now held at its tip."""
    held = {ref: held_branch_tip(graph, ref) for ref in wanted}
    todo = [ref for ref, tip in wanted.items() if held[ref] != tip and ref.startswith("refs/heads/")]
    if todo:
        refspecs = [f"+{ref}:{ref.replace('refs/', 'refs/forkctl/', 1)}" for ref in todo]
        if graph_fetch(graph, url, refspecs, since) != 0:
            return False
        held = {ref: held_branch_tip(graph, ref, again=True) for ref in wanted}
    return all(held[ref] == tip for ref, tip in wanted.items())


def held_branch_tip(graph: GitRepo, ref: str, again: bool = False) -> str | None:
    """The graph's copy of the URL's branch `ref` (refs/forkctl/...), read once while the graph object is
    open unless `again` (after a fetch into it): a check asks about the same branch for every pin on it."""
    if not isinstance(graph, CommitGraph):
        return graph.refs.ref_sha(ref.replace("refs/", "refs/forkctl/", 1))
    if again or ref not in graph.held_tips:
        graph.held_tips[ref] = graph.refs.ref_sha(ref.replace("refs/", "refs/forkctl/", 1))
    return graph.held_tips[ref]
