"""A port drops a patch as absorbed only by effect: its 3-way result on the new base changes nothing.

Hashes (patch-id, zero-context patch-id) and provenance only name the upstream commit; they never drop a
patch on their own (a pick compared with the very commit it names is `test_port_provenance.py`'s). Each case is compared with plain `git rebase --onto` of the same branch (which keeps
what these rules used to drop), and `status --onto` must say what `port` then does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from forkctl.series import parse_patch
from tests.gitrepos import FORMAT_PATCH, Repo, git
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json, write_manifest

BRANCH = "farai/main"
LINES = [f"line {n}" for n in range(1, 21)]
LONG = "megatron/core/long.py"
OTHER = "megatron/core/other.py"


def edited(after: dict[int, str] | None = None, **changes: str) -> str:
    """LINES with some lines replaced (l5="five") and some inserted after a line number (after={5: "x"})."""
    lines = list(LINES)
    for key, value in changes.items():
        lines[int(key[1:]) - 1] = value
    out = []
    for number, line in enumerate(lines, start=1):
        out.append(line)
        if after and number in after:
            out.append(after[number])
    return "\n".join(out) + "\n"


BASE_FILES = {LONG: edited(), OTHER: "X = 1\n"}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))


def empty_setup(tmp_path: Path) -> SeriesSetup:
    return make_series(tmp_path, changes=[], extra_upstream_files=BASE_FILES)


def dev_at_base(setup: SeriesSetup) -> Repo:
    """The dev clone with upstream's newest commits fetched, detached at the base."""
    dev = setup.dev
    dev.git("fetch", "-q", str(setup.upstream.path), "main")
    dev.git("checkout", "-q", "--detach", setup.base)
    return dev


def own(dev: Repo, subject: str, files: dict[str, str | None], day: int) -> str:
    return dev.commit(f"{subject}\n\nWhy: our own change.\n", files, date=f"2026-03-{day:02d}T10:00:00+00:00")


def pick_amended(dev: Repo, upstream_commit: str, extra: dict[str, str | None]) -> str:
    """`git cherry-pick -x` of an upstream commit, with an own change amended into it."""
    dev.git("cherry-pick", "-x", upstream_commit)
    dev.write(extra)
    dev.git("add", "-A")
    dev.git("commit", "-q", "--amend", "--no-edit")
    return dev.head()


def export_dev(setup: SeriesSetup, dev: Repo) -> list[Path]:
    """The dev clone's base..HEAD as the toolkit's series (format-patch, as a maintainer makes it)."""
    out = setup.root / "patches" / "megatron-lm"
    for old in out.glob("*.patch"):
        old.unlink()
    names = dev.git(*FORMAT_PATCH, "-o", str(out), f"{setup.base}..HEAD").splitlines()
    files = [str(Path(name).relative_to(setup.root)) for name in names]
    write_manifest(setup.root, setup.base, setup.url, files)
    return [setup.root / f for f in files]


