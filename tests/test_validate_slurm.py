"""`forkctl validate --launcher slurm` against a real one-node Slurm (tests/slurmcluster.py): bad input
refused before anything is submitted, a CPU-only job that fails for want of a GPU reported with its id,
state, exit code and log tail, Ctrl-C / SIGTERM cancelling the job, a time limit, a drained node.

The job runs forkctl validate on the node with --job-python. Where a test needs a job that runs long
(cancellation, the time limit), --job-python names a stand-in interpreter that only sleeps: a validate
that hangs on the node, as a wedged GPU test would.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from forkctl import manifest
from forkctl.gpu import evidence, signing
from forkctl.manifest.validation import SlurmSettings
from forkctl.slurm import script
from tests.sigint import sigint_delivered  # noqa: F401 (a fixture)
from tests.slurmcluster import PARTITION, SlurmCluster, running_cluster
from tests.test_evidence import FAKE_TORCH, GPU_SUITE, fake_installed, with_a_gpu_driver, write_files
from tests.test_signing import keypair
from tests.toolkit import Toolkit, make_toolkit

POLL = ("--poll", "0.3")


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    yield from running_cluster(tmp_path_factory)


def toolkit_at(tmp_path: Path, name: str = "tool kit's $HOME") -> Toolkit:
    """The GPU toolkit in a folder whose name a shell would split and expand: it must reach the job as data."""
    folder = tmp_path / name
    folder.mkdir()
    toolkit = make_toolkit(folder)
    write_files(toolkit.root, GPU_SUITE)
    return toolkit


def forkctl_argv(toolkit: Toolkit, *args: str) -> list[str]:
    return [sys.executable, "-m", "forkctl", "--manifest", str(toolkit.manifest), "validate", *args]


def run_slurm_validate(
    toolkit: Toolkit, env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    argv = forkctl_argv(toolkit, "--launcher", "slurm", "--gpus-per-node", "0", *POLL, *args)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def sleeper(tmp_path: Path) -> Path:
    """An interpreter that never finishes: the job's validate hangs. It leaves its PID in sleeper.pid."""
    path = tmp_path / "hanging-python"
    pid = shlex.quote(str(tmp_path / "sleeper.pid"))
    path.write_text(f"#!/bin/sh\necho $$ > {pid}\necho stand-in interpreter: sleeping\nexec sleep 600\n")
    path.chmod(0o755)
    return path


def no_leftovers(toolkit: Toolkit, cluster: SlurmCluster | None = None) -> None:
    assert not (toolkit.root / "validation").exists()
    jobs = toolkit.root / ".forkctl" / "slurm"
    assert not jobs.exists() or not any(jobs.iterdir()), list(jobs.iterdir())
    if cluster is not None:
        assert cluster.jobs() == []


# --- bad input: exit 2, nothing submitted ------------------------------------------------------------


