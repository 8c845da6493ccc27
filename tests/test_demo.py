"""forkctl demo against the real manifest and the installed megatron-core: mismatch, bump, pass."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.demo.package import find_installed
from forkctl.errors import BadInput
from forkctl.manifest import load
from tests.bridgerule import main_commit_matches_submodule
from tests.gitrepos import git, init_repo

REPO_MANIFEST = Path(__file__).resolve().parent.parent / "manifest.yaml"


def _megatron_installed() -> bool:
    try:
        find_installed(load(REPO_MANIFEST).package)
    except BadInput:
        return False
    return True


pytestmark = pytest.mark.skipif(not _megatron_installed(), reason="megatron-core is not installed")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The demo must use its own cache: point the user's at a folder that must stay empty.
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "user-cache"))
    monkeypatch.chdir(tmp_path)


def demo(manifest: Path, *args: str) -> tuple[int, dict, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(manifest), "demo", *args, "--json"])
    return result.exit_code, json.loads(result.stdout), result.stderr


@pytest.mark.slow
def test_demo_finds_the_unpatched_base_bumps_and_passes(tmp_path: Path, repo_root: Path) -> None:
    keep = tmp_path / "demo"
    code, report, progress = demo(repo_root / "manifest.yaml", "--keep-in", str(keep))
    assert code == 0, report
    assert report["ok"] is True
    # The demo used its own cache (asked before this test's own `load` below writes to the user's).
    assert not (tmp_path / "user-cache").exists()
    assert "step 1: check-pins" in progress and "step 3: check-pins" in progress
    # The base is the installed package's megatron/ tree, the fork head the real series on it.
    package = find_installed(load(repo_root / "manifest.yaml").package)
    assert report["package"] == {
        "name": "megatron",
        "distribution": "megatron-core",
        "version": package.version,
        "path": str(package.folder),
    }
    upstream = keep / "upstream.git"
    assert git(upstream, "rev-parse", "main") == report["base"]
    recompute = (package.folder / "core" / "recompute.py").read_text()
    assert git(upstream, "show", f"{report['base']}:megatron/core/recompute.py") + "\n" == recompute
    assert git(keep / "fork.git", "rev-parse", "farai/main") == report["fork_head"]
    assert git(keep / "fork.git", "rev-list", "--count", f"{report['base']}..farai/main") == str(
        len(report["patches"])
    )
    # First check: the Bridge pins the plain upstream base, and NeMo-RL pins that failing Bridge.
    first = report["first_check"]
    assert first["ok"] is False
    bridge_link, nemo_link = first["links"]
    assert bridge_link["pinned"] == report["base"] and bridge_link["status"] == "MISMATCH"
    assert "unpatched-upstream" in [f["kind"] for f in bridge_link["findings"]]
    assert "url-upstream" in [f["kind"] for f in bridge_link["findings"]]
    assert "pins-failing-commit" in [f["kind"] for f in nemo_link["findings"]]
    # The bump was pushed to the bare remotes as new branches; farai/main stayed where it was.
    branch = report["bump"]["branch"]
    assert branch == f"forkctl/bump-megatron-{report['fork_head'][:12]}"  # the manifest's prefix
    bridge_step, nemo_step = report["bump"]["steps"]
    assert git(keep / "bridge.git", "rev-parse", branch) == bridge_step["commit"]
    assert git(keep / "bridge.git", "rev-parse", f"{branch}:3rdparty/Megatron-LM") == report["fork_head"]
    assert git(keep / "bridge.git", "rev-parse", "farai/main") == bridge_link["commit"]
    assert git(keep / "nemo-rl.git", "rev-parse", branch) == nemo_step["commit"]
    nemo_gitlink = f"{branch}:3rdparty/Megatron-Bridge-workspace/Megatron-Bridge"
    assert git(keep / "nemo-rl.git", "rev-parse", nemo_gitlink) == bridge_step["commit"]
    changed = git(keep / "nemo-rl.git", "diff", "--name-only", f"{branch}~1", branch).splitlines()
    assert changed == ["3rdparty/Megatron-Bridge-workspace/Megatron-Bridge"]  # Automodel, Gym untouched
    modules = git(
        keep / "nemo-rl.git", "config", "--blob", f"{branch}:.gitmodules", "--get-regexp", "shallow"
    )
    assert len(modules.splitlines()) == 3
    # Final check on the bumped branches passes, link by link.
    final = report["final_check"]
    assert final["ok"] is True and final["failure_kinds"] == []
    assert [link["status"] for link in final["links"]] == ["OK", "OK"]
    assert final["links"][0]["pinned"] == report["fork_head"]
    assert report["verdict"].startswith("demo: OK")
    assert report["workdir"] == str(keep.resolve())
    # No GPU run recorded the demo's series (the real patches on a synthetic base): the demo moves the
    # chain as bump-bridge --push --no-gate would, says so, and each bump commit carries the override.
    note = report["bump"]["gate_note"]
    assert note and note[0].startswith("Published without GPU evidence (--no-gate)")
    assert "without GPU evidence" in report["verdict"] and "--no-gate" in report["verdict"]
    for bare, step in ((keep / "bridge.git", bridge_step), (keep / "nemo-rl.git", nemo_step)):
        assert note[0] in git(bare, "log", "-1", "--format=%B", step["commit"])


@pytest.mark.slow
def test_the_demo_bridge_keeps_main_commit_and_its_bump_passes_the_bridge_rule(
    tmp_path: Path, repo_root: Path
) -> None:
    """The demo's Bridge-shaped consumer records its pin twice, as Megatron-Bridge does (the gitlink
    and `.main.commit`): the Bridge's own rule (tests/bridgerule.py) holds at its base, holds on the
    demo's bump commit, and fails on a bump that moves the gitlink alone."""
    keep = tmp_path / "demo"
    code, report = demo(repo_root / "manifest.yaml", "--keep-in", str(keep))[:2]
    assert code == 0, report
    bridge = keep / "bridge.git"
    assert git(bridge, "cat-file", "blob", "farai/main:.main.commit") == report["base"]
    main_commit_matches_submodule(bridge, "farai/main")
    bridge_step = report["bump"]["steps"][0]
    main_commit_matches_submodule(bridge, bridge_step["commit"])
    assert git(bridge, "cat-file", "blob", f"{bridge_step['commit']}:.main.commit") == report["fork_head"]
    assert bridge_step["records"] == [
        {"path": ".main.commit", "format": "sha-line", "old": report["base"], "new": report["fork_head"]}
    ]
    tree = git(bridge, "mktree", input=_gitlink_moved(bridge, "farai/main", report["fork_head"]))
    gitlink_only = git(bridge, "commit-tree", tree, "-p", "farai/main", "-m", "gitlink only", env=_IDENTITY)
    with pytest.raises(AssertionError, match=r"\.main\.commit names"):
        main_commit_matches_submodule(bridge, gitlink_only)


