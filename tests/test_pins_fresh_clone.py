"""check-pins judges what git would check out: for each way a consumer commit can mislead a reader of
its tree, the verdict on the Bridge link equals the outcome of a real `git clone --recurse-submodules`
of that commit (file:// remotes): it passes exactly when the clone succeeds and holds, at the gitlink
path the manifest declares, a checkout of the fork head."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import (
    BRIDGE_GITLINK,
    NEMO_GITLINK,
    Chain,
    check_pins_json,
    commit_index,
    make_fixed_chain,
    url,
)
from tests.chain import use_private_cache as _use_private_cache


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_private_cache(tmp_path, monkeypatch)


def clone_builds_fork_head(
    chain: Chain, commit: str, dest: Path, superproject: Path | None = None, declared: str = BRIDGE_GITLINK
) -> bool:
    """Does a fresh recursive clone of the Bridge (or `superproject`) at `commit` hold the fork head at
    the declared path? git alone decides: no system configuration, the user's only where the test sets
    $GIT_CONFIG_GLOBAL (as forkctl reads it too), file:// allowed for the submodules."""
    home = dest.parent / f"{dest.name}-home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.environ.get("GIT_CONFIG_GLOBAL", os.devnull),
        "GIT_TERMINAL_PROMPT": "0",
    }
    env = {k: v for k, v in env.items() if not k.startswith(("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX"))}
    cloned = subprocess.run(
        [
            "git",
            "-c",
            "protocol.file.allow=always",
            "clone",
            "-q",
            "--no-checkout",
            url(superproject or chain.bridge),
            str(dest),
        ],
        env=env,
        capture_output=True,
    )
    if cloned.returncode != 0:
        return False  # the consumer repository itself is gone
    # Check out exactly `commit`, then do what `clone --recurse-submodules` does after its checkout.
    for args in (["checkout", "-q", "--detach", commit], ["submodule", "update", "--init", "--recursive"]):
        done = subprocess.run(
            ["git", "-c", "protocol.file.allow=always", "-C", str(dest), *args], env=env, capture_output=True
        )
        if done.returncode != 0:
            return False
    submodule = dest / declared
    top = subprocess.run(
        ["git", "-C", str(submodule), "rev-parse", "--show-toplevel", "HEAD"], env=env, capture_output=True
    )
    if top.returncode != 0:
        return False
    toplevel, head = top.stdout.decode().split()
    return Path(toplevel).resolve() == submodule.resolve() and head == chain.head


def bridge_passes(chain: Chain, commit: str) -> tuple[bool, list[str]]:
    """check-pins' verdict on the Bridge link at `commit` (and the kinds of its failures)."""
    _, report = check_pins_json(chain)
    links = [
        link for link in report["links"] if link["consumer"] == "megatron-bridge" and link["commit"] == commit
    ]
    assert len(links) == 1, report
    failures = [f["kind"] for f in links[0]["findings"] if f["status"] != "OK"]
    return not failures, failures


def push_bridge(chain: Chain, message: str) -> str:
    commit = commit_index(chain.bridge_work, message)
    chain.bridge_work.git("push", "-q", "origin", "HEAD:refs/heads/farai/main")
    return commit


def agree(chain: Chain, commit: str, tmp_path: Path, clone_name: str = "fresh") -> tuple[bool, list[str]]:
    """check-pins' verdict and the clone's outcome, asserted equal; returns the verdict."""
    passes, failures = bridge_passes(chain, commit)
    builds = clone_builds_fork_head(chain, commit, tmp_path / clone_name)
    assert passes == builds, (passes, failures, builds)
    return passes, failures