def fork_with_branch(setup: SeriesSetup, tmp_path: Path) -> Repo:
    fork = clone(setup.upstream, tmp_path / "fork.git", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data
    return fork


class Rebased:
    """Plain `git rebase --onto new old` of a branch: whether it stopped, how many commits it made, the
    tree it holds (at a stop: the commits before the stopping one) and the paths left unmerged."""

    def __init__(self, fork: Repo, tmp_path: Path, old_base: str, old_head: str, new_base: str) -> None:
        work = tmp_path / "rebase-work"
        git(tmp_path, "clone", "-q", str(fork.path), str(work))
        git(work, "checkout", "-q", "--detach", old_head)
        status = subprocess.run(
            ["git", "rebase", "-q", "--onto", new_base, old_base], cwd=work, capture_output=True, check=False
        ).returncode
        self.stopped = status != 0
        self.tree = git(work, "rev-parse", "HEAD^{tree}")
        self.made = int(git(work, "rev-list", "--count", f"{new_base}..HEAD"))
        self.unmerged = git(work, "diff", "--name-only", "--diff-filter=U").split()


def port(setup: SeriesSetup, fork: Repo, onto: str) -> tuple[int, dict]:
    return run_json(setup, "port", "--onto", onto, "--repo", str(fork.path))


def preview(setup: SeriesSetup, fork: Repo, onto: str) -> list[dict]:
    code, data = run_json(setup, "status", "--onto", onto, "--repo", str(fork.path))
    assert code in (0, 1), data
    return data["patches"]


def port_results(data: dict) -> list[str]:
    """Each patch's fate in port's words, as status --onto would name it."""
    results = []
    for step in data["steps"]:
        if step["absorbed"]:
            results.append("absorbed")
        else:
            results.append("partial" if step["partial"] else "applied")
    if "conflict" in data:
        results.append("conflicts")
    return results


def preview_results(patches: list[dict]) -> list[str]:
    names = []
    for item in patches:
        result = item["result"]
        if result.startswith("applies"):
            result = "partial" if "partial" in item else "applied"
        names.append(result)
    return names


def test_own_patch_adding_upstreams_lines_elsewhere_is_kept_like_rebase(tmp_path: Path) -> None:
    setup = empty_setup(tmp_path)
    # Upstream adds a line after line 5; our patch adds the very same line after line 15: the same
    # zero-context patch-id, but a change of its own (`git cherry` marks it +, `git rebase` keeps it).
    new_base = setup.upstream.commit("upstream: guard early", {LONG: edited(after={5: "    check()"})})
    dev = dev_at_base(setup)
    own(dev, "feat: guard late too", {LONG: edited(after={15: "    check()"})}, 1)
    export_dev(setup, dev)
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    cherry = fork.git("cherry", new_base, old_head)
    assert cherry.startswith("+ ")  # git's own view: not upstream
    previewed = preview(setup, fork, new_base)
    code, data = port(setup, fork, new_base)
    assert code == 0, data
    assert port_results(data) == ["applied"] == preview_results(previewed)
    rebased = Rebased(fork, tmp_path, setup.base, old_head, new_base)
    assert not rebased.stopped
    assert fork.git("rev-parse", f"{BRANCH}^{{tree}}") == rebased.tree
    assert fork.git("show", f"{BRANCH}:{LONG}").count("check()") == 2
    assert setup.manifest_data()["dropped"] == []


def test_amended_pick_keeps_its_own_lines_and_reports_the_upstream_part(tmp_path: Path) -> None:
    setup = empty_setup(tmp_path)
    upstream = setup.upstream
    picked = upstream.commit("upstream: line 10 (#7)", {LONG: edited(l10="TEN")})
    new_base = upstream.commit("upstream: unrelated", {"megatron/core/u.py": "U = 1\n"})
    dev = dev_at_base(setup)
    # A -x pick of upstream's commit with our own line amended into it: the provenance names a commit
    # the new base holds, but only the upstream half is there.
    pick_amended(dev, picked, {LONG: edited(l10="TEN", l17="OWN")})
    export_dev(setup, dev)
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    previewed = preview(setup, fork, new_base)
    code, data = port(setup, fork, new_base)
    assert code == 0, data
    assert port_results(data) == ["partial"] == preview_results(previewed)
    partial = data["steps"][0]["partial"]
    assert (partial["changed_lines"], partial["still_needed"]) == (4, 2)
    assert partial["upstream_commit"] == picked == previewed[0]["partial"]["upstream_commit"]
    assert "OWN" in fork.git("show", f"{BRANCH}:{LONG}")
    rebased = Rebased(fork, tmp_path, setup.base, old_head, new_base)
    assert not rebased.stopped
    assert fork.git("rev-parse", f"{BRANCH}^{{tree}}") == rebased.tree


def test_mixed_series_ports_like_rebase_and_status_onto_says_so(tmp_path: Path) -> None:
    setup = empty_setup(tmp_path)
    upstream = setup.upstream
    picked = upstream.commit("upstream: line 10 (#7)", {LONG: edited(l10="TEN")})
    took_ours = upstream.commit(
        "upstream: takes our other.py (#8)", {LONG: edited(l10="TEN"), OTHER: "X = 5\n"}
    )
    new_base = upstream.commit(
        "upstream: guard early", {LONG: edited(l10="TEN", after={3: "    check()"}), OTHER: "X = 5\n"}
    )
    dev = dev_at_base(setup)
    own(dev, "feat: other is five", {OTHER: "X = 5\n"}, 1)  # absorbed: upstream made the same change
    pick_amended(dev, picked, {LONG: edited(l10="TEN", l17="OWN")})  # partial
    own(dev, "feat: guard late", {LONG: edited(l10="TEN", l17="OWN", after={18: "    check()"})}, 2)
    own(dev, "docs: readme", {"README.md": "upstream\nforked\n"}, 3)
    export_dev(setup, dev)
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    previewed = preview(setup, fork, new_base)
    code, data = port(setup, fork, new_base)
    assert code == 0, data
    assert port_results(data) == ["absorbed", "partial", "applied", "applied"] == preview_results(previewed)
    absorbed = data["steps"][0]["absorbed"]
    assert (absorbed["reason"], absorbed["upstream_commit"]) == ("patch-id", took_ours)
    assert (previewed[0]["reason"], previewed[0]["upstream_commit"]) == ("patch-id", took_ours)
    dropped = setup.manifest_data()["dropped"]
    assert [(d["subject"], d["upstream_commit"]) for d in dropped] == [("feat: other is five", took_ours)]
    rebased = Rebased(fork, tmp_path, setup.base, old_head, new_base)
    assert not rebased.stopped and rebased.made == 3
    assert fork.git("rev-parse", f"{BRANCH}^{{tree}}") == rebased.tree


def test_two_ports_keep_every_provenance_line_and_add_none(tmp_path: Path) -> None:
    setup = empty_setup(tmp_path)
    upstream = setup.upstream
    picked = upstream.commit("upstream: line 10 (#7)", {LONG: edited(l10="TEN")})
    dev = dev_at_base(setup)
    # git's -x on a commit that already says where it came from adds a second line: kept, as git keeps it.
    first = own(dev, "feat: other", {OTHER: "X = 5\n"}, 1)
    dev.git("checkout", "-q", "--detach", setup.base)
    dev.git("cherry-pick", "-x", first)
    dev.git("checkout", "-q", "--detach", setup.base)
    dev.git("cherry-pick", "-x", "HEAD@{1}")
    pick_amended(dev, picked, {LONG: edited(l10="TEN", l17="OWN")})
    own(dev, "docs: readme", {"README.md": "upstream\nforked\n"}, 3)  # no provenance line at all
    files = export_dev(setup, dev)
    written = [parse_patch(path).provenance for path in files]  # as the maintainer's git wrote them
    assert [len(names) for names in written] == [2, 1, 0] and written[0][0] == first
    first_base = upstream.commit("upstream: unrelated", {"megatron/core/u.py": "U = 1\n"})
    second_base = upstream.commit("upstream: more", {"megatron/core/u.py": "U = 2\n"})
    fork = fork_with_branch(setup, tmp_path)
    for onto in (first_base, second_base):
        code, data = port(setup, fork, onto)
        assert code == 0, data
        manifest = setup.manifest_data()
        kept = [parse_patch(setup.root / entry["file"]).provenance for entry in manifest["series"]]
        # Every line kept, in order; none added (the own patch names no commit of this clone).
        assert kept == written, kept
        assert [entry.get("provenance") for entry in manifest["series"]] == [written[0], picked, None]
        assert run_json(setup, "lint")[0] == 0
        code, check = run_json(setup, "export", "--repo", str(fork.path), "--check")
        assert code == 0, check
    # And the files rebuild exactly the ported branch.
    code, again = run_json(
        setup, "apply", "--base", second_base, "--repo", str(fork.path), "--branch", "again"
    )
    assert code == 0, again
    assert again["head"] == fork.head(BRANCH)
