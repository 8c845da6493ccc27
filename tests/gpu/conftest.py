from __future__ import annotations

import pytest

from tests import _patched


@pytest.fixture(scope="session")
def megatron_tree(tmp_path_factory: pytest.TempPathFactory):
    """A patched copy of the installed megatron package, first on sys.path.

    Nothing in these tests imports megatron at module level, so this runs before the first import.
    """
    tree = _patched.patched_tree(tmp_path_factory)
    _patched.activate(tree)
    import megatron.core

    assert str(megatron.core.__file__).startswith(str(tree.resolve()))
    return tree


@pytest.fixture(scope="session")
def plain_megatron_tree(tmp_path_factory: pytest.TempPathFactory):
    """An unpatched copy of the installed megatron package (for 'the old code fails' checks)."""
    return _patched.plain_tree(tmp_path_factory)
