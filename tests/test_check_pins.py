"""forkctl check-pins on real chains of repositories (tests/chain.py): each failure mode its own message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.git.clonecache import cache_path
from tests.chain import BRIDGE_GITLINK, NEMO_GITLINK, Chain, commit_index, make_chain, make_fixed_chain, url
from tests.gitrepos import FORMAT_PATCH, git
from tests.toolkit import flat


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def check(chain: Chain, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins", "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def kinds(report: dict, consumer: str) -> list[str]:
    """Failure kinds of `consumer` at the commit checked first (its branch head or given rev)."""
    link = next(link for link in report["links"] if link["consumer"] == consumer)
    return [f["kind"] for f in link["findings"] if f["status"] != "OK"]


def bridge_failure(report: dict, kind: str) -> str:
    link = next(link for link in report["links"] if link["consumer"] == "megatron-bridge")
    return next(f["message"] for f in link["findings"] if f["kind"] == kind)


def test_fixed_chain_passes_with_uninitialised_submodules(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    code, report = check(chain)
    assert code == 0, report["problems"]
    assert report["expected_fork_head"] == chain.head
    assert [link["status"] for link in report["links"]] == ["OK", "OK"]
    assert report["links"][0]["pinned"] == chain.head
    # `patches` is a list of objects with `file`, as in every command's JSON (issue 13's contract).
    assert report["schema_version"] == 1 and report["patches"]
    assert all(set(p) == {"file", "subject"} and p["file"].endswith(".patch") for p in report["patches"])
    # Nothing was checked out: the consumers' working copies have empty submodule folders.
    assert not (chain.nemo_work.path / NEMO_GITLINK / "3rdparty").exists()


def test_upstream_bridge_today_pins_the_plain_base(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    code, report = check(chain)
    assert code == 1
    assert set(kinds(report, "megatron-bridge")) == {"unpatched-upstream", "url-upstream"}
    assert f"plain upstream base {chain.base[:12]}" in bridge_failure(report, "unpatched-upstream")
    assert "still points upstream" in bridge_failure(report, "url-upstream")
    assert kinds(report, "nemo-rl") == ["pins-failing-commit"]


def test_unpatched_upstream_commit_ahead_of_the_base(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    chain.pin_bridge(chain.upstream_tip, url(chain.fork))
    code, report = check(chain)
    assert code == 1
    message = bridge_failure(report, "unpatched-upstream")
    assert f"unpatched upstream commit {chain.upstream_tip[:12]}, 2 commits ahead" in message


@pytest.mark.parametrize("where", ["ahead", "behind"])
def test_wrong_base(tmp_path: Path, where: str) -> None:
    chain = make_chain(tmp_path)
    onto = chain.upstream_tip if where == "ahead" else chain.base_parent
    sha = chain.am_branch(f"port-{where}", onto, chain.patches)
    chain.pin_bridge(sha, url(chain.fork))
    code, report = check(chain)
    assert code == 1
    assert kinds(report, "megatron-bridge") == ["wrong-base"]
    expected = "2 commits ahead of" if where == "ahead" else "1 commits behind"
    assert f"another base {onto[:12]}, {expected} the manifest base {chain.base[:12]}" in bridge_failure(
        report, "wrong-base"
    )


def test_missing_patch(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    sha = chain.am_branch("missing", chain.base, [chain.patches[0], chain.patches[2], chain.patches[3]])
    chain.pin_bridge(sha, url(chain.fork))
    code, report = check(chain)
    assert code == 1
    assert kinds(report, "megatron-bridge") == ["missing-patch"]
    assert chain.patches[1].name in bridge_failure(report, "missing-patch")


def test_extra_commit(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    sha = chain.am_branch("extra", chain.base, chain.patches, extra={"local.txt": "hack\n"})
    chain.pin_bridge(sha, url(chain.fork))
    code, report = check(chain)
    assert code == 1
    assert kinds(report, "megatron-bridge") == ["extra-commit"]
    assert f"{sha[:12]} local: an extra change" in bridge_failure(report, "extra-commit")


def test_edited_patch_differs_by_patch_id(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    edited = tmp_path / "edited" / chain.patches[2].name
    edited.parent.mkdir()
    edited.write_text(chain.patches[2].read_text().replace("+forked", "+forked, edited by hand"))
    sha = chain.am_branch("edited", chain.base, [*chain.patches[:2], edited, chain.patches[3]])
    chain.pin_bridge(sha, url(chain.fork))
    code, report = check(chain)
    assert code == 1
    assert kinds(report, "megatron-bridge") == ["edited-patch"]
    message = bridge_failure(report, "edited-patch")
    assert "differs from its file" in message and chain.patches[2].name in message and "patch-id" in message


def test_same_series_built_by_hand_is_not_the_reproducible_commit(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    sha = chain.am_branch("by-hand", chain.base, chain.patches)
    chain.pin_bridge(sha, url(chain.fork))
    code, report = check(chain)
    assert code == 1
    assert kinds(report, "megatron-bridge") == ["not-reproducible"]


def test_consumer_pins_a_bridge_commit_that_fails(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    old_bridge = chain.bridge_work.head("HEAD~1")  # the initial Bridge commit: pins plain upstream
    chain.pin_nemo(old_bridge)
    code, report = check(chain)
    assert code == 1
    assert kinds(report, "nemo-rl") == ["pins-failing-commit"]
    roles = [(link["consumer"], link["role"], link["status"]) for link in report["links"]]
    assert ("megatron-bridge", "branch farai/main", "OK") in roles
    assert ("megatron-bridge", "pinned by nemo-rl", "MISMATCH") in roles
    nested = next(
        f["message"]
        for link in report["links"]
        for f in link["findings"]
        if f["kind"] == "pins-failing-commit"
    )
    assert f"megatron-bridge@{old_bridge[:12]}, which itself fails its pin check" in nested
    # Why is said once, by that commit's own link.
    inner = next(link for link in report["links"] if link["role"] == "pinned by nemo-rl")
    assert any("pins the plain upstream base" in f["message"] for f in inner["findings"])
    assert not any("pins the plain upstream base" in f["message"] for f in report["links"][-1]["findings"])


def test_gitmodules_url_still_upstream_only(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    bridge = chain.pin_bridge(chain.head)  # right commit, .gitmodules still names upstream
    chain.pin_nemo(bridge)
    code, report = check(chain)
    assert code == 1
    # The fork head is not on upstream's server either: the URL problem makes the pin unclonable.
    assert set(kinds(report, "megatron-bridge")) == {"url-upstream", "unreachable"}


def test_pinned_sha_only_local_is_unreachable(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    local_only = chain.pin_bridge(chain.head, push=False, files={"wip.txt": "not pushed\n"})
    chain.pin_nemo(local_only)
    code, report = check(
        chain, "--consumer", str(chain.bridge_work.path), "--consumer", str(chain.nemo_work.path)
    )
    assert code == 1
    assert kinds(report, "nemo-rl") == ["unreachable"]
    link = next(link for link in report["links"] if link["consumer"] == "nemo-rl")
    failure = next(f for f in link["findings"] if f["kind"] == "unreachable")
    assert local_only[:12] in failure["message"] and "fresh recursive clone" in failure["message"]
    assert "git push" in failure["fix"]


def test_reachable_through_ancestry_not_only_tips(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    bridge_ok = chain.bridge_work.head()
    chain.pin_bridge(chain.head, files={"later.txt": "newer bridge commit\n"})  # farai/main moves on
    chain.pin_nemo(bridge_ok)
    code, report = check(chain)
    assert code == 0, report["problems"]
    nemo = next(link for link in report["links"] if link["consumer"] == "nemo-rl")
    assert any(f["kind"] == "ok" and f["check"] == "reachable" for f in nemo["findings"])


@pytest.mark.parametrize("on", ["consumer", "fork"])
def test_fork_base_json_mismatch(tmp_path: Path, on: str) -> None:
    chain = make_fixed_chain(tmp_path)
    record = {
        "schema": 1,
        "fork_repo": "AlignmentResearch/Megatron-LM",
        "upstream_repo": "NVIDIA/Megatron-LM",
        "upstream_branch": "main",
        "upstream_base": chain.base_parent,
    }
    if on == "consumer":
        bridge = chain.pin_bridge(chain.head, files={".fork-base.json": json.dumps(record)})
        chain.pin_nemo(bridge)
    else:
        work = chain.fork_work()
        work.git("checkout", "-q", "--detach", "origin/farai/main")
        work.commit("record base", {".fork-base.json": json.dumps(record)}, date="2026-03-01T00:00:00+00:00")
        work.git("push", "-q", "origin", "HEAD:refs/heads/farai/main")
    code, report = check(chain)
    assert code == 1
    messages = [p["message"] for p in report["problems"]]
    assert any(
        ".fork-base.json disagrees with the manifest" in m and chain.base_parent[:12] in m for m in messages
    )


def test_fork_base_json_that_agrees_passes(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    record = {
        "schema": 1,
        "fork_repo": "AlignmentResearch/Megatron-LM",
        "upstream_repo": "NVIDIA/Megatron-LM",
        "upstream_branch": "main",
        "upstream_base": chain.base,
    }
    chain.pin_nemo(chain.pin_bridge(chain.head, files={".fork-base.json": json.dumps(record)}))
    code, report = check(chain)
    assert code == 0, report["problems"]


def test_run_inside_a_consumer_checkout_and_github_summary(tmp_path: Path, monkeypatch) -> None:
    chain = make_chain(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.chdir(chain.bridge_work.path)  # detected by its .gitmodules entry at 3rdparty/Megatron-LM
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins", "--github"])
    assert result.exit_code == 1
    assert "::error ::megatron-bridge@" in result.stdout
    assert "nemo-rl" not in result.stdout  # the chain ends at the checkout we are in
    text = summary.read_text()
    assert "```mermaid\ngraph LR" in text and "MISMATCH" in text


def test_local_consumer_clones_that_hold_their_pins_make_no_cache_repository(tmp_path: Path) -> None:
    """The pinned commits are read from the clones given: the cache gets no tree repository for the
    consumers' URLs (reachability is still asked of the URLs)."""
    chain = make_fixed_chain(tmp_path)
    code, report = check(
        chain, "--consumer", str(chain.bridge_work.path), "--consumer", str(chain.nemo_work.path)
    )
    assert code == 0, report
    repos = {path.name for path in (tmp_path / "cache" / "repos").iterdir()}
    for consumer in (chain.bridge, chain.nemo):
        assert cache_path(url(consumer)).name not in repos, repos


