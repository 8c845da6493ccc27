"""What a cache repository answered before about objects that cannot change, kept for the next run.

A commit's tree entries, the sections of a `.gitmodules` blob, "A is an ancestor of B" and the counts of
`base...commit` in a commit graph are functions of object names alone: asked once, they hold for every
later run. Each cache repository (never a user's clone) keeps them in one file in its git dir, read at
most once by the repository object that uses them (`GitRepo.cache_at`) and written once, atomically,
when that object is dropped (or at exit). A file that does not parse, has another schema or whose
digest does not match its facts is ignored and rewritten: a miss, never a wrong answer. Only exact
answers are recorded (the callers say which).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forkctl.digests import sha256_hex
from forkctl.files import atomic_write_text

SCHEMA = 1  # raise it when what a key means changes: files of another schema are ignored
FILE = "forkctl-facts.json"
MAX_FACTS = 4096  # the oldest are dropped beyond this: a cache checked for years stays small


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
        document = {"schema": SCHEMA, "digest": _digest(facts), "facts": facts}
        try:
            atomic_write_text(self.path, json.dumps(document, separators=(",", ":")))
        except OSError:
            return  # a read-only cache answers as before, it just does not remember
        self._dirty = False

    def _loaded(self) -> dict[str, Any]:
        if self._facts is None:
            self._facts = _read(self.path)
        return self._facts


def _digest(facts: dict[str, Any]) -> str:
    return sha256_hex(json.dumps(facts, sort_keys=True, separators=(",", ":")).encode())


def _read(path: Path) -> dict[str, Any]:
    """The facts of the file at `path`; {} when it is absent, damaged or of another schema."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        return {}
    facts = document.get("facts")
    if not isinstance(facts, dict) or document.get("digest") != _digest(facts):
        return {}
    return facts
