"""A manifest named by URL: `--manifest LOCATION@REF:PATH`, for a consumer's CI with no checkout of
the toolkit repository.

The spec, read from the right (a URL holds '@' and ':' itself):

    LOCATION@REF:PATH    split at the LAST '@'; REF ends at the first ':' after it; PATH is the rest.

- LOCATION: a URL git accepts (`https://`, `ssh://`, `git://`, `file://`, credentials allowed),
  an scp-like `[user@]host:owner/repo.git`, or the GitHub short form `owner/repo`
  (= `https://github.com/owner/repo.git`);
- REF: a branch, a tag, `refs/heads/NAME` / `refs/tags/NAME`, or a full commit SHA; it may hold '/'
  (`release/1.0`), never '@' or ':';
- PATH: the manifest's path in that repository, relative, never '@', '..', or a leading '-' or '/'.

A value is such a spec when it holds `://`, or when what comes before its last '@' is an scp-like
location or `owner/repo`; anything else is a local path (write `./owner/repo@x:y` for a file of that
name). The manifest and the files commands read beside it (the `patches/` folder, the evidence folder,
the GPU test suites' package, a root `conftest.py`) are copied, read-only, into
`$FORKCTL_CACHE/manifests/<commit>/<path-key>/`, made whole or not at all and reused by every later
run: a full SHA then needs no network, a branch or tag one `ls-remote`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import msgspec

from forkctl.digests import sha256_hex
from forkctl.errors import BadInput
from forkctl.manifest.schema import PATCHES_ROOT

SNAPSHOTS = "manifests"
_SHORT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+")
_SCP_RE = re.compile(r"(?:[^@/]+@)?[^:/]+:[^/].*")
_BAD_REF_RE = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@")
FORM = "URL@REF:PATH (e.g. https://github.com/OWNER/REPO.git@main:manifest.yaml, or OWNER/REPO@main:manifest.yaml)"


class ManifestSpec(msgspec.Struct, frozen=True):
    """A manifest named by URL. `url` may hold credentials: it is passed to git, never shown or stored."""

    url: str
    ref: str
    path: str  # normalised, relative, posix
    shown: str  # the spec as given, credentials removed: what messages name

    @property
    def folder(self) -> str:
        """The manifest's folder in the repository ('' at the top)."""
        parent = str(PurePosixPath(self.path).parent)
        return "" if parent == "." else parent


def _location_of(head: str) -> str | None:
    """The URL `head` names, or None when it is not a repository location (a local path, then)."""
    if "://" in head or _SCP_RE.fullmatch(head):
        return head
    if _SHORT_RE.fullmatch(head):
        return f"https://github.com/{head}.git"
    return None


def parse_spec(text: str) -> ManifestSpec | None:
    """The remote manifest `text` names, None when it is a local path; BadInput for a spec that is
    not well formed (a bad ref or path, a refused URL)."""
    head, at, tail = text.rpartition("@")
    location = _location_of(head) if at else None
    if location is None:
        if "://" in text:
            raise BadInput(f"--manifest {_shown(text)}: no '@REF:PATH' after the URL", hint=f"write {FORM}")
        return None
    ref, colon, path = tail.partition(":")
    from forkctl.git.remote import checked_url
    from forkctl.redact import without_credentials

    shown = f"{without_credentials(head) if '://' in head else head}@{tail}"
    if not colon or not ref or not path:
        raise BadInput(
            f"--manifest {shown}: expected REF:PATH after the last '@' (neither may hold '@')",
            hint=f"write {FORM}",
        )
    if ref.startswith(("-", "/")) or ref.endswith("/") or _BAD_REF_RE.search(ref):
        raise BadInput(
            f"--manifest {shown}: {ref!r} is not a branch, tag or commit SHA",
            hint="a ref must not start with '-' or hold spaces, '..', '@' or any of ~^:?*[\\",
        )
    checked_url(location)
    return ManifestSpec(url=location, ref=ref, path=_checked_path(path, shown), shown=shown)


def _shown(text: str) -> str:
    from forkctl.redact import redact

    return redact(text)


def _checked_path(path: str, shown: str) -> str:
    pure = PurePosixPath(path)
    if path.startswith(("-", "/")) or ".." in pure.parts or any(ord(c) < 32 for c in path) or not pure.name:
        raise BadInput(
            f"--manifest {shown}: {path!r} is not a path inside the repository",
            hint="give the manifest's path relative to the repository's top, e.g. manifest.yaml, "
            "without '..' and not starting with '-' or '/'",
        )
    return str(pure)


def snapshot_folder(cache: Path, url: str, sha: str, path: str) -> Path:
    """Where the files of commit `sha` of `url` read with the manifest at `path` live (no URL in the
    name, only a digest of its identity). Keyed by the URL too: a folder exists only once `sha` was
    fetched from that URL, so another URL naming the same SHA is asked itself (it may not have it)."""
    from forkctl.git.remote import cache_identity

    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", path)[-40:]
    key = sha256_hex(f"{cache_identity(url)}\n{path}".encode())[:12]
    return cache / SNAPSHOTS / sha / f"{slug}-{key}"


def _beside(manifest_text: str, spec: ManifestSpec) -> list[str]:
    """The repository paths, next to the manifest, that commands read: patches/, the evidence folder,
    the GPU suites' top package and a root conftest.py (what the suite digest covers)."""
    from forkctl.manifest.loader import parse_manifest

    model = parse_manifest(manifest_text, spec.shown)
    validation = model.validation
    relative = [
        PATCHES_ROOT,
        *(entry.file for entry in model.series),
        validation.evidence_dir,
        PurePosixPath(validation.gpu_tests).parts[0],
        PurePosixPath(validation.multigpu_tests).parts[0],
        "conftest.py",
    ]
    return list(dict.fromkeys(str(PurePosixPath(spec.folder, rel)) for rel in relative))


