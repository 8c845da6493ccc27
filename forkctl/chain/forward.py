"""A bump moves each consumer forward only: the new pin holds every upstream commit the old one had.

The fork link is judged by check-pins' own diagnosis of the pin the consumer holds now: a plain upstream
commit, or a fork head, on a base the manifest base lacks commits of carries the base the chain wants
(`ChainFinding.wants`), and the bump would take those commits away; the same fix (`forkctl port --onto`)
is the way forward. A later link pins the previous consumer's new bump commit, made on that consumer's
branch: it must contain the commit pinned now, which history answers (the clone's own when it is
complete, else the URL's commit graph). What cannot be judged (a pin no one hands out, history not to be
had) is said, not guessed in either direction.
"""

from __future__ import annotations

import msgspec

from forkctl.chain.forkhead import ForkContext
from forkctl.chain.forklink import check_fork_pin
from forkctl.chain.model import LinkResult, WantedBase
from forkctl.chain.reachable import CommitGraphs
from forkctl.errors import BadInput
from forkctl.git import clonecache
from forkctl.git import graph as gitgraph
from forkctl.git.repo import GitRepo
from forkctl.manifest import Consumer


class Backwards(msgspec.Struct, frozen=True):
    """A bump step whose new pin lacks commits the consumer's pin has now."""

    consumer: str
    old: str
    new: str
    message: str
    fix: str
    wants: WantedBase | None = None  # the fork link: the base the chain wants


class ForwardVerdict(msgspec.Struct):
    """The forward rule over a planned bump: the steps that would go back, and what could not be told."""

    backwards: list[Backwards] = msgspec.field(default_factory=list)
    unjudged: list[str] = msgspec.field(default_factory=list)


def judge_fork_step(
    verdict: ForwardVerdict,
    consumer: Consumer,
    old: str | None,
    new: str,
    url: str | None,
    fork: ForkContext,
    graphs: CommitGraphs,
) -> None:
    """The first consumer moves from `old` to `new` (the fork head, or its published merge): backwards
    when check-pins finds that `old` builds on upstream commits the manifest base lacks."""
    if old is None or old in (new, fork.head):
        return
    link = LinkResult(consumer.name, 0, "", "pinned now", consumer.gitlink, "fork")
    check_fork_pin(link, old, url, fork, graphs)
    found = next((f for f in link.findings if f.wants is not None), None)
    if found is not None:
        message = f"{consumer.name}: the bump would go back: {consumer.name} {found.message}"
        verdict.backwards.append(Backwards(consumer.name, old, new, message, found.fix, found.wants))
    elif any(f.kind in ("unreadable", "url-refused") for f in link.findings):
        verdict.unjudged.append(
            f"{consumer.name}: its pin {old[:12]} could not be read, so whether the bump to {new[:12]} "
            "keeps its upstream commits was not judged"
        )


def judge_consumer_step(
    verdict: ForwardVerdict,
    consumer: Consumer,
    previous: Consumer,
    old: str | None,
    new: str,
    branch_head: str,
    repo: GitRepo,
    url: str,
    graphs: CommitGraphs,
) -> None:
    """`consumer` moves its pin of `previous` from `old` to `new`, a bump commit on `previous`'s branch
    head `branch_head` (held in `repo`, fetched from `url`): `old` must be in the branch's history."""
    if old is None or old in (new, branch_head):
        return
    contained = contains(repo, url, previous.branch, branch_head, old, graphs)
    if contained is None:
        verdict.unjudged.append(
            f"{consumer.name}: whether {previous.name}'s {previous.branch} {branch_head[:12]} contains "
            f"the commit pinned now ({old[:12]}) could not be told, so the rule was not judged"
        )
        return
    if contained:
        return
    message = (
        f"{consumer.name}: the bump would go back: it pins {previous.name}@{old[:12]} now, which "
        f"{previous.name}'s {previous.branch} {branch_head[:12]} does not contain, so the new pin "
        f"{new[:12]} (a bump commit on that branch) drops its commits"
    )
    fix = (
        f"merge {old[:12]} into {previous.name}'s {previous.branch} (or pin a {previous.name} commit that "
        f"contains it), then forkctl bump-bridge --through {consumer.name}"
    )
    verdict.backwards.append(Backwards(consumer.name, old, new, message, fix))


def contains(repo: GitRepo, url: str, branch: str, head: str, old: str, graphs: CommitGraphs) -> bool | None:
    """Is `old` an ancestor of `head`? From `repo` when it holds full history (a yes is exact anyhow),
    else from the URL's commit graph when `head` is its branch tip there; None when neither can say."""
    if not repo.objects.missing_objects([old]):
        if repo.history.is_ancestor(old, head):
            return True  # a path in the history held here is a path in the whole one
        if not (repo.git_dir / "shallow").is_file():
            return False  # complete history holding both: a no is exact
    ref = f"refs/heads/{branch}"
    try:
        listed = graphs.remotes.refs(url).get(ref)
    except BadInput:
        return None
    if listed != head:
        return None
    graph = clonecache.graph_for(url)
    if not gitgraph.fetch_graph(graph, url, {ref: head}, graphs.since):
        return None
    # `reaches` deepens a bounded graph before a no: a graph of the whole branch that lacks `old`
    # says it is not on the branch.
    return graph.history.reaches(head, old)
