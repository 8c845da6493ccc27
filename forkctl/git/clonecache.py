"""The cache of partial clones keyed by URL, and every download forkctl makes into it.

`$FORKCTL_CACHE` or `~/.cache/forkctl` holds one bare partial clone (`blob:none`) per URL identity,
and for history questions one commit graph per URL (`tree:0`: commits only; bounded in time and
deepened when an answer needs it, see graph.py). A local repository is only ever read, or lent as
an object alternate. Objects arrive by explicit fetches only (one SHA, a batch of blobs, a URL's
branches and tags), never by git's lazy fetch; a warm cache answers without the network.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
from pathlib import Path

import msgspec

from forkctl import locking
from forkctl.digests import sha256_hex
from forkctl.errors import BadInput
from forkctl.files import atomic_write_text, cache_root, process_alive
from forkctl.git.graph import (
    FETCHED_REFS,
    CommitGraph,
    Since,
    fetch_graph,
    forget_tips,
    graph_fetch,
)
from forkctl.git.remote import (
    cache_identity,
    checked_url,
    git_reason,
    normalise_url,
    promisor_remote_name,
    talk,
)
from forkctl.git.repo import GitRepo
from forkctl.git.runner import git
from forkctl.git.sha import is_full_sha
from forkctl.redact import without_credentials

# --- the cache of partial clones --------------------------------------------------------------


def cache_repo_for(url: str, alternates: list[Path] | None = None, graph: bool = False) -> GitRepo:
    """The cache's bare partial clone for `url` (made on first use). `alternates`: local object stores
    to borrow from (read only), so a local clone given on the command line saves the network.

    `graph`: the URL's commit graph instead (a `CommitGraph`): commits only (`--filter=tree:0`), for
    history questions (ancestry, counts, which branch contains a commit). The tree cache holds single
    commits fetched at depth 1 with their trees; its shallow boundaries would cut history, and
    deepening it makes the server send again the trees it already sent."""
    path = cache_path(url, graph)
    if not (path / "HEAD").is_file():
        _create(path, url)
    # Made by forkctl, bare, at a path it chose: no need to ask git what it is (two processes a call).
    repo = CommitGraph.at(path, url) if graph else GitRepo.cache_at(path)
    if alternates:
        info = path / "objects" / "info"
        info.mkdir(parents=True, exist_ok=True)
        listed = (info / "alternates").read_text().splitlines() if (info / "alternates").is_file() else []
        wanted = [str((a / "objects").resolve()) for a in alternates if (a / "objects").is_dir()]
        merged = listed + [w for w in wanted if w not in listed]
        if merged != listed:
            atomic_write_text(info / "alternates", "".join(f"{line}\n" for line in merged))
    return repo


def graph_for(url: str, alternates: list[Path] | None = None) -> CommitGraph:
    """The cache's commit graph for `url` (`cache_repo_for(url, graph=True)`), typed as such."""
    graph = cache_repo_for(url, alternates, graph=True)
    assert isinstance(graph, CommitGraph)
    return graph


def cache_path(url: str, graph: bool = False) -> Path:
    """Where the cache keeps `url`'s partial clone (`graph`: its commit graph)."""
    key = sha256_hex(cache_identity(url).encode())[:16]
    name = re.sub(r"[^a-z0-9]+", "-", normalise_url(url).lower()).strip("-")[-40:]
    return cache_root() / "repos" / f"{name}-{key}{'-graph' if graph else ''}.git"


