"""Callers import what they use from the module of `forkctl.git` that defines it: the package itself
exports nothing (no second list of names to keep in step), and the cache lives in `store` alone."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import forkctl.git

ROOT = Path(__file__).resolve().parents[1]
GIT_MODULES = {path.stem for path in (ROOT / "forkctl" / "git").glob("*.py")} - {"__init__"}


def test_the_package_exports_no_names() -> None:
    public = {name for name in vars(forkctl.git) if not name.startswith("_")} - GIT_MODULES
    assert public == set()


def test_every_import_from_the_package_names_one_of_its_modules() -> None:
    """`from forkctl.git import X` must name a module: a name is imported from where it is defined."""
    wrong = []
    for path in [*ROOT.glob("forkctl/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("bench/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "forkctl.git":
                wrong += [
                    f"{path.relative_to(ROOT)}: {a.name}" for a in node.names if a.name not in GIT_MODULES
                ]
    assert wrong == []


def test_the_cache_lives_in_clonecache_alone() -> None:
    remote = importlib.import_module("forkctl.git.remote")
    clonecache = importlib.import_module("forkctl.git.clonecache")
    assert callable(clonecache.cache_repo_for)
    with pytest.raises(AttributeError):
        _ = remote.cache_repo_for  # moved, with no alias left behind
