"""Getting objects from other repositories: local paths, a cache of partial clones keyed by URL.

With git.py, the only module that runs git. Nothing here touches a user's checkout: a local
repository is only ever read (or lent as an object alternate); everything fetched lands in the cache,
`$FORKCTL_CACHE` or `~/.cache/forkctl`, one bare partial clone (`blob:none`) per normalised URL, and
for history questions one commit graph per URL (`tree:0`: commits only, full depth, never shallow).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from forkctl import git
from forkctl.errors import BadInput
from forkctl.files import atomic_write_text
from forkctl.git import GitRepo
from forkctl.git.runner import GitTimeout, network_args, network_timeout
from forkctl.redact import without_credentials

# --- pin-chain helpers: URL identity, ls-remote, one-SHA fetches, reachability ------------------

_SCP_RE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>[^/].*)$")


def normalise_url(url: str) -> str:
    """One spelling per repository: `host/owner/name`, lowercase, no scheme, user, port or `.git`.

    https://github.com/A/B.git, git@github.com:a/b and ssh://git@github.com/A/B all give github.com/a/b;
    a file:// URL or a local path gives its resolved absolute path (case kept: file systems care).
    """
    text = url.strip()
    if text.startswith("file://") or text.startswith("/") or text.startswith("."):
        path = urlsplit(text).path if text.startswith("file://") else text
        return str(Path(path).resolve()).removesuffix("/").removesuffix(".git")
    if "://" in text:
        parts = urlsplit(text)
        host, path = (parts.hostname or ""), parts.path
    else:
        match = _SCP_RE.match(text)
        if not match:
            return text.lower().removesuffix("/").removesuffix(".git")
        host, path = match.group("host"), match.group("path")
    path = path.strip("/").removesuffix(".git").removesuffix("/")
    return f"{host.lower()}/{path.lower()}"


ALLOWED_SCHEMES = ("https", "ssh", "git", "file")


def checked_url(url: str) -> str:
    """`url` unchanged when it is a repository location git may contact; BadInput otherwise.

    A URL is data, never an option or a command: a leading `-` (`--upload-pack=...`,
    `-oProxyCommand=...`) and transports other than https, ssh, git and file (`ext::`, `fd::`, plain http)
    are refused. Local paths and scp-like `host:path` locations are allowed.
    """
    text = url.strip()
    if not text or text.startswith("-") or any(ord(c) < 32 for c in text):
        raise BadInput(
            f"refusing repository location {text!r}",
            hint="a URL must not start with '-' or hold control characters",
        )
    if "::" in text.split("/", 1)[0]:
        raise BadInput(
            f"refusing repository location {text!r}: git remote helpers are not allowed",
            hint="use an https, ssh, git or file URL",
        )
    if "://" in text:
        scheme = text.split("://", 1)[0].lower()
        if scheme not in ALLOWED_SCHEMES:
            raise BadInput(
                f"refusing repository location {text!r}: transport {scheme!r} is not allowed",
                hint="use an https, ssh, git or file URL",
            )
    return url


def talk(
    verb_args: list[str], url: str, after_url: list[str], repo: GitRepo | None = None, fetch: bool = False
) -> tuple[int, str, str]:
    """One network operation: `git <verb_args> -- <url> <after_url>` with the network bounds (stall
    limits, total time), the URL checked to be data. Returns (status, stdout, stderr); a silent remote
    is a BadInput naming it.

    `fetch` (into `repo`): the URL is reached through a named promisor remote whose configured URL
    has no credentials (git would otherwise record the positional URL, token included, in the
    repository's config); the credentials, when the URL has any, are lent for this one command by a
    command-line `url.<with>.insteadOf=<without>`. Later lazy fetches use the same remote.
    """
    if fetch:
        assert repo is not None, "a fetch needs a repository"
        public = without_credentials(checked_url(url))
        name = _promisor_remote(repo, public)
        lend = ["-c", f"url.{url}.insteadOf={public}"] if url != public else []
        args = [*network_args(), *lend, *verb_args, "--", name, *after_url]
    else:
        args = [*network_args(), *verb_args, "--", checked_url(url), *after_url]
    try:
        if repo is None:
            return git.try_run(args, timeout=network_timeout())
        return repo.try_git(args, timeout=network_timeout())
    except GitTimeout:
        raise _silent(url) from None


def _promisor_remote(repo: GitRepo, public_url: str) -> str:
    """The remote (named by URL identity) that a cache repository fetches `public_url` through."""
    name = "forkctl-" + hashlib.sha256(cache_identity(public_url).encode()).hexdigest()[:12]
    wanted = {"url": public_url, "promisor": "true", "partialclonefilter": "blob:none"}
    # One read of the remote's settings; writes only for what is missing (the first fetch).
    _, out, _ = repo.try_git(["config", "-z", "--get-regexp", rf"^remote\.{name}\."])
    current = dict(item.split("\n", 1) for item in out.split("\x00") if "\n" in item)
    for key, value in wanted.items():
        if current.get(f"remote.{name}.{key}") != value:
            repo.set_config(f"remote.{name}.{key}", value)
    return name


def _silent(url: str) -> BadInput:
    return BadInput(
        f"{url} did not answer within {network_timeout():.0f} s",
        hint="check the network and the URL; $FORKCTL_NETWORK_TIMEOUT sets the limit in seconds",
    )


def cache_identity(url: str) -> str:
    """What tells two remotes apart for the cache: scheme, host, port and path (credentials dropped).

    Unlike `normalise_url` (which says whether two URLs name the same GitHub repository), two URLs that
    differ in scheme or port are different servers and must not share a partial clone.
    """
    text = without_credentials(url.strip())
    if "://" not in text:
        match = _SCP_RE.match(text)
        if match and not Path(text).exists():
            text = f"ssh://{match.group('host')}/{match.group('path')}"
        else:
            return "file://" + normalise_url(text)
    parts = urlsplit(text)
    host = (parts.hostname or "").lower()
    port = f":{parts.port}" if parts.port else ""
    path = parts.path.rstrip("/").removesuffix(".git")
    return f"{parts.scheme.lower()}://{host}{port}{path}"


def same_repo(a: str, b: str) -> bool:
    return normalise_url(a) == normalise_url(b)


def resolve_relative_url(url: str, superproject_url: str) -> str:
    """`.gitmodules` may say `../Other.git`: resolve it against the superproject's URL, as git does."""
    if not url.startswith("./") and not url.startswith("../"):
        return url
    base = superproject_url.rstrip("/")
    for part in url.split("/"):
        if part == "..":
            base = base.rsplit("/", 1)[0] if "/" in base.split("://", 1)[-1] else base.rsplit(":", 1)[0] + ":"
        elif part not in (".", ""):
            base = f"{base}/{part}" if not base.endswith(":") else f"{base}{part}"
    return base


def ls_remote(url: str) -> dict[str, str]:
    """The branches and tags of `url` as {ref: commit sha}; annotated tags are peeled to their commit.

    Each answer is recorded in the cache (refs and SHAs only, no URL), for `listed_refs` to fall back on.
    """
    status, out, err = talk(["ls-remote", "--heads", "--tags"], url, [])
    if status != 0:
        raise BadInput(
            f"cannot list the refs of {url}: {err.strip() or f'git ls-remote exited {status}'}",
            hint="check the URL and your network / credentials (git ls-remote must work)",
        )
    refs: dict[str, str] = {}
    for line in out.splitlines():
        sha, ref = line.split("\t", 1)
        if ref.endswith("^{}"):
            refs[ref.removesuffix("^{}")] = sha  # the peeled commit wins over the tag object
        else:
            refs.setdefault(ref, sha)
    _record_listing(url, refs)
    return refs


@dataclass(frozen=True)
class Listing:
    """The branches and tags of a URL: as it answered now, or as recorded when it last answered."""

    refs: dict[str, str]
    recorded_at: str | None = None  # set when the URL did not answer and the record was used
    why: str = ""  # what the URL said (or did not) when the record was used


def listed_refs(url: str) -> Listing:
    """`ls_remote(url)`, or, when git could not reach it, what it answered last time (so a warm cache
    checks offline; the caller says so in its report). A refused URL is never looked up."""
    checked_url(url)
    try:
        return Listing(ls_remote(url))
    except BadInput as exc:
        record = _listing_file(url)
        if not record.is_file():
            raise
        data = json.loads(record.read_text())
        return Listing(dict(data["refs"]), recorded_at=str(data["listed_at"]), why=exc.message)


def _listing_file(url: str) -> Path:
    key = hashlib.sha256(cache_identity(url).encode()).hexdigest()[:16]
    return cache_root() / "listings" / f"{key}.json"


def _record_listing(url: str, refs: dict[str, str]) -> None:
    path = _listing_file(url)
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    atomic_write_text(path, json.dumps({"listed_at": stamp, "refs": refs}, sort_keys=True) + "\n")


def cache_root() -> Path:
    configured = os.environ.get("FORKCTL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "forkctl"


def cache_repo_for(url: str, alternates: list[Path] | None = None, graph: bool = False) -> GitRepo:
    """The cache's bare partial clone for `url` (made on first use). `alternates`: local object stores
    to borrow from (read only), so a local clone given on the command line saves the network.

    `graph`: the URL's commit graph instead: commits only (`--filter=tree:0`), full depth, never
    shallow, for history questions (ancestry, counts, which branch contains a commit). The tree cache
    holds single commits fetched at depth 1 with their trees; its shallow boundaries would cut
    history, and deepening it makes the server send again the trees it already sent."""
    key = hashlib.sha256(cache_identity(url).encode()).hexdigest()[:16]
    name = re.sub(r"[^a-z0-9]+", "-", normalise_url(url).lower()).strip("-")[-40:]
    path = cache_root() / "repos" / f"{name}-{key}{'-graph' if graph else ''}.git"
    if not (path / "HEAD").is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        repo = GitRepo.init_bare(path)
        # The cache's config never holds credentials: fetches pass the URL on the command line.
        repo.git(["config", "--", "remote.origin.url", without_credentials(checked_url(url))])
        repo.git(["config", "remote.origin.promisor", "true"])
        repo.git(["config", "remote.origin.partialclonefilter", "blob:none"])
        repo.git(["config", "extensions.partialClone", "origin"])
    # Made by forkctl, bare, at a path it chose: no need to ask git what it is (two processes a call).
    repo = GitRepo.known_bare(path)
    if alternates:
        info = path / "objects" / "info"
        info.mkdir(parents=True, exist_ok=True)
        listed = (info / "alternates").read_text().splitlines() if (info / "alternates").is_file() else []
        wanted = [str((a / "objects").resolve()) for a in alternates if (a / "objects").is_dir()]
        merged = listed + [w for w in wanted if w not in listed]
        if merged != listed:
            atomic_write_text(info / "alternates", "".join(f"{line}\n" for line in merged))
    return repo


FETCHED_REFS = "refs/forkctl/fetched/"  # single commits fetched by SHA; never a URL's branch or tag


def fetch_sha(cache_repo: GitRepo, url: str, sha: str, depth: int | None = 1) -> bool:
    """Fetch one commit by SHA (default depth 1, blobs on demand) into the cache; True when it arrived.

    Servers refuse a SHA that none of their refs reach unless configured otherwise, which is itself
    the answer for a commit that exists only on someone's machine.
    """
    if cache_repo.has_object(f"{sha}^{{commit}}"):
        return True
    args = ["fetch", "--quiet", "--no-tags", "--filter=blob:none"]
    if depth:
        args.append(f"--depth={depth}")
    # Kept under a ref, the commit is a "have" for every later fetch into this cache (or from a cache
    # that borrows its objects), so its trees are not sent again with the next commit's.
    refspec = f"{sha}:{FETCHED_REFS}{sha}" if re.fullmatch(r"[0-9a-f]{40}", sha) else sha
    status, _, _ = talk(args, url, [refspec], repo=cache_repo, fetch=True)
    return status == 0 and cache_repo.has_object(f"{sha}^{{commit}}")


def fetch_objects(cache_repo: GitRepo, url: str, shas: list[str]) -> None:
    """Fetch the objects `shas` that the cache lacks (blobs, typically) in one request.

    The alternative is git's lazy fetch: one process and one round trip per object, through the
    promisor remote's configured URL, which holds no credentials.
    """
    missing = cache_repo.missing_objects(list(dict.fromkeys(shas)))
    if not missing:
        return
    # No negotiation (as git's own lazy fetch): a blob is reachable from the commits the cache has, so
    # with them as "haves" the server would think the cache holds it and send nothing.
    args = ["-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head"]
    status, _, err = talk([*args, "--filter=blob:none"], url, missing, repo=cache_repo, fetch=True)
    if status != 0:
        raise BadInput(
            f"cannot fetch {len(missing)} object(s) from {url}: {err.strip()}",
            hint="check the URL and your access to it",
        )


def history_is_current(cache_repo: GitRepo, listed: dict[str, str]) -> bool:
    """Does the cache hold `listed` (a URL's branches and tags) exactly as its last history fetch left
    them, full depth? Then fetching again would bring nothing."""
    if (cache_repo.git_dir / "shallow").is_file():
        return False
    fmt = "--format=%(refname) %(objectname) %(*objectname)"
    out = cache_repo.git(["for-each-ref", fmt, "refs/forkctl/heads/", "refs/forkctl/tags/"])
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
    status, _, err = talk(args, url, refspecs, repo=cache_repo, fetch=True)
    if status != 0:
        raise BadInput(
            f"cannot fetch the branches and tags of {url}: {err.strip()}",
            hint="check the URL and your access to it",
        )


def fetch_graph(graph: GitRepo, url: str, wanted: dict[str, str]) -> bool:
    """Bring the commit graph of the branches `wanted` ({refs/heads/B: tip as listed}) into `graph`
    (commits only, full depth: exact ancestry, a fraction of the bytes of the trees), under
    refs/forkctl/heads/. Branches already held at the listed tip are not fetched (a warm cache works
    offline). True when every wanted branch is now held at its tip."""
    held = {ref: graph.ref_sha(ref.replace("refs/", "refs/forkctl/", 1)) for ref in wanted}
    todo = [ref for ref, tip in wanted.items() if held[ref] != tip and ref.startswith("refs/heads/")]
    if not todo:
        return all(held[ref] == tip for ref, tip in wanted.items())
    refspecs = [f"+{ref}:{ref.replace('refs/', 'refs/forkctl/', 1)}" for ref in todo]
    args = ["fetch", "--quiet", "--no-tags", "--filter=tree:0"]
    status, _, _ = talk(args, url, refspecs, repo=graph, fetch=True)
    return status == 0 and all(
        graph.ref_sha(ref.replace("refs/", "refs/forkctl/", 1)) == tip for ref, tip in wanted.items()
    )


def fetch_graph_of(graph: GitRepo, url: str, sha: str) -> bool:
    """The commit graph of one commit (commits only, full depth), kept under a ref; True when here."""
    if graph.has_object(f"{sha}^{{commit}}"):
        return True
    if not re.fullmatch(r"[0-9a-f]{40}", sha):
        return False
    args = ["fetch", "--quiet", "--no-tags", "--filter=tree:0"]
    status, _, _ = talk(args, url, [f"{sha}:{FETCHED_REFS}{sha}"], repo=graph, fetch=True)
    return status == 0 and graph.has_object(f"{sha}^{{commit}}")


@dataclass(frozen=True)
class Reachability:
    reachable: bool
    refs: list[str]  # branches/tags of the URL that contain the commit (tips first)


def tip_reachability(sha: str, remote_refs: dict[str, str]) -> Reachability | None:
    """Answered by the URL's listing alone: `sha` is the tip of a branch or tag."""
    tips = [ref for ref, tip in remote_refs.items() if tip == sha]
    return Reachability(True, tips) if tips else None


def reachability(
    graph: GitRepo, url: str, sha: str, remote_refs: dict[str, str], likely: tuple[str, ...] = ()
) -> Reachability:
    """Is `sha` reachable from a branch or tag of `url` (what a fresh recursive clone needs)?

    `graph`: the URL's commit-graph cache (`cache_repo_for(url, graph=True)`). A tip answers from the
    listing alone. Then the `likely` branches: the commit graph of each (commits only, full depth, so
    a pin deep in history is found and a "no" is exact) and one `merge-base --is-ancestor`. Only when
    none contains `sha` is the graph of every branch and tag fetched and searched
    (`for-each-ref --contains`, slow over hundreds of refs).
    """
    at_tip = tip_reachability(sha, remote_refs)
    if at_tip is not None:
        return at_tip
    for branch in dict.fromkeys(likely):
        ref = f"refs/heads/{branch}"
        if ref not in remote_refs or not fetch_graph(graph, url, {ref: remote_refs[ref]}):
            continue
        if graph.has_object(f"{sha}^{{commit}}") and graph.is_ancestor(sha, f"refs/forkctl/heads/{branch}"):
            return Reachability(True, [ref])
    fetch_history(graph, url, remote_refs, commits_only=True)
    if not graph.has_object(f"{sha}^{{commit}}"):
        return Reachability(False, [])
    status, out, _ = graph.try_git(
        [
            "for-each-ref",
            "--contains",
            sha,
            "--format=%(refname)",
            "refs/forkctl/heads/",
            "refs/forkctl/tags/",
        ]
    )
    containing = [
        r.replace("refs/forkctl/heads/", "refs/heads/").replace("refs/forkctl/tags/", "refs/tags/")
        for r in (out.splitlines() if status == 0 else [])
    ]
    return Reachability(bool(containing), containing)


# --- the upstream object store for apply / export / port ----------------------------------------


def ensure_commits(cache_repo: GitRepo, url: str, revs: list[str]) -> None:
    """Make every rev in `revs` resolvable in the cache, contacting `url` only when one is missing.

    A warm cache that already has them works offline. Missing ones come from a fetch of the URL's
    branches and tags (commits and trees only: blobs arrive on demand), then a direct fetch of any
    full SHA still missing (for commits no branch reaches any more).
    """
    missing = [rev for rev in revs if cache_repo.resolve_commit(rev) is None]
    if not missing:
        return
    fetch_history(cache_repo, url)
    for rev in missing:
        if cache_repo.resolve_commit(rev) is None and re.fullmatch(r"[0-9a-f]{40}", rev):
            fetch_sha(cache_repo, url, rev, depth=None)


def object_store(repo_path: Path | None, url: str, revs: list[str]) -> GitRepo:
    """The repository to read upstream objects from: `repo_path` as it is, or the cache for `url`.

    A given repository is never fetched into (it is the user's); the cache is filled as needed.
    """
    if repo_path is not None:
        return GitRepo(repo_path)
    cache_repo = cache_repo_for(url)
    ensure_commits(cache_repo, url, revs)
    return cache_repo


def default_branch(url: str) -> str | None:
    """The branch `HEAD` of `url` points at (its default branch), when the server says."""
    status, out, _ = talk(["ls-remote", "--symref"], url, ["HEAD"])
    for line in out.splitlines() if status == 0 else []:
        if line.startswith("ref: ") and line.endswith("\tHEAD"):
            return line[len("ref: ") :].split("\t")[0].removeprefix("refs/heads/")
    return None


def push_branch(repo: GitRepo, url: str, sha: str, branch: str) -> None:
    """`git push url sha:refs/heads/branch`, never forced: an existing different branch is refused."""
    status, _, err = talk(["push", "--quiet", "--no-verify"], url, [f"{sha}:refs/heads/{branch}"], repo=repo)
    if status != 0:
        raise BadInput(
            f"pushing {branch} to {url} failed: {err.strip()}",
            hint="the branch may already exist with other commits: delete it on the remote or bump anew",
        )