def _create(path: Path, url: str) -> None:
    """Make the cache repository at `path` whole or not at all: initialised and configured in a folder
    of its own beside it, then renamed into place. Another forkctl creating the same entry at the same
    moment (publishes, check-pins in parallel jobs sharing one cache) then never sees a half-made one
    (a HEAD without the partial-clone config, or `git init` racing on its config lock); the second
    rename finds the first's repository there and its own folder is dropped."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _drop_abandoned(path)
    making = path.with_name(f"{path.name}.making-{os.getpid()}")
    shutil.rmtree(making, ignore_errors=True)  # a pid reused after a killed run
    git(["init", "--quiet", "--bare", "--", str(making)])
    _configure(making, url)
    try:
        os.rename(making, path)
        return
    except OSError:  # a folder is there (the rename refuses one that is not empty)
        pass
    if not (path / "HEAD").is_file():
        _replace_partial(making, path)
    shutil.rmtree(making, ignore_errors=True)  # another forkctl made it meanwhile: theirs is kept


def _replace_partial(making: Path, path: Path) -> None:
    """Put the new repository `making` in place of a folder at `path` without a HEAD: what a `git
    init` killed in place (by a forkctl before this one) left. Under a lock, so two runs never both
    move a folder aside (the second would move the first's new repository)."""
    with locking.held(path.with_name(f"{path.name}.lock"), f"the cache repository {path}"):
        if (path / "HEAD").is_file():
            return
        aside = path.with_name(f"{path.name}.abandoned-{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            os.rename(path, aside)
        with contextlib.suppress(OSError):  # another forkctl's new one arrived first: kept
            os.rename(making, path)
        shutil.rmtree(aside, ignore_errors=True)


def _drop_abandoned(path: Path) -> None:
    """Folders a killed forkctl left while creating `path` (its process gone)."""
    for left in path.parent.glob(f"{glob.escape(path.name)}.*-*"):
        kind, _, pid = left.name.rsplit(".", 1)[-1].partition("-")
        if kind in ("making", "abandoned") and pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(left, ignore_errors=True)


def _configure(path: Path, url: str) -> None:
    """Make the new bare repository at `path` a partial clone of `url`, its promisor remotes (`origin`
    and the one `talk` fetches through) written straight into its config file: one write, where
    `git config` costs a process per key (eight per cache repository). The config never holds
    credentials: fetches pass the URL on the command line."""
    public = without_credentials(checked_url(url))
    quoted = '"' + public.replace("\\", "\\\\").replace('"', '\\"') + '"'
    sections = "".join(
        f'[remote "{name}"]\n\turl = {quoted}\n\tpromisor = true\n\tpartialclonefilter = blob:none\n'
        for name in ("origin", promisor_remote_name(public))
    )
    config = path / "config"
    atomic_write_text(config, config.read_text() + sections + "[extensions]\n\tpartialClone = origin\n")


# --- fetches: one SHA, a batch of objects, a URL's branches and tags, commit graphs ------------


def fetch_sha(cache_repo: GitRepo, url: str, sha: str, depth: int | None = 1) -> bool:
    """Fetch one commit by SHA (default depth 1, blobs on demand) into the cache; True when it arrived.

    Servers refuse a SHA that none of their refs reach unless configured otherwise, which is itself
    the answer for a commit that exists only on someone's machine.
    """
    return fetch_sha_why(cache_repo, url, sha, depth) is None


def fetch_sha_why(cache_repo: GitRepo, url: str, sha: str, depth: int | None = 1) -> str | None:
    """`fetch_sha`, saying why not: None when the commit is in the cache, else git's own reason (its
    last error line: "Could not resolve host", "does not appear to be a git repository", "not our
    ref", ...), so that a report can tell an unreachable server from a commit it does not hand out."""
    if cache_repo.objects.has_object(f"{sha}^{{commit}}"):
        return None
    args = ["fetch", "--quiet", "--no-tags", "--filter=blob:none"]
    if depth:
        args.append(f"--depth={depth}")
    # Kept under a ref, the commit is a "have" for every later fetch into this cache (or from a cache
    # that borrows its objects), so its trees are not sent again with the next commit's.
    refspec = f"{sha}:{FETCHED_REFS}{sha}" if is_full_sha(sha) else sha
    status, _, err = talk(args, url, [refspec], repo=cache_repo, fetch=True).parts()
    if status == 0 and cache_repo.objects.has_object(f"{sha}^{{commit}}"):
        return None
    return git_reason(err) or f"git fetch exited {status}"


def fetch_commits(cache_repo: GitRepo, url: str, shas: list[str]) -> None:
    """Fetch the commits `shas` (full SHAs) that the cache lacks in one request, at depth 1 with their
    trees: one pack, so a tree two of them share arrives once (fetched one at a time, the server sends
    the second commit's trees again even though the first is a "have": its shallow pack ignores it).
    A commit the server refuses is left out; `fetch_sha_why` then says why, one at a time."""
    wanted: list[str] = [sha for sha in dict.fromkeys(shas) if is_full_sha(sha)]
    # One question for them all; a yes is remembered for the run (the check asks about each again).
    missing = cache_repo.objects.missing_commits(wanted)
    if not missing:
        return
    args = ["fetch", "--quiet", "--no-tags", "--filter=blob:none", "--depth=1"]
    talk(args, url, [f"{sha}:{FETCHED_REFS}{sha}" for sha in missing], repo=cache_repo, fetch=True)


def fetch_objects(cache_repo: GitRepo, url: str, shas: list[str]) -> None:
    """Fetch the objects `shas` that the cache lacks (blobs, typically) in one request.

    The alternative is git's lazy fetch: one process and one round trip per object, through the
    promisor remote's configured URL, which holds no credentials.
    """
    missing = cache_repo.objects.missing_objects(list(dict.fromkeys(shas)))
    if not missing:
        return
    # No negotiation (as git's own lazy fetch): a blob is reachable from the commits the cache has, so
    # with them as "haves" the server would think the cache holds it and send nothing.
    args = ["-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head"]
    status, _, err = talk([*args, "--filter=blob:none"], url, missing, repo=cache_repo, fetch=True).parts()
    if status != 0:
        raise BadInput(
            f"cannot fetch {len(missing)} object(s) from {url}: {git_reason(err)}",
            hint="check the URL and your access to it",
        )


def history_is_current(cache_repo: GitRepo, listed: dict[str, str]) -> bool:
    """Does the cache hold `listed` (a URL's branches and tags) exactly as its last history fetch left
    them, full depth? Then fetching again would bring nothing."""
    if (cache_repo.git_dir / "shallow").is_file():
        return False
    fmt = "--format=%(refname) %(objectname) %(*objectname)"
    out = cache_repo.git(["for-each-ref", fmt, "refs/forkctl/heads/", "refs/forkctl/tags/"]).text
    held: dict[str, str] = {}
    for line in out.splitlines():
        ref, sha, *peeled = line.split()
        held[ref.replace("refs/forkctl/", "refs/", 1)] = peeled[0] if peeled else sha
    return held == listed


def fetch_history(
    cache_repo: GitRepo, url: str, listed: dict[str, str] | None = None, commits_only: bool = False
) -> None:
    """Fetch every branch and tag of `url` with full history (commits and trees, blobs on demand).

    The refs land under refs/forkctl/ so that `contains` questions only see what the URL has now.
    A cache made shallow by earlier one-SHA fetches is deepened, or ancestry answers would be wrong.
    `listed`: the URL's refs as just listed; when the cache already holds exactly those, nothing is
    fetched (a warm cache answers without the network). `commits_only`: no trees either (a graph cache).
    """
    if listed is not None and history_is_current(cache_repo, listed):
        return
    args = [
        "fetch",
        "--quiet",
        "--prune",
        "--no-tags",
        f"--filter={'tree:0' if commits_only else 'blob:none'}",
    ]
    if (cache_repo.git_dir / "shallow").is_file():
        args.append("--unshallow")
    refspecs = ["+refs/heads/*:refs/forkctl/heads/*", "+refs/tags/*:refs/forkctl/tags/*"]
    status, _, err = talk(args, url, refspecs, repo=cache_repo, fetch=True).parts()
    forget_tips(cache_repo)  # every branch may have moved (or gone: --prune)
    if status != 0:
        raise BadInput(
            f"cannot fetch the branches and tags of {url}: {git_reason(err)}",
            hint="check the URL and your access to it",
        )


def fetch_graph_of(graph: GitRepo, url: str, sha: str) -> bool:
    """The commit graph of one commit (commits only, full depth), kept under a ref; True when here."""
    if graph.objects.has_object(f"{sha}^{{commit}}"):
        return True
    if not is_full_sha(sha):
        return False
    status = graph_fetch(graph, url, [f"{sha}:{FETCHED_REFS}{sha}"])
    return status == 0 and graph.objects.has_object(f"{sha}^{{commit}}")


# --- which branches and tags of a URL contain a commit (what a fresh recursive clone needs) -----


class Reachability(msgspec.Struct, frozen=True):
    reachable: bool
    refs: list[str]  # branches/tags of the URL that contain the commit (tips first)
    # How it was told: "tip" (the listing: refs whose tip it is), "likely" (the first likely branch that
    # holds it; the others not searched) or "searched" (`refs` is every branch and tag that holds it).
    how: str = "searched"


def tip_reachability(sha: str, remote_refs: dict[str, str]) -> Reachability | None:
    """Answered by the URL's listing alone: `sha` is the tip of a branch or tag."""
    tips = [ref for ref, tip in remote_refs.items() if tip == sha]
    return Reachability(True, tips, "tip") if tips else None


def reachability(
    graph: CommitGraph,
    url: str,
    sha: str,
    remote_refs: dict[str, str],
    likely: tuple[str, ...] = (),
    since: Since | None = None,
) -> Reachability:
    """Is `sha` reachable from a branch or tag of `url` (what a fresh recursive clone needs)?

    `graph`: the URL's commit-graph cache (`cache_repo_for(url, graph=True)`). A tip answers from the
    listing alone. Then the `likely` branches: the commit graph of each (commits only, bounded at
    `since()` when new, deepened when the bound could hide the answer: a "no" is exact) and one
    `merge-base --is-ancestor`. Only when
    none contains `sha` is the graph of every branch and tag fetched and searched
    (`for-each-ref --contains`, slow over hundreds of refs).
    """
    at_tip = tip_reachability(sha, remote_refs)
    if at_tip is not None:
        return at_tip
    for branch in dict.fromkeys(likely):
        ref = f"refs/heads/{branch}"
        if ref in remote_refs and graph.history.known_ancestor(sha, remote_refs[ref]):
            return Reachability(True, [ref], "likely")  # a fact of the history, whatever the graph holds now
        if ref not in remote_refs or not fetch_graph(graph, url, {ref: remote_refs[ref]}, since):
            continue
        # Asked of the tip's SHA (the graph holds the branch there): the answer is remembered. A
        # bounded graph deepens itself when the bound may hide the commit or the path (graph.py).
        if graph.history.reaches(remote_refs[ref], sha):
            return Reachability(True, [ref], "likely")
    fetch_history(graph, url, remote_refs, commits_only=True)
    if not graph.objects.has_object(f"{sha}^{{commit}}"):
        return Reachability(False, [])
    status, out, _ = graph.git(
        [
            "for-each-ref",
            "--contains",
            sha,
            "--format=%(refname)",
            "refs/forkctl/heads/",
            "refs/forkctl/tags/",
        ],
        check=False,
    ).parts()
    containing = [
        r.replace("refs/forkctl/heads/", "refs/heads/").replace("refs/forkctl/tags/", "refs/tags/")
        for r in (out.splitlines() if status == 0 else [])
    ]
    return Reachability(bool(containing), containing)


# --- the upstream repository for apply / export / port ----------------------------------------


def ensure_commits(cache_repo: GitRepo, url: str, revs: list[str]) -> None:
    """Make every rev in `revs` resolvable in the cache, contacting `url` only when one is missing.

    A warm cache that already has them works offline. Missing ones come from a fetch of the URL's
    branches and tags (commits and trees only: blobs arrive on demand), then a direct fetch of any
    full SHA still missing (for commits no branch reaches any more).
    """
    missing = [rev for rev in revs if cache_repo.objects.resolve_commit(rev) is None]
    if not missing:
        return
    fetch_history(cache_repo, url)
    for rev in missing:
        if cache_repo.objects.resolve_commit(rev) is None and is_full_sha(rev):
            fetch_sha(cache_repo, url, rev, depth=None)


def cached_objects(url: str, revs: list[str]) -> GitRepo:
    """The cache for `url`, holding the commits `revs` (fetched as needed)."""
    cache_repo = cache_repo_for(url)
    ensure_commits(cache_repo, url, revs)
    return cache_repo
