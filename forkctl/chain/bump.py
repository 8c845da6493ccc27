"""Moving the chain: the consumer commits that pin the fork head, one gitlink each.

Each commit is made in a private index (the gitlink changed, the consumer's other records of the pin
rewritten (manifest `pin_files`, e.g. the Bridge's `.main.commit`), `.gitmodules` pointed at the fork
when it still names upstream), never in a user's index or worktree. A plan makes the commits (objects only),
judges that each moves its consumer forward (forward.py) and checks the chain they make; applying it
creates the branches, pushing it pushes them, never forced.

A bump commit is a pure function of its inputs, so a rerun on any machine or cache makes the same SHA
(and finds the branch it pushed before equal): its tree (the parent's, with the gitlink, its pin files
and maybe the `.gitmodules` URL changed), its parent, its message (both SHAs, the series), and an identity and date
taken from them, never from the machine: author = committer = `BUMP_NAME <BUMP_EMAIL>`, dated the later of the
parent's committer date and the new pin's committer date (the fork head's, whose commits carry their
patches' dates; for a later consumer, the previous bump commit's). When the caller or the manifest
(`fork.bump_signoff`) names a signer, that identity authors and commits it and the message ends with
its `Signed-off-by:` (the consumers ask for the DCO, whose check wants the author's own sign-off).

A consumer merges the bump its own way (the Bridge squashes and deletes the branch): a step whose
commit would change nothing on the consumer branch is done, and the next consumer pins that branch
head, never the stranded bump commit; an existing bump branch is built on, forward only
(bumpbranch.py).
"""

from __future__ import annotations

import shlex
from datetime import datetime
from pathlib import Path

import msgspec

from forkctl import mail
from forkctl.chain import forward, pinrecords
from forkctl.chain.bumpbranch import BranchStart, bump_branch_now, merged_bump
from forkctl.chain.checks import check_chain
from forkctl.chain.forkhead import ForkContext
from forkctl.chain.model import ChainResult, Progress
from forkctl.chain.pinrecords import RecordChange
from forkctl.chain.reachable import CommitGraphs
from forkctl.chain.sources import Remotes, Source, branch_to_bump
from forkctl.errors import BadInput
from forkctl.git import clonecache, remote
from forkctl.git.commits import Commits, Identity
from forkctl.git.objects import TreeEntry
from forkctl.git.repo import GitRepo
from forkctl.git.sha import TreeSha
from forkctl.git.submodules import SubmoduleEntry
from forkctl.manifest import Consumer, Manifest
from forkctl.redact import without_credentials

# Who a bump commit is by: forkctl itself, the same on every machine (a .invalid address reaches no one).
BUMP_NAME, BUMP_EMAIL = "forkctl bump", "bump@forkctl.invalid"


class BumpStep(msgspec.Struct, kw_only=True):
    """One consumer commit that moves one gitlink, or a step already done on the consumer branch."""

    consumer: Consumer
    repo: GitRepo
    push_url: str
    branch_head: str  # the consumer branch head the step starts from
    parent: str  # the new commit's parent: the branch head, or the bump branch already built on it
    gitlink: str
    old: str | None  # what the consumer branch pins now
    new: str
    commit: str  # the bump commit; for a step already done, the consumer branch head
    branch: str
    url_changed: tuple[str, str] | None  # (old, new) .gitmodules URL when it pointed upstream
    existing: str | None  # where the branch is already (a user's clone: its own; else at the URL)
    old_url: str | None = None  # the absolute .gitmodules URL of the gitlink at the branch head
    date: str = ""  # the commit's author and committer date (see the module docstring)
    pushed: str | None = None  # after push_steps: "pushed", or "already there"
    done: bool = False  # the consumer branch already pins `new` (a merged bump): no commit, no branch
    builds_on_existing: bool = False  # the commit is on top of the existing branch (or is it)
    replaces: str | None = None  # the existing branch's pin this commit replaces, when not `old`
    in_cache: bool = False  # committed in forkctl's cache: its branch there mirrors the URL's
    records: list[RecordChange] = msgspec.field(default_factory=list)  # pin files rewritten with the gitlink


class BumpPlan(msgspec.Struct):
    """Every consumer's new commit up to the last one bumped, whether each moves forward, and the check
    of the chain they make."""

    branch: str
    steps: list[BumpStep]
    check: ChainResult
    forward: forward.ForwardVerdict = msgspec.field(default_factory=forward.ForwardVerdict)


