"""pytest as evidence needs it: the command and its run, test outcomes read from its JUnit XML, and a
run's status."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Literal

from forkctl.errors import BadInput
from forkctl.gpu import process
from forkctl.gpu.evidence import Outcome, TestOutcome
from forkctl.redact import redact

# pytest exit codes that mean the tests ran to the end (0 all passed, 1 some failed).
PYTEST_COMPLETED = {0, 1}


def parse_junit(path: Path) -> list[TestOutcome]:
    """Test outcomes from pytest's JUnit XML (written with junit_family=xunit1, which keeps `file`)."""
    try:
        tree = ElementTree.parse(path)
    except (OSError, ElementTree.ParseError) as exc:
        raise BadInput(f"{path}: cannot read pytest's JUnit report: {exc}") from None
    return [_outcome(case) for case in tree.getroot().iter("testcase")]


def run_status(tests: list[TestOutcome], pytest_exit_code: int) -> Literal["passed", "failed"]:
    """Passed only when pytest said so, at least one test passed, and none failed or errored."""
    ran = [t for t in tests if t.outcome == "passed"]
    bad = [t for t in tests if t.outcome in ("failed", "error")]
    return "passed" if pytest_exit_code == 0 and ran and not bad else "failed"


def _nodeid(case: ElementTree.Element) -> str:
    name = case.get("name", "?")
    classname = case.get("classname", "")
    file = case.get("file")
    if not file:
        return f"{classname}::{name}" if classname else name
    module = file.removesuffix(".py").replace("/", ".")
    inner = classname.removeprefix(module).lstrip(".")
    return "::".join(part for part in (file, *inner.split("."), name) if part)


def _first_line(text: str | None) -> str | None:
    if not text:
        return None
    lines = [line for line in text.strip().splitlines() if line.strip()]
    # Stored in the evidence file: no credentials from a URL a test printed.
    return redact(lines[0])[:300] if lines else None


def _outcome(case: ElementTree.Element) -> TestOutcome:
    outcome: Outcome = "passed"
    message = None
    for tag, kind in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        element = case.find(tag)
        if element is not None:
            outcome = kind  # type: ignore[assignment]
            message = _first_line(element.get("message")) or _first_line(element.text)
            break
    properties = {
        prop.get("name", ""): prop.get("value", "") for prop in case.iter("property") if prop.get("name")
    }
    return TestOutcome(
        nodeid=_nodeid(case),
        outcome=outcome,
        duration_s=round(float(case.get("time", "0") or 0), 4),
        message=message,
        properties=properties,
    )


def pytest_command(python: str, targets: list[str], junit: Path, *extra: str) -> list[str]:
    """`python -m pytest TARGETS` writing the JUnit XML `parse_junit` reads (xunit1 keeps `file`), with
    no cache folder left in the tree it runs in."""
    return [
        python,
        "-m",
        "pytest",
        *targets,
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",
        f"--junitxml={junit}",
        "-q",
        *extra,
    ]


def run_pytest(
    args: list[str], junit: Path, timeout: float, env: dict[str, str], cwd: Path, what: str, hint: str
) -> process.Finished:
    """Run a pytest command to its end, or raise BadInput saying no evidence was written: a timeout, or
    an exit other than 0 / 1 (all passed / some failed), or no JUnit XML, is no result to record."""
    finished = process.run(args, timeout=timeout, env=env, cwd=cwd)
    if finished.returncode is None:
        raise BadInput(
            f"{what} did not finish within {timeout:.0f} s; no evidence was written\n{finished.tail()}",
            hint=hint,
        )
    if finished.returncode not in PYTEST_COMPLETED or not junit.is_file():
        raise BadInput(
            f"{what} stopped with exit code {finished.returncode} (collection error, no tests, or a "
            f"crash); no evidence was written\n{finished.tail()}",
            hint="run the same pytest command by hand to see the whole output",
        )
    return finished
