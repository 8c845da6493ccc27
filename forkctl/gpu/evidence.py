"""GPU evidence: what `forkctl validate` records and what `forkctl gate` demands before a merge.

Evidence is bound to exactly what it tested:
- the series digest (`Series.digest`: sha256 over the base SHA and every patch file's bytes, in order);
- the GPU test-suite digest (`suite_record` below: the files under the suite folder, the conftest
  files pytest loads above them, and the repository modules they import). The folder depends on the
  environment: `validation.gpu_tests` for a single-GPU tag such as `sm90`, MULTIGPU_TESTS for an
  expert-parallel tag such as `sm90-ep4` (`forkctl validate --ep 4`); each run records its folder;
- the environment (GPU, compute capability, driver, torch, CUDA, cuBLAS, megatron-core, TE), summarised
  in a tag such as `sm90` that the manifest's `validation.require` lists.

Layout: one file per series digest, `<evidence_dir>/<series-digest>.json`, holding a list of runs, at
most one per environment tag (a new run for a tag replaces the old one, failed or not: the newest
result is the truth). A benchmark plot sits next to it as `<series-digest>-<tag>.png`.

Nothing here runs a GPU or imports torch: the probe that captures the environment is a script run in
the target interpreter by `forkctl validate`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import msgspec

from forkctl import schema
from forkctl.errors import BadInput
from forkctl.files import atomic_write_text
from forkctl.gpu import signing
from forkctl.manifest import Manifest
from forkctl.series import Series

SCHEMA = 1
RERUN_HINT = "run `forkctl validate` on a GPU host and commit the evidence file it writes"
SIGN_HINT = (
    "run `forkctl validate --sign-key KEY` on a GPU host whose public key is in validation.allowed_signers, "
    "and commit the evidence file and its .sig; never edit evidence by hand"
)
# Files under the GPU test folder that are not part of the suite: caches and editor droppings.
IGNORED_PARTS = {"__pycache__", ".pytest_cache"}
IGNORED_SUFFIXES = {".pyc", ".pyo", ".swp"}

Outcome = Literal["passed", "failed", "error", "skipped"]
# The multi-GPU suite (`forkctl validate --ep N`) and the tag suffix its runs carry (sm90-ep4).
MULTIGPU_TESTS = "tests/multigpu"
EP_TAG = re.compile(r"-ep(\d+)$")


# --- the schema -----------------------------------------------------------------------------------


class _Model(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pass


class TestOutcome(_Model):
    nodeid: str
    outcome: Outcome
    duration_s: float
    message: str | None = None  # the first line of the failure or skip reason
    properties: dict[str, str] = msgspec.field(
        default_factory=dict
    )  # record_property figures (error norms...)


class Environment(_Model):
    tag: str  # what `validation.require` names, e.g. "sm90"
    gpu_name: str
    gpu_count: int
    compute_capability: str  # "9.0"
    driver: str
    torch: str
    cuda: str
    cublas: str
    megatron_core: str
    transformer_engine: str  # a version, or "absent"
    python: str
    platform: str


class SuiteRecord(_Model):
    root: str  # the suite folder the run covered: validation.gpu_tests, or MULTIGPU_TESTS for -epN tags
    digest: str
    files: dict[str, str]  # relative path -> sha256 of its bytes


class PatchRecord(_Model):
    file: str
    subject: str
    sha256: str


class Run(_Model):
    status: Literal["passed", "failed"]
    environment: Environment
    gpu_tests: SuiteRecord
    tests: list[TestOutcome]
    pytest_exit_code: int
    started_at: datetime
    finished_at: datetime
    forkctl_version: str
    benchmark: dict[str, Any] | None = None  # bench/grouped_gemm.py's JSON, or {"status": "skipped"}
    plot: str | None = None  # file name of the plot next to the evidence, when one was drawn
    report_sha256: str | None = None  # sha256 of the raw JUnit XML the `tests` list was parsed from


class Evidence(_Model):
    schema_: Literal[1] = msgspec.field(name="schema")
    series_digest: str
    base: str
    patches: list[PatchRecord]
    runs: list[Run] = msgspec.field(default_factory=list)

    def run_for(self, tag: str) -> Run | None:
        return next((run for run in self.runs if run.environment.tag == tag), None)


# --- digests --------------------------------------------------------------------------------------


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def patch_records(manifest: Manifest, series: Series) -> list[PatchRecord]:
    return [
        PatchRecord(
            file=_rel(patch.path, manifest.root), subject=patch.subject, sha256=sha256_bytes(patch.raw)
        )
        for patch in series.patches
    ]


def _rel(path: Path, root: Path) -> str:
    # The folder is resolved, not the file: a symlinked file is named where it is, not where it points.
    return (path.parent.resolve() / path.name).relative_to(root.resolve()).as_posix()


def _suite_member(path: Path) -> bool:
    return path.is_file() and not (set(path.parts) & IGNORED_PARTS) and path.suffix not in IGNORED_SUFFIXES


def _imported_modules(source: bytes) -> set[str]:
    """Dotted names of every module a Python file imports (absolute imports only)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()  # the file's bytes still count; pytest will report the error itself
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _module_file(root: Path, dotted: str, package: str) -> Path | None:
    """The file under the tests package that `dotted` names, if it is one (e.g. tests._patched)."""
    if dotted.split(".")[0] != package:
        return None
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def ep_size(tag: str) -> int | None:
    """N for an expert-parallel environment tag (`sm90-ep4` -> 4), None for any other tag."""
    match = EP_TAG.search(tag)
    return int(match.group(1)) if match else None