def _gitlink_and_module(
    source: Source, repo: GitRepo, parent: str
) -> tuple[TreeEntry, TreeEntry, SubmoduleEntry, dict[str, TreeEntry]]:
    """(gitlink entry, .gitmodules entry, its submodule for the gitlink, the tree entries read) at the
    consumer's `parent`; the entries include the consumer's pin files (manifest `pin_files`)."""
    consumer = source.consumer
    entries = repo.objects.tree_entries(
        parent, [consumer.gitlink, ".gitmodules", *pinrecords.paths(consumer)]
    )
    entry = entries.get(consumer.gitlink)
    if entry is None or entry.kind != "commit":
        raise BadInput(
            f"{consumer.name}@{parent[:12]} has no gitlink at {consumer.gitlink}",
            hint="fix consumers[].gitlink in the manifest",
        )
    modules_entry = entries.get(".gitmodules")
    if modules_entry is not None and modules_entry.kind != "blob":
        modules_entry = None
    if source.local is None:
        # The cache's .gitmodules and pin files: the only files a bump reads, fetched explicitly in one
        # request (no lazy fetch; a consumer's large files are never read).
        small = [e.sha for e in entries.values() if e.kind == "blob" and e.path != consumer.gitlink]
        if small:
            clonecache.fetch_objects(repo, source.fetch_url, small)
    modules = repo.submodules.parse_gitmodules(modules_entry.sha) if modules_entry else []
    module = next((m for m in modules if m.path == consumer.gitlink), None)
    if module is None or modules_entry is None:
        raise BadInput(f"{consumer.name}@{parent[:12]}: .gitmodules has no entry for {consumer.gitlink}")
    return entry, modules_entry, module, entries


class _Moved(msgspec.Struct, frozen=True):
    """A commit's tree with the gitlink moved (and `.gitmodules` pointed at the target when it named
    the target's upstream): what it pinned, and its tree before and after."""

    tree: TreeSha
    before: TreeSha
    old: str
    url_changed: tuple[str, str] | None
    module: str  # the submodule's name in .gitmodules
    old_url: str | None
    records: list[RecordChange]  # the consumer's other records of the pin, rewritten with the gitlink


def _moved(
    source: Source, repo: GitRepo, commit: str, new: str, target_url: str, target_upstream: str | None
) -> _Moved:
    consumer = source.consumer
    entry, modules_entry, module, entries = _gitlink_and_module(source, repo, commit)
    records = pinrecords.record_changes(repo.objects, commit, consumer, entries, new)
    url_changed = None
    before = repo.commits.commit_info(commit).tree
    with repo.indexes.private_index(before) as index:
        index.set_entry("160000", new, consumer.gitlink)
        for record in records:  # the consumer's other records of the pin, in the same commit
            index.set_entry(record.mode, record.blob, record.path)
        if (
            module.url
            and target_upstream
            and remote.same_repo(remote.resolve_relative_url(module.url, consumer.url), target_upstream)
        ):
            # Credentials in a manifest URL are for fetching; they never go into a consumer's history.
            public_url = without_credentials(target_url)
            blob = repo.submodules.gitmodules_with(modules_entry.sha, module.name, "url", public_url)
            index.set_entry(modules_entry.mode, blob, ".gitmodules")
            url_changed = (without_credentials(module.url), public_url)
        tree = index.write_tree()
    old_url = remote.resolve_relative_url(module.url, consumer.url) if module.url else None
    return _Moved(tree, before, entry.sha, url_changed, module.name, old_url, records)


def _commit_date(commits: Commits, commit: str) -> str:
    info = commits.commit_info(commit)
    return (info.committer or info.author).date


