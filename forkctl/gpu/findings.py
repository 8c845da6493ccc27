"""One thing the gate found: what is wrong, how to fix it, the evidence file and, when it concerns one
environment only, that environment's tag."""

from __future__ import annotations

import msgspec


class Finding(msgspec.Struct):
    message: str
    hint: str | None = None
    file: str | None = None
    env: str | None = None  # the one environment it concerns; None: the evidence as a whole