def suite_root(manifest: Manifest, tag: str) -> str:
    """The test folder whose run an environment's evidence must come from."""
    return MULTIGPU_TESTS if ep_size(tag) is not None else manifest.validation.gpu_tests


def suite_files(manifest: Manifest, root: str | None = None) -> list[Path]:
    """Every file a GPU test suite consists of, sorted by relative path.

    `root` is the suite folder (default `validation.gpu_tests`; MULTIGPU_TESTS for the EP suite).
    Precisely: (1) every file under that folder except caches; (2) each `conftest.py`
    and `__init__.py` in the folders between the repository root and that folder, which pytest loads
    for these tests; (3) every module of the same top-level package (e.g. `tests.*`) that those files
    import, transitively, such as a shared fixture that builds the patched package.
    """
    suite = root or manifest.validation.gpu_tests
    repo = manifest.root
    suite_dir = repo / suite
    if not suite_dir.is_dir():
        if suite != manifest.validation.gpu_tests:
            raise BadInput(
                f"no multi-GPU test suite at {suite}/",
                hint="restore the folder with the @pytest.mark.multigpu tests",
            )
        raise BadInput(
            f"no GPU test suite at {suite}/ (validation.gpu_tests in {manifest.path.name})",
            hint="create the folder with the @pytest.mark.gpu tests, or point validation.gpu_tests at it",
        )
    found = {path for path in suite_dir.rglob("*") if _suite_member(path)}
    rel_parts = PurePosixPath(suite).parts
    for depth in range(len(rel_parts)):
        folder = repo.joinpath(*rel_parts[:depth])
        found.update(p for p in (folder / "conftest.py", folder / "__init__.py") if depth and p.is_file())
    found.update(p for p in (repo / "conftest.py",) if p.is_file())
    package = rel_parts[0]
    pending = [p for p in found if p.suffix == ".py"]
    while pending:
        for dotted in _imported_modules(pending.pop().read_bytes()):
            module = _module_file(repo, dotted, package)
            if module is not None and module not in found:
                found.add(module)
                pending.append(module)
    return sorted(found, key=lambda p: _rel(p, repo))


def suite_digest(files: dict[str, str]) -> str:
    """sha256 over `path NUL sha256(bytes) LF` for each file in path order: names and contents count."""
    hasher = hashlib.sha256()
    for rel in sorted(files):
        hasher.update(f"{rel}\0{files[rel]}\n".encode())
    return hasher.hexdigest()


def suite_record(manifest: Manifest, root: str | None = None) -> SuiteRecord:
    """The suite at `root` (default `validation.gpu_tests`) as it is now: its files and their digest."""
    suite = root or manifest.validation.gpu_tests
    files = {
        _rel(path, manifest.root): sha256_bytes(path.read_bytes()) for path in suite_files(manifest, suite)
    }
    return SuiteRecord(root=suite, digest=suite_digest(files), files=files)


