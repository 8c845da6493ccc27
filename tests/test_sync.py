"""forkctl sync: the target the consumers' upstream pins, the sync branch and its one pull request, the
dashboard issue on a conflict, and a rerun that changes nothing.

git, the chain and forkctl are real (tests/chain.py: local bare remotes); `gh` is a recording fake on
PATH that keeps pull requests and issues, with their bodies, in a JSON file and answers like gh.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import BRIDGE_GITLINK, DATE, Chain, make_chain, url
from tests.gitrepos import Repo, git

FAKE_GH = """#!{python}
import json, os, sys
from pathlib import Path

args = sys.argv[1:]
state_file = Path(os.environ["FAKE_GH_STATE"])
state = json.loads(state_file.read_text()) if state_file.exists() else {{"pr": [], "issue": []}}
me = os.environ.get("FAKE_GH_LOGIN", "forkctl-bot")
flags = {{}}
for i, arg in enumerate(args):
    if arg.startswith("--") and "=" in arg:
        key, _, value = arg.partition("=")
        flags[key] = value
    elif arg.startswith("--") and i + 1 < len(args):
        flags[arg] = args[i + 1]
entry = {{"argv": args}}
if "--body-file" in flags:
    entry["body"] = Path(flags["--body-file"]).read_text()
with open(os.environ["FAKE_GH_LOG"], "a") as log:
    log.write(json.dumps(entry) + "\\n")
if os.environ.get("FAKE_GH_FAIL"):
    sys.stderr.write("HTTP 403: Resource not accessible by integration\\n")
    sys.exit(1)
if args[:2] == ["api", "user"]:
    print(me)
    sys.exit(0)
kind, verb = args[0], args[1]
items = state[kind]
repo = flags.get("--repo", "")
if verb == "list":
    found = [i for i in items if i["repo"] == repo and i["open"]]
    if kind == "pr" and "--head" in flags:
        found = [i for i in found if i["head"] == flags["--head"]]
    if kind == "pr" and "--base" in flags:
        found = [i for i in found if i["base"] == flags["--base"]]
    print(json.dumps([{{"number": i["number"], "url": i["url"], "body": i["body"], "headRefName": i["head"],
                       "author": {{"login": i["author"]}},
                       "headRepositoryOwner": {{"login": i["head_repo"].split("/")[0]}},
                       "headRepository": {{"name": i["head_repo"].split("/")[1]}}}}
                      for i in found]))
elif verb == "create":
    number = len(state["pr"]) + len(state["issue"]) + 1
    link = "https://github.com/" + repo + ("/pull/" if kind == "pr" else "/issues/") + str(number)
    items.append({{"number": number, "url": link, "repo": repo, "head": flags.get("--head"),
                  "base": flags.get("--base"), "title": flags["--title"], "body": entry["body"], "open": True,
                  "author": me, "head_repo": repo}})
    print(link)
elif verb == "close":
    item = next(i for i in items if i["number"] == int(args[2]))
    item["open"], item["closing_comment"] = False, flags.get("--comment")
elif verb == "edit":
    item = next(i for i in items if i["number"] == int(args[2]))
    item["body"] = entry["body"]
    print(item["url"])
state_file.write_text(json.dumps(state))
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


