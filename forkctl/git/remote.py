"""Talking to other repositories by URL: which URLs name the same repository, which ones git may
contact, their branches and tags (ls-remote, each answer recorded for when the URL does not answer),
and push.

With the rest of `forkctl.git`, the only code that runs git. A URL is data, never an option: every
network command goes through `talk`. What is fetched lands in the cache of partial clones (`clonecache`),
under `cache_root()`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

from forkctl import locking
from forkctl.digests import sha256_hex
from forkctl.errors import BadInput
from forkctl.git import listings, locations
from forkctl.git.credentials import lent_credentials
from forkctl.git.repo import GitRepo
from forkctl.git.runner import Completed, GitTimeout, git, network_args, network_timeout
from forkctl.redact import without_credentials

# --- URL identity and checks -----------------------------------------------------------------

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


def is_local(url: str) -> bool:
    """Does `url` name a repository on this machine (a file:// URL or a path)?"""
    text = url.strip()
    if text.startswith(("file://", "/", "./", "../", "~")):
        return True
    try:
        return "://" not in text and Path(text).exists()
    except (OSError, ValueError):  # a NUL byte, a name too long: not a path here
        return False


def allow_local(url: str) -> None:
    """`url` (when local) was named by the user (in the manifest, or on the command line): it may be
    contacted in this command (`locations`). A local location that only a repository names (a
    consumer's `.gitmodules`, a PR) is not."""
    locations.name(url)


def checked_local(url: str) -> str:
    """`url` unchanged unless it is a local location nobody allowed: BadInput, before git lists or
    fetches it (a pull request's `.gitmodules` naming `file:///home/...` must not make a runner list
    a repository of its disk). `$FORKCTL_ALLOW_LOCAL_URLS=1` allows every local location."""
    if not is_local(url) or os.environ.get("FORKCTL_ALLOW_LOCAL_URLS") == "1":
        return url
    wanted = normalise_url(url)
    if any(is_local(text) and normalise_url(text) == wanted for text in locations.named()):
        return url
    raise BadInput(
        f"refusing to contact the local repository {url}: neither the manifest nor the command line names it",
        hint="a local URL in a repository's .gitmodules is not followed; name it in the manifest, "
        "or set FORKCTL_ALLOW_LOCAL_URLS=1 to allow local URLs",
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


# --- one network operation: the URL is data, never an option ------------------------------------


def talk(
    verb_args: list[str], url: str, after_url: list[str], repo: GitRepo | None = None, fetch: bool = False
) -> Completed:
    """One network operation: `git <verb_args> -- <url> <after_url>` with the network bounds (stall
    limits, total time), the URL checked to be data. Returns what git did (`check=False`: it unpacks as
    (status, stdout, stderr)); a silent remote is a BadInput naming it.

    Credentials in an https URL never reach git's command line or a config key: git is given the URL
    without them and a credential helper (`lent_credentials`) that reads them from its own environment.

    `fetch` (into `repo`): the URL is reached through a named promisor remote whose configured URL
    has no credentials (git would otherwise record the positional URL, token included, in the
    repository's config). Later lazy fetches use the same remote.
    """
    checked_url(url)
    if verb_args[:1] != ["push"]:  # a push goes where forkctl chose (a manifest URL, its own scratch)
        checked_local(url)
    lend, env = lent_credentials(url)
    public = without_credentials(url) if env else url
    try:
        if not fetch:
            args = [*network_args(), *lend, *verb_args, "--", public, *after_url]
            if repo is None:
                return git(args, env=env or None, timeout=network_timeout(), check=False)
            return repo.git(args, env=env or None, timeout=network_timeout(), check=False)
        assert repo is not None, "a fetch needs a repository"
        # One fetch at a time into a repository: a second one would fail on git's shallow.lock (or
        # the ref locks) instead of waiting; this one waits, then finds what the first brought.
        wait = locking.wait_limit() + network_timeout()  # the fetch it waits for may take that long
        with locking.held(repo.git_dir / "forkctl-fetch.lock", f"a fetch into {repo.git_dir}", wait):
            return _fetch(repo, public, lend, verb_args, after_url, env)
    except GitTimeout:
        raise _silent(url) from None


def _fetch(
    repo: GitRepo, public: str, lend: list[str], verb_args: list[str], after_url: list[str], env: dict
) -> Completed:
    """The fetch of `talk`, under the repository's fetch lock: what depends on the repository's state
    is read here, after any fetch this one waited for. Its promisor remote is configured (a `git
    config` beside another's fails on the config lock), and `--unshallow` is dropped once a fetch
    before it made the repository complete: git refuses it there ("does not make sense"), and a
    complete repository already is what it asks for."""
    name = _promisor_remote(repo, without_credentials(public))
    if public != without_credentials(public):  # an ssh login name: no secret, but git needs it
        lend = ["-c", f"url.{public}.insteadOf={without_credentials(public)}"]
    if "--unshallow" in verb_args and not (repo.git_dir / "shallow").is_file():
        verb_args = [arg for arg in verb_args if arg != "--unshallow"]
    if any(arg.startswith("--depth=") for arg in verb_args) and _holds_history(repo):
        # A depth-limited fetch into a repository that holds full history would graft the commit it
        # brings (git records it in `shallow`): every ancestry answer through it, this process's and
        # any other's reading the cache at the same time, would be cut there until the next unshallow.
        verb_args = [arg for arg in verb_args if not arg.startswith("--depth=")]
    args = [*network_args(), *lend, *verb_args, "--", name, *after_url]
    return repo.git(args, env=env or None, timeout=network_timeout(), check=False)


def _holds_history(repo: GitRepo) -> bool:
    """A full history fetch (`clonecache.fetch_history`) has filled the repository and nothing made it
    shallow since."""
    if (repo.git_dir / "shallow").is_file():
        return False
    status, out, _ = repo.git(
        ["for-each-ref", "--count=1", "--format=%(refname)", "refs/forkctl/heads/"], check=False
    ).parts()
    return status == 0 and bool(out.strip())


def promisor_remote_name(public_url: str) -> str:
    """The name of the remote (by URL identity) that a cache repository fetches `public_url` through."""
    return "forkctl-" + sha256_hex(cache_identity(public_url).encode())[:12]


def _promisor_remote(repo: GitRepo, public_url: str) -> str:
    """The remote (named by URL identity) that a cache repository fetches `public_url` through."""
    name = promisor_remote_name(public_url)
    if name in repo.configured_remotes:  # only forkctl writes these settings, and it wrote them already
        return name
    wanted = {"url": public_url, "promisor": "true", "partialclonefilter": "blob:none"}
    # One read of the remote's settings; writes only for what is missing (the first fetch).
    _, out, _ = repo.git(["config", "-z", "--get-regexp", rf"^remote\.{name}\."], check=False).parts()
    current = dict(item.split("\n", 1) for item in out.split("\x00") if "\n" in item)
    for key_name, value in wanted.items():
        if current.get(f"remote.{name}.{key_name}") != value:
            repo.set_config(f"remote.{name}.{key_name}", value)
    repo.configured_remotes.add(name)
    return name


def git_reason(err: str) -> str:
    """git's reason for a failure, on one line: from its stderr, the `fatal:`/`error:` lines (else the
    last line), joined: "Could not resolve host", "Connection refused", "does not appear to be a git
    repository", "not our ref"."""
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines[-1:]
    return "; ".join(dict.fromkeys(said))


# git's words for a server that answered without the object (not one unreached: DNS, TCP, TLS, auth).
_OBJECT_REFUSED = ("not our ref", "unadvertised object", "remote ref", "did not send all necessary objects")


def object_refused(reason: str) -> bool:
    """Did git's `reason` come from a server that answered and lacks (or will not give) the object?"""
    return any(words in reason.lower() for words in _OBJECT_REFUSED)


def _silent(url: str) -> BadInput:
    return BadInput(
        f"{url} did not answer within {network_timeout():.0f} s",
        hint="check the network and the URL; $FORKCTL_NETWORK_TIMEOUT sets the limit in seconds",
    )


# --- branches and tags of a URL, recorded for when it does not answer -------------------------


def ls_remote(url: str) -> dict[str, str]:
    """The branches and tags of `url` as {ref: commit sha}; annotated tags are peeled to their commit.

    Each answer is recorded in the cache (refs and SHAs only, no URL), for `listed_refs` to fall back on.
    """
    status, out, err = talk(["ls-remote", "--heads", "--tags"], url, []).parts()
    if status != 0:
        raise BadInput(
            f"cannot list the refs of {url}: {git_reason(err) or f'git ls-remote exited {status}'}",
            hint="check the URL and your network / credentials (git ls-remote must work)",
        )
    refs: dict[str, str] = {}
    for line in out.splitlines():
        sha, ref = line.split("\t", 1)
        if ref.endswith("^{}"):
            refs[ref.removesuffix("^{}")] = sha  # the peeled commit wins over the tag object
        else:
            refs.setdefault(ref, sha)
    listings.record(cache_identity(url), refs)
    return refs


class Listing(msgspec.Struct, frozen=True):
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
        found = listings.recorded(cache_identity(url))
        if found is None:
            raise
        return Listing(found[0], recorded_at=found[1], why=exc.message)


# --- a URL's default branch; push --------------------------------------------------------------


def default_branch(url: str) -> str | None:
    """The branch `HEAD` of `url` points at (its default branch), when the server says."""
    status, out, _ = talk(["ls-remote", "--symref"], url, ["HEAD"]).parts()
    for line in out.splitlines() if status == 0 else []:
        if line.startswith("ref: ") and line.endswith("\tHEAD"):
            return line[len("ref: ") :].split("\t")[0].removeprefix("refs/heads/")
    return None


def push_branch(repo: GitRepo, url: str, sha: str, branch: str) -> None:
    """`git push url sha:refs/heads/branch`, never forced: an existing different branch is refused."""
    status, _, err = talk(
        ["push", "--quiet", "--no-verify"], url, [f"{sha}:refs/heads/{branch}"], repo=repo
    ).parts()
    if status != 0:
        raise BadInput(
            f"pushing {branch} to {url} failed: {err.strip()}",
            hint="the branch may already exist with other commits: delete it on the remote or bump anew",
        )


class RemoteMoved(BadInput):
    """A compare-and-swap push found the branch elsewhere than where it was read: nothing was pushed."""


def push_fast_forward(repo: GitRepo, url: str, new: str, branch: str, expected: str | None) -> None:
    """Move `branch` at `url` from `expected` to `new` as a compare-and-swap that only fast-forwards.

    `expected` None: the branch must not exist yet. `new` must descend from `expected` (checked here
    first), so the push never drops a commit; git's lease (`--force-with-lease=<ref>:<expected>`, the
    compare-and-swap of a push) then refuses when the remote no longer holds `expected`, also when it
    was rewound or deleted, where a plain push would have fast-forwarded it. Nothing is ever forced
    over a tip forkctl did not read."""
    if expected is not None and expected != new and not repo.history.is_ancestor(expected, new):
        raise BadInput(
            f"refusing to push {new[:12]} to {branch}: it is not a fast-forward of {expected[:12]}",
            hint="forkctl never force-pushes: publish it as a merge (fork.publish: merge)",
        )
    ref = f"refs/heads/{branch}"
    lease = f"--force-with-lease={ref}:{expected or ''}"
    status, _, err = talk(["push", "--quiet", "--no-verify", lease], url, [f"{new}:{ref}"], repo=repo).parts()
    if status == 0:
        return
    now = ls_remote(url).get(ref)
    if now == new:  # another run pushed this very commit meanwhile (it read the same tip): done
        return
    if now != expected:
        raise RemoteMoved(
            f"{branch} at {url} moved meanwhile: it was {(expected or 'absent')[:12]} when read and is "
            f"{(now or 'absent')[:12]} now; nothing was pushed",
            hint="run forkctl publish again (it reads the new tip)",
        )
    raise BadInput(
        f"pushing {branch} to {url} failed: {git_reason(err) or f'git push exited {status}'}",
        hint="check your push access to the fork and that the branch is not protected against this push",
    )
