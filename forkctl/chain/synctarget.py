"""Which upstream commit `forkctl sync` ports the series onto, and the rule that chose it.

By default the fork goes where the consumers' own pins already stand, when they stand past the manifest
base: the chain's one way forward (chain/wayforward.py), the target check-pins and describe name too,
by the same rule; pins on two lines of upstream history are a finding, never a target. Otherwise the
fork follows its nearest consumer's own upstream: the commit that upstream's default
branch (the branch its `HEAD` names, e.g. NVIDIA-NeMo/Megatron-Bridge `main`) pins at the consumer's
gitlink path, read from the tree of that branch's tip (objects only: no checkout, no submodule). It is
a target only when it descends from the manifest base: a pin at or behind the base asks nothing of the
fork, and one beside it (not an ancestor either way) is a finding, never guessed into a target.
`--onto upstream` takes upstream's branch tip; `--onto SHA` a given commit.

Whatever the rule, the target is a commit one of upstream's branches or tags holds: a commit only a pull
request's ref (`refs/pull/*`) or another ref reaches is anyone's proposal, never a base (relation
`unlisted`), and a SHA fetched by its name alone proves nothing about where it lives.
"""

from __future__ import annotations

import msgspec

from forkctl.chain.checks import chain_way_forward
from forkctl.chain.forkhead import ForkContext
from forkctl.chain.model import Progress, WayForward
from forkctl.errors import BadInput, ForkctlError
from forkctl.git import clonecache, remote
from forkctl.git.sha import is_commit_name, is_full_sha
from forkctl.manifest import Manifest

RULE_CONSUMER = "consumer-upstream"
RULE_TIP = "upstream-tip"
RULE_GIVEN = "given"
RULE_PINS = "consumer-pins"  # the chain's one way forward (chain/wayforward.py)


class SyncTarget(msgspec.Struct, frozen=True):
    """The commit to port onto (`commit`), the rule that chose it and the sentence that says so."""

    commit: str  # "" when the consumers' pins diverge (relation "pins-diverged"): there is no target
    rule: str  # RULE_PINS | RULE_CONSUMER | RULE_TIP | RULE_GIVEN
    because: str
    relation: str = "ahead"  # the target against the base: ahead | base | behind | diverged | pins-diverged
    consumer: str | None = None  # the consumer whose upstream was read (RULE_CONSUMER)
    consumer_upstream: str | None = None  # its upstream's OWNER/NAME
    consumer_branch: str | None = None  # that upstream's default branch
    consumer_commit: str | None = None  # the branch tip whose gitlink was read
    ahead: int = 0  # upstream commits base..target
    way: WayForward | None = None  # where the consumers' pins want the fork, when they were read
    pins_unread: str | None = None  # why they were not, when they could not be


def choose_target(manifest: Manifest, fork: ForkContext, onto: str | None, progress: Progress) -> SyncTarget:
    """The sync target for `--onto` (None: the consumer rule), its history in `fork.upstream_repo`."""
    if onto is None:
        return _by_default(manifest, fork, progress)
    if onto == "upstream":
        tip = fork.upstream_tip(manifest.upstream.branch)
        if tip is None:
            raise BadInput(
                f"{manifest.upstream.url} has no branch {manifest.upstream.branch}",
                hint="fix upstream.branch in the manifest, or pass --onto SHA",
            )
        because = f"--onto upstream: the tip of {manifest.upstream.repo} {manifest.upstream.branch}"
        return _relate(manifest, fork, SyncTarget(tip, RULE_TIP, because))
    if not is_commit_name(onto):
        raise BadInput(
            f"--onto {onto!r} is neither `upstream` nor a commit SHA",
            hint="pass --onto upstream, or 7 to 40 lowercase hex digits (or a full SHA) of an upstream commit",
        )
    commit = _upstream_commit(manifest, fork, onto)
    return _relate(manifest, fork, SyncTarget(commit, RULE_GIVEN, f"--onto {onto}: the commit given"))


def _by_default(manifest: Manifest, fork: ForkContext, progress: Progress) -> SyncTarget:
    """The chain's one way forward when the consumers' pins stand past the base (or a finding when they
    diverge); else what the nearest consumer's upstream pins."""
    try:
        way: WayForward | None = chain_way_forward(manifest, fork, progress)
        unread = None
    except ForkctlError as exc:  # the upstream rule alone then, saying so
        way, unread = None, exc.message
    if way is not None and way.moves:
        if way.target is None:
            return SyncTarget("", RULE_PINS, way.because, relation="pins-diverged", way=way)
        because = f"where the consumers' own pins stand: {way.because}"
        return _relate(manifest, fork, SyncTarget(way.target, RULE_PINS, because, way=way))
    followed = _relate(manifest, fork, _consumer_pin(manifest, fork, progress))
    return msgspec.structs.replace(followed, way=way, pins_unread=unread)


