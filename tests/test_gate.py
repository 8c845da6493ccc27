"""forkctl gate: passes only on evidence for exactly this series, test suite and environments."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from forkctl.cli import cli
from forkctl.series import load_series
from tests.test_evidence import gpu_toolkit, load, make_run, record
from tests.toolkit import Toolkit


def gate(toolkit: Toolkit, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--manifest", str(toolkit.manifest), "gate", *args])


def gate_json(toolkit: Toolkit, *args: str) -> tuple[int, dict]:
    result = gate(toolkit, "--json", *args)
    return result.exit_code, json.loads(result.stdout)


def problems(payload: dict) -> list[str]:
    return [p["message"] for p in payload["problems"] if p["level"] == "error"]


def test_passes_on_matching_evidence(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    path = record(toolkit)
    code, payload = gate_json(toolkit)
    assert code == 0, payload
    assert payload["ok"] is True
    assert payload["covered"] == ["sm90"]
    assert payload["series_digest"] == load_series(load(toolkit)).digest
    assert payload["evidence_file"] == path.relative_to(toolkit.root).as_posix()
    assert "gate: ok" in gate(toolkit).output


def test_fails_without_any_evidence(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    code, payload = gate_json(toolkit)
    assert code == 1
    assert any("no GPU evidence for series" in m for m in problems(payload))


def test_edited_patch_is_named(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit)
    second = toolkit.patch_files[1]
    second.write_bytes(second.read_bytes().replace(b"Why: test series patch 2.", b"Why: edited."))
    code, payload = gate_json(toolkit)
    assert code == 1
    messages = problems(payload)
    assert any(f"patch {second.name} changed since the evidence was recorded" in m for m in messages), (
        messages
    )
    assert not any(toolkit.patch_files[0].name in m for m in messages)
    assert "run `forkctl validate --source base.tgz` on a GPU" in payload["problems"][0]["hint"]


def test_new_patch_and_moved_base_are_named(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit)
    data = toolkit.manifest_data()
    data["series"] = data["series"][:1]
    data["upstream"]["base"] = toolkit.upstream.commit("upstream moves", {"README.md": "moved\n"})
    toolkit.write_manifest(data)
    messages = problems(gate_json(toolkit)[1])
    assert any("the upstream base moved from" in m for m in messages), messages
    assert any(
        f"patch {toolkit.patch_files[1].name} was in the evidence but is no longer in the series" in m
        for m in messages
    ), messages


def test_edited_gpu_test_is_named(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit)
    test_file = toolkit.root / "tests/gpu/test_parity.py"
    test_file.write_text(test_file.read_text() + "\n\ndef test_more():\n    pass\n")
    code, payload = gate_json(toolkit)
    assert code == 1
    messages = problems(payload)
    assert any("the GPU tests changed" in m and "tests/gpu/test_parity.py changed" in m for m in messages), (
        messages
    )


def test_edited_shared_fixture_counts_as_a_gpu_test_change(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit)
    (toolkit.root / "tests/_helpers.py").write_text("def helper():\n    return 3\n")
    messages = problems(gate_json(toolkit)[1])
    assert any("tests/_helpers.py changed" in m for m in messages), messages


def test_failed_test_in_the_evidence_is_named(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    outcomes = {
        "tests/gpu/test_parity.py::test_parity": "passed",
        "tests/gpu/test_parity.py::test_grad": "failed",
    }
    record(toolkit, make_run(load(toolkit), outcomes=outcomes))
    code, payload = gate_json(toolkit)
    assert code == 1
    assert problems(payload) == [
        "test tests/gpu/test_parity.py::test_grad failed in the evidence for sm90: AssertionError: rel_l2 0.3 > 0"
    ]


def test_a_skipped_test_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    outcomes = {
        "tests/gpu/test_parity.py::test_parity": "passed",
        "tests/gpu/test_parity.py::test_ep4": "skipped",
    }
    record(toolkit, make_run(load(toolkit), outcomes=outcomes))
    code, payload = gate_json(toolkit)
    assert code == 0
    warnings = [p["message"] for p in payload["problems"] if p["level"] == "warning"]
    # (the toolkit's upstream.url does not answer here: the gate also says it compared no tree)
    skips = [w for w in warnings if "NOT compared" not in w]
    assert len(skips) == 1 and "tests/gpu/test_parity.py::test_ep4 was skipped" in skips[0]


def test_evidence_where_nothing_passed_is_rejected(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit, make_run(load(toolkit), outcomes={"tests/gpu/test_parity.py::test_parity": "skipped"}))
    messages = problems(gate_json(toolkit)[1])
    assert messages == ["the evidence for sm90 records no test that ran and passed"]


def test_missing_required_environment(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit)
    code, payload = gate_json(toolkit, "--require", "sm90-ep4")
    assert code == 1
    assert payload["required"] == ["sm90", "sm90-ep4"]
    assert problems(payload) == ["no evidence for environment sm90-ep4 (the evidence covers: sm90)"]
    # The manifest's list counts too: evidence only for another GPU does not cover sm90.
    toolkit2 = gpu_toolkit(tmp_path / "second")
    record(toolkit2, make_run(load(toolkit2), tag="sm100"))
    messages = problems(gate_json(toolkit2)[1])
    assert messages == ["no evidence for environment sm90 (the evidence covers: sm100)"]


def test_a_failed_run_on_another_environment_still_fails(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit)
    bad = make_run(load(toolkit), tag="sm100", outcomes={"tests/gpu/test_parity.py::test_parity": "error"})
    record(toolkit, bad)
    messages = problems(gate_json(toolkit)[1])
    assert len(messages) == 1, messages
    assert "test tests/gpu/test_parity.py::test_parity errored in the evidence for sm100" in messages[0]


def test_malformed_evidence_is_a_clear_error(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    path = record(toolkit)
    path.write_text(path.read_text().replace('"runs"', '"rnus"'))
    result = gate(toolkit)
    assert result.exit_code == 2
    assert str(path) in result.output
    assert "malformed evidence" in result.output
    code, payload = gate_json(toolkit)
    assert code == 2 and payload["ok"] is False and path.name in payload["error"]


def test_malformed_old_evidence_is_skipped_with_a_warning(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    old = record(toolkit)
    old.write_text("{")
    toolkit.patch_files[0].write_bytes(toolkit.patch_files[0].read_bytes() + b"\n")
    code, payload = gate_json(toolkit)
    assert code == 1
    warnings = [p["message"] for p in payload["problems"] if p["level"] == "warning"]
    assert any(old.name in w and "not valid JSON" in w for w in warnings), warnings


def test_github_annotations(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    summary = tmp_path / "summary.md"
    proc = subprocess.run(
        [sys.executable, "-m", "forkctl", "--manifest", str(toolkit.manifest), "gate", "--github"],
        capture_output=True,
        text=True,
        env={**_env(), "GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert proc.returncode == 1
    assert "::error" in proc.stdout and "no GPU evidence for series" in proc.stdout
    assert "forkctl gate: failed" in summary.read_text()


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def _env_rows(toolkit: Toolkit, *args: str) -> dict[str, str]:
    """The environment table of the text report: {tag: status}."""
    output = gate(toolkit, *args).output
    lines = output.split("required GPU environments\n", 1)[1].splitlines()[2:]
    rows = {}
    for line in lines:
        if not line.strip():
            break
        tag, status, *_ = re.split(r"\s{2,}", line.strip())  # environment, status, baseline
        rows[tag] = status
    return rows


def test_require_of_a_missing_environment_leaves_a_covered_one_passed(tmp_path: Path) -> None:
    """`gate --require sm90-ep4` fails for sm90-ep4 alone: sm90's passing evidence is not put in doubt."""
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit)
    assert gate(toolkit, "--require", "sm90-ep4").exit_code == 1
    assert _env_rows(toolkit, "--require", "sm90-ep4") == {"sm90": "passed", "sm90-ep4": "missing"}


