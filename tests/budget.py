"""Budgets: assertions on what a run costs (git processes, imported modules, file reads, objects received,
seconds), not on what it answers.

A test that holds one is marked `@pytest.mark.budget("<the measurement it protects>")`, the text naming
the figure the budget keeps (what was measured, where and when), and states each budget through the
functions below, so that a failure says it is a budget exceeded (a performance regression) and the number
measured, not a wrong answer. Behaviour in the same test stays a plain `assert`. `tests/test_budgets.py`
holds the two together: a budget assertion only in a marked test, a marked test only with one.
"""

from __future__ import annotations

from collections.abc import Collection

import pytest

KIND = "BUDGET exceeded (a performance regression, not a behaviour failure)"


def _fail(what: str, measured: str, allowed: str, detail: object) -> None:
    extra = f"\n{detail}" if detail not in (None, "") else ""
    pytest.fail(
        f"{KIND}: {what}: measured {measured}, budget {allowed}. The test's @pytest.mark.budget names the "
        f"measurement this budget protects; if the new cost is wanted, re-measure and say so there.{extra}"
    )


def at_most(what: str, measured: float, most: float, detail: object = "") -> None:
    """`what` (a count or seconds) must not exceed `most`."""
    if measured > most:
        _fail(what, f"{measured:g}", f"at most {most:g}", detail)


def at_least(what: str, measured: float, least: float, detail: object = "") -> None:
    """`what` must reach `least` (e.g. the objects frozen before the interpreter's last collection)."""
    if measured < least:
        _fail(what, f"{measured:g}", f"at least {least:g}", detail)


def none_of(what: str, found: Collection[str]) -> None:
    """None of `what` may be there (modules imported, git subcommands run, objects received twice)."""
    if found:
        _fail(what, f"{len(found)}: {', '.join(sorted(map(str, found)))}", "none", "")