def test_consumer_path_at_rev_and_upstream_repo(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    first = chain.bridge_work.head("HEAD~1")
    code, report = check(
        chain, "--consumer", f"{chain.bridge_work.path}@{first}", "--upstream-repo", str(chain.upstream)
    )
    assert code == 1
    assert report["links"][0]["commit"] == first
    assert len(report["links"]) == 1
    code, report = check(
        chain, "--consumer", f"{chain.bridge_work.path}@HEAD", "--upstream-repo", str(chain.upstream)
    )
    assert code == 0, report["problems"]


def test_bad_input_exits_2(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    result = CliRunner().invoke(
        cli,
        [
            "--manifest",
            str(chain.manifest),
            "check-pins",
            "--consumer",
            f"{chain.bridge_work.path}@no-such-rev",
        ],
    )
    assert result.exit_code == 2
    assert "no-such-rev" in result.output
    git(chain.bridge, "branch", "-D", "farai/main")
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins"])
    assert result.exit_code == 2
    assert "has no branch 'farai/main'" in flat(result.output)


def test_a_gitlink_found_only_elsewhere_by_url_fails(tmp_path: Path) -> None:
    """The manifest's gitlink path is authoritative: the submodule moved to another path is named in
    the finding, never taken as the pin (the consumer's code reads the declared path)."""
    chain = make_fixed_chain(tmp_path)
    work = chain.bridge_work
    work.git("rm", "-q", "--cached", BRIDGE_GITLINK)
    work.git(
        "config", "-f", ".gitmodules", "--rename-section", f"submodule.{BRIDGE_GITLINK}", "submodule.mlm"
    )
    work.git("config", "-f", ".gitmodules", "submodule.mlm.path", "vendor/mlm")
    work.git("update-index", "--add", "--cacheinfo", f"160000,{chain.head},vendor/mlm")
    chain.pin_nemo(commit_index(work, "move the submodule"))
    work.git("push", "-q", "origin", "HEAD:refs/heads/farai/main")
    code, report = check(chain)
    assert code == 1, report
    assert kinds(report, "megatron-bridge") == ["no-gitlink"]
    assert "vendor/mlm" in bridge_failure(report, "no-gitlink")


@pytest.mark.parametrize("hostile", ["--upload-pack=touch {marker};", "-oProxyCommand=touch {marker}"])
def test_gitmodules_url_is_never_run_as_an_option(
    tmp_path: Path, hostile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull request can write any URL into .gitmodules: check-pins, run inside the consumer's
    checkout as CI runs it, reports the URL and runs nothing."""
    marker = tmp_path / "PWNED"
    chain = make_fixed_chain(tmp_path)
    bridge = chain.pin_bridge(chain.head, url_=hostile.format(marker=marker))
    chain.pin_nemo(bridge, url_=hostile.format(marker=marker))
    monkeypatch.chdir(chain.nemo_work.path)
    code, report = check(chain)
    assert not marker.exists()
    assert code == 1, report
    # git ignores a url that looks like an option (a fresh clone has none to fetch from): so does the check.
    assert "url-refused" in kinds(report, "megatron-bridge")
    failure = bridge_failure(report, "url-refused")
    assert "refusing repository location" in failure


def test_a_series_stale_on_its_base_has_no_fork_head(tmp_path: Path) -> None:
    """A patch that only a 3-way merge puts on the base: check-pins says the series is stale, with the
    fix, instead of checking pins against a merged head (the cache could lazily fetch its pre-image)."""
    chain = make_chain(tmp_path)
    work = tmp_path / "upstream-work"
    git(tmp_path, "clone", "-q", str(chain.upstream), str(work))
    lines = "".join(f"line {number}\n" for number in range(1, 13))
    long = work / "megatron/core/long.py"
    long.write_text(lines)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "upstream: long.py")
    written_on = git(work, "rev-parse", "HEAD")
    long.write_text(lines.replace("line 8\n", "line eight\n"))
    git(work, "commit", "-q", "-am", "upstream: line eight")
    base = git(work, "rev-parse", "HEAD")
    git(work, "push", "-q", "origin", "HEAD:main")
    # The patch is written on the commit before the base: its context has line 8 as it was.
    git(work, "checkout", "-q", "--detach", written_on)
    long.write_text(lines.replace("line 5\n", "line five\n"))
    git(work, "commit", "-q", "-am", f"fix(core): line five\n\n(cherry picked from commit {'e' * 40})")
    out = chain.toolkit / "patches" / "megatron-lm"
    made = git(work, *FORMAT_PATCH, "--start-number", "5", "-o", str(out), "-1", "HEAD")
    data = yaml.safe_load(chain.manifest.read_text())
    data["upstream"]["base"] = base
    data["series"].append({"file": str(Path(made).relative_to(chain.toolkit))})
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    pre_image = git(work, "rev-parse", f"{written_on}:megatron/core/long.py")
    assert git(work, "cat-file", "-t", pre_image) == "blob"
    answers = []
    # A full local clone that holds the pre-image (a 3-way merge made a head there) and the cache (a
    # partial clone that fetches only the base's blobs): the same answer.
    for args in (("--upstream-repo", str(work)), ()):
        code, report = check(chain, *args)
        assert code == 2, report
        assert "stale" in report["error"] and Path(made).name in report["error"]
        assert f"forkctl port --onto {base}" in report["hint"]
        answers.append((report["error"], report["hint"]))
    assert answers[0] == answers[1]
    cache = cache_path(url(chain.upstream))
    assert git(cache, "for-each-ref", "refs/forkctl/applied/") == ""  # no head was recorded for it
