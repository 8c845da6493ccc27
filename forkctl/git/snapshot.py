"""Files of a repository at one commit, read through the cache of partial clones: how a manifest named
by URL (`--manifest URL@REF:PATH`) is read without a checkout of the repository that holds it.

A ref is resolved with one `ls-remote` (a full SHA needs none; when the URL does not answer, the
answer recorded last time is used, as check-pins does); the commit arrives by one fetch of that SHA
(trees, no blobs) into the URL's cache clone, then the blobs of the wanted files in one more request.
A commit the cache already holds is never fetched again.
"""

from __future__ import annotations

import msgspec

from forkctl.errors import BadInput
from forkctl.git.clonecache import cache_repo_for, fetch_objects
from forkctl.git.graph import FETCHED_REFS
from forkctl.git.remote import listed_refs, talk
from forkctl.git.repo import GitRepo
from forkctl.git.sha import is_full_sha


class ResolvedRef(msgspec.Struct, frozen=True):
    """The commit a ref names, and, when the URL did not answer, when that answer was recorded."""

    sha: str
    recorded_at: str | None = None
    why: str = ""  # what the URL said (or did not) when the recorded answer was used


def resolve_ref(url: str, ref: str) -> ResolvedRef:
    """The commit `ref` (a branch, a tag, `refs/...`, or a full SHA) names at `url`.

    A full SHA is its own answer (no network). A name that is both a branch and a tag is refused
    rather than guessed: spell it `refs/heads/NAME` or `refs/tags/NAME`.
    """
    if is_full_sha(ref):
        return ResolvedRef(ref)
    listing = listed_refs(url)
    names = [ref] if ref.startswith("refs/") else [f"refs/heads/{ref}", f"refs/tags/{ref}"]
    found = [name for name in names if name in listing.refs]
    if len(found) > 1:
        raise BadInput(
            f"{url}: {ref!r} is both a branch and a tag",
            hint=f"write refs/heads/{ref} or refs/tags/{ref} after the '@'",
        )
    if not found:
        raise BadInput(
            f"{url} has no branch or tag {ref!r}",
            hint="name a branch, a tag or a full commit SHA after the '@'",
        )
    return ResolvedRef(listing.refs[found[0]], listing.recorded_at, listing.why)


def fetch_commit(url: str, sha: str) -> GitRepo:
    """The cache clone of `url` holding commit `sha` (depth 1, trees, no blobs); BadInput with git's
    own reason when it cannot be fetched."""
    cache_repo = cache_repo_for(url)
    if cache_repo.objects.has_object(f"{sha}^{{commit}}"):
        return cache_repo
    args = ["fetch", "--quiet", "--no-tags", "--filter=blob:none", "--depth=1"]
    status, _, err = talk(args, url, [f"{sha}:{FETCHED_REFS}{sha}"], repo=cache_repo, fetch=True).parts()
    if status != 0 or not cache_repo.objects.has_object(f"{sha}^{{commit}}"):
        reason = err.strip() or f"git fetch exited {status}"
        raise BadInput(
            f"cannot fetch commit {sha[:12]} of {url}: {reason}",
            hint="check the URL, the network and your access to it (git fetch must work)",
        )
    return cache_repo


class TooLarge(BadInput):
    """A file past read_files' `limit`, found before its bytes were fetched or read."""

    def __init__(self, message: str, hint: str, size: int) -> None:
        super().__init__(message, hint)
        self.size = size


def read_files(
    cache_repo: GitRepo, url: str, sha: str, paths: list[str], limit: int | None = None
) -> dict[str, bytes]:
    """{path: bytes} of the regular files at `paths` in commit `sha` (a folder: every file under it);
    a path the commit lacks is left out. Every object read is checked against its name
    (`git.verified`): what a cache repository holds is not taken on trust. Symbolic links and submodules are not files: left out.
    The blobs the cache lacks come from `url` in one request. `limit`: the most bytes a file may
    hold, checked (one `cat-file --batch-check`) before any is read.

    A tree may hold names git itself never writes (`..`, `.`, an empty or slash-holding name: made
    with `git mktree`, refused only by fsck); a path with such a part is refused (BadInput), never
    copied: it would point outside the snapshot."""
    if not paths:
        return {}
    from forkctl.git import verified

    blobs: dict[str, str] = {}
    for path, (mode, blob) in verified.listing(cache_repo, url, sha, paths).items():
        _check_tree_path(path, url, sha)
        if mode != "120000":
            blobs[path] = blob
    fetch_objects(cache_repo, url, list(blobs.values()))
    if limit is not None:
        sizes = cache_repo.objects.object_sizes(list(blobs.values()))
        for path, blob in blobs.items():
            size = sizes[blob]
            if size > limit:
                raise TooLarge(
                    f"{path} in commit {sha[:12]} of {url}: {size} bytes is too large (the limit is {limit})",
                    hint="check the path after the ':': a manifest is a few kilobytes",
                    size=size,
                )
    return {path: verified.checked(cache_repo, blob, "blob", url) for path, blob in blobs.items()}


def _check_tree_path(path: str, url: str, sha: str) -> None:
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..", ".git") for part in parts):
        raise BadInput(
            f"commit {sha[:12]} of {url} holds a tree entry {path!r} that points outside its folder",
            hint="git never writes such a name (git fsck reports it): fix the repository, or name another commit",
        )