def bump_step(
    source: Source,
    repo: GitRepo,
    head: str,
    start: BranchStart,
    new: str,
    target: tuple[str, str | None],
    branch: str,
    message_body: str,
    new_date: str,
    signer: tuple[str, str] | None = None,
) -> BumpStep:
    """The step that moves the consumer's gitlink to `new` (whose committer date is `new_date`) on
    `branch`, `target` = (URL, upstream URL) of what it pins: done when the branch head `head` pins it
    already; else one commit (made, not referenced) on `head`, or on the bump branch `start` names when
    that is built on `head` (none when that already pins `new`). The commit is by, and signed off by,
    `signer` (name, email) when one is named."""
    consumer = source.consumer
    at_head = _moved(source, repo, head, new, *target)
    step = BumpStep(
        consumer=consumer,
        repo=repo,
        push_url=source.fetch_url,
        branch_head=head,
        parent=head,
        gitlink=consumer.gitlink,
        old=at_head.old,
        new=new,
        commit=head,
        branch=branch,
        url_changed=at_head.url_changed,
        existing=start.existing,
        old_url=at_head.old_url,
        in_cache=start.in_cache,
    )
    if at_head.tree == at_head.before:  # merged already (squash, rebase or merge): never an empty commit
        step.done, step.date = True, _commit_date(repo.commits, head)
        return step
    moved = at_head
    if start.builds_on_existing and start.existing is not None:
        step.parent, step.builds_on_existing = start.existing, True
        moved = _moved(source, repo, start.existing, new, *target)
        step.url_changed = moved.url_changed
        if moved.tree == moved.before:  # the branch pins `new` already: it is the step's commit
            step.commit, step.date = start.existing, _commit_date(repo.commits, start.existing)
            return step
        step.replaces = moved.old if moved.old != at_head.old else None
    step.records = moved.records
    lines = [f"build: pin {consumer.gitlink} at {new[:12]} (forkctl bump)", ""]
    lines += [f"{consumer.gitlink}: {moved.old} -> {new}", *pinrecords.message_lines(moved.records), ""]
    if moved.url_changed:
        lines += [f".gitmodules submodule.{moved.module}.url: {' -> '.join(moved.url_changed)}", ""]
    message = "\n".join(lines) + message_body
    if signer is not None:
        message = f"{message.rstrip()}\n\nSigned-off-by: {signer[0]} <{signer[1]}>\n"
    step.date = later(_commit_date(repo.commits, step.parent), new_date)
    name, email = signer or (BUMP_NAME, BUMP_EMAIL)
    step.commit = repo.commits.commit_tree(
        moved.tree, [step.parent], message, Identity(name, email, step.date)
    )
    return step


def later(first: str, second: str) -> str:
    """The later of two strict ISO 8601 dates, as written (its own time zone); the first on a tie."""
    return second if datetime.fromisoformat(second) > datetime.fromisoformat(first) else first


def series_description(manifest: Manifest, fork: ForkContext, pin: str | None = None) -> str:
    lines = [
        f"The fork head {fork.head} is {manifest.upstream.repo}@{fork.base}",
        f"+ {len(fork.patches)} patches:",
    ]
    lines += [f"  {i:>2}. {patch.subject}" for i, patch in enumerate(fork.patches, start=1)]
    if pin is not None and pin != fork.head:
        lines.append(f"{manifest.fork.branch} publishes it as the merge {pin} (the same tree).")
    return "\n".join(lines) + "\n"


def plan_bump(
    manifest: Manifest,
    fork: ForkContext,
    last: int,
    local_repos: dict[int, Path | None],
    progress: Progress,
    pin: str | None = None,
    signoff: str | None = None,
    note: list[str] | None = None,
) -> BumpPlan:
    """Plan consumers 0..last: each pins the new commit of the one before it (the first pins `pin`,
    default the fork head; in merge mode its published merge), or, where that consumer's branch already
    pins its pin (a merged bump), that branch head. Commits are made (objects only, no ref moves);
    each step is judged forward or not (`plan.forward`: the caller refuses what goes back); then the
    planned chain is checked, with the planned commits counted as reachable because they are not
    pushed yet. `signoff` (`Name <email>`, default the manifest's fork.bump_signoff) signs each off.
    `note`: lines that end each message (a bump past a failing gate says so), an input of the commits
    like the rest, so the same note makes the same commits."""
    new_pin = pin or fork.head
    branch = f"{manifest.fork.bump_branch_prefix}{new_pin[:12]}"
    body = series_description(manifest, fork, new_pin) + ("\n" + "\n".join(note) + "\n" if note else "")
    steps: list[BumpStep] = []
    sources: list[Source] = []
    target: tuple[str, str | None] = (manifest.fork.url, manifest.upstream.url)
    new_date = _commit_date(fork.upstream_repo.commits, new_pin)
    graphs = CommitGraphs(manifest, fork.upstream_url, Remotes(progress), fork.upstream_repo, fork.base)
    signer = mail.address(signoff or manifest.fork.bump_signoff or "")
    for index in range(last + 1):
        consumer = manifest.consumers[index]
        source = Source(consumer, local=local_repos.get(index))
        repo, head = branch_to_bump(source, progress)
        progress(f"{consumer.name}: moving {consumer.gitlink} to {new_pin[:12]} on {branch}")
        start = bump_branch_now(source, repo, head, branch, graphs)
        step = bump_step(source, repo, head, start, new_pin, target, branch, body, new_date, signer)
        steps.append(step)
        where = f"its {consumer.branch}" if step.done else branch
        label = f"branch {consumer.branch}" if step.done else f"new branch {branch}"
        sources.append(
            Source(consumer, local=repo.git_dir, rev=step.commit, url=source.fetch_url, label=label)
        )
        body = f"It pins {consumer.name} {step.commit} ({where}), which pins the fork head.\n\n" + body
        new_pin, new_date = step.commit, step.date
        target = (consumer.url, consumer.upstream_url)
    verdict = judge_forward(fork, steps, graphs)
    pending: dict[str, list[str]] = {}
    for step in steps:
        if not step.done:
            pending.setdefault(remote.normalise_url(step.consumer.url), []).append(step.commit)
    check = check_chain(manifest, sources, progress=progress, pending=pending, fork=fork)
    return BumpPlan(branch=branch, steps=steps, check=check, forward=verdict)


