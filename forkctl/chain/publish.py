"""Publishing the fork head: apply(series, base) onto the fork's branch at its URL, never forced.

`fork.publish: rebuild` pushes the reproducible head R only as a fast-forward of the remote tip (or as a
new branch). `fork.publish: merge` is for merge-only branches: when the tip T is not an ancestor of R
(after a port, say) it pushes a merge commit M with R's tree and parents [T, R], so `git log
--first-parent` is the branch's history and consumers may pin M (check-pins accepts exactly that
shape). M is made with a fixed identity and date, so the same T and R make the same M. The push is a
compare-and-swap against the T that was read.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from forkctl.chain.forkhead import ForkContext, publish_merge_finding
from forkctl.chain.model import Progress, Status
from forkctl.errors import BadInput
from forkctl.git import GitRepo, Identity, remote
from forkctl.git import store as gitstore
from forkctl.git.merge import SYNTHETIC_EMAIL, SYNTHETIC_NAME
from forkctl.manifest import Manifest
from forkctl.series import Series

# What a plan does: push nothing (up-to-date, already-published), push R (create, fast-forward),
# push a merge of R onto the tip (merge), or nothing because rebuild mode cannot (refused).
NOTHING = ("up-to-date", "already-published")


class PublishPlan(msgspec.Struct):
    mode: str  # fork.publish: rebuild | merge
    url: str
    branch: str
    head: str  # R = apply(series, base)
    base: str
    digest: str  # the series digest
    before: str | None  # the branch tip read at the URL (None: no such branch)
    action: str  # create | fast-forward | merge | up-to-date | already-published | refused | moved
    new: str | None  # what the branch becomes (None: nothing is pushed)

    @property
    def pushes(self) -> bool:
        return self.new is not None and self.action not in (*NOTHING, "refused", "moved")


def _published(store: GitRepo, tip: str, fork: ForkContext) -> bool:
    """The tip is a publish merge of R: R among its parents, R's tree (parents [previous tip, R])."""
    found = publish_merge_finding(store, tip, fork.head, fork.head_tree())
    return found is not None and found.status == Status.OK


def plan_publish(
    manifest: Manifest, fork: ForkContext, branch: str, url: str, progress: Progress
) -> PublishPlan:
    """Read the branch at `url` and decide what publishing R takes; the merge commit, if one is needed,
    is made (objects only, in `fork.store`), nothing is pushed."""
    mode = manifest.fork.publish
    digest = Series(base=fork.base, patches=fork.patches).digest
    progress(f"reading {branch} at {url}")
    tip = remote.ls_remote(url).get(f"refs/heads/{branch}")
    plan = PublishPlan(mode, url, branch, fork.head, fork.base, digest, tip, "create", fork.head)
    if tip is None:
        return plan
    if tip == fork.head:
        plan.action, plan.new = "up-to-date", None
        return plan
    store = fork.store
    fork.upstream_tip(manifest.upstream.branch)  # upstream's history first: T's fetch sends only the fork's
    why = gitstore.fetch_sha_why(store, url, tip, depth=None)
    if why is not None:
        raise BadInput(f"cannot read {branch}'s tip {tip[:12]} from {url}: {why}", hint="check the URL")
    if _published(store, tip, fork):
        plan.action, plan.new = "already-published", None
    elif store.is_ancestor(tip, fork.head):
        plan.action = "fast-forward"
    elif mode == "merge":
        plan.action, plan.new = "merge", _merge_commit(store, tip, manifest, fork, branch, digest)
    else:
        plan.action, plan.new = "refused", None
    return plan


def _merge_commit(
    store: GitRepo, tip: str, manifest: Manifest, fork: ForkContext, branch: str, digest: str
) -> str:
    """M: R's tree, parents [T, R], a message naming R, the base and the series, a fixed identity and
    the later of T's and R's committer dates (so M is never older than its parents)."""
    tip_info, head_info = store.commit_infos([tip, fork.head])
    dates = [info.committer.date for info in (tip_info, head_info) if info.committer]
    date = max(dates, key=_epoch) if dates else head_info.author.date
    lines = [
        f"Publish apply(series, base) = {fork.head[:12]} onto {branch}",
        "",
        f"The fork head {fork.head} is {manifest.upstream.repo}@{fork.base}",
        f"+ {len(fork.patches)} patches (series {digest[:12]}):",
        *(f"  {i:>2}. {patch.subject}" for i, patch in enumerate(fork.patches, start=1)),
        "",
        f"Previous tip of {branch}: {tip}. This merge has the fork head's tree; its first parent",
        "is the branch's history (forkctl publish, fork.publish: merge).",
    ]
    identity = Identity(SYNTHETIC_NAME, SYNTHETIC_EMAIL, date)
    return store.commit_tree(head_info.tree, [tip, fork.head], "\n".join(lines) + "\n", identity)


def _epoch(date: str) -> float:
    return datetime.fromisoformat(date).timestamp()


def push_plan(plan: PublishPlan, store: GitRepo) -> None:
    """Push what the plan makes the branch, as a compare-and-swap against the tip it read."""
    if not plan.pushes or plan.new is None:
        return
    remote.push_fast_forward(store, plan.url, plan.new, plan.branch, plan.before)


def published_head(manifest: Manifest, fork: ForkContext) -> str | None:
    """In merge mode, the fork branch's tip at the fork URL when it is the publish merge of R (what
    consumers should pin: it is on the branch); None otherwise (also when the fork URL cannot be read:
    the head itself is then pinned, which check-pins accepts as well), and always in rebuild mode."""
    if manifest.fork.publish != "merge":
        return None
    try:
        tip = remote.listed_refs(manifest.fork.url).refs.get(f"refs/heads/{manifest.fork.branch}")
        if tip is None or tip == fork.head:
            return None
        if gitstore.fetch_sha_why(fork.store, manifest.fork.url, tip) is not None:
            return None
    except BadInput:
        return None
    return tip if _published(fork.store, tip, fork) else None
