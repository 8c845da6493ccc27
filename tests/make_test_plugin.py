"""What `make test` adds to a pytest run (`-p tests.make_test_plugin`): how the suite is spread over its
xdist workers. (Each test's own HOME and forkctl cache are tests/conftest.py's, for every pytest run.)

A plugin of its own, not a conftest hook: the GPU evidence covers the conftests of the GPU suites, and
none of this changes anything a GPU test does.

- The tests under tests/patches/ import torch and the patched megatron into their worker (seconds of
  CPU for each process that does): they are one unit of work, so one worker pays for that, once. (xdist's
  own `--dist loadgroup` cannot do it under pytest 9, whose node ids xdist 3.8 can no longer suffix.)
- Every other test is a unit of its own, handed out as a worker frees up, slow ones first: a 20 s test
  handed out last would keep one worker busy after the others are done.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

PATCH_TESTS = "tests/patches/"


class PatchTestsTogether(LoadScopeScheduling):
    """xdist's scope scheduler (largest unit first, then collection order) with these units."""

    def _split_scope(self, nodeid: str) -> str:
        return PATCH_TESTS if nodeid.startswith(PATCH_TESTS) else nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> PatchTestsTogether:
    return PatchTestsTogether(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