def judge_forward(fork: ForkContext, steps: list[BumpStep], graphs: CommitGraphs) -> forward.ForwardVerdict:
    """Does each step keep every commit its consumer's branch pins now? (forward.py)"""
    verdict = forward.ForwardVerdict()
    for index, step in enumerate(steps):
        if index == 0:
            forward.judge_fork_step(verdict, step.consumer, step.old, step.new, step.old_url, fork, graphs)
            continue
        previous = steps[index - 1]
        if step.old and merged_bump(
            previous.consumer, previous.repo, previous.push_url, previous.branch_head, step.old, graphs
        ):
            continue  # a squash- or rebase-merged bump: its change is on the branch the new pin holds
        forward.judge_consumer_step(
            verdict,
            step.consumer,
            previous.consumer,
            step.old,
            step.new,
            previous.branch_head,
            previous.repo,
            previous.push_url,
            graphs,
        )
    return verdict


def apply_step(step: BumpStep) -> None:
    """Create or move the step's branch, forward only: in a user's clone a compare-and-swap from where
    it was; in forkctl's cache its bookkeeping copy of the URL's branch is set (a stale one, e.g. of a
    branch the URL deleted after a merge, is forkctl's to refresh). A step already done moves nothing;
    a branch that exists but is not built on the consumer branch head is refused."""
    if step.done:
        return
    if step.existing is not None and not step.builds_on_existing:
        raise _stale_branch(step)
    ref = f"refs/heads/{step.branch}"
    if step.in_cache:
        step.repo.refs.set_ref(ref, step.commit, f"bump {step.gitlink}")
    elif step.existing != step.commit:
        step.repo.refs.update_ref(ref, step.commit, step.existing, f"bump {step.gitlink}")


def _stale_branch(step: BumpStep) -> BadInput:
    """The refusal for a bump branch made from an older consumer branch head, with the user's ways
    forward: at the URL (the cache is forkctl's, never named), or in the user's own clone."""
    assert step.existing is not None
    head = f"{step.consumer.branch} {step.branch_head[:12]}"
    if step.in_cache:
        delete = shlex.join(["git", "push", step.push_url, "--delete", step.branch])
        return BadInput(
            f"branch {step.branch} already exists at {step.push_url} at {step.existing[:12]}, which is not "
            f"built on {step.consumer.name}'s {head}: forkctl moves it forward only",
            hint=f"merge {step.consumer.branch} into it and push, or close its pull request and delete it "
            f"({delete}), then rerun",
        )
    delete = shlex.join(["git", "-C", str(step.repo.path), "branch", "-D", step.branch])
    return BadInput(
        f"branch {step.branch} already exists in {step.repo.path} at {step.existing[:12]}, which is not "
        f"built on {head}: forkctl moves it forward only",
        hint=f"merge {step.consumer.branch} into it, or delete it ({delete}), then rerun",
    )


def push_step(step: BumpStep, protected: set[str]) -> str:
    """Push the new branch, never forced, never onto a protected (default or consumer) branch:
    "pushed", or "already there" when the URL's branch is this commit (a rerun anywhere makes the same
    commit, so it finds its own push)."""
    if step.branch in protected:
        raise BadInput(f"refusing to push to {step.branch}: it is the default or consumer branch")
    if remote.ls_remote(step.push_url).get(f"refs/heads/{step.branch}") == step.commit:
        return "already there"
    remote.push_branch(step.repo, step.push_url, step.commit, step.branch)
    return "pushed"


def push_steps(steps: list[BumpStep], progress: Progress) -> None:
    """Push every new branch, never forced, never onto the consumer's own or default branch; each
    step's `pushed` says what happened."""
    for step in steps:
        if step.done:
            continue  # the consumer branch pins it already: there is no branch to push
        progress(f"pushing {step.branch} to {step.push_url}")
        step.pushed = push_step(step, {step.consumer.branch, remote.default_branch(step.push_url) or "main"})
