"""Ctrl-C that reaches what a test starts, however the suite itself was started.

A shell starts a background job (`make test &`, `( .ci/run & )`, nohup) with SIGINT ignored, and an
ignored signal stays ignored across exec: forkctl then ignores Ctrl-C as any background job does, and a
test of what Ctrl-C does would fail. While a test that uses `sigint_delivered` runs, this process has a
SIGINT handler instead, which exec resets to the default, so the processes the test starts take Ctrl-C as a
terminal's foreground job does. (Not in conftest.py: the GPU suite's digest covers it.)
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


@pytest.fixture
def sigint_delivered() -> Iterator[None]:
    before = signal.getsignal(signal.SIGINT)
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
