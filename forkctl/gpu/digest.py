"""The GPU test-suite digest: which files a suite consists of, and one sha256 over their names and bytes.

A suite is (1) every file under its folder except caches; (2) each `conftest.py` and `__init__.py` in
the folders between the repository root and that folder, which pytest loads for these tests; (3) every
module of the same top-level package (e.g. `tests.*`) that those files import, transitively, such as a
shared fixture that builds the patched package. The import closure is read with `ast`: nothing runs.
Evidence records the digest, so the gate can tell when the tests changed after a run.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path, PurePosixPath

from forkctl.errors import BadInput
from forkctl.gpu.evidence import Run, SuiteRecord, repo_relative, sha256_bytes
from forkctl.manifest import Manifest

# Files under the GPU test folder that are not part of the suite: caches and editor droppings.
IGNORED_PARTS = {"__pycache__", ".pytest_cache"}
IGNORED_SUFFIXES = {".pyc", ".pyo", ".swp"}


def _suite_member(path: Path) -> bool:
    return path.is_file() and not (set(path.parts) & IGNORED_PARTS) and path.suffix not in IGNORED_SUFFIXES


def _imported_modules(source: bytes) -> set[str]:
    """Dotted names of every module a Python file imports (absolute imports only)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()  # the file's bytes still count; pytest will report the error itself
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _module_file(root: Path, dotted: str, package: str) -> Path | None:
    """The file under the tests package that `dotted` names, if it is one (e.g. tests._patched)."""
    if dotted.split(".")[0] != package:
        return None
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _require_suite_dir(manifest: Manifest, suite: str) -> Path:
    suite_dir = manifest.root / suite
    if suite_dir.is_dir():
        return suite_dir
    if suite != manifest.validation.gpu_tests:
        raise BadInput(
            f"no multi-GPU test suite at {suite}/",
            hint="restore the folder with the @pytest.mark.multigpu tests",
        )
    raise BadInput(
        f"no GPU test suite at {suite}/ (validation.gpu_tests in {manifest.path.name})",
        hint="create the folder with the @pytest.mark.gpu tests, or point validation.gpu_tests at it",
    )


def suite_files(manifest: Manifest, root: str | None = None) -> list[Path]:
    """Every file a GPU test suite consists of (see the module's docstring), sorted by relative path.

    `root` is the suite folder (default `validation.gpu_tests`; `validation.multigpu_tests` for the EP suite).
    """
    suite = root or manifest.validation.gpu_tests
    repo = manifest.root
    suite_dir = _require_suite_dir(manifest, suite)
    found = {path for path in suite_dir.rglob("*") if _suite_member(path)}
    rel_parts = PurePosixPath(suite).parts
    for depth in range(len(rel_parts)):
        folder = repo.joinpath(*rel_parts[:depth])
        found.update(p for p in (folder / "conftest.py", folder / "__init__.py") if depth and p.is_file())
    found.update(p for p in (repo / "conftest.py",) if p.is_file())
    package = rel_parts[0]
    pending = [p for p in found if p.suffix == ".py"]
    while pending:
        for dotted in _imported_modules(pending.pop().read_bytes()):
            module = _module_file(repo, dotted, package)
            if module is not None and module not in found:
                found.add(module)
                pending.append(module)
    return sorted(found, key=lambda p: repo_relative(p, repo))


def suite_digest(files: dict[str, str]) -> str:
    """sha256 over `path NUL sha256(bytes) LF` for each file in path order: names and contents count."""
    hasher = hashlib.sha256()
    for rel in sorted(files):
        hasher.update(f"{rel}\0{files[rel]}\n".encode())
    return hasher.hexdigest()


def suite_record(manifest: Manifest, root: str | None = None) -> SuiteRecord:
    """The suite at `root` (default `validation.gpu_tests`) as it is now: its files and their digest."""
    suite = root or manifest.validation.gpu_tests
    files = {
        repo_relative(path, manifest.root): sha256_bytes(path.read_bytes())
        for path in suite_files(manifest, suite)
    }
    return SuiteRecord(root=suite, digest=suite_digest(files), files=files)


class CurrentSuites:
    """The current suite of each folder a run may have covered, computed once per folder."""

    def __init__(self, manifest: Manifest) -> None:
        self._manifest = manifest
        self._by_root: dict[str, SuiteRecord] = {}

    def get(self, root: str) -> SuiteRecord:
        if root not in self._by_root:
            try:
                self._by_root[root] = suite_record(self._manifest, root)
            except BadInput:
                if root == self._manifest.validation.gpu_tests:
                    raise
                # The folder is gone: every run recorded from it is stale (all its files "were removed").
                self._by_root[root] = SuiteRecord(root=root, digest=suite_digest({}), files={})
        return self._by_root[root]

    def is_current(self, run: Run) -> bool:
        return run.gpu_tests.digest == self.get(run.gpu_tests.root).digest


def suite_changes(recorded: SuiteRecord, current: SuiteRecord) -> list[str]:
    """What differs between the suite a run recorded and the current one, one phrase per file."""
    changes = []
    for rel in sorted(set(recorded.files) | set(current.files)):
        old, new = recorded.files.get(rel), current.files.get(rel)
        if old == new:
            continue
        what = "is new" if old is None else "was removed" if new is None else "changed"
        changes.append(f"{rel} {what}")
    return changes or ["the suite's files are the same but its digest differs"]
