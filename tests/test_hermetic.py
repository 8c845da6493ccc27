"""The same inputs give the same SHAs, patch-ids and bytes whatever the user's git config and environment.

Each test runs apply, export and port twice on identical copies of one setup: once under the tests'
plain config, once under a deliberately hostile global config plus `GIT_*` variables a git hook would
set, and compares everything forkctl produced.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from forkctl.series import parse_patch
from tests.gitrepos import Repo, git
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

HOSTILE_CONFIG = """\
[user]
\tname = Test User
\temail = test@example.com
[protocol "file"]
\tallow = always
[color]
\tui = always
\tdiff = always
[diff]
\tnoprefix = true
\tmnemonicPrefix = true
\tcontext = 9
\tinterHunkContext = 7
\talgorithm = histogram
\trenames = copies
\texternal = false
\torderFile = /nonexistent/orderfile
[i18n]
\tcommitEncoding = ISO-8859-1
\tlogOutputEncoding = ISO-8859-1
[core]
\tautocrlf = true
\tabbrev = 7
\thooksPath = {hooks}
[commit]
\tgpgSign = true
[gpg]
\tprogram = /bin/false
[format]
\tsignature = hostile signature
\tsignOff = true
\tnumbered = true
\tsubjectPrefix = HOSTILE
\tuseAutoBase = true
\tthread = shallow
\theaders = X-Hostile: yes
\tto = someone@example.com
[log]
\tshowSignature = true
\tdecorate = full
[rerere]
\tenabled = true
[merge]
\tconflictStyle = zdiff3
\trenames = false
"""


def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SeriesSetup, Repo, str]:
    # Fixed dates for the repositories the test builds, so both copies have the same SHAs.
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-03-01T00:00:00+00:00")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-03-01T00:00:00+00:00")
    setup = make_series(tmp_path)
    new_base = setup.upstream.commit("upstream: unrelated", {"megatron/core/sub/c.py": "C = 4\n"})
    fork = clone(setup.upstream, tmp_path / "fork.git", bare=True)
    return setup, fork, new_base


def outputs(setup: SeriesSetup, fork: Repo, new_base: str) -> dict[str, object]:
    """Run apply, export (round trip) and port; return every SHA, patch-id and byte they produced."""
    code, applied = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, applied
    code, exported = run_json(setup, "export", "--repo", str(fork.path))
    assert code == 0, exported
    code, checked = run_json(setup, "export", "--repo", str(fork.path), "--check")
    assert code == 0, checked
    code, status = run_json(setup, "status")
    assert code == 0, status
    code, ported = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 0, ported
    files = sorted((setup.root / "patches").rglob("*.patch"))
    return {
        "applied_head": applied["head"],
        "patch_ids": [p["patch_id"] for p in status["patches"]],
        "ported_head": ported["head"],
        "ported_steps": [s["commit"] for s in ported["steps"]],
        "patch_bytes": {f.name: f.read_bytes() for f in files},
        "manifest": setup.manifest.read_text().replace(str(setup.root.parent), "<tmp>"),
        "upstream_patch_ids": [parse_patch(f).patch_id for f in files],
    }


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Turn the hostile config and environment on for the code under test (not for the setup)."""

    def enable(setup: SeriesSetup) -> None:
        hooks = tmp_path / "hooks"
        hooks.mkdir()
        marker = tmp_path / "hook-ran"
        for name in ("post-checkout", "pre-commit", "post-commit", "reference-transaction"):
            script = hooks / name
            script.write_text(f"#!/bin/sh\ntouch {marker}\n")
            script.chmod(0o755)
        config = tmp_path / "hostile.gitconfig"
        config.write_text(HOSTILE_CONFIG.format(hooks=hooks))
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
        # What a git hook's environment (or a confused shell) points at: another repository and index.
        decoy = tmp_path / "decoy"
        git(tmp_path, "init", "-q", str(decoy))
        monkeypatch.setenv("GIT_DIR", str(decoy / ".git"))
        monkeypatch.setenv("GIT_WORK_TREE", str(decoy))
        monkeypatch.setenv("GIT_INDEX_FILE", str(decoy / ".git" / "index"))
        monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'diff.context=11' 'color.ui=always'")
        monkeypatch.setenv("GIT_EXTERNAL_DIFF", "/bin/false")
        monkeypatch.setenv("GIT_DIFF_OPTS", "-u9")
        monkeypatch.setenv("GIT_AUTHOR_NAME", "Someone Else")
        monkeypatch.setenv("GIT_COMMITTER_DATE", "2001-01-01T00:00:00+00:00")

    return enable


