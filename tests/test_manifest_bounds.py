"""A manifest's size is bounded by what export writes (issue 37, item 9): a series holds at most
MAX_SERIES_ENTRIES patches (export refuses a branch with more), and a manifest, local or named by URL,
is at most what such a series takes plus room for what people write by hand. A 23 MB manifest named by
URL took over 80 s and 1.6 GB before it was refused or read: now it is exit 2 before it is parsed."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from forkctl.manifest.loader import MAX_MANIFEST_BYTES, MAX_SERIES_ENTRIES
from forkctl.ops.export import SLUG_MAX
from tests.gitrepos import git
from tests.seriesrepo import make_series, run_json
from tests.test_manifest_url import _snapshots, run, serve
from tests.toolkit import make_toolkit


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FORKCTL_MANIFEST", raising=False)
    monkeypatch.chdir(tmp_path)


def _series_text(count: int) -> str:
    """`series:` entries as export writes them (the longest name export gives), `count` of them."""
    return "series:\n" + "".join(
        f"- file: patches/megatron-lm/{n:04d}-{'x' * SLUG_MAX}.patch\n"
        f"  provenance: {hashlib.sha1(str(n).encode()).hexdigest()}\n"
        for n in range(1, count + 1)
    )


def _with_series(manifest: Path, count: int) -> None:
    head = manifest.read_text().split("series:")[0]
    manifest.write_text(head + _series_text(count))


def test_the_limits_hold_what_export_writes() -> None:
    assert len(_series_text(MAX_SERIES_ENTRIES).encode()) < MAX_MANIFEST_BYTES
    assert MAX_MANIFEST_BYTES < 23_000_000


@pytest.mark.slow
def test_a_23_mb_manifest_named_by_url_is_refused_before_it_is_read(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    _with_series(toolkit.manifest, 160_000)
    assert toolkit.manifest.stat().st_size > 23_000_000
    url, _ = serve(toolkit.root)
    started = time.monotonic()
    code, out, _ = run("--manifest", f"{url}@main:manifest.yaml", "lint", "--json")
    assert code == 2, out[-2000:]
    error = json.loads(out)["error"]
    assert "too large" in error and f"{MAX_SERIES_ENTRIES:,} patches" in error, error
    assert time.monotonic() - started < 30
    assert _snapshots(tmp_path) == []


def test_a_series_longer_than_export_writes_is_exit_2(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    _with_series(toolkit.manifest, MAX_SERIES_ENTRIES + 1)
    assert toolkit.manifest.stat().st_size < MAX_MANIFEST_BYTES  # refused for its length, not its bytes
    code, out, _ = run("--manifest", str(toolkit.manifest), "lint", "--json")
    assert code == 2, out[-2000:]
    error = json.loads(out)["error"]
    assert f"{MAX_SERIES_ENTRIES + 1:,} patches" in error and f"{MAX_SERIES_ENTRIES:,}" in error, error


@pytest.mark.slow
def test_export_refuses_a_branch_longer_than_a_series_holds(tmp_path: Path) -> None:
    setup = make_series(tmp_path)
    dev = setup.dev.path
    stream = [f"reset refs/heads/long\nfrom {setup.base}\n"]
    for n in range(1, MAX_SERIES_ENTRIES + 2):
        data, message = f"{n}\n", f"change {n}"
        stream.append(
            f"commit refs/heads/long\ncommitter D <d@e> 1700000000 +0000\ndata {len(message)}\n{message}\n"
            f"M 100644 inline megatron/core/n.py\ndata {len(data)}\n{data}\n"
        )
    git(dev, "fast-import", "--quiet", input="".join(stream).encode())
    before = sorted(p.name for p in (setup.root / "patches").rglob("*"))
    code, data = run_json(setup, "export", "--repo", str(dev), "--from", "long")
    assert code == 2, data
    assert f"{MAX_SERIES_ENTRIES + 1:,} commits" in data["error"], data["error"]
    assert sorted(p.name for p in (setup.root / "patches").rglob("*")) == before