def test_the_fixed_chain_passes_and_its_clone_builds_the_fork_head(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    commit = chain.bridge_work.head()
    assert agree(chain, commit, tmp_path) == (True, [])


def test_vendored_files_at_the_declared_path_fail_whatever_gitlink_sits_elsewhere(tmp_path: Path) -> None:
    """The pinned folder replaced by ordinary files; the right gitlink (fork head, fork URL) moved to
    another path: the clone builds the fork there, but the declared path holds the vendored code."""
    chain = make_fixed_chain(tmp_path)
    work = chain.bridge_work
    moved = "3rdparty/Megatron-LM-real"
    work.git("rm", "-q", "--cached", BRIDGE_GITLINK)
    work.write({f"{BRIDGE_GITLINK}/megatron/vendored.py": "VENDORED = 1\n"})
    work.git("add", "--", BRIDGE_GITLINK)
    work.git("update-index", "--add", "--cacheinfo", f"160000,{chain.head},{moved}")
    work.git("config", "-f", ".gitmodules", f"submodule.{BRIDGE_GITLINK}.path", moved)
    commit = push_bridge(chain, "vendor megatron, keep the submodule elsewhere")
    passes, failures = agree(chain, commit, tmp_path)
    assert not passes and "not-a-gitlink" in failures


@pytest.mark.parametrize("last", ["upstream", "fork"])
def test_a_second_gitmodules_section_for_the_path_wins(tmp_path: Path, last: str) -> None:
    """Two sections (different names) claim the gitlink's path: git clones the last one's URL."""
    chain = make_fixed_chain(tmp_path)
    work = chain.bridge_work
    urls = {"fork": url(chain.fork), "upstream": url(chain.upstream)}
    first = "fork" if last == "upstream" else "upstream"
    work.git("config", "-f", ".gitmodules", f"submodule.{BRIDGE_GITLINK}.url", urls[first])
    with (work.path / ".gitmodules").open("a") as text:
        text.write(f'[submodule "megatron-{last}"]\n\tpath = {BRIDGE_GITLINK}\n\turl = {urls[last]}\n')
    commit = push_bridge(chain, f"a second section for the gitlink, {last} last")
    passes, failures = agree(chain, commit, tmp_path)
    assert passes == (last == "fork"), failures


@pytest.mark.parametrize("where", ["absolute", "relative"])
def test_an_include_in_gitmodules_is_ignored_as_git_ignores_it(tmp_path: Path, where: str) -> None:
    """`.gitmodules` names plain upstream (which lacks the fork head) and ends with an `[include]` of
    a file (here outside the repository; on a runner, one in the pull request's own checkout) that
    names the fork. git's submodule code reads no includes: the clone fetches from upstream and
    fails. `git config --blob` follows an absolute include unless told not to, so check-pins passed
    on the included URL (and a relative one made the whole check exit 2)."""
    chain = make_fixed_chain(tmp_path)
    work = chain.bridge_work
    extra = tmp_path / "extra.cfg"
    extra.write_text(f'[submodule "{BRIDGE_GITLINK}"]\n\turl = {url(chain.fork)}\n')
    work.git("config", "-f", ".gitmodules", f"submodule.{BRIDGE_GITLINK}.url", url(chain.upstream))
    with (work.path / ".gitmodules").open("a") as text:
        text.write(f"[include]\n\tpath = {extra if where == 'absolute' else 'extra.cfg'}\n")
    commit = push_bridge(chain, f"an {where} include names the fork")
    passes, failures = agree(chain, commit, tmp_path)
    assert not passes and "url-upstream" in failures, failures


def test_a_gitmodules_git_cannot_parse_is_a_finding_on_its_link(tmp_path: Path) -> None:
    """A line that is not config after the right section: `git submodule update` stops at it, so the
    clone fails; check-pins says so on the Bridge link (exit 1, the line named) instead of ending the
    whole check as bad input (exit 2) without naming the consumer or commit."""
    chain = make_fixed_chain(tmp_path)
    work = chain.bridge_work
    with (work.path / ".gitmodules").open("a") as text:
        text.write("this is not config\n")
    commit = push_bridge(chain, "a broken .gitmodules")
    passes, failures = agree(chain, commit, tmp_path)
    assert not passes and failures == ["gitmodules-refused"], failures
    code, report = check_pins_json(chain)
    assert code == 1
    (problem,) = [p for p in report["problems"] if "git cannot read .gitmodules" in p["message"]]
    assert problem["message"].startswith(f"megatron-bridge@{commit[:12]}") and "line 4" in problem["message"]
    # The pull request's own check (--under-test, the GitHub channel) says it at that line.
    result = CliRunner().invoke(
        cli,
        ["--manifest", str(chain.manifest), "check-pins", "--under-test", str(work.path), "--github"],
    )
    assert result.exit_code == 1, result.output
    assert "file=.gitmodules,line=4" in result.stdout and "git cannot read .gitmodules" in result.stdout, (
        result.stdout
    )


def test_a_gitmodules_with_a_byte_order_mark_reads_as_git_submodule_update_reads_it(tmp_path: Path) -> None:
    """An editor's UTF-8 byte-order mark before the first section: `git config --blob` refuses the
    file (git 2.39), but `git submodule update` reads the checked-out file, which skips it, and the
    clone builds the fork head: check-pins passes too."""
    chain = make_fixed_chain(tmp_path)
    gitmodules = chain.bridge_work.path / ".gitmodules"
    gitmodules.write_bytes(b"\xef\xbb\xbf" + gitmodules.read_bytes())
    commit = push_bridge(chain, "a byte-order mark")
    assert agree(chain, commit, tmp_path) == (True, [])


def test_a_symlinked_gitmodules_fails_whatever_its_target_text_says(tmp_path: Path) -> None:
    """`.gitmodules` committed as a symbolic link whose target text is the right file, byte for byte
    (a link target may hold newlines): git refuses to check out such a path, so the clone fails;
    check-pins read the link's text as the file and passed."""
    chain = make_fixed_chain(tmp_path)
    work = chain.bridge_work
    text = (work.path / ".gitmodules").read_bytes()
    blob = subprocess.run(
        ["git", "-C", str(work.path), "hash-object", "-w", "--stdin"],
        input=text,
        capture_output=True,
        check=True,
    ).stdout.decode()
    listing = [
        f"120000 blob {blob.strip()}\t.gitmodules" if line.endswith("\t.gitmodules") else line
        for line in work.git("ls-tree", "HEAD").splitlines()
    ]
    tree = subprocess.run(
        ["git", "-C", str(work.path), "mktree"],
        input="\n".join(listing).encode() + b"\n",
        capture_output=True,
    ).stdout.decode()
    commit = work.git("commit-tree", tree.strip(), "-p", "HEAD", "-m", "a symlinked .gitmodules")
    work.git("push", "-q", "origin", f"{commit}:refs/heads/farai/main")
    passes, failures = agree(chain, commit, tmp_path)
    assert not passes and failures == ["gitmodules-symlink"], failures


@pytest.mark.parametrize(
    ("added", "refused"),
    [
        ('[submodule "other"]\n\turl\n', True),  # a url without a value, in another section
        ('[submodule "other"]\n\tpath = other\n\tupdate = !make\n', True),  # a command
        ("\tshallow = maybe\n", True),
        ("\tfetchRecurseSubmodules = sometimes\n", True),
        ("\tbranch\n", True),
        ("\tignore = sometimes\n", False),  # a warning only
        ("\tshallow\n", False),  # a boolean without a value is true
        ('[submodule "../x"]\n\turl\n', False),  # a section git ignores by its name
    ],
)
def test_a_value_git_submodule_update_dies_on_fails_the_link_in_any_section(
    tmp_path: Path, added: str, refused: bool
) -> None:
    """git's submodule code reads every key of every section and stops the whole `submodule update`
    at some values (git 2.39): the clone then checks out no submodule. check-pins passed them."""
    chain = make_fixed_chain(tmp_path)
    with (chain.bridge_work.path / ".gitmodules").open("a") as text:
        text.write(added)
    commit = push_bridge(chain, "a value git's submodule code reads")
    passes, failures = agree(chain, commit, tmp_path)
    assert (failures == ["gitmodules-refused"]) == refused and passes != refused, failures


def test_update_none_fails_a_recursive_clone_skips_the_fork(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    work = chain.bridge_work
    work.git("config", "-f", ".gitmodules", f"submodule.{BRIDGE_GITLINK}.update", "none")
    commit = push_bridge(chain, "never update megatron")
    passes, failures = agree(chain, commit, tmp_path)
    assert not passes and "update-none" in failures


def test_a_fork_gone_after_a_passing_check_fails_from_the_record(tmp_path: Path) -> None:
    """A first check passes (and records the fork's listing); then the fork repository is deleted: a
    fresh clone fails, and check-pins must say so rather than pass from what it recorded."""
    chain = make_fixed_chain(tmp_path)
    commit = chain.bridge_work.head()
    assert agree(chain, commit, tmp_path, "before") == (True, [])
    chain.fork.rename(chain.fork.with_name("fork.git.gone"))
    passes, failures = agree(chain, commit, tmp_path, "after")
    assert not passes and "cannot-reach" in failures


def test_a_consumer_gone_fails_its_recorded_branch(tmp_path: Path) -> None:
    """The Bridge repository itself deleted after a passing check: its branch is known only from the
    listing recorded then, and nobody can clone it."""
    chain = make_fixed_chain(tmp_path)
    commit = chain.bridge_work.head()
    assert agree(chain, commit, tmp_path, "before") == (True, [])
    chain.bridge.rename(chain.bridge.with_name("bridge.git.gone"))
    passes, failures = agree(chain, commit, tmp_path, "after")
    assert not passes and "branch-recorded" in failures


def test_a_url_rewrite_of_the_fork_counts_as_the_clone_applies_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's `url.<base>.insteadOf` sends the fork URL to upstream (which lacks the fork head):
    a clone on this machine fails, and check-pins, which reads the user's configuration as git does,
    fails too."""
    chain = make_fixed_chain(tmp_path)
    commit = chain.bridge_work.head()
    config = tmp_path / "user-gitconfig"
    config.write_text(f'[url "{url(chain.upstream)}"]\n\tinsteadOf = {url(chain.fork)}\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    passes, failures = agree(chain, commit, tmp_path)
    assert not passes, failures


def test_nemo_rl_passes_as_its_shallow_recursive_clone_builds_the_fork_head(tmp_path: Path) -> None:
    """NeMo-RL's Bridge submodule is `shallow = true`, `branch = main`, and pins farai/main (not the
    Bridge's default branch): git clones depth 1 then fetches the pin; check-pins passes, and the
    nested clone holds the fork head at the Bridge's declared path."""
    chain = make_fixed_chain(tmp_path)
    commit = chain.nemo_work.head()
    _, report = check_pins_json(chain)
    link = next(
        link for link in report["links"] if link["consumer"] == "nemo-rl" and link["commit"] == commit
    )
    passes = all(f["status"] == "OK" for f in link["findings"])
    nested = f"{NEMO_GITLINK}/{BRIDGE_GITLINK}"
    builds = clone_builds_fork_head(chain, commit, tmp_path / "fresh", chain.nemo, nested)
    assert passes == builds == True  # noqa: E712 (both, and equal)
