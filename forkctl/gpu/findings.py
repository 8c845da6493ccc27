"""One thing the gate found: what is wrong, how to fix it, and the evidence file it concerns."""

from __future__ import annotations

import msgspec


class Finding(msgspec.Struct):
    message: str
    hint: str | None = None
    file: str | None = None
