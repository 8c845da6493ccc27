"""check-pins --under-test: a consumer's commit judged on its own, from that commit down to the fork head.

A NeMo-RL pull request passes or fails on the pins it makes, whatever the Bridge's branch head holds;
a finding about the commit's own `.gitmodules` lands on its line; an unreachable server says why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl import report
from forkctl.cli import cli
from tests.chain import BRIDGE_GITLINK, NEMO_GITLINK, Chain, commit_index, make_chain, make_fixed_chain, url
from tests.gitrepos import git, init_repo
from tests.toolkit import flat


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)


def run(chain: Chain, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins", *args])
    return result.exit_code, result.stdout + (result.stderr if result.stderr_bytes is not None else "")


def check(chain: Chain, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins", "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def roles(data: dict) -> list[tuple[str, str, str]]:
    return [(link["consumer"], link["role"], link["status"]) for link in data["links"]]


def failing(data: dict, consumer: str) -> list[dict]:
    return [
        f
        for link in data["links"]
        if link["consumer"] == consumer
        for f in link["findings"]
        if f["status"] != "OK"
    ]


def break_bridge_branch(chain: Chain) -> str:
    """farai/main of the Bridge moves to a commit pinning plain upstream; returns the good commit before."""
    good = chain.bridge_work.head()
    chain.pin_bridge(chain.base)
    return good


def test_a_nemo_commit_pinning_a_good_bridge_passes_though_the_bridge_branch_is_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_fixed_chain(tmp_path)
    good = break_bridge_branch(chain)
    assert git(chain.nemo_work.path, "ls-tree", "HEAD", NEMO_GITLINK).split()[2] == good
    code, plain = check(chain)
    assert code == 1  # the Bridge's branch head fails
    assert ("megatron-bridge", "branch farai/main", "MISMATCH") in roles(plain)
    monkeypatch.chdir(chain.nemo_work.path)
    code, detected = check(chain)
    assert code == 0, detected["problems"]  # in a NeMo-RL checkout the default judges its HEAD alone
    assert detected["in_consumer"] == "nemo-rl" and detected["fork_branch"] == []
    assert [(c, r, s) for c, r, s in roles(detected) if "branch" in r] == []
    code, text = run(chain)
    assert code == 0 and "in a checkout of consumer nemo-rl (recognised by its gitlink" in text, text
    code, published = check(chain, "--branches")  # asked for: every consumer's branch, as before
    assert code == 1 and "in_consumer" not in published
    assert ("megatron-bridge", "branch farai/main", "MISMATCH") in roles(published)

    code, data = check(chain, "--under-test", str(chain.nemo_work.path))
    assert code == 0, data["problems"]
    assert [(c, s) for c, _, s in roles(data)] == [("megatron-bridge", "OK"), ("nemo-rl", "OK")]
    assert ("megatron-bridge", "pinned by nemo-rl", "OK") in roles(data)
    assert not any("branch farai/main" in role for _, role, _ in roles(data))
    assert data["fork_branch"] == []  # nothing above or beside the commit under test
    code, text = run(chain, "--under-test", "HERE")
    assert code == 0, text
    assert "branch farai/main" not in text and "nemo-rl@" in text


def test_a_nemo_commit_pinning_a_failing_bridge_fails_on_its_own_finding(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)  # the Bridge's farai/main is good
    old_bridge = chain.bridge_work.head("HEAD~1")  # pins plain upstream
    chain.pin_nemo(old_bridge, push=False)
    code, data = check(chain, "--under-test", f"{chain.nemo_work.path}@HEAD")
    assert code == 1
    assert [f["kind"] for f in failing(data, "nemo-rl")] == ["pins-failing-commit"]
    assert roles(data)[0] == ("megatron-bridge", "pinned by nemo-rl", "MISMATCH")
    assert len(data["links"]) == 2  # the Bridge's (passing) branch head is not part of it
    assert any(
        p["message"].startswith("nemo-rl@") and old_bridge[:12] in p["message"] for p in data["problems"]
    )


def test_a_shallow_bridge_clone_with_uninitialised_submodules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    chain.pin_bridge(chain.head, url(chain.fork))
    clone = tmp_path / "bridge-shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", "-b", "farai/main", url(chain.bridge), str(clone))
    assert (clone / ".git" / "shallow").is_file() and not any((clone / BRIDGE_GITLINK).iterdir())
    (clone / "src" / "bridge").mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(clone / "src" / "bridge")  # HERE: the repository containing the current directory
    code, data = check(chain, "--under-test", "HERE")
    assert code == 0, data["problems"]
    assert [(c, s) for c, _, s in roles(data)] == [("megatron-bridge", "OK")]
    assert data["links"][0]["pinned"] == chain.head
    code, data = check(chain, "--under-test", ".")
    assert code == 0, data["problems"]


def test_which_consumer_ambiguous_or_none_exits_2_and_as_chooses(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    stranger = init_repo(tmp_path / "stranger", {"README.md": "nothing to see\n"})
    code, text = run(chain, "--under-test", str(stranger.path))
    assert code == 2
    assert "megatron-bridge" in text and "nemo-rl" in text and "--as" in text

    both = init_repo(tmp_path / "both", {"README.md": "both\n"})
    both.write({".gitmodules": (chain.nemo_work.path / ".gitmodules").read_text()})
    both.git("config", "-f", ".gitmodules", f"submodule.{BRIDGE_GITLINK}.path", BRIDGE_GITLINK)
    both.git("config", "-f", ".gitmodules", f"submodule.{BRIDGE_GITLINK}.url", url(chain.fork))
    both.git("update-index", "--add", "--cacheinfo", f"160000,{chain.head},{BRIDGE_GITLINK}")
    bridge_pin = chain.bridge_work.head()
    both.git("update-index", "--add", "--cacheinfo", f"160000,{bridge_pin},{NEMO_GITLINK}")
    commit_index(both, "pins both")
    code, text = run(chain, "--under-test", str(both.path))
    assert code == 2
    assert "megatron-bridge" in text and "nemo-rl" in text and "--as NAME" in text
    code, data = check(chain, "--under-test", str(both.path), "--as", "megatron-bridge")
    assert code == 0, data["problems"]
    assert [link["consumer"] for link in data["links"]] == ["megatron-bridge"]
    code, text = run(chain, "--under-test", str(both.path), "--as", "no-such")
    assert code == 2 and "no-such" in text
    code, text = run(chain, "--as", "nemo-rl")
    assert code == 2 and "--under-test" in text
    code, text = run(chain, "--under-test", str(both.path), "--consumer", str(both.path))
    assert code == 2 and "give one" in text


def test_the_default_start_outside_a_consumer_checks_the_branches_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_fixed_chain(tmp_path)
    stranger = init_repo(tmp_path / "stranger", {"README.md": "nothing to see\n"})
    monkeypatch.chdir(stranger.path)
    code, data = check(chain)
    assert code == 0, data["problems"]
    assert data["in_consumer"] is None
    assert ("megatron-bridge", "branch farai/main", "OK") in roles(data)
    assert ("nemo-rl", "branch farai/main", "OK") in roles(data)
    code, text = run(chain)
    assert code == 0 and "not in a consumer checkout (" in flat(text), text
    assert "is none of the manifest's consumers" in flat(text)

    both = init_repo(tmp_path / "both", {"README.md": "both\n"})
    both.write({".gitmodules": (chain.nemo_work.path / ".gitmodules").read_text()})
    both.git("config", "-f", ".gitmodules", f"submodule.{BRIDGE_GITLINK}.path", BRIDGE_GITLINK)
    both.git("config", "-f", ".gitmodules", f"submodule.{BRIDGE_GITLINK}.url", url(chain.fork))
    both.git("update-index", "--add", "--cacheinfo", f"160000,{chain.head},{BRIDGE_GITLINK}")
    both.git("update-index", "--add", "--cacheinfo", f"160000,{chain.bridge_work.head()},{NEMO_GITLINK}")
    commit_index(both, "pins both")
    monkeypatch.chdir(both.path)
    code, text = run(chain)  # two consumers' gitlinks: no guess
    assert code == 2 and "--as NAME" in text and "--branches" in text
    code, data = check(chain, "--as", "megatron-bridge")
    assert code == 0, data["problems"]
    assert data["in_consumer"] == "megatron-bridge"
    assert [link["consumer"] for link in data["links"]] == ["megatron-bridge"]
    both.git("rm", "-q", "--cached", NEMO_GITLINK)
    both.git("config", "-f", ".gitmodules", "--remove-section", f"submodule.{NEMO_GITLINK}")
    commit_index(both, "only the Bridge's gitlink")
    code, text = run(chain)  # one gitlink, no remote: recognised by it
    assert (
        code == 0 and "consumer megatron-bridge (recognised by its gitlink 3rdparty/Megatron-LM)" in text
    ), text
    for extra in (["--consumer", str(both.path)], ["--under-test", "HERE"], ["--as", "nemo-rl"]):
        code, text = run(chain, "--branches", *extra)
        assert code == 2 and "--branches" in text, text


def test_gitmodules_findings_are_annotated_on_their_line(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    work = chain.bridge_work
    gitmodules = work.path / ".gitmodules"
    other = '# vendored tools\n[submodule "tools"]\n\tpath = tools\n\turl = https://example.com/tools.git\n'
    gitmodules.write_text(other + gitmodules.read_text())  # url = upstream on line 7
    assert gitmodules.read_text().splitlines()[6].strip().startswith("url = ")
    chain.pin_bridge(chain.head, push=False)
    code, text = run(chain, "--under-test", str(work.path), "--github")
    assert code == 1
    lines = [line for line in text.splitlines() if line.startswith("::error")]
    assert any(
        line.startswith("::error file=.gitmodules,line=7::") and "still points upstream" in line
        for line in lines
    ), lines
    assert any(line.startswith("::error ::megatron-bridge@") and "reachable" in line for line in lines)
    # Without --under-test nothing changes: no file, no line.
    code, text = run(chain, "--github")
    assert "file=.gitmodules" not in text


def test_annotation_properties_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    out = report.Report(command="x")
    out.fail(report.Problem("bad, really: bad", file="a,b:c%.yaml", line=3))
    assert report.emit(out, report.Format.GITHUB) == 1
    assert "::error file=a%2Cb%3Ac%25.yaml,line=3::bad, really: bad" in capsys.readouterr().out


def test_an_unreachable_upstream_says_gits_reason(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    data = yaml.safe_load(chain.manifest.read_text())
    data["upstream"]["url"] = "file:///nonexistent/megatron.git"
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    for args in ([], ["--under-test", str(chain.nemo_work.path)]):
        code, data_ = check(chain, *args)
        assert code == 2
        assert "does not appear to be a git repository" in data_["error"], data_


def test_an_unreachable_consumer_says_gits_reason(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    not_a_repo = tmp_path / "not-a-repo"
    not_a_repo.mkdir()
    data = yaml.safe_load(chain.manifest.read_text())
    data["consumers"][0]["url"] = url(not_a_repo)
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    chain.pin_nemo(chain.bridge_work.head(), url_=url(not_a_repo), push=False)
    code, data_ = check(chain, "--under-test", str(chain.nemo_work.path))
    assert code == 1, data_
    messages = [f["message"] for f in failing(data_, "nemo-rl")]
    assert any(
        "cannot be fetched" in m and "does not appear to be a git repository" in m for m in messages
    ), messages


def test_the_section_git_uses_is_the_one_annotated(tmp_path: Path) -> None:
    """Two sections claim the gitlink's path: the finding points at the last one (the one git clones),
    and its `update = none` line is annotated too."""
    chain = make_fixed_chain(tmp_path)
    work = chain.bridge_work
    gitmodules = work.path / ".gitmodules"
    last = f'[submodule "mlm"]\n\tpath = {BRIDGE_GITLINK}\n\turl = {url(chain.upstream)}\n\tupdate = none\n'
    gitmodules.write_text(gitmodules.read_text() + last)
    count = len(gitmodules.read_text().splitlines())  # url on line count - 1, update on the last
    chain.pin_bridge(chain.head, push=False)
    code, text = run(chain, "--under-test", str(work.path), "--github")
    assert code == 1
    lines = [line for line in text.splitlines() if line.startswith("::error")]
    assert any(
        line.startswith(f"::error file=.gitmodules,line={count - 1}::") and "still points upstream" in line
        for line in lines
    ), lines
    assert any(
        line.startswith(f"::error file=.gitmodules,line={count}::") and "update = none" in line
        for line in lines
    ), lines