class _CurrentSuites:
    """The current suite of each folder a run may have covered, computed once per folder."""

    def __init__(self, manifest: Manifest) -> None:
        self._manifest = manifest
        self._by_root: dict[str, SuiteRecord] = {}

    def get(self, root: str) -> SuiteRecord:
        if root not in self._by_root:
            try:
                self._by_root[root] = suite_record(self._manifest, root)
            except BadInput:
                if root == self._manifest.validation.gpu_tests:
                    raise
                # The folder is gone: every run recorded from it is stale (all its files "were removed").
                self._by_root[root] = SuiteRecord(root=root, digest=suite_digest({}), files={})
        return self._by_root[root]

    def is_current(self, run: Run) -> bool:
        return run.gpu_tests.digest == self.get(run.gpu_tests.root).digest


# --- reading and writing evidence files ----------------------------------------------------------


def evidence_dir(manifest: Manifest, out: Path | None = None) -> Path:
    return out if out is not None else manifest.root / manifest.validation.evidence_dir


def evidence_path(folder: Path, series_digest: str) -> Path:
    return folder / f"{series_digest}.json"


MAX_EVIDENCE_BYTES = 16 << 20  # one run's evidence is a few kilobytes; a runaway file is refused


def load_evidence(path: Path) -> Evidence:
    """Parse one evidence file; raise BadInput naming the file and what is wrong with it."""
    hint = f"restore {path.name} from git, or delete it and {RERUN_HINT}"
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise BadInput(f"{path}: evidence must be a regular file, not a link or a device", hint)
    try:
        if path.stat().st_size > MAX_EVIDENCE_BYTES:
            raise BadInput(f"{path}: {path.stat().st_size} bytes is too large for an evidence file", hint)
        data = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise BadInput(f"{path}: malformed evidence: nested too deeply", hint) from None
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{path}: malformed evidence: not valid JSON (line {exc.lineno}: {exc.msg})", hint
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read evidence: {exc}", hint) from None
    try:
        evidence = msgspec.convert(data, Evidence)
    except msgspec.ValidationError as exc:
        _, message = schema.describe(exc, data, Evidence)
        raise BadInput(f"{path}: malformed evidence: {message}", hint) from None
    if path.stem != evidence.series_digest:
        raise BadInput(
            f"{path}: malformed evidence: it records series digest {evidence.series_digest} "
            f"but is named for {path.stem}",
            hint,
        )
    return evidence


def dump_evidence(evidence: Evidence) -> str:
    payload = msgspec.to_builtins(evidence)
    return json.dumps(payload, indent=2, sort_keys=False) + "\n"


def record_run(manifest: Manifest, series: Series, run: Run, folder: Path) -> Path:
    """Add `run` to the evidence file of this series, replacing an earlier run for the same tag."""
    path = evidence_path(folder, series.digest)
    runs: list[Run] = []
    if path.exists():
        runs = [r for r in load_evidence(path).runs if r.environment.tag != run.environment.tag]
    evidence = Evidence(
        schema_=SCHEMA,
        series_digest=series.digest,
        base=series.base,
        patches=patch_records(manifest, series),
        runs=sorted([*runs, run], key=lambda r: r.environment.tag),
    )
    # Write then rename, so an interrupted write never leaves a half file that looks like evidence.
    atomic_write_text(path, dump_evidence(evidence))
    return path


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


# --- environment and test results ------------------------------------------------------------------


def environment_tag(compute_capability: str, suffix: str | None = None) -> str:
    """`sm90` for compute capability 9.0, `sm100` for 10.0; a suffix names a topology (`sm90-ep4`)."""
    major, _, minor = compute_capability.partition(".")
    tag = f"sm{major}{minor or '0'}"
    return f"{tag}-{suffix}" if suffix else tag


def parse_junit(path: Path) -> list[TestOutcome]:
    """Test outcomes from pytest's JUnit XML (written with junit_family=xunit1, which keeps `file`)."""
    try:
        tree = ElementTree.parse(path)
    except (OSError, ElementTree.ParseError) as exc:
        raise BadInput(f"{path}: cannot read pytest's JUnit report: {exc}") from None
    return [_outcome(case) for case in tree.getroot().iter("testcase")]


