"""The last branch-and-tag listing each URL gave, kept in the cache for when the URL does not answer.

A `contentcache` entry under `$FORKCTL_CACHE/listings/` (refs and SHAs only, no URL), keyed by the URL's
identity. A record is read only to say what a URL answered last (progress, the "unreachable, last seen"
message, a warm cache's offline answers); it never passes a check: an unreachable URL is a finding.
"""

from __future__ import annotations

from datetime import datetime, timezone

import msgspec

from forkctl import contentcache

FOLDER = "listings"


class Listed(msgspec.Struct, frozen=True):
    listed_at: str
    refs: dict[str, str]


def _key(identity: str) -> str:
    return contentcache.key_of("a URL's last listing", identity.encode())


def record(identity: str, refs: dict[str, str]) -> None:
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    contentcache.write(FOLDER, _key(identity), msgspec.json.encode(Listed(listed_at=stamp, refs=refs)))


def recorded(identity: str) -> tuple[dict[str, str], str] | None:
    """(refs, when they were listed) as last recorded for the URL of this identity, or None."""
    payload = contentcache.read(FOLDER, _key(identity))
    if payload is None:
        return None
    try:
        listed = msgspec.json.decode(payload, type=Listed)
    except msgspec.ValidationError:
        return None
    return dict(listed.refs), listed.listed_at
