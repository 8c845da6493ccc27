"""How soon the finer steps of a piece of work are told: silent for work that ends within a second."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable


def after(step: Callable[[str], None], seconds: float = 1.0) -> Callable[[str], None]:
    """`step` for the finer steps of a piece of work, silent until it has run `seconds` (from this
    call; `$FORKCTL_PROGRESS_AFTER` overrides it): work that ends sooner adds no line."""
    with contextlib.suppress(ValueError):
        seconds = float(os.environ.get("FORKCTL_PROGRESS_AFTER", seconds))
    start = time.monotonic()

    def tell(message: str) -> None:
        if time.monotonic() - start >= seconds:
            step(message)

    return tell
