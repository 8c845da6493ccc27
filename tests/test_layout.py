"""The layout is the architecture: sizes a reader can hold, and imports that only run downward.

Read from the source with `ast` (nothing is imported), so a violation names the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "forkctl"

MODULE_MAX_LINES = 400
CLASS_MAX_LINES = 150
FUNCTION_MAX_LINES = 60

# Where the house chose otherwise, and why (docs/architecture.md repeats these). Each entry must still
# be over its limit: an entry that no longer is fails the test, so the list cannot go stale.
ALLOWED_OVER: dict[str, str] = {}

# The presentation and the entry points: the core may not import them.
PRESENTATION = ("forkctl.report", "forkctl.commands", "forkctl.cli", "forkctl.__main__")
# Allowed exceptions to the layering rule, with the reason (none today).
ALLOWED_UPWARD: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _body_lines(node: ast.AST) -> int:
    # A docstring explains; it is not size. Decorators are not counted either (lineno is the def line).
    start = node.lineno
    body = getattr(node, "body", [])
    first = body[0] if body else None
    has_docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if has_docstring and isinstance(first.value.value, str) and len(body) > 1:
        start = body[1].lineno
    return node.end_lineno - start + 1


def _oversized() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in _modules():
        name = _name(path)
        source = path.read_text()
        lines = len(source.splitlines())
        if lines > MODULE_MAX_LINES:
            found[name] = lines
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                limit = CLASS_MAX_LINES
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                limit = FUNCTION_MAX_LINES
            else:
                continue
            size = _body_lines(node)
            if size > limit:
                found[f"{name}:{node.lineno}:{node.name}"] = size
    return found


def _strip_line(key: str) -> str:
    # Allow-list keys leave the line number out, so an edit above a function does not break them.
    parts = key.split(":")
    return f"{parts[0]}:{parts[2]}" if len(parts) == 3 else key


def test_no_module_class_or_function_is_over_its_size() -> None:
    oversized = {_strip_line(key): size for key, size in _oversized().items()}
    unexplained = {key: size for key, size in oversized.items() if key not in ALLOWED_OVER}
    assert not unexplained, (
        f"over the limits (module {MODULE_MAX_LINES}, class {CLASS_MAX_LINES}, function "
        f"{FUNCTION_MAX_LINES} lines): {unexplained}"
    )
    stale = sorted(set(ALLOWED_OVER) - set(oversized))
    assert not stale, f"allowed as oversized but no longer are: {stale}"


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, node.module)]
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def _is_presentation(name: str) -> bool:
    return any(name == top or name.startswith(top + ".") for top in PRESENTATION)


def test_the_core_imports_nothing_from_the_presentation() -> None:
    upward = []
    for path in _modules():
        name = _name(path)
        if _is_presentation(name) or name in ALLOWED_UPWARD:
            continue
        upward += [
            f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
            for line, target in _imports(path)
            if _is_presentation(target)
        ]
    assert not upward, "the core imports the presentation:\n" + "\n".join(upward)


@pytest.mark.parametrize("package", ["git", "ops", "chain", "gpu", "demo", "manifest", "cli", "commands"])
def test_every_package_of_the_picture_exists(package: str) -> None:
    assert (PACKAGE / package / "__init__.py").is_file(), f"forkctl/{package}/ is part of the layout"


def test_no_command_imports_another_command() -> None:
    crossings = []
    for path in sorted((PACKAGE / "commands").glob("*.py")):
        own = _name(path)
        crossings += [
            f"{own}:{line} imports {target}"
            for line, target in _imports(path)
            if target.startswith("forkctl.commands.") and not target.startswith(own)
        ]
    assert not crossings, crossings


@pytest.mark.parametrize("package", ["chain", "demo", "report"])
def test_no_two_classes_of_a_package_share_a_name(package: str) -> None:
    # Two `Finding` classes in one package once made a reader (and a grep) take one for the other.
    seen: dict[str, str] = {}
    clashes = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                if node.name in seen:
                    clashes.append(f"{node.name}: {seen[node.name]} and {where}")
                seen.setdefault(node.name, where)
    assert not clashes, clashes


def _class_names(paths: list[Path]) -> dict[str, str]:
    return {
        node.name: f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in paths
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
    }


def test_no_class_takes_the_name_of_one_in_the_layers_below_everything() -> None:
    # ops/replay.Commits beside git/commits.Commits once made a reader take one for the other: the git
    # layer's and the shared modules' class names are not used again above them.
    below = sorted((PACKAGE / "git").rglob("*.py")) + sorted(PACKAGE.glob("*.py"))
    taken = _class_names(below)
    above = [path for path in _modules() if path not in below]
    clashes = [
        f"{name}: {taken[name]} and {where}" for name, where in _class_names(above).items() if name in taken
    ]
    assert not clashes, clashes


def test_every_module_is_imported_under_one_name() -> None:
    # `patch_dir` was `treepatch` in gpu/, `replay` was `build` in two places: a reader grepping for
    # `patch_dir.plan` or `replay.build_series` missed them. An alias is fine where it is the only one.
    local_names: dict[str, dict[str, str]] = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("forkctl"):
                for alias in node.names:
                    where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                    local_names.setdefault(f"{node.module}.{alias.name}", {})[alias.asname or alias.name] = (
                        where
                    )
    several = {module: names for module, names in local_names.items() if len(names) > 1}
    assert not several, several
