"""The parsed-manifest cache: a manifest that loaded cleanly, kept as JSON so that the next start reads
it back with msgspec instead of importing PyYAML (which costs more than the parse itself).

An entry is named by its key, the sha256 of the manifest's bytes together with forkctl's version and
this format; it holds that key, the sha256 of its payload and the payload (the validated model as
msgspec JSON). It is data, never trusted: an entry whose key or digest does not match, which does not
decode, or which fails the schema's checks (which run again on decode) is ignored, and the caller then
parses the YAML, whose errors name file:line. Only a manifest that loaded cleanly is stored, so every
error still comes from the YAML path. Entries are written atomically; a cache that cannot be read or
written costs a parse, never a failure.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec

from forkctl import __version__
from forkctl.files import cache_root
from forkctl.manifest.schema import ManifestModel

FORMAT = b"forkctl-parsed-manifest 1"
FOLDER = "parsed-manifests"


def _sha256(data: bytes) -> str:
    """sha256 in hex, from CPython's built-in implementation when there is one: `hashlib` loads OpenSSL,
    a few milliseconds of a start that hashes a few kilobytes. Both give the same digest."""
    try:
        from _sha2 import sha256  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[no-redef]  # Python 3.10, 3.11
        except ImportError:
            from hashlib import sha256
    return sha256(data).hexdigest()


def key_of(manifest_bytes: bytes) -> str:
    return _sha256(b"\0".join([FORMAT, __version__.encode(), manifest_bytes]))


def _entry_path(key: str) -> Path:
    return cache_root() / FOLDER / f"{key}.json"


def lookup(manifest_bytes: bytes) -> ManifestModel | None:
    """The model stored for exactly these bytes, or None (no entry, or one that is not sound)."""
    key = key_of(manifest_bytes)
    try:
        with open(_entry_path(key), "rb") as stream:
            entry = stream.read()
    except OSError:
        return None
    header, _, payload = entry.partition(b"\n\n")
    if header != b"\n".join([FORMAT, key.encode(), _sha256(payload).encode()]):
        return None  # another manifest's entry, another format, or a payload changed since it was written
    try:
        return msgspec.json.decode(payload, type=ManifestModel)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError):
        return None  # the schema changed under an entry of the same version: parse the YAML


def store(manifest_bytes: bytes, model: ManifestModel) -> None:
    """Keep `model` as what these bytes load to; a cache that cannot be written is skipped."""
    from forkctl.files import atomic_write  # only a cold start writes (and pays for tempfile)

    key = key_of(manifest_bytes)
    payload = msgspec.json.encode(model)
    entry = b"\n".join([FORMAT, key.encode(), _sha256(payload).encode()]) + b"\n\n" + payload
    with contextlib.suppress(OSError):
        atomic_write(_entry_path(key), entry)
