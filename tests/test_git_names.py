"""The names the rest of forkctl imports from `forkctl.git` resolve, wherever inside the package they live.

`forkctl.git` loads its modules on first use (a map of name to module), and `remote` still answers for
the cache functions that moved to `store`: a name left behind by a split shows up here, not in a
command that happens to need it.
"""

from __future__ import annotations

import importlib

import pytest

import forkctl.git

# Reached as `remote.<name>` by callers written before the cache moved into `store`.
CACHE_NAMES = [
    "FETCHED_REFS",
    "Reachability",
    "cache_repo_for",
    "ensure_commits",
    "fetch_graph",
    "fetch_graph_of",
    "fetch_history",
    "fetch_objects",
    "fetch_sha",
    "history_is_current",
    "object_store",
    "reachability",
    "tip_reachability",
]


@pytest.mark.parametrize("name", forkctl.git.__all__)
def test_every_public_name_of_the_package_resolves(name: str) -> None:
    assert getattr(forkctl.git, name) is not None


@pytest.mark.parametrize("name", CACHE_NAMES)
def test_remote_still_answers_for_the_cache(name: str) -> None:
    remote = importlib.import_module("forkctl.git.remote")
    store = importlib.import_module("forkctl.git.store")
    assert getattr(remote, name) is getattr(store, name)


def test_remote_refuses_a_name_it_never_had() -> None:
    remote = importlib.import_module("forkctl.git.remote")
    with pytest.raises(AttributeError):
        _ = remote.no_such_name
