"""What a cache repository answered before about objects that cannot change, kept for the next run.

A commit's tree entries, the sections of a `.gitmodules` blob, "A is an ancestor of B" and the counts of
`base...commit` in a commit graph are functions of object names alone: asked once, they hold for every
later run. Each cache repository (never a user's clone) keeps them in one file in its git dir, read at
most once by the repository object that uses them (`GitRepo.cache_at`) and written once, atomically,
when that object is dropped (or at exit). The file is a `contentcache` entry, the one integrity scheme
of forkctl's caches: one whose header names another key (another forkctl version, another meaning of
the keys) or whose digest does not match is ignored and rewritten: a miss, never a wrong answer. Only
exact answers are recorded (the callers say which).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forkctl import contentcache

FILE = "forkctl-facts.json"
MAX_FACTS = 4096  # the oldest are dropped beyond this: a cache checked for years stays small
# The entry's key: what the facts mean. forkctl's version is part of every key (`contentcache.key_of`),
# so an upgrade that changes what a fact's key means starts from an empty file.
_KIND = "facts of a cache repository, v2"


def entry_key() -> str:
    return contentcache.key_of(_KIND)


class Facts:
    """One cache repository's recorded answers: {key: JSON value}, in `FILE` of its git dir."""

    def __init__(self, git_dir: Path) -> None:
        self.path = git_dir / FILE
        self._facts: dict[str, Any] | None = None
        self._dirty = False

    def get(self, key: str) -> Any:
        """The recorded answer for `key`, or None."""
        return self._loaded().get(key)

    def put(self, key: str, value: Any) -> None:
        facts = self._loaded()
        if facts.get(key) != value:
            facts.pop(key, None)  # re-inserted last: the newest survive the cap
            facts[key] = value
            self._dirty = True

    def save(self) -> None:
        """Write the facts when this object added any (temp file and rename: a reader sees old or new)."""
        if not self._dirty or self._facts is None or not self.path.parent.is_dir():
            return  # nothing new, or the repository was removed since (a demo's scratch cache)
        facts = dict(list(self._facts.items())[-MAX_FACTS:])
        payload = json.dumps(facts, separators=(",", ":")).encode()
        # A read-only cache answers as before, it just does not remember.
        self._dirty = not contentcache.write_file(self.path, entry_key(), payload)

    def _loaded(self) -> dict[str, Any]:
        if self._facts is None:
            self._facts = _read(self.path)
        return self._facts


def _read(path: Path) -> dict[str, Any]:
    """The facts of the entry at `path`; {} when it is absent, damaged or of another key."""
    payload = contentcache.read_file(path, entry_key())
    try:
        facts = json.loads(payload) if payload is not None else {}
    except ValueError:
        return {}
    return facts if isinstance(facts, dict) else {}
