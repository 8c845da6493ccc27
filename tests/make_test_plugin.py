"""What `make test` adds to a pytest run (`-p tests.make_test_plugin`): how the suite is spread over its
xdist workers. (Each test's own HOME and forkctl cache are tests/conftest.py's, for every pytest run.)

A plugin of its own, not a conftest hook: the GPU evidence covers the conftests of the GPU suites, and
none of this changes anything a GPU test does.

- The tests under tests/patches/ import torch and the patched megatron into their worker (seconds of
  CPU for each process that does): they are one unit of work, so one worker pays for that, once. (xdist's
  own `--dist loadgroup` cannot do it under pytest 9, whose node ids xdist 3.8 can no longer suffix.)
- Every other test is a unit of its own, handed out as a worker frees up, the longest first: a 90 s
  test handed out late keeps one worker busy after the others are done (a run that ended on the Slurm
  time-limit test, started 150 s in, took 240 s where its CPU needed 150). How long a test takes is what
  the last runs measured (pytest's cache, `forkctl/seconds`, written by every run that has the cache);
  where nothing was measured yet (a fresh checkout, CI), slow tests first: those marked slow in their
  file (2.5 s or more of a `make test` run; `slow(seconds=N)` where a test waits that long, longest
  first), then those tests/slow-tests.txt lists (over 0.8 s of the fast loop, `scripts/slow_tests.sh`). The patch tests are slow as a whole (importing torch into a worker costs
  seconds), so `make test-fast` (`-m "not slow"`) runs neither them nor any slow test.
- Text forkctl writes to a log is laid out for 120 columns, so a message that names a temp path wraps
  at a column that depends on where the checkout and the temp folder are: the run sets
  $FORKCTL_LOG_WIDTH wide, and the tests of the layout itself (tests/test_output_width.py and the few
  that read wrapped lines) set the width they check.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

PATCH_TESTS = "tests/patches/"
SLOW_LIST = Path(__file__).with_name("slow-tests.txt")
SECONDS_KEY = "forkctl/seconds"  # pytest's cache: node id -> seconds of its last run (all phases)


def listed_slow() -> set[str]:
    """The test ids tests/slow-tests.txt names (without parameters; `#` lines are comments); none while
    scripts/slow_tests.sh measures the loop again ($FORKCTL_MEASURE_SLOW)."""
    if os.environ.get("FORKCTL_MEASURE_SLOW") or not SLOW_LIST.is_file():
        return set()
    lines = SLOW_LIST.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def recorded_seconds(config: pytest.Config) -> dict[str, float]:
    """What the last runs measured, per node id (empty without pytest's cache or a run before)."""
    cache = getattr(config, "cache", None)
    found = cache.get(SECONDS_KEY, {}) if cache is not None else {}
    return found if isinstance(found, dict) else {}


def longest_first(
    workqueue: OrderedDict[str, dict[str, bool]], seconds: dict[str, float]
) -> OrderedDict[str, dict[str, bool]]:
    """The work units by the seconds their tests took last time, longest first; the order they came in
    where that is the same (nothing measured: the slow tests' order of collection)."""
    units = sorted(workqueue.items(), key=lambda unit: -sum(seconds.get(test, 0.0) for test in unit[1]))
    return OrderedDict(units)


class PatchTestsTogether(LoadScopeScheduling):
    """xdist's scope scheduler with these units, handed out longest first."""

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        super().__init__(config, log)
        self.seconds = recorded_seconds(config)
        self.ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return PATCH_TESTS if nodeid.startswith(PATCH_TESTS) else nodeid

    def _assign_work_unit(self, node: object) -> None:
        if not self.ordered:  # the first hand-out: the queue is complete (xdist's schedule() built it)
            self.workqueue = longest_first(self.workqueue, self.seconds)
            self.ordered = True
        super()._assign_work_unit(node)


class Timings:
    """The controller's record of each test's seconds (setup + call + teardown), into pytest's cache at
    the end: the next run's order. A run of some tests updates theirs and keeps the others'."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(session.config, "cache", None)
        if cache is not None and self.seconds:
            kept = recorded_seconds(session.config)
            kept.update({test: round(took, 2) for test, took in self.seconds.items()})
            cache.set(SECONDS_KEY, kept)


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("FORKCTL_LOG_WIDTH", "100000")
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) sees every report
        config.pluginmanager.register(Timings(), "forkctl-timings")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> PatchTestsTogether:
    return PatchTestsTogether(config, log)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = listed_slow()
    marked = {item.nodeid: _declared_seconds(item) for item in items if item.get_closest_marker("slow")}
    for item in items:
        if item.nodeid.startswith(PATCH_TESTS) or item.nodeid.split("[", 1)[0] in slow:
            item.add_marker(pytest.mark.slow)
    # Marked in their file (the longest declared first), then listed or patch tests, then the rest: each
    # group otherwise in collection order.
    items.sort(key=lambda item: (0, -marked[item.nodeid]) if item.nodeid in marked else (_group(item), 0.0))


def _declared_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("slow")
    return float(marker.kwargs.get("seconds", 0)) if marker is not None else 0.0


def _group(item: pytest.Item) -> int:
    return 1 if item.get_closest_marker("slow") else 2