class FakeGh:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        bin_dir = tmp_path / "bin-gh"
        bin_dir.mkdir()
        script = bin_dir / "gh"
        script.write_text(FAKE_GH.format(python=sys.executable))
        script.chmod(0o755)
        git_bin = shutil.which("git")
        assert git_bin is not None
        (bin_dir / "git").symlink_to(git_bin)
        self.log, self.state = tmp_path / "gh.log", tmp_path / "gh-state.json"
        monkeypatch.setenv("FAKE_GH_LOG", str(self.log))
        monkeypatch.setenv("FAKE_GH_STATE", str(self.state))
        monkeypatch.setenv("PATH", str(bin_dir))

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def writes(self) -> list[dict]:
        return [c for c in self.calls() if c["argv"][1] in ("create", "edit", "close")]

    def items(self, kind: str) -> list[dict]:
        return json.loads(self.state.read_text())[kind] if self.state.exists() else []

    def add(self, kind: str, **item: object) -> dict:
        """An item someone else opened (a stranger's look-alike): open, as gh would list it."""
        state = json.loads(self.state.read_text()) if self.state.exists() else {"pr": [], "issue": []}
        number = len(state["pr"]) + len(state["issue"]) + 1
        repo = str(item["repo"])
        kinds = "pull" if kind == "pr" else "issues"
        full = {"number": number, "url": f"https://github.com/{repo}/{kinds}/{number}", "open": True}
        full.update({"head": None, "base": None, "title": "", "head_repo": repo, **item})
        state[kind].append(full)
        self.state.write_text(json.dumps(state))
        return full


