"""sha1 and sha256 in hex, from CPython's built-in implementations when the build has them.

`hashlib` loads OpenSSL on import, a few milliseconds of every start that only hashes a lock name, a
cache key or a commit object. The built-in modules give the same digests; `hashlib` stays the fallback
for a Python built without them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _builtin(name: str) -> Callable[[bytes], Any]:
    try:
        if name == "sha1":
            from _sha1 import sha1 as builtin
        else:
            try:
                from _sha2 import sha256 as builtin  # Python 3.12+
            except ImportError:
                from _sha256 import sha256 as builtin  # type: ignore[no-redef]  # Python 3.10, 3.11
        return builtin
    except ImportError:
        import hashlib

        return getattr(hashlib, name)


_SHA1 = _builtin("sha1")
_SHA256 = _builtin("sha256")


def sha1_hex(data: bytes) -> str:
    return _SHA1(data).hexdigest()


def sha256_hex(data: bytes) -> str:
    return _SHA256(data).hexdigest()


def sha256() -> Any:
    """A sha256 object to feed with `update`, for data that comes in parts."""
    return _SHA256()
