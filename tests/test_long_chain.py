"""Long chains end in a verdict or in bad input, never in exit 3 (issue 23): 600 consumers are refused by
every verb, from a local or a remote manifest; the longest chain forkctl follows (64 consumers, each
pinning the one before it) is checked through every link; a consumer commit with 600 submodules nested
600 folders deep is judged on its own link. Real repositories, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.manifest.schema import MAX_CONSUMERS
from tests.chain import Chain, _consumer_repo, bare_clone, commit_index, make_fixed_chain, url
from tests.gitrepos import git
from tests.toolkit import make_toolkit, many_consumers


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def forkctl(manifest: str, *args: str) -> tuple[int, str]:
    """(exit code, stdout; under --json the report alone) with stderr after it when not --json."""
    result = CliRunner().invoke(cli, ["--manifest", manifest, *args])
    return result.exit_code, result.stdout if "--json" in args else result.stdout + result.stderr


VERBS = [
    ["lint"],
    ["status"],
    ["check-pins"],
    ["describe"],
    ["bump-bridge", "--dry-run"],
    ["publish", "--dry-run"],
    ["fork-base"],
    ["gate"],
    ["apply", "--base", "HEAD"],
]


@pytest.mark.slow
def test_600_consumers_are_bad_input_for_every_verb_and_a_remote_manifest(tmp_path: Path) -> None:
    """Coverage (passes before and after this round): the limit is applied where the manifest loads."""
    toolkit = make_toolkit(tmp_path)
    data = toolkit.manifest_data()
    data["consumers"] = many_consumers(600)
    toolkit.write_manifest(data)
    git(toolkit.root, "init", "-q", "-b", "main")
    git(toolkit.root, "add", "-A")
    git(toolkit.root, "commit", "-q", "-m", "toolkit")
    for manifest in (str(toolkit.manifest), f"{toolkit.root.as_uri()}@main:manifest.yaml"):
        for verb in VERBS:
            code, out = forkctl(manifest, *verb)
            assert code == 2, (manifest, verb, out)
            assert f"600 consumers is more than forkctl follows (at most {MAX_CONSUMERS})" in out, (verb, out)


def long_chain(chain: Chain, length: int) -> list[Path]:
    """Consumers 2..`length` after the Bridge of the fixed chain, each a repository whose gitlink
    `3rdparty/c<N-1>` pins the previous consumer's branch tip; the manifest lists them all."""
    data = yaml.safe_load(chain.manifest.read_text())
    consumers = data["consumers"][:1]
    below, pinned = url(chain.bridge), git(chain.bridge, "rev-parse", "refs/heads/farai/main")
    works = []
    for number in range(2, length + 1):
        gitlink = f"3rdparty/c{number - 1}"
        work = _consumer_repo(
            chain.tmp / f"c{number}-work",
            {"README.md": f"c{number}\n"},
            [(gitlink, below, {})],
            {gitlink: pinned},
        )
        bare = bare_clone(work.path, chain.tmp / f"c{number}.git")
        git(bare, "branch", "farai/main", "main")
        consumers.append(
            {
                "name": f"c{number}",
                "upstream": f"org/c{number}",
                "fork": f"org/c{number}-fork",
                "url": url(bare),
                "branch": "farai/main",
                "gitlink": gitlink,
            }
        )
        below, pinned = url(bare), work.head()
        works.append(work.path)
    data["consumers"] = consumers
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    return works


@pytest.mark.slow
def test_the_longest_chain_forkctl_follows_is_checked_through_every_link(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    works = long_chain(chain, MAX_CONSUMERS)
    code, out = forkctl(str(chain.manifest), "check-pins", "--json")
    assert code == 0, out[-3000:]
    assert len(json.loads(out)["links"]) == MAX_CONSUMERS
    code, out = forkctl(str(chain.manifest), "check-pins", "--under-test", str(works[-1]), "--json")
    assert code == 0, out[-3000:]
    # The Bridge's branch moves off the commit the next consumer pins: every link above fails, each
    # one naming the link below it down to c2, whose own pin is unreachable now (no recursion limit).
    git(chain.bridge, "update-ref", "refs/heads/farai/main", git(chain.bridge, "rev-parse", "main"))
    code, out = forkctl(str(chain.manifest), "check-pins", "--json")
    assert code == 1, out[-3000:]
    messages = [p["message"] for p in json.loads(out)["problems"]]
    for link in range(3, MAX_CONSUMERS + 1):  # each link names the failing one below it, once
        own = [m for m in messages if m.startswith(f"c{link}@")]
        assert len(own) == 1 and "which itself fails" in own[0] and f"pins c{link - 1}@" in own[0], own
    bottom = [m for m in messages if m.startswith("c2@")]  # the link whose own pin is unreachable now
    assert bottom and "a fresh recursive clone cannot check it out" in bottom[0], messages


@pytest.mark.slow
def test_a_consumer_commit_with_600_submodules_nested_600_deep_is_judged_on_its_link(tmp_path: Path) -> None:
    """A pull request adds 600 submodules, the last 600 folders deep, each naming a repository that
    does not exist: check-pins --under-test reads the manifest's gitlink alone and passes; nothing is
    followed into the others."""
    chain = make_fixed_chain(tmp_path)
    work = chain.bridge_work
    sections, entries = [], []
    for depth in range(1, 601):
        path = "d/" * depth + "m"
        sections.append(f'[submodule "{path}"]\n\tpath = {path}\n\turl = ../nested-{depth}.git\n')
        entries.append(f"160000 {chain.head}\t{path}\n")
    # One git process for the 600 gitlinks (`--cacheinfo` for each was 600 processes, a second of CPU).
    git(work.path, "update-index", "--index-info", input="".join(entries).encode())
    gitmodules = work.path / ".gitmodules"
    gitmodules.write_text(gitmodules.read_text() + "".join(sections))
    commit_index(work, "600 nested submodules")
    code, out = forkctl(str(chain.manifest), "check-pins", "--under-test", str(work.path), "--json")
    assert code == 0, out[-3000:]
    (link,) = json.loads(out)["links"]
    assert link["pinned"] == chain.head
