"""Content-addressed cache entries: facts derived from some bytes, kept under the sha256 of those bytes.

The one integrity scheme of everything forkctl derives and keeps (git's repositories keep their own).
An entry lives at `$FORKCTL_CACHE/<folder>/<key>.json` (or at a path its owner chose: a cache
repository's facts file in its git dir) and holds a header (the entry format, its key
and the sha256 of its payload) then the payload. It is data, never trusted: `read` returns the payload
only when the header names exactly this key and the payload's digest matches (so an entry copied under
another name, truncated or edited is ignored), and the caller still validates what it decodes. Entries
are written atomically; a cache that cannot be read or written costs the work it would have saved, never
a failure. Used for parsed manifests (`manifest.cache`), git's answers about patch text (`series`), the
apply record (`ops.record`), a cache repository's facts (`git.facts`) and a URL's last listing
(`git.listings`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from forkctl import __version__
from forkctl.digests import sha256_hex
from forkctl.files import CacheNotAFolder, cache_root

_FORMAT = b"forkctl-cache-entry 1"


def key_of(kind: str, *parts: bytes) -> str:
    """The key of `parts` for one kind of entry; forkctl's version is part of it, so an upgrade never
    reads what an older forkctl derived. Each part is length-prefixed: the split cannot be shifted."""
    material = [_FORMAT, kind.encode(), __version__.encode()]
    material += [b"%d:%s" % (len(part), part) for part in parts]
    return sha256_hex(b"\0".join(material))


def _header(key: str, payload: bytes) -> bytes:
    return b"\n".join([_FORMAT, key.encode(), sha256_hex(payload).encode()]) + b"\n\n"


def read(folder: str, key: str) -> bytes | None:
    """The payload stored under `key`, or None when there is none or it is not sound."""
    try:
        path = cache_root() / folder / f"{key}.json"
    except (RuntimeError, CacheNotAFolder):  # RuntimeError: no home folder to put the cache in
        return None
    return read_file(path, key)


def read_file(path: Path, key: str) -> bytes | None:
    """The payload of the entry at `path` when its header names `key` and its digest matches, else None."""
    try:
        with open(path, "rb") as stream:
            entry = stream.read()
    except OSError:
        return None
    header, separator, payload = entry.partition(b"\n\n")
    if not separator or header + separator != _header(key, payload):
        return None
    return payload


def write(folder: str, key: str, payload: bytes) -> None:
    """Store `payload` under `key`; a cache that cannot be written is skipped."""
    from forkctl.files import atomic_write  # only a cold start writes (and pays for tempfile)

    with contextlib.suppress(OSError, RuntimeError, CacheNotAFolder):
        atomic_write(cache_root() / folder / f"{key}.json", _header(key, payload) + payload)


def write_file(path: Path, key: str, payload: bytes) -> bool:
    """Store `payload` under `key` at `path` (temp file and rename); False when it cannot be written."""
    from forkctl.files import atomic_write

    try:
        atomic_write(path, _header(key, payload) + payload)
    except OSError:
        return False
    return True
