"""What `make test` adds to a pytest run (`-p tests.make_test_plugin`): how the suite is spread over its
xdist workers. (Each test's own HOME and forkctl cache are tests/conftest.py's, for every pytest run.)

A plugin of its own, not a conftest hook: the GPU evidence covers the conftests of the GPU suites, and
none of this changes anything a GPU test does.

- The tests under tests/patches/ import torch and the patched megatron into their worker (seconds of
  CPU for each process that does): they are one unit of work, so one worker pays for that, once. (xdist's
  own `--dist loadgroup` cannot do it under pytest 9, whose node ids xdist 3.8 can no longer suffix.)
- Every other test is a unit of its own, handed out as a worker frees up, slow ones first: a 20 s test
  handed out last would keep one worker busy after the others are done. A test is `slow` when it is
  marked so (2.5 s or more of a `make test` run) or listed in tests/slow-tests.txt (over 0.8 s of the fast
  loop, `scripts/slow_tests.sh`); the patch tests are slow as a whole (importing torch into a worker costs
  seconds), so `make test-fast` (`-m "not slow"`) runs neither them nor any slow test.
- Text forkctl writes to a log is laid out for 120 columns, so a message that names a temp path wraps
  at a column that depends on where the checkout and the temp folder are: the run sets
  $FORKCTL_LOG_WIDTH wide, and the tests of the layout itself (tests/test_output_width.py and the few
  that read wrapped lines) set the width they check.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

PATCH_TESTS = "tests/patches/"
SLOW_LIST = Path(__file__).with_name("slow-tests.txt")


def listed_slow() -> set[str]:
    """The test ids tests/slow-tests.txt names (without parameters; `#` lines are comments); none while
    scripts/slow_tests.sh measures the loop again ($FORKCTL_MEASURE_SLOW)."""
    if os.environ.get("FORKCTL_MEASURE_SLOW") or not SLOW_LIST.is_file():
        return set()
    lines = SLOW_LIST.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


class PatchTestsTogether(LoadScopeScheduling):
    """xdist's scope scheduler (largest unit first, then collection order) with these units."""

    def _split_scope(self, nodeid: str) -> str:
        return PATCH_TESTS if nodeid.startswith(PATCH_TESTS) else nodeid


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("FORKCTL_LOG_WIDTH", "100000")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> PatchTestsTogether:
    return PatchTestsTogether(config, log)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = listed_slow()
    for item in items:
        if item.nodeid.startswith(PATCH_TESTS) or item.nodeid.split("[", 1)[0] in slow:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