_IDENTITY = {k: "demo-test" for k in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")} | {
    "GIT_AUTHOR_EMAIL": "t@t.invalid",
    "GIT_COMMITTER_EMAIL": "t@t.invalid",
    "PATH": "/usr/bin:/bin",
}


def _gitlink_moved(repo: Path, commit: str, new: str) -> bytes:
    """`commit`'s root tree listing with its 3rdparty subtree's gitlink moved to `new` (mktree input)."""
    third = git(repo, "ls-tree", f"{commit}:3rdparty").replace(
        git(repo, "rev-parse", f"{commit}:3rdparty/Megatron-LM"), new
    )
    subtree = git(repo, "mktree", input=(third + "\n").encode())
    root = git(repo, "ls-tree", commit).replace(git(repo, "rev-parse", f"{commit}:3rdparty"), subtree)
    return (root + "\n").encode()


@pytest.mark.slow
def test_demo_text_output_and_temp_dir_removed(tmp_path: Path, repo_root: Path) -> None:
    result = CliRunner().invoke(cli, ["--manifest", str(repo_root / "manifest.yaml"), "demo"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("demo: "))
    assert lines[verdict].startswith("demo: OK")
    assert all(line.startswith("  ") for line in lines[verdict + 1 :])  # its words wrapped under it
    assert any("(fork head)" in line for line in lines)
    # Step 1's line, with the words wrapped under it.
    step = next(i for i, line in enumerate(lines) if line.startswith("1. check-pins"))
    told = [lines[step]]
    for line in lines[step + 1 :]:
        if not line.startswith("  "):
            break
        told.append(line.strip())
    assert "unpatched-upstream" in " ".join(told)
    # The chain diagram nests each consumer under the one it pins: NeMo-RL under the Bridge.
    bridge = next(line for line in lines if "]─ megatron-bridge@" in line)
    nemo = next(line for line in lines if "]─ nemo-rl@" in line)
    assert nemo.index("└─") > bridge.index("└─") > 2
    workdir = next(line for line in result.stderr.splitlines() if "upstream base" in line)
    folder = Path(workdir.rsplit("(", 1)[1].rstrip(")")).parent
    assert folder.name.startswith("forkctl-demo-") and not folder.exists()


def test_keep_refuses_a_folder_that_is_not_empty(tmp_path: Path, repo_root: Path) -> None:
    keep = tmp_path / "busy"
    keep.mkdir()
    (keep / "mine.txt").write_text("not the demo's\n")
    code, report, _ = demo(repo_root / "manifest.yaml", "--keep-in", str(keep))
    assert code == 2 and "not empty" in report["error"]
    assert sorted(p.name for p in keep.iterdir()) == ["mine.txt"]


def _bogus_patch(tmp_path: Path) -> Path:
    """A format-patch of recompute.py whose context the installed package does not have."""
    work = init_repo(
        tmp_path / "bogus", {"megatron/core/recompute.py": "def nothing_like_upstream():\n    pass\n"}
    )
    work.commit(
        "fix: a change made on another tree", {"megatron/core/recompute.py": "def other():\n    pass\n"}
    )
    return work.format_patch("HEAD", tmp_path / "bogus-patch", number=3)


@pytest.mark.slow
def test_a_series_that_does_not_apply_exits_2(tmp_path: Path, repo_root: Path) -> None:
    toolkit = tmp_path / "toolkit"
    shutil.copytree(repo_root / "patches", toolkit / "patches")
    bogus = _bogus_patch(tmp_path)
    target = toolkit / "patches" / "megatron-lm" / bogus.name
    shutil.copyfile(bogus, target)
    data = yaml.safe_load((repo_root / "manifest.yaml").read_text())
    data["series"].append({"file": f"patches/megatron-lm/{bogus.name}"})
    (toolkit / "manifest.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    keep = tmp_path / "demo"
    code, report, _ = demo(toolkit / "manifest.yaml", "--keep-in", str(keep))
    assert code == 2, report
    assert "does not apply to the installed megatron-core" in report["error"]
    assert bogus.name in report["error"] and f"1 of {len(data['series'])} patches fail" in report["error"]
    assert "megatron-core==0.19.2" in report["hint"]
    # It stopped before making a fork or a consumer.
    assert not (keep / "bridge.git").exists()
    assert git(keep / "fork.git", "for-each-ref") == ""


def test_the_package_comes_from_the_manifest_and_its_absence_is_explained(tmp_path: Path) -> None:
    # No package: in the manifest: the demo says which keys to set; a package that is not installed:
    # it says what to install, in the manifest's own words.
    shutil.copytree(REPO_MANIFEST.parent / "patches", tmp_path / "patches")
    data = yaml.safe_load(REPO_MANIFEST.read_text())
    del data["package"]
    bare = tmp_path / "manifest.yaml"
    bare.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(BadInput, match="names no package") as refused:
        find_installed(load(bare).package)
    assert "package.name" in (refused.value.hint or "")
    data["package"] = {"name": "not_installed_here", "requirement": "not-installed-here==1.0"}
    bare.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(BadInput, match="not installed") as missing:
        find_installed(load(bare).package, search_path=[str(tmp_path)])
    assert "pip install not-installed-here==1.0" in (missing.value.hint or "")
