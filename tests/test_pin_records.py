"""Every record of a pin (issue 32, item 1): a consumer that keeps its pin twice, the gitlink and a file
(Megatron-Bridge's `.main.commit`, the full SHA and a newline), gets both moved in one bump commit;
check-pins reports a record that disagrees with its gitlink (or is missing or malformed) with a fix that
works as printed; describe shows the records; the manifest says which files and how they are written.

Real repositories (tests/chain.py), the real CLI in process, a private cache per test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from forkctl.manifest import load
from tests.chain import BRIDGE_GITLINK, Chain, url, use_private_cache
from tests.gitrepos import git
from tests.test_manifest import VALID, _lint, _write
from tests.toolkit import flat

MAIN_COMMIT = ".main.commit"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


def _name_pin_files(chain: Chain, files: list[dict[str, str]] | None = None) -> None:
    """The toolkit's manifest says the Bridge also records its pin in `.main.commit`."""
    data = yaml.safe_load(chain.manifest.read_text())
    data["consumers"][0]["pin_files"] = files or [{"path": MAIN_COMMIT, "format": "sha-line"}]
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))


def _bridge_recording(chain: Chain, content: str | None, pin: str | None = None) -> str:
    """A Bridge farai/main commit whose gitlink pins `pin` (default: the plain base, .gitmodules as
    upstream Bridge has it; else `.gitmodules` names the fork) and whose `.main.commit` holds `content`."""
    files = {MAIN_COMMIT: content} if content is not None else None
    if pin is None:
        return chain.pin_bridge(chain.base, files=files)
    return chain.pin_bridge(pin, url(chain.fork), files=files)


def _gitlink_only_bump(repo: Path, parent: str, new: str) -> str:
    """The commit bump-bridge made before pin records: the gitlink moved, nothing else."""
    index = repo / "old-bump-index"
    env = {"GIT_INDEX_FILE": str(index), "PATH": "/usr/bin:/bin"}
    git(repo, "read-tree", parent, env=env)
    git(repo, "update-index", "--cacheinfo", f"160000,{new},{BRIDGE_GITLINK}", env=env)
    tree = git(repo, "write-tree", "--missing-ok", env=env)
    index.unlink()
    return git(repo, "commit-tree", tree, "-p", parent, "-m", "old bump", env={**env, **_IDENTITY})


_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t.invalid",
}


# --- the manifest ----------------------------------------------------------------------------------

PIN_FILES = "    gitlink: 3rdparty/Megatron-LM\n    pin_files:\n"


def test_pin_files_load_with_their_format_and_default_to_none(tmp_path: Path, repo_root: Path) -> None:
    text = VALID.replace(
        "    gitlink: 3rdparty/Megatron-LM\n", PIN_FILES + "      - {path: .main.commit, format: sha-line}\n"
    )
    consumer = load(_write(tmp_path, text)).consumers[0]
    assert [(f.path, f.format) for f in consumer.pin_files] == [(".main.commit", "sha-line")]
    plain = load(_write(tmp_path / "old", VALID)).consumers[0]
    assert plain.pin_files == []  # a manifest from before pin_files is still valid: no records
    real = load(repo_root / "manifest.yaml").consumers
    assert [(f.path, f.format) for f in real[0].pin_files] == [(".main.commit", "sha-line")]
    assert real[1].pin_files == []


@pytest.mark.parametrize(
    ("entries", "line", "expected"),
    [
        ("      - {path: .main.commit, format: sha}\n", 20, "'sha-line'"),
        ("      - {path: .main.commit}\n", 20, "missing key"),
        ("      - {path: /etc/passwd, format: sha-line}\n", 20, "is absolute"),
        ("      - {path: ../x.commit, format: sha-line}\n", 20, "contains '..'"),
        ("      - {path: 3rdparty/Megatron-LM, format: sha-line}\n", 19, "is the gitlink itself"),
        ("      - {path: 3rdparty/Megatron-LM/x, format: sha-line}\n", 19, "inside the submodule"),
        ("      - {path: .gitmodules, format: sha-line}\n", 20, ".gitmodules"),
        (
            "      - {path: .main.commit, format: sha-line}\n      - {path: .main.commit, format: sha-line}\n",
            19,
            "listed twice",
        ),
    ],
    ids=[
        "unknown-format",
        "no-format",
        "absolute",
        "dotdot",
        "the-gitlink",
        "in-submodule",
        "gitmodules",
        "twice",
    ],
)
def test_bad_pin_files_name_the_line_and_exit_2(
    tmp_path: Path, entries: str, line: int, expected: str
) -> None:
    path = _write(tmp_path, VALID.replace("    gitlink: 3rdparty/Megatron-LM\n", PIN_FILES + entries))
    code, output = _lint(path)
    assert code == 2, output
    assert expected in flat(output)
    assert f"{path}:{line}:" in flat(output) and "pin_files" in flat(output)