def materialise(spec: ManifestSpec, progress: Callable[[str], None], deciding: bool = False) -> Path:
    """The manifest's path in its read-only snapshot, made on first use. `progress`: a note for
    people (the fetch, and when the URL did not answer, the recorded answer that was used).
    `deciding`: a verb whose verdict rests on the manifest; a branch or tag is then resolved by the
    server, never by the answer the cache recorded (a full SHA needs no server).

    One lock per snapshot's URL: concurrent first runs wait for the one fetching into that URL's cache
    clone instead of colliding in it; the one that waited finds the folder made."""
    from forkctl import locking
    from forkctl.files import cache_root
    from forkctl.git import snapshot
    from forkctl.git.remote import allow_local, cache_identity

    allow_local(spec.url)  # named on the command line
    resolved = snapshot.resolve_ref(spec.url, spec.ref)
    folder = snapshot_folder(cache_root(), spec.url, resolved.sha, spec.path)
    if resolved.recorded_at and deciding:
        raise BadInput(
            f"{spec.shown}: the server did not answer ({resolved.why}); the answer the cache recorded for "
            f"{spec.ref!r} does not decide a check",
            hint=f"name the manifest's commit by its full SHA to work offline (...@{resolved.sha}:{spec.path}, "
            "if that is the commit you mean), or run it again when the server answers",
        )
    if resolved.recorded_at:
        progress(
            f"{spec.shown}: the server did not answer ({resolved.why}); working offline with {spec.ref} "
            f"= {resolved.sha[:12]} as recorded at {resolved.recorded_at}"
        )
    if folder.is_dir() and _intact(spec, resolved.sha, folder):
        return folder.joinpath(*PurePosixPath(spec.path).parts)
    lock = cache_root() / "locks" / f"snapshot-{sha256_hex(cache_identity(spec.url).encode())[:16]}.lock"
    from forkctl.git.runner import network_timeout

    # The snapshot it waits for takes two fetches (the commit, then the blobs).
    with locking.held(lock, f"the snapshot of {spec.shown}", locking.wait_limit() + 2 * network_timeout()):
        if folder.is_dir() and not _intact(spec, resolved.sha, folder):
            progress(
                f"the snapshot of {spec.shown} in the cache is not commit {resolved.sha[:12]}'s files: made again"
            )
            _discard(folder)
        if not folder.is_dir():
            progress(f"fetching {spec.shown} ({resolved.sha[:12]})")
            _make_snapshot(spec, resolved.sha, folder)
    return folder.joinpath(*PurePosixPath(spec.path).parts)


def _intact(spec: ManifestSpec, sha: str, folder: Path) -> bool:
    """Whether `folder` holds exactly the files the snapshot of commit `sha` is made of, compared byte
    for byte with the commit's objects (each checked against its name): a snapshot lives in the cache,
    which a CI job may restore from a place a pull request wrote, so it is never trusted as it stands."""
    return _on_disk(folder) == _snapshot_files(spec, sha)


def _on_disk(folder: Path) -> dict[str, bytes] | None:
    """{relative posix path: bytes} of the files under `folder`; None when it holds anything else."""
    import os

    out: dict[str, bytes] = {}
    for top, folders, names in os.walk(folder):
        for name in [*folders, *names]:
            path = Path(top, name)
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                return None
        for name in names:
            path = Path(top, name)
            with open(path, "rb") as stream:
                out[path.relative_to(folder).as_posix()] = stream.read()
    return out


def _discard(folder: Path) -> None:
    """Move `folder` out of the way (one rename: readers see it or nothing), then remove it."""
    import os
    import shutil
    import tempfile

    aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".stale.tmp", dir=folder.parent))
    os.rename(folder, aside / "stale")
    for top, folders, _ in os.walk(aside):
        for name in folders:
            os.chmod(Path(top, name), 0o755)
    shutil.rmtree(aside, ignore_errors=True)


def _make_snapshot(spec: ManifestSpec, sha: str, folder: Path) -> None:
    """Fetch commit `sha` of the spec's URL and copy the manifest and the files beside it into `folder`."""
    from forkctl.files import atomic_folder

    atomic_folder(folder, _snapshot_files(spec, sha))


def _snapshot_files(spec: ManifestSpec, sha: str) -> dict[str, bytes]:
    """The manifest and the files beside it in commit `sha` of the spec's URL (fetched when the cache
    lacks it), every object checked against its name. The manifest's size is checked before its bytes
    are read or parsed."""
    from forkctl.git import snapshot
    from forkctl.manifest.loader import MAX_MANIFEST_BYTES, too_large

    cache_repo = snapshot.fetch_commit(spec.url, sha)
    try:
        found = snapshot.read_files(cache_repo, spec.url, sha, [spec.path], limit=MAX_MANIFEST_BYTES)
    except snapshot.TooLarge as exc:
        raise too_large(spec.shown, exc.size) from None
    if spec.path not in found:
        raise BadInput(
            f"{spec.shown}: no file {spec.path} in commit {sha[:12]}",
            hint="check the path after the ':' (relative to the repository's top)",
        )
    text = found[spec.path].decode("utf-8", errors="replace")
    files = snapshot.read_files(cache_repo, spec.url, sha, _beside(text, spec))
    return {**files, spec.path: found[spec.path]}
