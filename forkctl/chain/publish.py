"""Publishing the fork head: apply(series, base) onto the fork's branch at its URL, never forced.

`fork.publish: rebuild` pushes the reproducible head R only as a fast-forward of the remote tip (or as a
new branch). `fork.publish: merge` is for merge-only branches: when the tip T is not an ancestor of R
(after a port, say) it pushes a merge commit M with parents [T, R] and the published tree: R's, with
the fork's own files (`fork.own_paths`, `.fork-base.json` rewritten for the base) as T has them
(chain/ownfiles.py). `git log --first-parent` is the branch's history and consumers may pin M
(check-pins accepts exactly that shape). M is made with a fixed identity and date, so the same T, R
and manifest make the same M. In rebuild mode the same M goes to a new branch of the fork's sync
convention, `sync/upstream-<date>-<sha12>` (the base's committer date, so a rerun names the same
branch), and a person lands it with a plain (fast-forward) push. A tip holding changes that are
neither the series' nor the fork's own is refused, never dropped. Every push is a compare-and-swap
against the tip that was read.

Forward only: the merge has R's tree, so over a tip built on a newer upstream commit than the base
(the tip's merge-base with upstream, computed from history: the tip's `.fork-base.json` is only its
word) it would revert the upstream commits between them. Such a plan is refused (`backwards`) unless
the caller means to go back. And what is published is what the toolkit committed: `uncommitted_inputs`
names the manifest and patch files that differ from the toolkit checkout's HEAD.
"""

from __future__ import annotations

import shlex
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from forkctl.chain.forkhead import ForkContext, publish_merge_finding, relation
from forkctl.chain.model import Progress, Status, WantedBase
from forkctl.chain.ownfiles import (
    Foreign,
    foreign_changes,
    own_files,
    published_tree,
    refuse_own_path_conflicts,
)
from forkctl.errors import BadInput
from forkctl.git import clonecache, remote
from forkctl.git.commits import Commits, Identity
from forkctl.git.merge import SYNTHETIC_EMAIL, SYNTHETIC_NAME
from forkctl.git.repo import GitRepo, toplevel
from forkctl.git.worktree import Worktree
from forkctl.manifest import Manifest
from forkctl.series import Patch, Series

if TYPE_CHECKING:
    from forkctl.git.history import History

# What a plan does: push nothing (up-to-date, already-published, already-synced), push R (create,
# fast-forward), push a merge of R onto the tip (merge; sync: to a new sync branch, in rebuild mode),
# or nothing because it must not (foreign: the tip holds changes publishing would drop; sync-taken:
# the sync branch holds another commit; moved: the branch moved while publishing; backwards: the tip
# builds on upstream commits the base lacks; uncommitted: the toolkit's inputs are not committed;
# gated: the gate fails for the series and no override was given, decided by the command).
NOTHING = ("up-to-date", "already-published", "already-synced")
REFUSED = ("foreign", "sync-taken", "moved", "backwards", "uncommitted", "gated")
SYNC_PREFIX = "sync/upstream-"


class PublishPlan(msgspec.Struct):
    mode: str  # fork.publish: rebuild | merge
    url: str
    branch: str
    head: str  # R = apply(series, base)
    base: str
    digest: str  # the series digest
    before: str | None  # the branch tip read at the URL (None: no such branch)
    action: str  # create | fast-forward | merge | sync | one of NOTHING | one of REFUSED
    new: str | None  # what the pushed branch becomes (None: nothing is pushed)
    target: str = ""  # the branch pushed to: `branch`, or (action sync*) the sync branch
    target_before: str | None = None  # the target's tip as read, for the compare-and-swap
    carried: list[str] = msgspec.field(default_factory=list)  # fork-owned paths the merge takes from T
    foreign: list[Foreign] = msgspec.field(default_factory=list)
    land: str | None = None  # rebuild mode: the command that lands the sync branch on `branch`
    tip_base: str | None = None  # the upstream commit the tip builds on (its merge-base with upstream)
    backwards: WantedBase | None = None  # tip_base, when it has upstream commits the head's base lacks

    @property
    def pushes(self) -> bool:
        return self.new is not None and self.action not in (*NOTHING, *REFUSED)


def _published(upstream_repo: GitRepo, tip: str, fork: ForkContext) -> bool:
    """The tip is a publish merge of R: R among its parents, the published tree (R's with the fork's
    own files of its first parent)."""
    found = publish_merge_finding(upstream_repo, tip, fork.head, fork.head_tree(), fork.owned)
    return found is not None and found.status == Status.OK


def sync_branch(commits: Commits, base: str) -> str:
    """`sync/upstream-<YYYY-MM-DD>-<sha12>` of the base: its committer date in UTC, so every run (and
    machine) names the same branch for the same base."""
    date = commits.commit_info(base).committer
    day = (
        datetime.fromisoformat(date.date).astimezone(timezone.utc).strftime("%Y-%m-%d") if date else "undated"
    )
    return f"{SYNC_PREFIX}{day}-{base[:12]}"


