"""The parsed-manifest cache: a manifest that loaded cleanly once is read back without YAML, and an
entry is data, never trusted: a stale, edited or corrupted entry is ignored and the YAML path decides.

Each run is a real `forkctl` process (the cache is on disk, between processes); which modules it
imported says which path it took.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import budget
from tests.probe import imported
from tests.toolkit import Toolkit, flat, make_toolkit

ROOT = Path(__file__).resolve().parent.parent


def _forkctl(tmp_path: Path, cache: Path, *args: str) -> tuple[int, set[str], str]:
    """Exit code, the modules imported, and stdout + stderr of one `forkctl ARGS` process."""
    proc, modules = imported(tmp_path, *args, env={"FORKCTL_CACHE": str(cache)})
    return proc.returncode, modules, proc.stdout + proc.stderr


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "parsed-manifests").glob("*.json")) if cache.exists() else []


@pytest.fixture
def toolkit(tmp_path: Path) -> Toolkit:
    return make_toolkit(tmp_path)


@pytest.mark.budget(
    "a warm `lint` / `status` start (0.145 / 0.147 s, target 0.25 s; bench/startup_bench.py, 2026-12-02) "
    "reads the parsed manifest without importing PyYAML"
)
def test_a_warm_lint_and_status_do_not_import_yaml(tmp_path: Path, toolkit: Toolkit) -> None:
    cache = tmp_path / "cache"
    code, modules, out = _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "lint")
    assert code == 0, out
    assert "yaml" in modules  # the first run parses the YAML (the probe works)
    assert len(_entries(cache)) == 1
    for verb in ("lint", "status"):
        code, modules, out = _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), verb)
        assert code == 0, out
        budget.none_of(
            f"YAML modules imported by a warm {verb}", {m for m in modules if m.split(".")[0] == "yaml"}
        )


def test_an_edited_manifest_is_parsed_again(tmp_path: Path, toolkit: Toolkit) -> None:
    cache = tmp_path / "cache"
    _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "lint")
    data = toolkit.manifest_data()
    data["upstream"]["base"] = "a" * 40
    toolkit.write_manifest(data)
    code, modules, out = _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "status", "--json")
    assert code == 0, out
    assert "yaml" in modules
    assert json.loads(out)["base"] == "a" * 40
    assert len(_entries(cache)) == 2


@pytest.mark.slow
def test_an_entry_under_another_manifests_key_is_ignored(tmp_path: Path, toolkit: Toolkit) -> None:
    """An entry whose content belongs to another manifest (copied, or a stale format) is never used."""
    cache = tmp_path / "cache"
    _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "lint")
    [original] = _entries(cache)
    data = toolkit.manifest_data()
    data["upstream"]["base"] = "b" * 40
    toolkit.write_manifest(data)
    _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "lint")
    [edited] = [entry for entry in _entries(cache) if entry != original]
    edited.write_bytes(original.read_bytes())  # the old manifest's entry under the new one's name
    code, modules, out = _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "status", "--json")
    assert code == 0, out
    assert "yaml" in modules
    assert json.loads(out)["base"] == "b" * 40
    assert edited.read_bytes() != original.read_bytes()  # rewritten from the YAML


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: b"",
        lambda raw: raw[: len(raw) // 2],
        lambda raw: b"not json at all \x00\xff",
        # the key intact, a value changed: the entry's own digest no longer matches its payload
        lambda raw: raw.replace(b"farai/main", b"farai/evil"),
    ],
    ids=["empty", "truncated", "garbage", "edited-value"],
)
def test_a_corrupted_entry_is_ignored(tmp_path: Path, toolkit: Toolkit, damage) -> None:
    cache = tmp_path / "cache"
    _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "lint")
    [entry] = _entries(cache)
    good = entry.read_bytes()
    assert b"farai/main" in good
    entry.write_bytes(damage(good))
    code, modules, out = _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "status", "--json")
    assert code == 0, out
    assert "yaml" in modules
    assert json.loads(out)["base"] == toolkit.base
    assert entry.read_bytes() == good  # replaced by a sound entry


def test_a_manifest_with_an_error_is_never_cached_and_names_its_line(
    tmp_path: Path, toolkit: Toolkit
) -> None:
    cache = tmp_path / "cache"
    text = toolkit.manifest.read_text().replace("branch: farai/main", "branch: farai/main\n  brnch: x", 1)
    toolkit.manifest.write_text(text)
    line = text.splitlines().index("  brnch: x") + 1
    for _ in range(2):
        code, _modules, out = _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "lint")
        assert code == 2, out
        assert f"manifest.yaml:{line}:" in out and "brnch" in out
    assert _entries(cache) == []


def test_a_missing_patch_on_a_warm_cache_names_the_manifest_line(tmp_path: Path, toolkit: Toolkit) -> None:
    cache = tmp_path / "cache"
    _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "lint")
    toolkit.patch_files[1].unlink()
    rel = str(toolkit.patch_files[1].relative_to(toolkit.root))
    line = next(i for i, text in enumerate(toolkit.manifest.read_text().splitlines(), 1) if rel in text)
    code, _modules, out = _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "lint")
    assert code == 2, out
    assert f"manifest.yaml:{line}: patch file {rel!r} does not exist" in flat(out)


def test_an_unwritable_cache_is_not_an_error(tmp_path: Path, toolkit: Toolkit) -> None:
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache folder would be")
    code, _modules, out = _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "lint")
    assert code == 0, out
    assert "lint: ok" in out


def test_a_manifest_with_credentials_in_a_url_is_never_cached(tmp_path: Path, toolkit: Toolkit) -> None:
    cache = tmp_path / "cache"
    token = "ghp_NEVERwrittenANYWHERE0123456789"
    data = toolkit.manifest_data()
    data["fork"]["url"] = f"https://user:{token}@github.com/AlignmentResearch/Megatron-LM.git"
    toolkit.write_manifest(data)
    for _ in range(2):
        code, modules, out = _forkctl(tmp_path, cache, "--manifest", str(toolkit.manifest), "lint")
        assert code == 0, out
        assert "yaml" in modules
    assert _entries(cache) == []
    assert not any(token.encode() in path.read_bytes() for path in cache.rglob("*") if path.is_file())