def test_hostile_config_and_environment_change_nothing(tmp_path: Path, hostile, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    plain = outputs(*build(tmp_path / "plain", monkeypatch))
    setup, fork, new_base = build(tmp_path / "hostile", monkeypatch)
    hostile(setup)
    assert os.environ["GIT_DIR"].endswith("decoy/.git")
    under_hostile = outputs(setup, fork, new_base)
    assert under_hostile == plain
    assert not (tmp_path / "hook-ran").exists()
    assert all(b"HOSTILE" not in content for content in under_hostile["patch_bytes"].values())  # type: ignore[union-attr]


def test_absorbed_detection_holds_under_color_always(tmp_path: Path, hostile, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """color.ui=always once emptied every upstream patch-id, so an absorbed patch went unnoticed."""
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    setup = make_series(tmp_path)
    first = parse_patch(setup.patch_files[0])
    absorbed_by = setup.upstream.commit(
        "upstream takes patch 1 (#1)",
        {"megatron/core/a.py": "def a():\n    return 10\n\n\ndef helper():\n    return 'h'\n"},
    )
    fork = clone(setup.upstream, tmp_path / "fork.git", bare=True)
    hostile(setup)
    code, data = run_json(setup, "port", "--onto", absorbed_by, "--repo", str(fork.path))
    assert code == 0, data
    assert data["steps"][0]["absorbed"]["reason"] == "patch-id"
    assert data["steps"][0]["absorbed"]["upstream_commit"] == absorbed_by
    assert data["steps"][0]["absorbed"]["subject"] == first.subject


@pytest.mark.parametrize(
    "hostile_url",
    [
        "--upload-pack=touch {marker};",
        "-oProxyCommand=touch {marker}",
        "ext::sh -c touch% {marker}",
        "fd::17",
        "http://example.invalid/{marker}.git",
    ],
)
def test_a_url_is_data_never_an_option_or_a_command(tmp_path: Path, hostile_url: str) -> None:
    """A URL from a manifest or a consumer's .gitmodules reaches git only as a repository location."""
    from forkctl.errors import BadInput
    from forkctl.git import clonecache, remote
    from forkctl.git.repo import GitRepo

    marker = tmp_path / "PWNED"
    url = hostile_url.format(marker=marker)
    cache_repo = GitRepo.init_bare(tmp_path / "store.git")
    calls = [
        lambda: remote.ls_remote(url),
        lambda: clonecache.fetch_sha(cache_repo, url, "0" * 40),
        lambda: clonecache.fetch_history(cache_repo, url),
        lambda: remote.default_branch(url),
        lambda: remote.push_branch(cache_repo, url, "0" * 40, "main"),
    ]
    for call in calls:
        with pytest.raises(BadInput, match="refusing repository location"):
            call()
    assert not marker.exists()


@pytest.mark.slow
def test_a_silent_server_does_not_hang_forkctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tarpit: accepts connections and never answers. Every remote operation gives up in time."""
    import socket
    import threading
    import time

    from forkctl.errors import BadInput
    from forkctl.git import clonecache, remote
    from forkctl.git.repo import GitRepo

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept_forever() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("FORKCTL_NETWORK_TIMEOUT", "1")
    port = server.getsockname()[1]
    cache_repo = GitRepo.init_bare(tmp_path / "store.git")
    try:
        for url in (f"git://127.0.0.1:{port}/repo.git", f"ssh://127.0.0.1:{port}/repo.git"):
            for call in (
                lambda url=url: remote.ls_remote(url),
                lambda url=url: clonecache.fetch_history(cache_repo, url),
                lambda url=url: clonecache.fetch_sha(cache_repo, url, "1" * 40),
            ):
                started = time.monotonic()
                # Bounded whatever asks: the fetch itself, or (git 2.39 cannot turn lazy fetches off) a
                # read in the cache that git turned into a lazy fetch from the silent server.
                with pytest.raises(BadInput, match=r"did not (answer|finish) within 1 s"):
                    call()
                assert time.monotonic() - started < 10
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        server.close()


def test_cache_entries_differ_by_scheme_port_and_path_not_by_credentials() -> None:
    from forkctl.git import remote

    identities = {
        remote.cache_identity(u)
        for u in (
            "https://github.com/NVIDIA/Megatron-LM.git",
            "http://github.com/NVIDIA/Megatron-LM.git",
            "https://github.com:8443/NVIDIA/Megatron-LM.git",
            "https://github.com/NVIDIA/Megatron-LM-fork.git",
            "ssh://git@github.com/NVIDIA/Megatron-LM.git",
        )
    }
    assert len(identities) == 5
    assert remote.cache_identity(
        "https://user:tok@GitHub.com/NVIDIA/Megatron-LM.git/"
    ) == remote.cache_identity("https://github.com/NVIDIA/Megatron-LM")
    assert "tok" not in remote.cache_identity("https://user:tok@github.com/x/y.git")


@pytest.mark.parametrize(
    "ask",
    [
        lambda repo, spec: repo.history.count(spec),
        lambda repo, spec: repo.history.rev_list(spec),
    ],
    ids=["count", "rev_list"],
)
def test_a_revision_that_looks_like_an_option_is_a_revision(tmp_path: Path, ask) -> None:
    # `git rev-list --count --output=FILE` writes FILE (then fails): every revision forkctl hands git
    # comes after --end-of-options, so such a name can only be a bad revision.
    from forkctl.git.repo import GitRepo
    from forkctl.git.runner import GitFailed
    from tests.gitrepos import init_repo

    repo = GitRepo(init_repo(tmp_path / "repo", {"README.md": "x\n"}).path)
    marker = tmp_path / "written"
    with pytest.raises(GitFailed, match="bad revision"):
        ask(repo, f"--output={marker}")
    assert not marker.exists()