def land_command(url: str, sync: str, branch: str) -> str:
    """The push that lands the sync branch: a plain push, which git refuses unless it fast-forwards."""
    quoted = shlex.quote(url)
    return (
        f"git fetch {quoted} {shlex.quote(f'refs/heads/{sync}')} && "
        f"git push {quoted} {shlex.quote(f'FETCH_HEAD:refs/heads/{branch}')}"
    )


def plan_publish(
    manifest: Manifest,
    fork: ForkContext,
    branch: str,
    url: str,
    progress: Progress,
    sync: bool = False,
    ported_from: list[Patch] | None = None,
    allow_backwards: bool = False,
    note: list[str] | None = None,
) -> PublishPlan:
    """Read the branch at `url` and decide what publishing R takes; the merge commit, if one is needed,
    is made (objects only, in `fork.upstream_repo`), nothing is pushed. `sync` (forkctl sync): whatever
    fork.publish says, what lands R goes to the sync branch, for a pull request; `branch` never moves.
    `ported_from`: the series R was ported from (sync), whose commits on the tip are the series' too
    (one absorbed upstream is in no patch of R, and is not the tip's own change). A tip on a newer
    upstream base than R's is refused (`backwards`) unless `allow_backwards`. `note`: lines that end the
    merge's message (a publish past a failing gate says so there); an input of the merge like the rest,
    so the same note makes the same merge, and a published merge is recognised by its parents and tree
    whatever its message says."""
    mode = manifest.fork.publish
    digest = Series(base=fork.base, patches=fork.patches).digest
    own = fork.owned or own_files(manifest, fork.base)
    refuse_own_path_conflicts(
        manifest, fork.patches, lambda: fork.upstream_repo.objects.all_entries(fork.head_tree())
    )
    progress(f"reading {branch} at {url}")
    refs = remote.ls_remote(url)
    tip = refs.get(f"refs/heads/{branch}")
    plan = PublishPlan(mode, url, branch, fork.head, fork.base, digest, tip, "create", fork.head, branch, tip)
    if tip is None:
        if sync:
            raise BadInput(
                f"{branch} does not exist at {url}: a sync pull request needs the branch it goes into",
                hint="publish the fork head first: forkctl publish",
            )
        return plan
    if tip == fork.head:
        plan.action, plan.new = "up-to-date", None
        return plan
    upstream_repo = fork.upstream_repo
    upstream = fork.upstream_tip(
        manifest.upstream.branch
    )  # upstream's history first: T's fetch sends only the fork's
    why = clonecache.fetch_sha_why(upstream_repo, url, tip, depth=None)
    if why is not None:
        raise BadInput(f"cannot read {branch}'s tip {tip[:12]} from {url}: {why}", hint="check the URL")
    if _published(upstream_repo, tip, fork):
        plan.action, plan.new = "already-published", None
        return plan
    if upstream_repo.history.is_ancestor(tip, fork.head):
        plan.action = "fast-forward"
        return _to_sync_branch(plan, upstream_repo, refs, fork.head) if sync else plan
    plan.tip_base, plan.backwards = tip_base(upstream_repo.history, tip, upstream, fork.base)
    if plan.backwards is not None and not allow_backwards:
        plan.action, plan.new = "backwards", None
        return plan
    progress(f"checking that {branch} holds nothing beside the series and the fork's own files")
    series = [*fork.patches, *(ported_from or [])]
    plan.foreign = foreign_changes(upstream_repo, tip, fork.head, upstream or fork.base, series, own)
    if plan.foreign:
        plan.action, plan.new = "foreign", None
        return plan
    plan.new, plan.carried = _merge_commit(upstream_repo, tip, manifest, fork, branch, digest, note or [])
    plan.action = "merge"
    if mode == "rebuild" or sync:  # never a non-fast-forward of the branch: a sync branch a person lands
        return _to_sync_branch(plan, upstream_repo, refs, plan.new)
    return plan


def tip_base(
    history: History, tip: str, upstream: str | None, base: str
) -> tuple[str | None, WantedBase | None]:
    """(the upstream commit `tip` builds on, that commit as the base the chain wants when it has
    upstream commits `base` lacks): the tip's merge-base with upstream's branch `upstream`, from the
    history in `history`. Of several merge-bases (criss-cross) the first that `base` lacks commits of
    is named. (None, None) when upstream's branch is not known or the tip shares no history with it."""
    if upstream is None:
        return None, None
    bases = history.merge_bases(tip, upstream)
    for found in bases:
        wants = relation(history, found, base).wants(found)
        if wants is not None:
            return found, wants
    return (bases[0] if bases else None), None