def sync(chain: Chain, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(
        cli, ["--manifest", str(chain.manifest), "sync", "--no-gate", *args, "--json"]
    )
    return result.exit_code, json.loads(result.stdout)


def upstream_commit(chain: Chain, message: str, files: dict[str, str]) -> str:
    """A new commit on upstream's main (pushed to the bare upstream)."""
    path = chain.tmp / "upstream-work"
    if not path.exists():
        git(chain.tmp, "clone", "-q", url(chain.upstream), str(path))
    work = Repo(path)
    sha = work.commit(message, files, date="2026-01-05T00:00:00+00:00")
    work.git("push", "-q", "origin", "HEAD:refs/heads/main")
    return sha


def bridge_upstream_pins(chain: Chain, sha: str) -> str:
    """Upstream Bridge moves its `3rdparty/Megatron-LM` pin to `sha` on its default branch."""
    path = chain.tmp / "bridge-upstream-work"
    if not path.exists():
        git(chain.tmp, "clone", "-q", "--no-recurse-submodules", url(chain.bridge_upstream), str(path))
    work = Repo(path)
    work.git("update-index", "--cacheinfo", f"160000,{sha},{BRIDGE_GITLINK}")
    work.git("commit", "-q", "-m", f"build: bump MCore to {sha[:8]}", "--date", DATE)
    work.git("push", "-q", "origin", "HEAD:refs/heads/main")
    return work.head()


def rebase_tree(chain: Chain, onto: str) -> str:
    """What plain git gives: the fork head's patches replayed with `git rebase --onto` (3-way)."""
    work = chain.fork_work()
    work.git("fetch", "-q", url(chain.upstream), "main")
    work.git("checkout", "-q", "--detach", chain.head)
    work.git("-c", "user.name=t", "-c", "user.email=t@e", "rebase", "-q", "--onto", onto, chain.base)
    return work.git("rev-parse", "HEAD^{tree}")


@pytest.mark.slow
def test_sync_follows_the_consumers_upstream_opens_one_pull_request_and_reruns_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    bridge_tip = bridge_upstream_pins(chain, chain.upstream_tip)
    before = chain.refs(chain.fork)

    code, plan = sync(chain, "--no-gate", "--dry-run")
    assert code == 0, plan
    assert (plan["target"], plan["rule"], plan["consumer_commit"]) == (
        chain.upstream_tip,
        "consumer-upstream",
        bridge_tip,
    )
    assert "NVIDIA-NeMo/Megatron-Bridge" in plan["because"] and "main" in plan["because"]
    assert [p["result"] for p in plan["patches"]] == ["applies"] * 4
    branch = plan["sync_branch"]
    day = git(
        chain.upstream,
        "show",
        "-s",
        "--format=%cd",
        "--date=format-local:%Y-%m-%d",
        chain.upstream_tip,
        env={**os.environ, "TZ": "UTC"},
    )
    assert branch == f"sync/upstream-{day}-{chain.upstream_tip[:12]}"  # the target's committer day
    assert chain.refs(chain.fork) == before and gh.calls() == []  # a dry run moves and asks nothing

    code, done = sync(chain, "--no-gate")
    assert code == 0, done
    refs = chain.refs(chain.fork)
    merge = refs[f"refs/heads/{branch}"]
    assert refs["refs/heads/farai/main"] == chain.head  # the fork branch itself never moves
    parents = git(chain.fork, "rev-list", "--parents", "-n1", merge).split()[1:]
    assert parents == [chain.head, done["head"]]
    # The sync branch's tree is what git rebase --onto the target makes of the fork head's patches.
    assert git(chain.fork, "rev-parse", f"{merge}^{{tree}}") == rebase_tree(chain, chain.upstream_tip)
    (pr,) = gh.items("pr")
    assert (pr["repo"], pr["base"], pr["head"]) == ("AlignmentResearch/Megatron-LM", "farai/main", branch)
    body = pr["body"]
    assert chain.upstream_tip in body and "NVIDIA-NeMo/Megatron-Bridge" in body
    assert "```mermaid" in body and "forkctl validate --source base.tgz" in body
    assert "### range-diff" in body and "feat(core): a returns 10" in body
    assert done["pull_request"]["action"] == "created"
    assert gh.items("issue") == []  # nothing conflicts, nothing to warn of: no dashboard

    writes = len(gh.writes())
    code, again = sync(chain, "--no-gate")
    assert code == 0, again
    assert chain.refs(chain.fork) == refs and len(gh.writes()) == writes  # no push, no create, no edit
    assert again["pull_request"]["action"] == "unchanged"


@pytest.mark.slow
def test_the_sync_head_is_the_fork_head_port_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After `forkctl port --onto` the target lands in the toolkit, its fork head is the sync merge's
    second parent: the pull request carries exactly what the toolkit will build."""
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    absorbed_by = upstream_commit(chain, "docs: readme forked (#7)", {"README.md": "upstream\nforked\n"})
    bridge_upstream_pins(chain, absorbed_by)
    code, done = sync(chain, "--no-gate")
    assert code == 0, done
    assert [p["result"] for p in done["patches"]][2] == "absorbed"
    assert done["patches"][2]["upstream_commit"] == absorbed_by
    plan = (
        CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "sync", "--no-gate", "--dry-run"]).stdout
    )
    assert f"would drop 'docs: readme only': absorbed upstream (patch-id, {absorbed_by[:12]})" in plan
    assert "docs: readme only" in gh.items("pr")[0]["body"].split("### Absorbed upstream")[1]
    clone = tmp_path / "upstream-clone.git"
    git(tmp_path, "clone", "-q", "--bare", url(chain.upstream), str(clone))
    result = CliRunner().invoke(
        cli,
        ["--manifest", str(chain.manifest), "port", "--onto", absorbed_by, "--repo", str(clone), "--json"],
    )
    assert result.exit_code == 0, result.stdout
    assert json.loads(result.stdout)["head"] == done["head"]


HELPER_HELLO = "def a():\n    return 1\n\n\ndef helper():\n    return 'HELLO'\n"


def _author(chain: Chain, sha: str) -> str:
    return git(chain.upstream, "show", "-s", "--format=%an <%ae>", sha)


@pytest.mark.slow
def test_a_conflict_moves_nothing_and_keeps_one_dashboard_naming_the_breaking_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    upstream_commit(chain, "upstream: unrelated 1", {"megatron/core/sub/e.py": "E = 1\n"})
    breaking = upstream_commit(chain, "refactor: helper shouts (#42)", {"megatron/core/a.py": HELPER_HELLO})
    target = upstream_commit(chain, "upstream: unrelated 2", {"megatron/core/sub/f.py": "F = 1\n"})
    bridge_upstream_pins(chain, target)
    before = chain.refs(chain.fork)

    code, done = sync(chain, "--no-gate")
    assert code == 1, done
    assert chain.refs(chain.fork) == before  # nothing moves
    assert [p["result"] for p in done["patches"]] == ["applies", "applies", "applies", "conflicts"]
    first = done["patches"][3]["first_break"]
    assert (first["commit"], first["subject"], first["files"]) == (
        breaking,
        "refactor: helper shouts (#42)",
        ["megatron/core/a.py"],
    )
    assert gh.items("pr") == []
    (issue,) = gh.items("issue")
    body = issue["body"]
    assert body.startswith("<!-- forkctl-sync-dashboard AlignmentResearch/Megatron-LM farai/main -->")
    assert breaking in body and "`refactor: helper shouts (#42)`" in body  # data in code: no cross-link
    assert f"`{_author(chain, breaking)}`" in body and "`megatron/core/a.py`" in body
    assert f"forkctl port --onto {target}" in body and "forkctl port --continue" in body
    assert "```mermaid" in body

    writes = len(gh.writes())
    code, again = sync(chain, "--no-gate")
    assert code == 1 and again["dashboard"]["action"] == "unchanged" and len(gh.writes()) == writes

    newer = upstream_commit(chain, "upstream: unrelated 3", {"megatron/core/sub/g.py": "G = 1\n"})
    bridge_upstream_pins(chain, newer)
    code, moved = sync(chain, "--no-gate")
    assert code == 1, moved
    (issue,) = gh.items("issue")  # the same issue, edited in place
    assert moved["dashboard"]["action"] == "updated" and moved["dashboard"]["number"] == issue["number"]
    assert newer in issue["body"] and breaking in issue["body"]
    assert chain.refs(chain.fork) == before


@pytest.mark.slow
def test_the_dashboard_warns_of_what_upstreams_tip_will_break(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    bridge_upstream_pins(chain, chain.upstream_tip)
    breaking = upstream_commit(chain, "refactor: helper shouts", {"megatron/core/a.py": HELPER_HELLO})
    tip = upstream_commit(chain, "upstream: later", {"megatron/core/sub/h.py": "H = 1\n"})
    code, done = sync(chain, "--no-gate")
    assert code == 0, done
    assert done["target"] == chain.upstream_tip and done["pull_request"]["action"] == "created"
    assert done["tip"]["commit"] == tip and done["tip"]["ahead"] == 2
    assert done["tip"]["warnings"] == [
        {"order": 4, "subject": "fix(core): helper says hi", "commit": breaking, "ahead": 1}
    ]
    (issue,) = gh.items("issue")
    assert f"will break at upstream `{breaking[:12]}`" in issue["body"] and "1 commits ahead" in issue["body"]


@pytest.mark.slow
def test_the_target_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    # Upstream Bridge pins the base itself: the fork is where its consumer's upstream is.
    code, plan = sync(chain, "--no-gate", "--dry-run")
    assert code == 0, plan
    assert (plan["target"], plan["relation"]) == (chain.base, "base")
    assert plan["publish"]["action"] == "up-to-date" and plan["head"] == chain.head
    code, plan = sync(chain, "--no-gate", "--dry-run", "--onto", "upstream")
    assert code == 0 and (plan["target"], plan["rule"]) == (chain.upstream_tip, "upstream-tip")
    code, plan = sync(chain, "--no-gate", "--dry-run", "--onto", chain.upstream_tip[:10])
    assert code == 0 and (plan["target"], plan["rule"]) == (chain.upstream_tip, "given")
    # A pin behind the base asks nothing of the fork; a name that is no SHA is bad input.
    bridge_upstream_pins(chain, chain.base_parent)
    before = chain.refs(chain.fork)
    code, plan = sync(chain, "--no-gate")
    assert code == 0 and (plan["target"], plan["relation"]) == (chain.base_parent, "behind"), plan
    assert chain.refs(chain.fork) == before and gh.calls() == []
    code, plan = sync(chain, "--no-gate", "--onto", "main~1")
    assert code == 2 and "--onto" in plan["error"]
    # A pin beside the base (a side line of upstream) is no target: sync moves the fork forward only.
    git(chain.tmp, "clone", "-q", url(chain.upstream), str(chain.tmp / "side-work"))
    work = Repo(chain.tmp / "side-work")
    work.git("checkout", "-q", "-b", "side", chain.base_parent)
    side = work.commit("upstream: a side line", {"megatron/core/sub/s.py": "S = 1\n"}, date=DATE)
    work.git("push", "-q", "origin", "side")
    bridge_upstream_pins(chain, side)
    code, plan = sync(chain, "--no-gate")
    assert code == 1 and plan["relation"] == "diverged", plan
    assert "does not descend from the manifest base" in plan["problems"][0]["message"]
    assert chain.refs(chain.fork) == before and gh.calls() == []


@pytest.mark.slow
def test_a_newer_target_opens_its_pull_request_and_closes_the_older_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    bridge_upstream_pins(chain, chain.upstream_tip)
    code, first = sync(chain, "--no-gate")
    assert code == 0, first
    newer = upstream_commit(chain, "upstream: later work", {"megatron/core/sub/n.py": "N = 1\n"})
    bridge_upstream_pins(chain, newer)
    code, second = sync(chain, "--no-gate")
    assert code == 0, second
    assert second["sync_branch"] != first["sync_branch"] and second["sync_branch"].endswith(newer[:12])
    old, new = gh.items("pr")
    assert (old["head"], old["open"]) == (first["sync_branch"], False)
    assert new["head"] == second["sync_branch"] and new["open"]
    assert new["url"] in old["closing_comment"]
    assert second["pull_request"]["closed_superseded"] == [old["number"]]


def test_the_bodies_fit_githubs_limit_and_keep_data_in_code(tmp_path: Path) -> None:
    """A range-diff of any size is cut to GitHub's 65,536 characters (UTF-16), with a note; a subject
    that mentions someone or another issue stays inside code."""
    from forkctl.chain.sync import SyncPlan
    from forkctl.chain.synctarget import SyncTarget
    from forkctl.manifest import load
    from forkctl.report import sync as views
    from tests.toolkit import make_toolkit

    manifest = load(make_toolkit(tmp_path).manifest)
    target = SyncTarget("a" * 40, "given", "--onto: @someone #12 <img src=x>", ahead=3)
    plan = SyncPlan(target=target, base="b" * 40, old_head="c" * 40, entries=[], head="d" * 40)
    plan.range_diff = "1:  abc = 1:  def \U0001f600 feat: x\n" * 20_000
    body = views.pr_body(manifest, plan, None)
    assert len(body.encode("utf-16-le")) // 2 <= 65_536
    assert "_Cut:" in body and "```mermaid" in body and "### GPU evidence the gate still needs" in body
    assert "`--onto: @someone #12 <img src=x>`" in body
    dashboard = views.dashboard_body(manifest, plan)
    assert (
        dashboard.startswith(views.dashboard_marker(manifest))
        and "`--onto: @someone #12 <img src=x>`" in dashboard
    )


def test_without_gh_the_sync_branch_is_pushed_and_the_command_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_open_pr import path_without_gh

    chain = make_chain(tmp_path)
    monkeypatch.setenv("PATH", path_without_gh(tmp_path))
    bridge_upstream_pins(chain, chain.upstream_tip)
    code, done = sync(chain, "--no-gate")
    assert code == 0, done
    branch = done["sync_branch"]
    assert f"refs/heads/{branch}" in chain.refs(chain.fork)
    (notice,) = [p["message"] for p in done["problems"] if "gh is not on PATH" in p["message"]]
    assert f"gh pr create --repo=AlignmentResearch/Megatron-LM --base=farai/main --head={branch}" in notice
    body_file = Path(done["pull_request"]["body_file"])
    assert f"--body-file={body_file}" in notice and chain.upstream_tip in body_file.read_text()
