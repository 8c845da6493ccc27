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
"""

from __future__ import annotations

import shlex
from datetime import datetime
from pathlib import Path

import msgspec

from forkctl import mail
from forkctl.chain import forward, pinrecords
from forkctl.chain.checks import check_chain
from forkctl.chain.forkhead import ForkContext
from forkctl.chain.model import ChainResult, Progress
from forkctl.chain.pinrecords import RecordChange
from forkctl.chain.reachable import CommitGraphs
from forkctl.chain.sources import Remotes, Source, branch_to_bump
from forkctl.errors import BadInput
from forkctl.git import remote
from forkctl.git import store as gitstore
from forkctl.git.commits import Identity
from forkctl.git.objects import TreeEntry
from forkctl.git.repo import GitRepo
from forkctl.git.sha import TreeSha
from forkctl.git.submodules import SubmoduleEntry
from forkctl.manifest import Consumer, Manifest
from forkctl.redact import without_credentials

# Who a bump commit is by: forkctl itself, the same on every machine (a .invalid address reaches no one).
BUMP_NAME, BUMP_EMAIL = "forkctl bump", "bump@forkctl.invalid"


class BumpStep(msgspec.Struct):
    """One consumer commit that moves one gitlink."""

    consumer: Consumer
    repo: GitRepo
    push_url: str
    parent: str  # the consumer branch head the new branch starts from
    gitlink: str
    old: str | None
    new: str
    commit: str
    branch: str
    url_changed: tuple[str, str] | None  # (old, new) .gitmodules URL when it pointed upstream
    existing: str | None  # what the branch points at already (None: it does not exist)
    old_url: str | None = None  # the absolute .gitmodules URL of the gitlink at the parent
    date: str = ""  # the commit's author and committer date (see the module docstring)
    pushed: str | None = None  # after push_steps: "pushed", or "already there"
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
    entries = repo.tree_entries(parent, [consumer.gitlink, ".gitmodules", *pinrecords.paths(consumer)])
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
            gitstore.fetch_objects(repo, source.fetch_url, small)
    modules = repo.parse_gitmodules(modules_entry.sha) if modules_entry else []
    module = next((m for m in modules if m.path == consumer.gitlink), None)
    if module is None or modules_entry is None:
        raise BadInput(f"{consumer.name}@{parent[:12]}: .gitmodules has no entry for {consumer.gitlink}")
    return entry, modules_entry, module, entries


def bump_step(
    source: Source,
    repo: GitRepo,
    parent: str,
    new: str,
    target_url: str,
    target_upstream: str | None,
    branch: str,
    message_body: str,
    new_date: str,
    signer: tuple[str, str] | None = None,
) -> BumpStep:
    """Make (but do not reference) the commit that moves the consumer's gitlink to `new` (whose
    committer date is `new_date`), by and signed off by `signer` (name, email) when one is named."""
    consumer = source.consumer
    entry, modules_entry, module, entries = _gitlink_and_module(source, repo, parent)
    records = pinrecords.record_changes(repo, parent, consumer, entries, new)
    url_changed = None
    info = repo.commit_info(parent)
    tree_sha = info.tree
    with repo.private_index(tree_sha) as index:
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
            blob = repo.gitmodules_with(modules_entry.sha, module.name, "url", public_url)
            index.set_entry(modules_entry.mode, blob, ".gitmodules")
            url_changed = (without_credentials(module.url), public_url)
        tree = index.write_tree()
    old = entry.sha
    subject = f"build: pin {consumer.gitlink} at {new[:12]} (forkctl bump)"
    lines = [subject, "", f"{consumer.gitlink}: {old} -> {new}", *pinrecords.message_lines(records), ""]
    if url_changed:
        lines += [f".gitmodules submodule.{module.name}.url: {url_changed[0]} -> {url_changed[1]}", ""]
    message = "\n".join(lines) + message_body
    if signer is not None:
        message = f"{message.rstrip()}\n\nSigned-off-by: {signer[0]} <{signer[1]}>\n"
    existing = repo.ref_sha(f"refs/heads/{branch}")
    date = later((info.committer or info.author).date, new_date)
    name, email = signer or (BUMP_NAME, BUMP_EMAIL)
    commit = _same_commit(repo, existing, tree, parent, message) or repo.commit_tree(
        tree, [parent], message, Identity(name, email, date)
    )
    old_url = remote.resolve_relative_url(module.url, consumer.url) if module.url else None
    return BumpStep(
        consumer,
        repo,
        source.fetch_url,
        parent,
        consumer.gitlink,
        old,
        new,
        commit,
        branch,
        url_changed,
        existing,
        old_url,
        date,
        records=records,
    )


def later(first: str, second: str) -> str:
    """The later of two strict ISO 8601 dates, as written (its own time zone); the first on a tie."""
    return second if datetime.fromisoformat(second) > datetime.fromisoformat(first) else first


def _same_commit(repo: GitRepo, existing: str | None, tree: TreeSha, parent: str, message: str) -> str | None:
    """The branch's commit when it already is this bump (same tree, parent and message): a second run
    reuses it (then pushes nothing new and updates the pull request) instead of refusing the branch."""
    if existing is None:
        return None
    info = repo.commit_info(existing)
    same = (
        info.tree == tree and info.parents == [parent] and info.message.rstrip("\n") == message.rstrip("\n")
    )
    return existing if same else None


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
) -> BumpPlan:
    """Plan consumers 0..last: each pins the new commit of the one before it (the first pins `pin`,
    default the fork head; in merge mode its published merge). Commits are made (objects only, no ref
    moves); each step is judged forward or not (`plan.forward`: the caller refuses what goes back);
    then the planned chain is checked, with the planned commits counted as reachable because they are
    not pushed yet. `signoff` (`Name <email>`, default the manifest's fork.bump_signoff) signs each off."""
    new_pin = pin or fork.head
    branch = f"{manifest.fork.bump_branch_prefix}{new_pin[:12]}"
    body = series_description(manifest, fork, new_pin)
    steps: list[BumpStep] = []
    sources: list[Source] = []
    target_url, target_upstream = manifest.fork.url, manifest.upstream.url
    pinned = fork.store.commit_info(new_pin)
    new_date = (pinned.committer or pinned.author).date
    signer = mail.address(signoff or manifest.fork.bump_signoff or "")
    for index in range(last + 1):
        consumer = manifest.consumers[index]
        source = Source(consumer, local=local_repos.get(index))
        repo, head = branch_to_bump(source, progress)
        progress(f"{consumer.name}: moving {consumer.gitlink} to {new_pin[:12]} on {branch}")
        step = bump_step(
            source, repo, head, new_pin, target_url, target_upstream, branch, body, new_date, signer
        )
        steps.append(step)
        sources.append(
            Source(
                consumer,
                local=repo.git_dir,
                rev=step.commit,
                url=source.fetch_url,
                label=f"new branch {branch}",
            )
        )
        body = f"It pins {consumer.name} {step.commit} ({branch}), which pins the fork head.\n\n" + body
        new_pin, new_date = step.commit, step.date
        target_url, target_upstream = consumer.url, consumer.upstream_url
    verdict = judge_forward(manifest, fork, steps, progress)
    pending: dict[str, list[str]] = {}
    for step in steps:
        pending.setdefault(remote.normalise_url(step.consumer.url), []).append(step.commit)
    check = check_chain(manifest, sources, progress=progress, pending=pending, fork=fork)
    return BumpPlan(branch=branch, steps=steps, check=check, forward=verdict)


def judge_forward(
    manifest: Manifest, fork: ForkContext, steps: list[BumpStep], progress: Progress
) -> forward.ForwardVerdict:
    """Does each step keep every commit its consumer's pin has now? (forward.py)"""
    verdict = forward.ForwardVerdict()
    graphs = CommitGraphs(manifest, fork.upstream_url, Remotes(progress), fork.store, fork.base)
    for index, step in enumerate(steps):
        if index == 0:
            forward.judge_fork_step(verdict, step.consumer, step.old, step.new, step.old_url, fork, graphs)
            continue
        previous = steps[index - 1]
        forward.judge_consumer_step(
            verdict,
            step.consumer,
            previous.consumer,
            step.old,
            step.new,
            previous.parent,
            previous.repo,
            previous.push_url,
            graphs,
        )
    return verdict


def apply_step(step: BumpStep) -> None:
    """Create the step's branch (compare-and-swap: it must not exist, or already be this commit)."""
    if step.existing == step.commit:
        return
    if step.existing is not None:
        raise BadInput(
            f"branch {step.branch} already exists in {step.repo.path} at {step.existing[:12]}",
            hint=f"delete it ({shlex.join(['git', 'branch', '-D', step.branch])}) or pass another --fork-commit",
        )
    step.repo.update_ref(f"refs/heads/{step.branch}", step.commit, None, f"bump {step.gitlink}")


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
        progress(f"pushing {step.branch} to {step.push_url}")
        step.pushed = push_step(step, {step.consumer.branch, remote.default_branch(step.push_url) or "main"})