def _upstream_commit(manifest: Manifest, fork: ForkContext, sha: str) -> str:
    """The full SHA of upstream commit `sha`, with upstream's history fetched first."""
    fork.upstream_tip(manifest.upstream.branch)
    found = fork.upstream_repo.objects.resolve_commit(sha)
    why = ""
    if found is None and is_full_sha(sha):
        why = clonecache.fetch_sha_why(fork.upstream_repo, fork.upstream_url, sha, depth=None) or ""
        found = None if why else fork.upstream_repo.objects.resolve_commit(sha)
    if found is None:
        raise BadInput(
            f"{sha} is not a commit of {manifest.upstream.repo} ({fork.upstream_url})"
            + (f": {why}" if why else ""),
            hint="give a full SHA of an upstream commit, or --onto upstream",
        )
    return found


def _consumer_pin(manifest: Manifest, fork: ForkContext, progress: Progress) -> SyncTarget:
    """What the nearest consumer's own upstream pins on its default branch, at the consumer's gitlink."""
    if not manifest.consumers:
        raise BadInput(
            "the manifest lists no consumers", hint="add consumers: to manifest.yaml, or pass --onto"
        )
    consumer = manifest.consumers[0]
    url = consumer.upstream_url
    if not url:
        raise BadInput(
            f"consumer {consumer.name} has no upstream_url: there is no upstream whose pin to follow",
            hint=f"set consumers[0].upstream_url (e.g. the URL of {consumer.upstream}), or pass --onto",
        )
    progress(f"reading what {consumer.upstream} pins at {consumer.gitlink}")
    branch = remote.default_branch(url) or "main"
    tip = remote.ls_remote(url).get(f"refs/heads/{branch}")
    if tip is None:
        raise BadInput(f"{url} has no branch {branch}", hint="check consumers[0].upstream_url")
    consumer_repo = clonecache.cache_repo_for(url)
    why = clonecache.fetch_sha_why(consumer_repo, url, tip)
    if why is not None:
        raise BadInput(f"cannot read {consumer.upstream} {branch} ({tip[:12]}) from {url}: {why}")
    entry = consumer_repo.objects.tree_entries(tip, [consumer.gitlink]).get(consumer.gitlink)
    if entry is None or entry.kind != "commit":
        raise BadInput(
            f"{consumer.upstream} {branch} ({tip[:12]}) has no gitlink at {consumer.gitlink}",
            hint="fix consumers[0].gitlink, or pass --onto",
        )
    because = f"what {consumer.upstream}'s default branch {branch} ({tip[:12]}) pins at {consumer.gitlink}"
    pin = _upstream_commit(manifest, fork, entry.sha)
    return SyncTarget(
        pin,
        RULE_CONSUMER,
        because,
        consumer=consumer.name,
        consumer_upstream=consumer.upstream,
        consumer_branch=branch,
        consumer_commit=tip,
    )


# Where upstream's branches and tags are: in forkctl's cache of its URL (fetch_history), or in a local
# clone (its own branches and tags, and those it tracks from the remotes local_branch_tip reads).
CACHED_LISTED = ["refs/forkctl/heads/", "refs/forkctl/tags/"]
LOCAL_LISTED = ["refs/heads/", "refs/tags/", "refs/remotes/origin/", "refs/remotes/upstream/"]


def listed_holders(manifest: Manifest, fork: ForkContext, commit: str) -> list[str]:
    """The refs of upstream's branches and tags whose history holds `commit` (empty: none does)."""
    fork.upstream_tip(manifest.upstream.branch)  # every branch and tag fetched, with its history
    if fork.upstream_local is not None:
        found = fork.upstream_local.refs.refs_containing(commit, LOCAL_LISTED)
        return [ref for ref in found if "/pull/" not in ref and "/pr/" not in ref]
    return fork.upstream_repo.refs.refs_containing(commit, CACHED_LISTED)


def _relate(manifest: Manifest, fork: ForkContext, target: SyncTarget) -> SyncTarget:
    """The target with its relation to the base and the number of upstream commits it adds; `unlisted`
    when no branch or tag of upstream holds it."""
    upstream_repo, base = fork.upstream_repo, fork.base
    if target.commit != base and not listed_holders(manifest, fork, target.commit):
        return msgspec.structs.replace(target, relation="unlisted")
    if target.commit == base:
        relation = "base"
    elif upstream_repo.history.is_ancestor(base, target.commit):
        relation = "ahead"
    elif upstream_repo.history.is_ancestor(target.commit, base):
        relation = "behind"
    else:
        relation = "diverged"
    ahead = upstream_repo.history.count(f"{base}..{target.commit}") if relation == "ahead" else 0
    return msgspec.structs.replace(target, relation=relation, ahead=ahead)