def _nodeid(case: ElementTree.Element) -> str:
    name = case.get("name", "?")
    classname = case.get("classname", "")
    file = case.get("file")
    if not file:
        return f"{classname}::{name}" if classname else name
    module = file.removesuffix(".py").replace("/", ".")
    inner = classname.removeprefix(module).lstrip(".")
    return "::".join(part for part in (file, *inner.split("."), name) if part)


def _first_line(text: str | None) -> str | None:
    if not text:
        return None
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else None


def _outcome(case: ElementTree.Element) -> TestOutcome:
    outcome: Outcome = "passed"
    message = None
    for tag, kind in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        element = case.find(tag)
        if element is not None:
            outcome = kind  # type: ignore[assignment]
            message = _first_line(element.get("message")) or _first_line(element.text)
            break
    properties = {
        prop.get("name", ""): prop.get("value", "") for prop in case.iter("property") if prop.get("name")
    }
    return TestOutcome(
        nodeid=_nodeid(case),
        outcome=outcome,
        duration_s=round(float(case.get("time", "0") or 0), 4),
        message=message,
        properties=properties,
    )


def run_status(tests: list[TestOutcome], pytest_exit_code: int) -> Literal["passed", "failed"]:
    """Passed only when pytest said so, at least one test passed, and none failed or errored."""
    ran = [t for t in tests if t.outcome == "passed"]
    bad = [t for t in tests if t.outcome in ("failed", "error")]
    return "passed" if pytest_exit_code == 0 and ran and not bad else "failed"


# The probe runs in the target interpreter (stdlib + torch only) and prints one JSON object.
PROBE_SCRIPT = r"""
import ctypes, importlib.metadata as md, json, platform, subprocess, sys
import torch

def version(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "absent"

def cublas():
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        parts = []
        for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            value = ctypes.c_int()
            if lib.cublasGetProperty(prop, ctypes.byref(value)) != 0:
                return "unknown"
            parts.append(str(value.value))
        return ".".join(parts)
    return "unknown"

def driver():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"

torch.zeros(1, device="cuda")  # load the CUDA libraries before asking for cuBLAS
major, minor = torch.cuda.get_device_capability(0)
te = version("transformer-engine")
print(json.dumps({
    "gpu_name": torch.cuda.get_device_name(0),
    "gpu_count": torch.cuda.device_count(),
    "compute_capability": f"{major}.{minor}",
    "driver": driver(),
    "torch": torch.__version__,
    "cuda": torch.version.cuda or "unknown",
    "cublas": cublas(),
    "megatron_core": version("megatron-core"),
    "transformer_engine": te if te != "absent" else version("transformer_engine"),
    "python": platform.python_version(),
    "platform": platform.platform(),
}))
"""