def test_the_manifest_names_slurm_settings_and_old_manifests_stay_valid(tmp_path: Path) -> None:
    toolkit = toolkit_at(tmp_path, "plain")
    assert manifest.load(toolkit.manifest).validation.slurm.partition is None
    data = toolkit.manifest_data()
    data.setdefault("validation", {})["slurm"] = {
        "partition": "gpu",
        "time": "1:00:00",
        "container": "apptainer",
    }
    toolkit.write_manifest(data)
    settings = manifest.load(toolkit.manifest).validation.slurm
    assert (settings.partition, settings.time, settings.container) == ("gpu", "1:00:00", "apptainer")
    data["validation"]["slurm"]["time"] = "an hour"
    toolkit.write_manifest(data)
    proc = subprocess.run(forkctl_argv(toolkit, "--launcher", "slurm"), capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "'an hour' is not a Slurm time limit" in proc.stderr
    assert "manifest.yaml:" in proc.stderr


def test_without_sbatch_nothing_is_submitted(tmp_path: Path) -> None:
    toolkit = toolkit_at(tmp_path, "plain")
    tools = tmp_path / "bin"  # git, which loading the series needs, and no Slurm
    tools.mkdir()
    (tools / "git").symlink_to(shutil.which("git") or "git")
    env = {**os.environ, "PATH": os.pathsep.join([str(tools), os.path.dirname(sys.executable)])}
    proc = run_slurm_validate(toolkit, env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "sbatch" in proc.stderr and "not found on PATH" in proc.stderr
    assert "make setup-slurm" in proc.stderr
    no_leftovers(toolkit)


def test_bad_options_are_refused_before_anything_is_submitted(tmp_path: Path, cluster: SlurmCluster) -> None:
    toolkit = toolkit_at(tmp_path)
    env = cluster.env
    proc = run_slurm_validate(toolkit, env, "--partition", "nosuch")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Slurm has no partition 'nosuch' (sinfo lists: debug)" in proc.stderr
    proc = run_slurm_validate(toolkit, env, "--container-image", str(tmp_path / "missing.sqsh"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "container image" in proc.stderr and "does not exist" in proc.stderr
    proc = run_slurm_validate(toolkit, env, "--partition", "--wrap=id")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is not a Slurm name" in proc.stderr
    proc = run_slurm_validate(toolkit, env, "--nodes", "2")
    assert proc.returncode == 2 and "one node" in proc.stderr, proc.stderr
    no_leftovers(toolkit, cluster)


# --- jobs that end without evidence: exit 1 ----------------------------------------------------------


def test_a_cpu_job_fails_for_want_of_a_gpu_with_its_id_state_and_log(
    tmp_path: Path, cluster: SlurmCluster
) -> None:
    toolkit = toolkit_at(tmp_path)
    proc = run_slurm_validate(toolkit, cluster.env, "--quick", "--partition", PARTITION, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # the log, streamed while the job ran
    assert "job: forkctl: job " in proc.stderr
    assert "no CUDA device is available on this host" in proc.stderr
    data = json.loads(proc.stdout)
    job = data
    assert (job["state"], job["exit_code"]) == ("FAILED", "2:0")
    assert job["job_id"].isdigit()
    assert "no CUDA device is available on this host" in job["log_tail"]
    assert f"Slurm job {job['job_id']} FAILED (exit code 2:0" in data["problems"][0]["message"]
    no_leftovers(toolkit, cluster)


@pytest.mark.usefixtures("sigint_delivered")  # Ctrl-C reaches the child, even from a background job
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_or_ctrl_c_cancels_the_running_job(
    tmp_path: Path, cluster: SlurmCluster, sig: signal.Signals, code: int
) -> None:
    toolkit = toolkit_at(tmp_path)
    argv = forkctl_argv(
        toolkit, "--launcher", "slurm", "--gpus-per-node", "0", *POLL, "--job-python", str(sleeper(tmp_path))
    )
    log = tmp_path / "stderr.txt"
    with log.open("w") as err:
        proc = subprocess.Popen(argv, env=cluster.env, stdout=subprocess.PIPE, stderr=err, text=True)
        deadline = time.monotonic() + 60
        while "stand-in interpreter: sleeping" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert cluster.jobs(), log.read_text()
        proc.send_signal(sig)
        proc.communicate(timeout=60)
    assert proc.returncode == code, log.read_text()
    assert "cancelling Slurm job" in log.read_text()
    no_leftovers(toolkit, cluster)


@pytest.mark.slow(seconds=90)  # Slurm's least limit is a minute, enforced on a 30 s tick: handed out first
def test_a_job_past_its_time_limit_is_reported_as_timeout(tmp_path: Path, cluster: SlurmCluster) -> None:
    toolkit = toolkit_at(tmp_path)
    proc = run_slurm_validate(
        toolkit, cluster.env, "--time", "1", "--job-python", str(sleeper(tmp_path)), timeout=240
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "TIMEOUT" in proc.stdout and "hit its time limit" in proc.stdout, proc.stdout
    assert "stand-in interpreter: sleeping" in proc.stdout  # the log's tail
    no_leftovers(toolkit, cluster)


@pytest.fixture
def quick_node_timeout_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """slurmctld declares a silent slurmd's node down after 5 s (not 300)."""
    yield from running_cluster(tmp_path_factory, ("SlurmdTimeout=5",))


@pytest.mark.slow(seconds=30)  # SlurmdTimeout=5, then slurmctld's next ping of the node
def test_a_job_that_loses_its_node_is_reported_as_node_fail(
    tmp_path: Path, quick_node_timeout_cluster: SlurmCluster
) -> None:
    cluster = quick_node_timeout_cluster
    toolkit = toolkit_at(tmp_path)
    argv = forkctl_argv(
        toolkit, "--launcher", "slurm", "--gpus-per-node", "0", *POLL, "--job-python", str(sleeper(tmp_path))
    )
    proc = subprocess.Popen(argv, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "sleeper.pid").is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        cluster.daemons["slurmd"].kill()  # the node goes silent
        cluster.daemons["slurmd"].wait()
        out, err = proc.communicate(timeout=120)
    finally:
        if (tmp_path / "sleeper.pid").is_file():  # the job's own process, orphaned with its node
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int((tmp_path / "sleeper.pid").read_text()), signal.SIGKILL)
    assert proc.returncode == 1, out + err
    assert "NODE_FAIL" in out and "lost its node" in out, out
    no_leftovers(toolkit, cluster)


def test_a_drained_node_is_reported_with_its_reason(tmp_path: Path, cluster: SlurmCluster) -> None:
    toolkit = toolkit_at(tmp_path)
    cluster.run("scontrol", "update", "nodename=localhost", "state=drain", "reason=fan failure on rack 3")
    proc = run_slurm_validate(toolkit, cluster.env, "--pending-limit", "2", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    job = json.loads(proc.stdout)
    assert job["state"] == "PENDING"
    assert job["node_reasons"] == ["localhost (drained): fan failure on rack 3"]
    assert "waited past its pending limit" in job["detail"]
    no_leftovers(toolkit, cluster)


def test_the_manifest_settings_reach_sbatch(tmp_path: Path, cluster: SlurmCluster) -> None:
    """validation.slurm's partition is checked like --partition: the manifest is input too."""
    toolkit = toolkit_at(tmp_path)
    data = toolkit.manifest_data()
    data.setdefault("validation", {})["slurm"] = {"partition": "elsewhere", "gpus_per_node": 0}
    toolkit.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = subprocess.run(
        forkctl_argv(toolkit, "--launcher", "slurm"), env=cluster.env, capture_output=True, text=True
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Slurm has no partition 'elsewhere'" in proc.stderr
    no_leftovers(toolkit, cluster)


# --- a node that shows a GPU: stand-ins for the driver, torch and megatron-core --------------------


def stand_in_gpu_node(tmp_path: Path, cluster: SlurmCluster) -> dict[str, str]:
    """The job's environment (sbatch passes ours on) as on a GPU node: a stand-in nvidia-smi on PATH,
    a torch that reports one sm90 device, and a megatron-core the series applies to. The real forkctl
    validate runs on it, as on a CPU host its tests run the toolkit's GPU suite without torch."""
    torch = {**FAKE_TORCH}
    torch["torch/cuda.py"] += "\n\ndef is_available():\n    return True\n"
    write_files(tmp_path / "fake-torch", torch)
    site = tmp_path / "site-packages"
    fake_installed(site)
    env = with_a_gpu_driver(tmp_path, cluster.env)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "fake-torch"), str(site)])
    return env


def test_a_job_on_a_gpu_node_is_recorded_checked_and_signed_here(
    tmp_path: Path, cluster: SlurmCluster
) -> None:
    toolkit = toolkit_at(tmp_path)
    key, signer = keypair(tmp_path, "runner")
    proc = run_slurm_validate(
        toolkit, stand_in_gpu_node(tmp_path, cluster), "--quick", "--sign-key", str(key)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "job: running the GPU tests in tests/gpu on Fake H200 (sm90)" in proc.stderr
    assert "Slurm job" in proc.stdout and "completed" in proc.stdout
    files = list((toolkit.root / "validation").iterdir())
    digest = files[0].name.split(".")[0]
    assert sorted(f.name for f in files) == [f"{digest}.json", f"{digest}.json.sig"]
    run = evidence.load_evidence(toolkit.root / "validation" / f"{digest}.json").runs[0]
    assert (run.status, run.environment.tag, run.environment.gpu_name) == ("passed", "sm90", "Fake H200")
    assert [t.outcome for t in run.tests] == ["passed"]
    verdict = signing.verify(toolkit.root / "validation" / f"{digest}.json", [signer])
    assert verdict.ok, verdict
    assert not any((toolkit.root / ".forkctl" / "slurm").iterdir())
    assert cluster.jobs() == []


def test_evidence_from_a_node_whose_suite_differs_is_refused(tmp_path: Path, cluster: SlurmCluster) -> None:
    """The node edits the GPU suite before validate runs (a checkout that differs from the one forkctl
    was started in): the evidence it writes names another suite digest, and nothing is recorded."""
    toolkit = toolkit_at(tmp_path)
    node_python = tmp_path / "node-python"
    node_python.write_text(
        f"#!/bin/sh\necho '# edited on the node' >> tests/gpu/test_parity.py\nexec {sys.executable} \"$@\"\n"
    )
    node_python.chmod(0o755)
    env = stand_in_gpu_node(tmp_path, cluster)
    proc = run_slurm_validate(toolkit, env, "--quick", "--job-python", str(node_python))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the node's checkout differs" in proc.stdout
    assert "COMPLETED" in proc.stdout
    no_leftovers(toolkit, cluster)


# --- the batch script, run by bash with stand-ins for srun and scontrol --------------------------


@pytest.mark.parametrize("container", ["pyxis", "apptainer"])
def test_the_batch_script_hands_every_value_to_srun_as_one_argument(tmp_path: Path, container: str) -> None:
    """Paths with spaces, quotes and `$` reach srun (and the container runtime) intact, each one argument,
    and the rendezvous host is the allocation's first."""
    root = tmp_path / "it's a $HOME; `x`"
    root.mkdir()
    image = str(tmp_path / "my image's.sqsh")
    chosen = SlurmSettings(container=container)  # type: ignore[arg-type]
    args = script.validate_args(root / "manifest.yaml", root / "ev", ["--quick"])
    text = script.batch_script(chosen, root, "/opt/py thon/bin/python", args, image)
    bin_dir = tmp_path / "bin"
    write_files(
        bin_dir,
        {
            "srun": '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n',
            "scontrol": "#!/bin/sh\nprintf 'node-a\\nnode-b\\n'\n",
        },
    )
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.update({"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "node-[a-b]"})
    (tmp_path / "job.sh").write_text(text)
    proc = subprocess.run(["bash", str(tmp_path / "job.sh")], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "forkctl: job 42 on node-[a-b], rendezvous node-a:20042"
    forkctl = [
        "/opt/py thon/bin/python",
        "-m",
        "forkctl",
        "--manifest",
        str(root / "manifest.yaml"),
        "validate",
    ]
    forkctl += ["--out", str(root / "ev"), "--unsigned", "--quick"]
    if container == "pyxis":
        runtime = [
            f"--container-image={image}",
            f"--container-mounts={root}:{root}",
            f"--container-workdir={root}",
        ]
        assert lines[1:] == ["--nodes=1", "--ntasks=1", *runtime, "--nodelist=node-a", *forkctl]
    else:
        runtime = ["apptainer", "exec", "--nv", "--bind", str(root), image]
        assert lines[1:] == ["--nodes=1", "--ntasks=1", "--nodelist=node-a", *runtime, *forkctl]
