"""Fork-owned paths never touch what the series or the package owns (issue 37, item 1): `lint`,
`publish`, `check-pins` and `bump-bridge` refuse a `fork.own_paths` entry that matches a path a patch
changes or a path of the package tree (`fork.tree_include`), so a pin whose package code differs from
apply(series, base) is never passed as the fork head's published merge. Through the CLI, on the local
chain of tests/chain.py (tree_include: megatron/**)."""

from __future__ import annotations

import pytest

from tests.chain import Chain, check_pins_json, forkctl_json, make_chain, use_private_cache
from tests.gitrepos import git
from tests.test_publish import set_fork


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    use_private_cache(tmp_path, monkeypatch)


def refusals(chain: Chain) -> dict[str, tuple[int, str]]:
    """What lint, publish, check-pins and bump-bridge say (exit code, first message)."""
    said = {}
    for verb, args in (
        ("lint", ["lint"]),
        ("publish", ["publish", "--no-gate", "--dry-run"]),
        ("check-pins", ["check-pins"]),
        ("bump-bridge", ["bump-bridge", "--no-gate", "--dry-run"]),
    ):
        code, report = forkctl_json(chain, *args)
        problems = report.get("problems") or []
        said[verb] = (code, problems[0]["message"] if problems else report.get("error", ""))
    return said


@pytest.mark.parametrize(
    "glob, why",
    [
        ("megatron/core/sub/**", "package tree"),  # a package folder no patch touches
        ("**/b.py", "package tree"),  # package files anywhere
        ("megatron/core/a.py", "series changes"),  # a patched file
        ("README.md", "series changes"),  # outside the package, but patch 0003 changes it
    ],
)
def test_every_verb_refuses_an_own_path_over_the_package_or_the_series(tmp_path, glob: str, why: str) -> None:  # type: ignore[no-untyped-def]
    chain = make_chain(tmp_path)
    set_fork(chain, own_paths=[".fork-base.json", glob])
    said = refusals(chain)
    assert said["lint"][0] == 1, said
    for verb in ("publish", "check-pins", "bump-bridge"):
        assert said[verb][0] == 2, (verb, said)
    for verb, (_, message) in said.items():
        assert repr(glob) in message and why in message and "own_paths" in message, (verb, message)


def test_the_fork_own_files_pass_everywhere(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Own files that neither the package nor the series holds change nothing any verb says."""
    chain = make_chain(tmp_path)
    plain = refusals(chain)
    set_fork(chain, own_paths=[".fork-base.json", "README.fork.md", ".github/**", "docs/fork/**"])
    assert refusals(chain) == plain
    assert plain["lint"][0] == 0 and plain["publish"][0] == 0


def test_check_pins_never_passes_a_merge_whose_package_code_is_not_the_fork_heads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A hotfix to package code carried on the fork branch under a glob: the merge publish would make
    (the head's tree with the 'owned' files as the tip has them) is pinned; check-pins used to pass it."""
    chain = make_chain(tmp_path)
    set_fork(chain, own_paths=[".fork-base.json", "megatron/core/sub/**"], publish="merge")
    work = chain.fork_work()
    work.git("checkout", "-q", "--detach", chain.head)
    hotfix = work.commit(
        "hotfix: by hand", {"megatron/core/sub/c.py": "C = 666\n"}, date="2026-04-01T00:00:00+00:00"
    )
    tree = work.git("rev-parse", f"{hotfix}^{{tree}}")
    merge = work.git(
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@e",
        "commit-tree",
        tree,
        "-p",
        hotfix,
        "-p",
        chain.head,
        "-m",
        "merge",
    )
    work.git("push", "-q", "origin", f"{merge}:refs/heads/farai/main")
    chain.pin_bridge(merge)
    assert git(chain.fork, "show", f"{merge}:megatron/core/sub/c.py") == "C = 666"
    code, report = check_pins_json(chain)
    assert code == 2, report
    assert "'megatron/core/sub/**'" in report["problems"][0]["message"]
    # Without the glob, the same pin is what it is: not the fork head.
    set_fork(chain, own_paths=[".fork-base.json"])
    code, report = check_pins_json(chain)
    assert code == 1, report


def test_where_the_package_is_every_path_the_fork_heads_tree_decides(tmp_path) -> None:  # type: ignore[no-untyped-def]
    chain = make_chain(tmp_path)
    set_fork(chain, tree_include="**", own_paths=[".fork-base.json", "megatron/core/b.py"])
    code, report = check_pins_json(chain)
    assert code == 2 and "megatron/core/b.py" in report["problems"][0]["message"], report
    set_fork(chain, tree_include="**", own_paths=[".fork-base.json", "README.fork.md"])
    assert check_pins_json(chain)[0] == 1  # the chain's own findings (its Bridge pins the base), no refusal
