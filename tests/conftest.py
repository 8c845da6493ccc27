from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_git(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every git call in the tests sees the same identity and no user or system config."""
    home = tmp_path_factory.mktemp("home")
    config = home / ".gitconfig"
    config.write_text(
        "[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
        '[protocol "file"]\n\tallow = always\n'
    )
    os.environ["GIT_CONFIG_GLOBAL"] = str(config)
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    os.environ.pop("GIT_DIR", None)
    os.environ.pop("GIT_INDEX_FILE", None)


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