def test_an_environment_with_its_own_failure_is_failed_and_the_other_passed(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit)
    bad = make_run(load(toolkit), tag="sm100", outcomes={"tests/gpu/test_parity.py::test_parity": "failed"})
    record(toolkit, bad)
    rows = _env_rows(toolkit, "--require", "sm100")
    assert rows["sm90"] == "passed", rows
    assert rows["sm100"].startswith("failed"), rows


def _with_benchmark(run, benchmark: dict):
    import msgspec

    return msgspec.structs.replace(run, benchmark=benchmark)


def _bench(baseline: dict | None) -> dict:
    arms = {"torch_grouped": {"speedup_vs_per_expert": 6.5}}
    if baseline and baseline["name"] == "transformer_engine":
        arms["torch_grouped"]["speedup_vs_te"] = 1.4
    bench = {"status": "ok", "sizes": [{"routed_rows": 131072, "arms": arms}]}
    if baseline is not None:
        bench["baseline"] = baseline
    return bench


def test_the_gate_names_the_baseline_each_run_measured(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    loaded = load(toolkit)
    te = {"name": "transformer_engine", "version": "2.20.2", "layer_arm": "te_grouped", "gemm_arm": "gemm_te"}
    record(toolkit, _with_benchmark(make_run(loaded), _bench(te)))
    code, payload = gate_json(toolkit)
    assert code == 0, payload
    assert payload["baselines"]["sm90"] == "Transformer Engine 2.20.2 (torch_grouped 1.40x at 131,072 rows)"
    assert "baseline" in gate(toolkit).output and "Transformer Engine 2.20.2" in gate(toolkit).output


def test_a_run_without_a_named_baseline_says_per_expert_loop(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    loaded = load(toolkit)
    record(toolkit, _with_benchmark(make_run(loaded), _bench(None)))
    payload = gate_json(toolkit)[1]
    assert payload["baselines"]["sm90"] == "per-expert loop (torch_grouped 6.50x at 131,072 rows)"
    record(toolkit, make_run(loaded))  # no benchmark at all (validate --quick)
    assert gate_json(toolkit)[1]["baselines"]["sm90"] == "none measured (no benchmark in this run)"
