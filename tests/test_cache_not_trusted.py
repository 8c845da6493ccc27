"""The cache never decides trust (issue 37): a CI cache is restored from places a pull request can
write, so what a decision rests on (the signers, the manifest, the pins) is read from its source or
checked against it, never taken from a cache entry alone.

- a parsed-manifest entry is keyed by the manifest's bytes, and anyone can compute that key: one that
  adds a signer must not make the gate accept evidence signed by that key;
- a remote manifest's snapshot is a copy of one commit's files: one edited in the cache must not be what
  check-pins checks the chain against.
Each run is a `forkctl` process, as a CI job runs it, on a cache the test wrote as an attacker would.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import yaml

from forkctl import contentcache
from forkctl.gpu import signing
from forkctl.manifest.loader import parse_manifest
from tests.chain import make_fixed_chain
from tests.test_evidence import gpu_toolkit, record
from tests.test_manifest_url import serve
from tests.test_signing import keypair, require_signers


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FORKCTL_MANIFEST", raising=False)


def forkctl(cwd: Path, *args: str) -> tuple[int, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTEST_"))}
    result = subprocess.run(
        [sys.executable, "-m", "forkctl", *args, "--json"], cwd=cwd, env=env, capture_output=True, text=True
    )
    try:
        return result.returncode, json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"exit {result.returncode}: {result.stdout}{result.stderr}") from None


def forge_parsed_manifest(manifest: Path, **validation: object) -> None:
    """What an attacker with write access to the cache writes: the entry for these exact bytes."""
    data = manifest.read_bytes()
    model = parse_manifest(data.decode(), manifest)
    model = msgspec.structs.replace(model, validation=msgspec.structs.replace(model.validation, **validation))
    contentcache.write("parsed-manifests", contentcache.key_of("manifest", data), msgspec.json.encode(model))


def test_a_forged_parsed_manifest_entry_adds_no_signer_the_gate_accepts(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path / "t")
    _, trusted = keypair(tmp_path, "h200-runner")
    forged_key, forged = keypair(tmp_path, "attacker")
    require_signers(toolkit, trusted)
    signing.sign(record(toolkit), forged_key)
    code, payload = forkctl(toolkit.root, "gate")
    assert code == 1, payload  # the manifest's own signers: refused
    forge_parsed_manifest(toolkit.manifest, allowed_signers=[trusted, forged])
    code, payload = forkctl(toolkit.root, "gate")
    assert code == 1, payload
    assert payload.get("signed_by") != "attacker@gpu-runners"


def _snapshot_manifest(cache: Path) -> Path:
    [found] = [p for p in (cache / "manifests").glob("*/*/**/manifest.yaml")]
    return found


def test_an_edited_remote_manifest_snapshot_does_not_pass_a_pin_of_plain_upstream(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    url, _ = serve(chain.toolkit)
    spec = f"{url}@main:{chain.manifest.relative_to(chain.toolkit)}"
    chain.pin_bridge(chain.base)  # the Bridge pins plain upstream: no patch
    code, before = forkctl(tmp_path, "--manifest", spec, "check-pins")
    assert code == 1, before
    assert any("pins the plain upstream base" in p["message"] for p in before["problems"]), before
    snapshot = _snapshot_manifest(tmp_path / "cache")
    data = yaml.safe_load(snapshot.read_text())
    data["series"] = []  # with no patch, the fork head would be the plain base
    os.chmod(snapshot, stat.S_IWUSR | stat.S_IRUSR)
    snapshot.write_text(yaml.safe_dump(data, sort_keys=False))
    code, after = forkctl(tmp_path, "--manifest", spec, "check-pins")
    assert code == 1, after
    assert after["problems"] == before["problems"]
    assert snapshot.read_bytes() == chain.manifest.read_bytes()  # the snapshot was made again


def test_a_file_added_to_a_remote_manifest_snapshot_is_not_read(tmp_path: Path) -> None:
    """A file the commit lacks (forged evidence, an extra patch) is not part of the snapshot."""
    chain = make_fixed_chain(tmp_path)
    url, _ = serve(chain.toolkit)
    spec = f"{url}@main:{chain.manifest.relative_to(chain.toolkit)}"
    assert forkctl(tmp_path, "--manifest", spec, "check-pins")[0] == 0
    folder = _snapshot_manifest(tmp_path / "cache").parent
    os.chmod(folder, 0o755)
    (folder / "planted.txt").write_text("not in the commit\n")
    assert forkctl(tmp_path, "--manifest", spec, "check-pins")[0] == 0
    assert not (folder / "planted.txt").exists()


def test_a_recorded_branch_answer_does_not_decide_a_check_offline(tmp_path: Path) -> None:
    """Offline, a branch named in the spec resolves to what the cache's listing recorded: good enough
    to show the series (lint), never to decide a check; a full SHA still works offline."""
    chain = make_fixed_chain(tmp_path)
    url, sha = serve(chain.toolkit)
    path = chain.manifest.relative_to(chain.toolkit)
    assert forkctl(tmp_path, "--manifest", f"{url}@main:{path}", "check-pins")[0] == 0
    os.rename(chain.toolkit / ".git", chain.toolkit / "gone.git")  # the toolkit's server is gone
    code, payload = forkctl(tmp_path, "--manifest", f"{url}@main:{path}", "check-pins")
    assert code == 2, payload
    assert "does not decide" in payload["error"] and sha in payload["hint"]
    assert forkctl(tmp_path, "--manifest", f"{url}@main:{path}", "lint")[0] == 0
    assert forkctl(tmp_path, "--manifest", f"{url}@{sha}:{path}", "check-pins")[0] == 0
