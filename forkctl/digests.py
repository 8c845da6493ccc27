"""sha1 and sha256 in hex, from CPython's built-in implementations when the build has them.

`hashlib` loads OpenSSL on import, a few milliseconds of every start that only hashes a lock name, a
cache key or a commit object. The built-in modules give the same digests; `hashlib` stays the fallback
for a Python built without them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Hash(Protocol):
    """What forkctl asks of a hash object (the built-in modules and `hashlib` alike)."""

    def update(self, data: bytes, /) -> None: ...

    def hexdigest(self) -> str: ...


def _builtin(name: str) -> Callable[..., Hash]:
    builtin: Callable[..., Hash]
    # CPython's own modules: typeshed has no stubs for them.
    try:
        if name == "sha1":
            import _sha1  # type: ignore[import-not-found]

            builtin = _sha1.sha1
        else:
            try:
                import _sha2  # type: ignore[import-not-found]  # Python 3.12+

                builtin = _sha2.sha256
            except ImportError:
                import _sha256  # type: ignore[import-not-found]  # Python 3.10, 3.11

                builtin = _sha256.sha256
        return builtin
    except ImportError:
        import hashlib

        builtin = getattr(hashlib, name)
        return builtin


_SHA1 = _builtin("sha1")
_SHA256 = _builtin("sha256")


def sha1_hex(data: bytes) -> str:
    return _SHA1(data).hexdigest()


def sha256_hex(data: bytes) -> str:
    return _SHA256(data).hexdigest()


def sha256() -> Hash:
    """A sha256 object to feed with `update`, for data that comes in parts."""
    return _SHA256()