def uncommitted_inputs(manifest: Manifest) -> tuple[Path | None, list[str]]:
    """(the root of the git checkout that holds the toolkit, the manifest and series patch files that
    differ from its HEAD, named from that root): what would be published that no commit of the toolkit
    records. (None, []) when the toolkit is no git checkout."""
    top = toplevel(manifest.root)
    if top is None:
        return None, []
    files = [manifest.path.name, *(entry.file for entry in manifest.series)]
    return top, Worktree(manifest.root).differs_from_head(files)


def _to_sync_branch(plan: PublishPlan, upstream_repo: GitRepo, refs: dict[str, str], new: str) -> PublishPlan:
    """The plan with `new` going to the base's sync branch instead of the branch itself: pushed when the
    sync branch is new, nothing to do when it already holds `new`, refused when it holds another."""
    plan.new = new
    plan.target = sync_branch(upstream_repo.commits, plan.base)
    plan.target_before = refs.get(f"refs/heads/{plan.target}")
    if plan.target_before not in (None, new) and _same_merge(
        upstream_repo, plan.url, plan.target_before, new
    ):
        new = plan.new = plan.target_before  # the same merge, another message (an override note or none)
    plan.land = land_command(plan.url, plan.target, plan.branch)
    plan.action = {None: "sync", new: "already-synced"}.get(plan.target_before, "sync-taken")
    if plan.action == "sync-taken":
        plan.new = None
    return plan


def _same_merge(upstream_repo: GitRepo, url: str, found: str, new: str) -> bool:
    """Is `found` (a sync branch's tip at `url`) the merge `new` is, but for its message: the same
    parents and tree? Then it lands the same head onto the same tip."""
    if clonecache.fetch_sha_why(upstream_repo, url, found) is not None:
        return False
    ours, theirs = upstream_repo.commits.commit_infos([new, found])
    return len(ours.parents) == 2 and ours.parents == theirs.parents and ours.tree == theirs.tree


def _merge_commit(
    upstream_repo: GitRepo,
    tip: str,
    manifest: Manifest,
    fork: ForkContext,
    branch: str,
    digest: str,
    note: list[str],
) -> tuple[str, list[str]]:
    """(M, the fork-owned paths it takes from T): the published tree, parents [T, R], a message naming
    R, the base and the series, a fixed identity and the later of T's and R's committer dates (so M is
    never older than its parents)."""
    tip_info, head_info = upstream_repo.commits.commit_infos([tip, fork.head])
    dates = [info.committer.date for info in (tip_info, head_info) if info.committer]
    date = max(dates, key=_epoch) if dates else head_info.author.date
    lines = [
        f"Publish apply(series, base) = {fork.head[:12]} onto {branch}",
        "",
        f"The fork head {fork.head} is {manifest.upstream.repo}@{fork.base}",
        f"+ {len(fork.patches)} patches (series {digest[:12]}):",
        *(f"  {i:>2}. {patch.subject}" for i, patch in enumerate(fork.patches, start=1)),
        "",
    ]
    own = fork.owned or own_files(manifest, fork.base)
    tree = published_tree(upstream_repo, tip, head_info.tree, own)
    carried = sorted(upstream_repo.diffs.changed_paths(tree, head_info.tree))
    if carried:
        lines += [
            f"Previous tip of {branch}: {tip}. This merge has the fork head's tree with",
            "the fork's own files (fork.own_paths) as that tip has them; its first parent is",
            "the branch's history (forkctl publish). Carried over from the previous tip:",
            *(f"  {path}" for path in carried),
        ]
    else:  # the words of a merge without own files, as they always were: the same inputs, the same M
        lines += [
            f"Previous tip of {branch}: {tip}. This merge has the fork head's tree; its first parent",
            "is the branch's history (forkctl publish, fork.publish: merge).",
        ]
    if note:  # only when there is one: a merge without it keeps the words it always had
        lines += ["", *note]
    identity = Identity(SYNTHETIC_NAME, SYNTHETIC_EMAIL, date)
    return upstream_repo.commits.commit_tree(
        tree, [tip, fork.head], "\n".join(lines) + "\n", identity
    ), carried


def _epoch(date: str) -> float:
    return datetime.fromisoformat(date).timestamp()


def push_plan(plan: PublishPlan, upstream_repo: GitRepo) -> None:
    """Push what the plan makes the branch, as a compare-and-swap against the tip it read."""
    if not plan.pushes or plan.new is None:
        return
    remote.push_fast_forward(
        upstream_repo, plan.url, plan.new, plan.target or plan.branch, plan.target_before
    )


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
        if clonecache.fetch_sha_why(fork.upstream_repo, manifest.fork.url, tip) is not None:
            return None
    except BadInput:
        return None
    return tip if _published(fork.upstream_repo, tip, fork) else None