def environment_from_probe(output: str, tag_suffix: str | None = None) -> Environment:
    """Turn the probe's JSON (its last stdout line) into an Environment with its tag."""
    lines = [line for line in output.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise BadInput(f"the environment probe printed no JSON: {output.strip()[-500:]}")
    data = json.loads(lines[-1])
    return Environment(tag=environment_tag(data["compute_capability"], tag_suffix), **data)


# --- the gate -------------------------------------------------------------------------------------


@dataclass
class Finding:
    message: str
    hint: str | None = None
    file: str | None = None


@dataclass
class GateVerdict:
    series_digest: str
    suite_digest: str
    evidence_file: str | None
    required: list[str]
    covered: list[str] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    signed_by: str | None = None  # the allowed signer whose signature verified, when signatures are required

    @property
    def ok(self) -> bool:
        return not self.problems


def check(manifest: Manifest, series: Series, required: list[str], folder: Path | None = None) -> GateVerdict:
    """May this series merge? Evidence for exactly this series and test suite, all passing, every
    required environment covered. Malformed evidence for this series raises BadInput."""
    folder = evidence_dir(manifest, folder)
    suites = _CurrentSuites(manifest)
    suite = suites.get(manifest.validation.gpu_tests)
    path = evidence_path(folder, series.digest)
    verdict = GateVerdict(
        series_digest=series.digest,
        suite_digest=suite.digest,
        evidence_file=_rel(path, manifest.root) if path.exists() else None,
        required=required,
    )
    if not path.exists():
        _explain_missing(manifest, series, suites, folder, verdict)
        return verdict
    evidence = load_evidence(path)
    rel = _rel(path, manifest.root)
    if manifest.validation.allowed_signers:
        signed = signing.verify(path, manifest.validation.allowed_signers)
        verdict.signed_by = signed.principal if signed.ok else None
        if not signed.ok:
            verdict.problems.append(Finding(f"the evidence is not trusted: {signed.detail}", SIGN_HINT, rel))
    if evidence.base != series.base or [p.sha256 for p in evidence.patches] != [
        p.sha256 for p in patch_records(manifest, series)
    ]:
        verdict.problems.append(
            Finding(
                "the evidence file's base or patch hashes do not match the series it is named for",
                RERUN_HINT,
                rel,
            )
        )
    misplaced = [
        run for run in evidence.runs if run.gpu_tests.root != suite_root(manifest, run.environment.tag)
    ]
    verdict.problems.extend(_misplaced_problem(manifest, run, rel) for run in misplaced)
    placed = [run for run in evidence.runs if run not in misplaced]
    current = [run for run in placed if suites.is_current(run)]
    stale = [run for run in placed if not suites.is_current(run)]
    verdict.covered = sorted(run.environment.tag for run in current)
    for run in current:
        verdict.problems.extend(_run_problems(run, rel))
        # A skip is not a failure (a test may need hardware this host lacks), but say so.
        verdict.warnings.extend(
            Finding(
                f"test {t.nodeid} was skipped in the evidence for {run.environment.tag}: {t.message}",
                file=rel,
            )
            for t in run.tests
            if t.outcome == "skipped"
        )
    # One finding per suite folder: the single-GPU suite and the multi-GPU one change independently.
    for root in sorted({run.gpu_tests.root for run in stale}):
        group = [run for run in stale if run.gpu_tests.root == root]
        newest = max(group, key=lambda run: run.finished_at)
        tags = ", ".join(sorted(run.environment.tag for run in group))
        changes = "; ".join(_suite_changes(newest.gpu_tests, suites.get(root)))
        what = "the GPU tests" if root == manifest.validation.gpu_tests else f"the GPU tests in {root}/"
        finding = Finding(
            f"{what} changed since the evidence for {tags} was recorded ({changes})", RERUN_HINT, rel
        )
        (
            verdict.problems if not current or _stale_needed(group, current, required) else verdict.warnings
        ).append(finding)
    explained = {run.environment.tag for run in [*stale, *misplaced]}
    for tag in required:
        if tag not in verdict.covered and tag not in explained:
            verdict.problems.append(
                Finding(
                    f"no evidence for environment {tag} (the evidence covers: "
                    f"{', '.join(verdict.covered) or 'none'})",
                    f"run `{validate_command(tag)}` on a {tag} host and commit the updated evidence",
                    rel,
                )
            )
    if not evidence.runs:
        verdict.problems.append(Finding("the evidence file records no run", RERUN_HINT, rel))
    return verdict


def validate_command(tag: str) -> str:
    """The command that records evidence for `tag`."""
    size = ep_size(tag)
    return f"forkctl validate --ep {size}" if size is not None else "forkctl validate"


def _misplaced_problem(manifest: Manifest, run: Run, rel: str) -> Finding:
    tag = run.environment.tag
    return Finding(
        f"the evidence for {tag} was recorded from {run.gpu_tests.root}/, but {tag} needs a run of "
        f"{suite_root(manifest, tag)}/",
        f"run `{validate_command(tag)}` on a {tag} host and commit the updated evidence",
        rel,
    )


def _stale_needed(stale: list[Run], current: list[Run], required: list[str]) -> bool:
    """A stale run matters when its tag is required and no current run covers that tag."""
    covered = {run.environment.tag for run in current}
    return any(run.environment.tag in required and run.environment.tag not in covered for run in stale)


def _run_problems(run: Run, rel: str) -> list[Finding]:
    tag = run.environment.tag
    problems = []
    for test in run.tests:
        if test.outcome in ("failed", "error"):
            reason = f": {test.message}" if test.message else ""
            verb = "failed" if test.outcome == "failed" else "errored"
            problems.append(
                Finding(
                    f"test {test.nodeid} {verb} in the evidence for {tag}{reason}",
                    "fix the patch or the test, then " + RERUN_HINT,
                    rel,
                )
            )
    if not problems and not any(test.outcome == "passed" for test in run.tests):
        problems.append(
            Finding(f"the evidence for {tag} records no test that ran and passed", RERUN_HINT, rel)
        )
    if run.status != "passed" and not problems:
        problems.append(
            Finding(
                f"the run for {tag} ended with status {run.status} (pytest exit code {run.pytest_exit_code})",
                RERUN_HINT,
                rel,
            )
        )
    return problems


def _suite_changes(recorded: SuiteRecord, current: SuiteRecord) -> list[str]:
    changes = []
    for rel in sorted(set(recorded.files) | set(current.files)):
        old, new = recorded.files.get(rel), current.files.get(rel)
        if old == new:
            continue
        what = "is new" if old is None else "was removed" if new is None else "changed"
        changes.append(f"{rel} {what}")
    return changes or ["the suite's files are the same but its digest differs"]


def _series_changes(recorded: Evidence, manifest: Manifest, series: Series) -> list[str]:
    """What differs between the series the evidence was recorded for and the current one."""
    changes = []
    if recorded.base != series.base:
        changes.append(f"the upstream base moved from {recorded.base[:12]} to {series.base[:12]}")
    current = patch_records(manifest, series)
    old_by_file = {p.file: p for p in recorded.patches}
    old_by_hash = {p.sha256: p for p in recorded.patches}
    matched: set[str] = set()
    for position, patch in enumerate(current):
        name = PurePosixPath(patch.file).name
        if patch.file in old_by_file:
            matched.add(patch.file)
            old = old_by_file[patch.file]
            if old.sha256 != patch.sha256:
                changes.append(f"patch {name} changed since the evidence was recorded")
            elif recorded.patches.index(old) != position:
                changes.append(f"patch {name} moved in the series order")
        elif patch.sha256 in old_by_hash:
            old = old_by_hash[patch.sha256]
            matched.add(old.file)
            changes.append(f"patch {name} was renamed from {PurePosixPath(old.file).name}")
        else:
            changes.append(f"patch {name} is new since the evidence was recorded")
    for old in recorded.patches:
        if old.file not in matched:
            changes.append(
                f"patch {PurePosixPath(old.file).name} was in the evidence but is no longer in the series"
            )
    return changes


def _explain_missing(
    manifest: Manifest, series: Series, suites: _CurrentSuites, folder: Path, verdict: GateVerdict
) -> None:
    """No evidence for this digest: find the nearest evidence and say what changed since."""
    candidates: list[tuple[Path, Evidence]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            candidates.append((path, load_evidence(path)))
        except BadInput as exc:
            verdict.warnings.append(
                Finding(
                    f"skipped while looking for the nearest evidence: {exc.message}",
                    file=_rel(path, manifest.root),
                )
            )
    digest = series.digest[:12]
    if not candidates:
        verdict.problems.append(
            Finding(
                f"no GPU evidence for series {digest} (nothing in {_rel(folder, manifest.root)}/)", RERUN_HINT
            )
        )
        return

    def distance(item: tuple[Path, Evidence]) -> tuple[int, float]:
        newest = max((run.finished_at.timestamp() for run in item[1].runs), default=0.0)
        return len(_series_changes(item[1], manifest, series)), -newest

    path, nearest = min(candidates, key=distance)
    rel = _rel(path, manifest.root)
    for change in _series_changes(nearest, manifest, series):
        verdict.problems.append(Finding(f"{change} (nearest evidence: {rel})", RERUN_HINT, rel))
    if nearest.runs and not any(suites.is_current(run) for run in nearest.runs):
        newest = max(nearest.runs, key=lambda run: run.finished_at)
        changes = "; ".join(_suite_changes(newest.gpu_tests, suites.get(newest.gpu_tests.root)))
        verdict.problems.append(Finding(f"the GPU tests changed too: {changes}", RERUN_HINT, rel))
    if not verdict.problems:
        verdict.problems.append(Finding(f"no GPU evidence for series {digest}", RERUN_HINT))
