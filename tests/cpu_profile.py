"""Where a run's CPU goes, test by test (`-p tests.cpu_profile`, with or without xdist; docs/test-time.md).

Wall time on a shared machine says as much about the other jobs as about the tests; CPU time does not.
Each test's CPU is its process's own (user + system) plus that of the children it waited for (git, the
forkctl processes it starts, pip...), from setup to teardown. The worker hands it to the controller with
the teardown report, and the run ends with the tests and the files that cost most, and the total.
"""

from __future__ import annotations

import resource
from collections import defaultdict

import pytest

KEY = "cpu_seconds"
SHOWN = 25
_started: dict[str, float] = {}


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _started[item.nodeid] = _cpu()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    if call.when == "teardown" and item.nodeid in _started:
        report = outcome.get_result()
        report.user_properties.append((KEY, _cpu() - _started.pop(item.nodeid)))


class Totals:
    """The controller's sums, from the teardown reports (its own process or the workers')."""

    def __init__(self) -> None:
        self.tests: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == KEY:
                self.tests[report.nodeid] = float(value)

    def pytest_terminal_summary(self, terminalreporter) -> None:  # type: ignore[no-untyped-def]
        if not self.tests:
            return
        files: dict[str, float] = defaultdict(float)
        for test, seconds in self.tests.items():
            files[test.split("::", 1)[0]] += seconds
        write = terminalreporter.write_line
        terminalreporter.section("CPU (user + system, children included)")
        write(f"{sum(self.tests.values()):.1f} s of CPU in {len(self.tests)} tests")
        for title, table in (("tests", self.tests), ("files", files)):
            write(f"the {SHOWN} {title} that cost most:")
            for name, seconds in sorted(table.items(), key=lambda item: -item[1])[:SHOWN]:
                write(f"{seconds:8.2f} s  {name}")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(Totals(), "forkctl-cpu-totals")
