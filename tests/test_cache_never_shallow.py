"""A cache repository that holds full history is never made shallow again by a one-commit fetch.

A `--depth=1` fetch records the commit it brings as shallow (grafted): until the next history fetch
unshallows the cache, every ancestry answer through that commit is cut there, for this process and for
any other reading the same cache at that moment. Concurrent publishes into one fresh cache refused with
a false "foreign" that way (tests/test_concurrent_publish.py: 1-3 failing runs in 6 before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forkctl.git import clonecache, locations
from tests.gitrepos import git, init_repo


def test_a_one_commit_fetch_into_a_cache_with_history_grafts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    upstream = init_repo(tmp_path / "upstream", {"a.txt": "1\n"})
    upstream.commit("second", {"a.txt": "2\n"})
    url = (tmp_path / "upstream").as_uri()
    with locations.named_by_user([url]):  # the test is the user who names this local repository
        cache = clonecache.cache_repo_for(url)
        clonecache.fetch_history(cache, url)
        assert not (cache.git_dir / "shallow").exists()
        newer = upstream.commit("third", {"a.txt": "3\n"})  # not in the cache yet
        parent = git(tmp_path / "upstream", "rev-parse", f"{newer}~1")
        assert clonecache.fetch_sha_why(cache, url, newer) is None  # depth 1 by default
        assert not (cache.git_dir / "shallow").exists()
        assert cache.git(["rev-list", "--parents", "-1", newer]).text.split() == [newer, parent]
