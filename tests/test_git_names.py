"""The names the rest of forkctl imports from `forkctl.git` resolve, wherever inside the package they live.

`forkctl.git` loads its modules on first use (a map of name to module): a name left behind by a split
shows up here, not in a command that happens to need it.
"""

from __future__ import annotations

import importlib

import pytest

import forkctl.git


@pytest.mark.parametrize("name", forkctl.git.__all__)
def test_every_public_name_of_the_package_resolves(name: str) -> None:
    assert getattr(forkctl.git, name) is not None


def test_the_cache_lives_in_store_alone() -> None:
    remote = importlib.import_module("forkctl.git.remote")
    store = importlib.import_module("forkctl.git.store")
    assert callable(store.cache_repo_for)
    with pytest.raises(AttributeError):
        _ = remote.cache_repo_for  # moved, with no alias left behind
