"""The fork's own files are regular files (issue 37, item 8): `publish` pushed a `.fork-base.json`
that is a symbolic link (its target rewritten as the record's text, the link kept) and check-pins
passed the merge. A fork-owned path that is a symbolic link or a submodule on the branch tip is now
refused by publish (exit 2, nothing pushed), and check-pins reports a pinned merge carrying one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chain import Chain, make_chain, url
from tests.gitrepos import git
from tests.test_publish import fork_base_record, ported, run, tip
from tests.test_publish_pins import with_files


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def _tip_with_link(chain: Chain, path: str, target: str) -> str:
    """A commit on the fork branch that makes `path` a symbolic link to `target`; pushed."""
    work = chain.fork_work()
    work.git("fetch", "-q", "origin")
    work.git("checkout", "-q", "--detach", "origin/farai/main")
    link = work.path / path
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.exists() or link.is_symlink():
        link.unlink()
    os.symlink(target, link)
    sha = work.commit(f"fork: {path} as a link", date="2026-04-01T00:00:00+00:00")
    work.git("push", "-q", "origin", "HEAD:refs/heads/farai/main")
    return sha


@pytest.mark.slow
@pytest.mark.parametrize(
    "path, target, own_paths",
    [
        (".fork-base.json", "/etc/passwd", None),
        (".fork-base.json", "megatron/core/a.py", None),
        ("README.fork.md", "../../outside.md", [".fork-base.json", "README.fork.md"]),
    ],
)
def test_publish_refuses_a_fork_owned_path_that_is_a_link(
    tmp_path: Path, path: str, target: str, own_paths: list[str] | None
) -> None:
    chain = make_chain(tmp_path)
    _tip_with_link(chain, path, target)
    before = tip(chain)
    ported(chain, **({"own_paths": own_paths} if own_paths else {}))
    for args in (("--dry-run",), ()):
        code, report = run(chain, "publish", "--no-gate", *args)
        assert code == 2, report
        assert path in report["error"] and "symbolic link" in report["error"], report["error"]
    assert tip(chain) == before  # nothing pushed


@pytest.mark.slow
def test_check_pins_reports_a_pinned_merge_carrying_a_fork_owned_link(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    record = fork_base_record(chain.upstream_tip)  # what publish would write as the link's target
    old_tip = _tip_with_link(chain, ".fork-base.json", record)
    head = ported(chain)
    git(chain.fork, "fetch", "-q", url(chain.upstream), f"{head}:refs/heads/farai/new")
    merge = with_files(chain.fork, head, {".fork-base.json": record}, [old_tip, head], mode="120000")
    git(chain.fork, "update-ref", "refs/heads/linked", merge)
    chain.pin_nemo(chain.pin_bridge(merge, url(chain.fork)))
    code, report = run(chain, "check-pins")
    assert code == 1, report["problems"]
    bad = [f for f in report["links"][0]["findings"] if f["status"] != "OK"]
    assert bad and ".fork-base.json" in bad[0]["message"] and "symbolic link" in bad[0]["message"], bad
