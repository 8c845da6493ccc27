"""How `make test` spreads the suite over its xdist workers (loaded there with `-p tests.xdist_plan`).

A plugin of its own, not a conftest hook: the GPU evidence covers the conftests of the GPU suites, and
how the CPU run is scheduled changes nothing a GPU test does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PATCH_TESTS = Path(__file__).resolve().parent / "patches"


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the xdist_group marks (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """- The tests under tests/patches/ import torch and the patched megatron into their worker (seconds
      of CPU for each process that does): one group, so that one worker pays for it, once.
    - Tests marked slow come first: xdist hands the rest out one at a time in this order, and a 20 s
      test handed out last would keep one worker busy after the others are done."""
    for item in items:
        if Path(str(item.path)).is_relative_to(PATCH_TESTS):
            item.add_marker(pytest.mark.xdist_group("megatron"))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
