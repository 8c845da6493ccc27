"""The last branch-and-tag listing each URL gave, kept in the cache for when the URL does not answer.

Plain JSON under `$FORKCTL_CACHE/listings/` (refs and SHAs only, no URL), keyed by the URL's identity. A
record is read only to say what a URL answered last (progress, the "unreachable, last seen" message, a
warm cache's offline answers); it never passes a check: an unreachable URL is a finding.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from forkctl.digests import sha256_hex
from forkctl.files import atomic_write_text, cache_root


def listing_file(identity: str) -> Path:
    return cache_root() / "listings" / f"{sha256_hex(identity.encode())[:16]}.json"


def record(identity: str, refs: dict[str, str]) -> None:
    path = listing_file(identity)
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    atomic_write_text(path, json.dumps({"listed_at": stamp, "refs": refs}, sort_keys=True) + "\n")


def recorded(identity: str) -> tuple[dict[str, str], str] | None:
    """(refs, when they were listed) as last recorded for the URL of this identity, or None."""
    path = listing_file(identity)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return dict(data["refs"]), str(data["listed_at"])
