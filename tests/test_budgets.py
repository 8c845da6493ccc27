"""Budgets are marked as budgets: a test that asserts a cost through tests/budget.py carries
`@pytest.mark.budget("<the measurement it protects>")`, a marked test asserts one, and a budget exceeded
fails with words that say so and the number measured."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests import budget

TESTS = Path(__file__).resolve().parent
ASSERTIONS = {"at_most", "at_least", "none_of"}


def _text(arg: ast.expr, strings: dict[str, str]) -> str:
    """A marker argument's text: a string, or the name of a module-level string."""
    if isinstance(arg, ast.Name):
        return strings.get(arg.id, "")
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ast.unparse(arg)


def _budget_text(function: ast.FunctionDef, strings: dict[str, str]) -> str | None:
    """The text of the function's `@pytest.mark.budget(...)`, "" when it names nothing, None when unmarked."""
    for decorator in function.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        if ast.unparse(call.func if call else decorator) == "pytest.mark.budget":
            return " ".join(_text(arg, strings) for arg in (call.args if call else []))
    return None


def _calls(function: ast.FunctionDef) -> set[str]:
    """What a function calls, as written (`budget.at_most`, `_each_read_once`)."""
    return {ast.unparse(node.func) for node in ast.walk(function) if isinstance(node, ast.Call)}


def _budget_asserters(functions: list[ast.FunctionDef]) -> set[str]:
    """budget's assertions and the functions of a module that call one, directly or through another."""
    calls = {f.name: _calls(f) for f in functions}
    asserting = {f"budget.{name}" for name in ASSERTIONS}
    while more := {name for name, called in calls.items() if called & asserting} - asserting:
        asserting |= more
    return asserting


def _strings(module: ast.Module) -> dict[str, str]:
    """The module-level `NAME = "text"` assignments."""
    return {
        node.targets[0].id: node.value.value
        for node in module.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def _tests() -> list[tuple[str, str | None, bool]]:
    """(where, its budget marker's text or None, whether it asserts a budget) for every test function."""
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if path.name == Path(__file__).name:  # its checks of the helpers are no budgets
            continue
        module = ast.parse(path.read_text(), str(path))
        strings = _strings(module)
        functions = [node for node in ast.walk(module) if isinstance(node, ast.FunctionDef)]
        asserting = _budget_asserters(functions)
        for f in functions:
            if f.name.startswith("test_"):
                where = f"{path.relative_to(TESTS)}:{f.lineno} {f.name}"
                found.append((where, _budget_text(f, strings), bool(_calls(f) & asserting)))
    return found


def test_every_budget_is_marked_and_every_marked_test_holds_one() -> None:
    tests = _tests()
    unmarked = [where for where, text, asserts in tests if asserts and text is None]
    unnamed = [where for where, text, _ in tests if text is not None and len(text) < 40]
    empty = [where for where, text, asserts in tests if text is not None and not asserts]
    assert not unmarked, f"assert a budget without @pytest.mark.budget: {unmarked}"
    assert not unnamed, f"@pytest.mark.budget must name the measurement it protects: {unnamed}"
    assert not empty, f"marked budget, but no budget.at_most/at_least/none_of: {empty}"
    assert sum(text is not None for _, text, _ in tests) >= 10  # the scan sees the marked tests


def test_the_budget_marker_is_registered(pytestconfig: pytest.Config) -> None:
    assert any(line.startswith("budget(") for line in pytestconfig.getini("markers"))


@pytest.mark.parametrize(
    ("check", "words"),
    [
        (lambda: budget.at_most("git processes of a warm check", 12, 11), "measured 12, budget at most 11"),
        (lambda: budget.at_least("objects frozen", 9_000, 10_000), "measured 9000, budget at least 10000"),
        (lambda: budget.none_of("modules imported", {"yaml", "rich"}), "measured 2: rich, yaml, budget none"),
    ],
    ids=["at_most", "at_least", "none_of"],
)
def test_a_budget_exceeded_says_it_is_a_budget_and_what_was_measured(check, words: str) -> None:
    with pytest.raises(pytest.fail.Exception) as failed:
        check()
    message = str(failed.value)
    assert message.startswith("BUDGET exceeded (a performance regression, not a behaviour failure)")
    assert words in message, message


def test_a_budget_kept_passes_silently() -> None:
    budget.at_most("git processes", 11, 11)
    budget.at_least("objects frozen", 10_000, 10_000)
    budget.none_of("modules imported", set())
