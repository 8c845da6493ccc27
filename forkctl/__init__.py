"""forkctl: keep a patch series alive on a moving upstream and the consumers that pin it."""

from __future__ import annotations

__version__ = "0.1.0"
