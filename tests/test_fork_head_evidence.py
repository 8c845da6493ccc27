"""Evidence for the tree consumers pin: the fork head built from a git archive of the upstream base,
named by its git tree id; upstream's own tests compared between the base and the fork head; the gate
refusing evidence for any other tree; required environments that are openly pending."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import msgspec
import pytest

from forkctl.errors import BadInput
from forkctl.git.repo import GitRepo
from forkctl.git.treehash import folder_tree_id
from forkctl.gpu import evidence, source, upstream
from forkctl.ops import replay
from forkctl.series import load_series
from tests.gitrepos import init_repo
from tests.test_evidence import gpu_toolkit, load, make_run, record, write_files
from tests.test_gate import gate_json, problems
from tests.toolkit import Toolkit

FORKCTL = [sys.executable, "-m", "forkctl"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


# --- the tree id of a folder ---------------------------------------------------------------------


def test_folder_tree_id_is_the_tree_git_writes(tmp_path: Path) -> None:
    files = {
        "pkg/a.py": "A = 1\n",
        "pkg/a.b": "sorted before a/ by git's rule, after it by plain string order\n",
        "pkg/a/x.py": "X = 1\n",
        "pkg/a-b/y.py": "Y = 1\n",
        "pkg/run.sh": "#!/bin/sh\n",
        "pkg/deep/er/z.txt": "z\n",
    }
    repo = init_repo(tmp_path / "repo", files)
    (repo.path / "pkg/run.sh").chmod(0o755)
    os.symlink("a.py", repo.path / "pkg/link.py")
    (repo.path / "pkg/empty").mkdir()  # git records no empty folder
    (repo.path / "pkg/__pycache__").mkdir()
    (repo.path / "pkg/__pycache__/a.cpython-312.pyc").write_bytes(b"\0")
    git(repo.path, "add", "-A", "pkg")
    git(repo.path, "rm", "-q", "--cached", "-r", "pkg/__pycache__")
    expected = git(repo.path, "write-tree", "--prefix=pkg/")
    assert folder_tree_id(repo.path / "pkg") == expected


# --- the fork head from a base archive -----------------------------------------------------------


def base_archive(toolkit: Toolkit, dest: Path, commit: str | None = None) -> Path:
    """`git archive` of the upstream base as a maintainer makes it for a GPU host."""
    upstream = toolkit.upstream.path
    git(upstream, "archive", "--format=tar.gz", "-o", str(dest), commit or toolkit.base, "megatron")
    return dest


def fork_head_tree(toolkit: Toolkit, tmp_path: Path) -> str:
    tmp_path.mkdir(exist_ok=True)
    """`git rev-parse <fork head>:megatron` where forkctl apply built the fork head."""
    clone = tmp_path / "clone.git"
    git(tmp_path, "clone", "-q", "--bare", str(toolkit.upstream.path), str(clone))
    subprocess.run(
        [
            *FORKCTL,
            "--manifest",
            str(toolkit.manifest),
            "apply",
            "--base",
            toolkit.base,
            "--repo",
            str(clone),
        ],
        check=True,
        capture_output=True,
    )
    return git(clone, "rev-parse", "farai/main:megatron")


def installed_with_helper(tmp_path: Path) -> Path:
    installed = tmp_path / "site-packages" / "megatron"
    write_files(installed.parent, {"megatron/core/a.py": "old\n", "megatron/core/helpers_cpp.so": "ELF"})
    return installed


def test_the_tested_tree_is_the_fork_heads_tree(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    series = load_series(load(toolkit))
    archive = base_archive(toolkit, tmp_path / "base.tgz")
    upstream = GitRepo(toolkit.upstream.path)

    def base_entries(names: list[str]) -> dict[str, str]:  # the base commit's own entries, from upstream
        return {name: entry.sha for name, entry in upstream.objects.tree_entries(toolkit.base, names).items()}

    prepared = source.from_base_archive(
        archive, series, installed_with_helper(tmp_path), tmp_path / "scratch", "megatron", base_entries
    )
    assert prepared.tested.source == "upstream-base"
    assert prepared.tested.base_commit == toolkit.base
    assert prepared.tested.package_tree == fork_head_tree(toolkit, tmp_path)
    assert prepared.tested.base_package_tree == git(
        toolkit.upstream.path, "rev-parse", f"{toolkit.base}:megatron"
    )
    # The compiled helper the source lacks comes from the installed release, after the ids were taken.
    assert prepared.tested.overlaid == ["megatron/core/helpers_cpp.so"]
    assert (prepared.site / "megatron/core/helpers_cpp.so").read_text() == "ELF"
    assert (prepared.site / "megatron/core/a.py").read_text() == "def a():\n    return 2\n"
    assert prepared.base_root is not None
    assert (prepared.base_root / "megatron/core/a.py").read_text() == "def a():\n    return 1\n"


def test_an_archive_of_another_commit_is_refused(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    later = toolkit.upstream.commit("upstream moves", {"megatron/core/b.py": "def b():\n    return 3\n"})
    archive = base_archive(toolkit, tmp_path / "later.tgz", later)
    with pytest.raises(BadInput, match="not the manifest's base") as raised:
        source.from_base_archive(
            archive, load_series(load(toolkit)), installed_with_helper(tmp_path), tmp_path / "s", "megatron"
        )
    assert toolkit.base in (raised.value.hint or "")


def test_an_archive_that_escapes_its_folder_is_refused(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    archive = tmp_path / "evil.tar"
    payload = tmp_path / "payload"
    payload.write_text("x\n")
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT, pax_headers={"comment": toolkit.base}) as tar:
        tar.add(payload, arcname="../outside.py")
    with pytest.raises(BadInput, match="outside"):
        source.from_base_archive(
            archive, load_series(load(toolkit)), installed_with_helper(tmp_path), tmp_path / "s", "megatron"
        )
    assert not (tmp_path / "outside.py").exists()


# --- upstream's tests, base against fork head ----------------------------------------------------


def outcome(nodeid: str, kind: str) -> evidence.TestOutcome:
    return evidence.TestOutcome(nodeid=nodeid, outcome=kind, duration_s=0.1)  # type: ignore[arg-type]


def test_only_a_test_that_passed_on_the_base_can_newly_fail() -> None:
    base = [outcome("t::kept", "passed"), outcome("t::broken", "passed"), outcome("t::needs_te", "failed")]
    head = [
        outcome("t::kept", "passed"),
        outcome("t::broken", "error"),
        outcome("t::needs_te", "failed"),
        outcome("t::series_own", "failed"),
    ]
    record_ = upstream.compare(["t"], base, head, (1, 1))
    assert record_.newly_failing == ["t::broken"]
    assert record_.head_only_failing == ["t::series_own"]
    assert (record_.base.passed, record_.base.failed, record_.head.errors) == (2, 1, 1)
    assert not record_.ok
    assert upstream.compare(["t"], base, base, (1, 1)).ok


def test_upstream_tests_run_on_each_tree_from_that_tree(tmp_path: Path) -> None:
    """A real pytest run per tree: the base's copy of the module passes, the fork head's breaks it."""
    trees = {}
    for name, value in (("base", 1), ("head", 2)):
        root = tmp_path / name
        write_files(
            root,
            {
                "megatron/__init__.py": "",
                "megatron/mod.py": f"VALUE = {value}\n",
                "tests/__init__.py": "",
                "tests/test_mod.py": "from megatron.mod import VALUE\n\n\ndef test_value():\n    assert VALUE == 1\n",
            },
        )
        trees[name] = root
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    result = upstream.regression(
        sys.executable,
        ["tests/test_mod.py", "tests/absent_here.py"],
        (trees["base"], trees["head"]),
        env,
        tmp_path / "site",
        120,
        lambda _message: None,
    )
    assert result.base.passed == 1
    assert result.newly_failing == ["tests/test_mod.py::test_value"]


# --- the gate ------------------------------------------------------------------------------------


def test_gate_refuses_evidence_for_the_installed_release(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    loaded = load(toolkit)
    installed = evidence.TestedTree(
        source="installed", package_tree="3" * 40, distribution="megatron-core 0.19.2"
    )
    record(toolkit, make_run(loaded, tested=installed))
    code, payload = gate_json(toolkit)
    assert code == 1
    assert any("tested megatron-core 0.19.2, not the fork head" in p for p in problems(payload))


def test_gate_refuses_a_fork_head_built_on_another_base(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    loaded = load(toolkit)
    other = evidence.TestedTree(source="upstream-base", package_tree="3" * 40, base_commit="4" * 40)
    record(toolkit, make_run(loaded, tested=other))
    code, payload = gate_json(toolkit)
    assert code == 1
    assert any(f"built on {'4' * 40}, not on the base" in p for p in problems(payload))


def with_validation(toolkit: Toolkit, **values: object) -> None:
    data = toolkit.manifest_data()
    data["validation"].update(values)
    toolkit.write_manifest(data)


def regression(newly: list[str]) -> evidence.UpstreamRegression:
    counts = evidence.TestCounts(passed=3)
    return evidence.UpstreamRegression(
        paths=["tests/unit_tests/transformer/moe"],
        base=counts,
        head=counts,
        newly_failing=newly,
        head_only_failing=[],
        base_exit_code=0,
        head_exit_code=1 if newly else 0,
        failure_messages={nodeid: "AssertionError: the experts were not packed" for nodeid in newly},
    )


def test_gate_requires_upstream_tests_no_worse_on_the_fork_head(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, upstream_tests=["tests/unit_tests/transformer/moe"])
    loaded = load(toolkit)
    record(toolkit, make_run(loaded))
    code, payload = gate_json(toolkit)
    assert code == 1
    assert any("records no run of upstream's tests" in p for p in problems(payload))
    run = make_run(loaded)
    record(toolkit, msgspec.structs.replace(run, upstream_tests=regression(["t.py::test_x"])))
    code, payload = gate_json(toolkit)
    assert code == 1
    said = (
        "t.py::test_x passes on the base and fails on the fork head in the evidence for sm90: AssertionError"
    )
    assert any(said in p for p in problems(payload)), problems(payload)
    record(toolkit, msgspec.structs.replace(run, upstream_tests=regression([])))
    assert gate_json(toolkit)[0] == 0


def test_a_pending_environment_is_said_never_counted_and_can_be_insisted_on(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, require=["sm90", "sm90-ep2"], pending={"sm90-ep2": "no 2-GPU host was lent"})
    loaded = load(toolkit)
    record(toolkit, make_run(loaded))
    code, payload = gate_json(toolkit, "--allow-pending", "sm90-ep2")
    assert code == 0, problems(payload)
    assert payload["pending"] == {"sm90-ep2": "no 2-GPU host was lent"}
    warnings = [p["message"] for p in payload["problems"] if p["level"] == "warning"]
    assert any("sm90-ep2 is required but PENDING" in w and "no 2-GPU host was lent" in w for w in warnings)
    # Named on the command line, it is required after all.
    code, payload = gate_json(toolkit, "--require", "sm90-ep2")
    assert code == 1
    assert any("no evidence for environment sm90-ep2" in p for p in problems(payload))


def test_a_pending_environment_counts_only_evidence_that_would_pass(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, require=["sm90", "sm90-nvl"], pending={"sm90-nvl": "no NVL host"})
    loaded = load(toolkit)
    installed = evidence.TestedTree(source="installed", package_tree="3" * 40)
    record(toolkit, make_run(loaded))
    record(toolkit, make_run(loaded, tag="sm90-nvl", tested=installed))
    code, payload = gate_json(toolkit, "--allow-pending", "sm90-nvl")
    assert code == 0, problems(payload)
    assert payload["covered"] == ["sm90"]
    assert gate_json(toolkit)[0] == 1  # not accepted by name: the run that would not pass covers nothing
    # Once it is recorded properly, the gate says the pending entry is obsolete.
    record(toolkit, make_run(loaded, tag="sm90-nvl"))
    code, payload = gate_json(toolkit)
    warnings = [p["message"] for p in payload["problems"] if p["level"] == "warning"]
    assert code == 0 and payload["covered"] == ["sm90", "sm90-nvl"]
    assert any("listed in validation.pending but the evidence now covers it" in w for w in warnings)


def test_pending_must_name_a_required_environment_with_a_reason(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, pending={"sm100": "no B200"})
    code, payload = gate_json(toolkit)
    assert code == 2
    assert "only a required tag can be pending" in payload["problems"][0]["message"]


def test_a_stale_run_of_a_pending_environment_is_no_problem_of_its_own(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, require=["sm90", "sm90-nvl"], pending={"sm90-nvl": "no NVL host"})
    loaded = load(toolkit)
    record(toolkit, make_run(loaded, tag="sm90-nvl"))
    (toolkit.root / "tests/gpu/test_parity.py").write_text("def test_parity():\n    pass\n")
    code, payload = gate_json(toolkit, "--allow-pending", "sm90-nvl")
    assert code == 1
    assert all("sm90-nvl" not in p for p in problems(payload)), problems(payload)
    assert any("no evidence for environment sm90 " in p for p in problems(payload))


def test_gate_with_an_upstream_clone_checks_the_exact_tested_tree(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    loaded = load(toolkit)
    clone = tmp_path / "clone.git"
    git(tmp_path, "clone", "-q", "--bare", str(toolkit.upstream.path), str(clone))
    exact = fork_head_tree(toolkit, tmp_path / "elsewhere")
    tested = evidence.TestedTree(source="upstream-base", package_tree=exact, base_commit=toolkit.base)
    record(toolkit, make_run(loaded, tested=tested))
    code, payload = gate_json(toolkit, "--repo", str(clone))
    assert code == 0, problems(payload)
    assert payload["fork_head_tree"] == exact
    wrong = msgspec.structs.replace(tested, package_tree="5" * 40)
    record(toolkit, make_run(loaded, tested=wrong))
    code, payload = gate_json(toolkit, "--repo", str(clone))
    assert code == 1
    assert any(f"but the fork head apply(series, base) has {exact}" in p for p in problems(payload))
    # Without the clone the gate can only check the recorded base.
    assert gate_json(toolkit)[0] == 0


@pytest.mark.parametrize("field", ["package_tree", "base_package_tree", "base_commit"])
def test_a_recorded_tree_or_base_that_is_no_object_name_is_malformed(tmp_path: Path, field: str) -> None:
    # Without an upstream clone nothing compares the recorded tree: garbage there must not pass (nor
    # be taken for "another base").
    toolkit = gpu_toolkit(tmp_path)
    loaded = load(toolkit)
    exact = evidence.TestedTree(source="upstream-base", package_tree="3" * 40, base_commit=toolkit.base)
    record(toolkit, make_run(loaded, tested=msgspec.structs.replace(exact, **{field: "megatron tree"})))
    code, payload = gate_json(toolkit)
    assert code == 2, payload
    message = payload["problems"][0]["message"]
    assert "malformed evidence" in message and field in message and "megatron tree" in message


def test_the_fork_head_tree_of_a_package_path_that_is_no_folder_is_none(tmp_path: Path) -> None:
    # The gate compares the tested tree with this: a file (or gitlink) at the path is no package tree.
    upstream_repo = init_repo(
        tmp_path / "up", {"megatron": "a file, not the package\n", "pkg/a.py": "A = 1\n"}
    )
    repo, base = GitRepo(upstream_repo.path), upstream_repo.head()
    assert replay.fork_head_tree(repo, base, [], "pkg") == upstream_repo.head("HEAD:pkg")
    assert replay.fork_head_tree(repo, base, [], "megatron") is None
