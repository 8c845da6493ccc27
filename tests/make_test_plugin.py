"""What `make test` adds to a pytest run (`-p tests.make_test_plugin`): a private forkctl cache, and how the
suite is spread over its xdist workers.

A plugin of its own, not a conftest hook: the GPU evidence covers the conftests of the GPU suites, and
neither changes anything a GPU test does.

- Every forkctl command keeps what it learned (parsed manifests, facts about patches, listings) under
  $FORKCTL_CACHE, by default the user's ~/.cache/forkctl: the session gets a folder of its own, so the
  suite writes nothing there. Tests that need a cache of their own still set one.
- The tests under tests/patches/ import torch and the patched megatron into their worker (seconds of
  CPU for each process that does): they are one unit of work, so one worker pays for that, once. (xdist's
  own `--dist loadgroup` cannot do it under pytest 9, whose node ids xdist 3.8 can no longer suffix.)
- Every other test is a unit of its own, handed out as a worker frees up, slow ones first: a 20 s test
  handed out last would keep one worker busy after the others are done.
"""

from __future__ import annotations

import os

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


@pytest.fixture(autouse=True, scope="session")
def _private_forkctl_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["FORKCTL_CACHE"] = str(tmp_path_factory.mktemp("forkctl-cache"))
