"""GPU evidence: the file `forkctl validate` records and `forkctl gate` reads, and how it is stored.

Evidence is bound to exactly what it tested:
- the series digest (`Series.digest`: sha256 over the base SHA and every patch file's bytes, in order);
- the GPU test-suite digest (`forkctl.gpu.digest`: the files under the suite folder, the conftest
  files pytest loads above them, and the repository modules they import). The folder depends on the
  environment: `validation.gpu_tests` for a single-GPU tag such as `sm90`, `validation.multigpu_tests` for an
  expert-parallel tag such as `sm90-ep4` (`forkctl validate --ep 4`); each run records its folder;
- the environment (GPU, compute capability, driver, torch, CUDA, cuBLAS, megatron-core, TE), summarised
  in a tag such as `sm90` that the manifest's `validation.require` lists.

Layout: one file per series digest, `<evidence_dir>/<series-digest>.json`, holding a list of runs, at
most one per environment tag (a new run for a tag replaces the old one, failed or not: the newest
result is the truth). A benchmark plot sits next to it as `<series-digest>-<tag>.png`.

Nothing here runs a GPU or imports torch.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from forkctl import fielderrors
from forkctl.errors import BadInput
from forkctl.files import atomic_write_text
from forkctl.git.sha import FullShaText, TreeShaText
from forkctl.manifest import Manifest
from forkctl.series import Series

SCHEMA: Final = 1
RERUN_HINT = (
    "run `forkctl validate --source base.tgz` on a GPU host (base.tgz: `git archive --format=tar.gz "
    "-o base.tgz <base> megatron tests`) and commit the evidence file it writes"
)
MAX_EVIDENCE_BYTES = 16 << 20  # one run's evidence is a few kilobytes; a runaway file is refused

Outcome = Literal["passed", "failed", "error", "skipped"]
# The multi-GPU suite (`forkctl validate --ep N`) and the tag suffix its runs carry (sm90-ep4).
EP_TAG = re.compile(r"-ep(\d+)$")


# --- the schema -----------------------------------------------------------------------------------


class _Model(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Subclasses say frozen=True again: msgspec inherits it, a type checker (PEP 681) does not."""


class TestOutcome(_Model, frozen=True):
    nodeid: str
    outcome: Outcome
    duration_s: float
    message: str | None = None  # the first line of the failure or skip reason
    properties: dict[str, str] = msgspec.field(
        default_factory=dict
    )  # record_property figures (error norms...)


class Environment(_Model, frozen=True):
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


class SuiteRecord(_Model, frozen=True):
    root: str  # the suite folder the run covered: validation.gpu_tests, or validation.multigpu_tests for -epN tags
    digest: str
    files: dict[str, str]  # relative path -> sha256 of its bytes


class PatchRecord(_Model, frozen=True):
    file: str
    subject: str
    sha256: str


class TestedTree(_Model, frozen=True):
    """Which `megatron/` package the run tested, named by its git tree id (`forkctl.git.treehash`).

    `upstream-base`: built from a `git archive` of the upstream base (its commit read from the archive)
    with the series applied, the tree consumers pin: `package_tree` equals `git rev-parse <fork
    head>:megatron`. `installed`: the installed release with the series applied, which is not the
    fork head (the gate refuses it)."""

    source: Literal["upstream-base", "installed"]
    package_tree: TreeShaText  # the tested megatron/ folder, before any overlay
    base_commit: FullShaText | None = None  # upstream-base: the commit the archive was made from
    base_package_tree: TreeShaText | None = None  # upstream-base: megatron/ of that commit
    distribution: str | None = None  # installed: e.g. "megatron-core 0.19.2"
    # Files the source lacks (compiled helpers) that were taken from the installed distribution.
    overlaid: list[str] = msgspec.field(default_factory=list)


class TestCounts(_Model, frozen=True):
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0

    @property
    def ran(self) -> int:
        """Tests that ran to an outcome (a skip ran nothing)."""
        return self.passed + self.failed + self.errors


class UpstreamRegression(_Model, frozen=True):
    """Upstream's own tests of the modules the series touches, run on the base and on the fork head in
    one validate run: a test that passes on the base and fails on the fork head fails the run."""

    paths: list[str]  # validation.upstream_tests, relative to the upstream tree
    base: TestCounts
    head: TestCounts
    newly_failing: list[str]  # passed on the base, failed or errored on the fork head
    head_only_failing: list[str]  # tests only the fork head has (the series' own) that failed
    base_exit_code: int
    head_exit_code: int
    # Failed on the fork head in the full run, passed when re-run alone on both trees: order-dependent
    # state in upstream's suite (e.g. model-parallel groups a failed test left), not a regression.
    order_dependent: list[str] = msgspec.field(default_factory=list)
    # Why each test of newly_failing and head_only_failing failed in the full run (the first line pytest
    # reported): a failed run can be read from its evidence alone, without the scratch folder's JUnit.
    failure_messages: dict[str, str] = msgspec.field(default_factory=dict)

    def why(self, nodeid: str) -> str:
        """`: <first line>` of the test's failure, for the end of a sentence; empty when none was kept."""
        message = self.failure_messages.get(nodeid)
        return f": {message}" if message else ""

    @property
    def idle_trees(self) -> list[str]:
        """The trees on which no upstream test ran (none collected, all skipped): no comparison there."""
        return [name for name, count in (("base", self.base), ("fork head", self.head)) if count.ran == 0]

    @property
    def ok(self) -> bool:
        return not self.newly_failing and not self.head_only_failing and not self.idle_trees


class Run(_Model, frozen=True):
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
    tested: TestedTree | None = None  # which package was tested (absent in evidence from before 2026-12)
    upstream_tests: UpstreamRegression | None = None  # single-GPU runs from an upstream tree only


class Evidence(_Model, frozen=True):
    schema_: Literal[1] = msgspec.field(name="schema")
    series_digest: str
    base: str
    patches: list[PatchRecord]
    runs: list[Run] = msgspec.field(default_factory=list)


# --- environment tags -----------------------------------------------------------------------------


def environment_tag(compute_capability: str, suffix: str | None = None) -> str:
    """`sm90` for compute capability 9.0, `sm100` for 10.0; a suffix names a topology (`sm90-ep4`)."""
    major, _, minor = compute_capability.partition(".")
    tag = f"sm{major}{minor or '0'}"
    return f"{tag}-{suffix}" if suffix else tag


def ep_size(tag: str) -> int | None:
    """N for an expert-parallel environment tag (`sm90-ep4` -> 4), None for any other tag."""
    match = EP_TAG.search(tag)
    return int(match.group(1)) if match else None


def suite_root(manifest: Manifest, tag: str) -> str:
    """The test folder whose run an environment's evidence must come from."""
    validation = manifest.validation
    return validation.multigpu_tests if ep_size(tag) is not None else validation.gpu_tests


def validate_command(tag: str) -> str:
    """The command that records evidence for `tag`: on the fork head, from a base archive (the gate
    refuses evidence for any other tree; the README says how base.tgz is made)."""
    size = ep_size(tag)
    ep = f" --ep {size}" if size is not None else ""
    return f"forkctl validate{ep} --source base.tgz"


# --- hashes and names -----------------------------------------------------------------------------


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def repo_relative(path: Path, root: Path) -> str:
    """`path` as recorded in evidence: POSIX, relative to the repository root."""
    # The folder is resolved, not the file: a symlinked file is named where it is, not where it points.
    return (path.parent.resolve() / path.name).relative_to(root.resolve()).as_posix()


def patch_records(manifest: Manifest, series: Series) -> list[PatchRecord]:
    return [
        PatchRecord(
            file=repo_relative(patch.path, manifest.root),
            subject=patch.subject,
            sha256=sha256_bytes(patch.raw),
        )
        for patch in series.patches
    ]


def now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


# --- reading and writing evidence files ----------------------------------------------------------


def evidence_dir(manifest: Manifest, out: Path | None = None) -> Path:
    return out if out is not None else manifest.root / manifest.validation.evidence_dir


def evidence_path(folder: Path, series_digest: str) -> Path:
    return folder / f"{series_digest}.json"


class AmbiguousJSON(ValueError):
    """JSON that two readers may read differently, or that no reader should accept."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Python keeps the last of two equal keys, other readers the first: a signed file must mean one thing.
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise AmbiguousJSON(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise AmbiguousJSON(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise AmbiguousJSON(f"the number {text[:40]} is too large to be read the same everywhere")
    return value


def _check_strings(value: Any) -> None:
    # An escaped lone surrogate ("\\ud800") decodes to a str no UTF-8 reader can represent.
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise AmbiguousJSON("a string holds a lone UTF-16 surrogate escape") from None
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)


def read_strict_json(data: bytes) -> Any:
    """Parse JSON that every reader reads alike: UTF-8 without a byte-order mark, each key once per
    object, no NaN or Infinity, no lone surrogates. Raises AmbiguousJSON, json.JSONDecodeError,
    UnicodeDecodeError or RecursionError."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise AmbiguousJSON("it starts with a byte-order mark, which JSON does not allow")
    parsed = json.loads(
        data.decode("utf-8"),
        object_pairs_hook=_unique_keys,
        parse_constant=_no_constant,
        parse_float=_finite_float,
    )
    _check_strings(parsed)
    return parsed


def load_evidence(path: Path) -> Evidence:
    """Parse one evidence file; raise BadInput naming the file and what is wrong with it."""
    hint = f"restore {path.name} from git, or delete it and {RERUN_HINT}"
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise BadInput(f"{path}: evidence must be a regular file, not a link or a device", hint)
    try:
        if path.stat().st_size > MAX_EVIDENCE_BYTES:
            raise BadInput(f"{path}: {path.stat().st_size} bytes is too large for an evidence file", hint)
        data = read_strict_json(path.read_bytes())
    except AmbiguousJSON as exc:
        raise BadInput(f"{path}: malformed evidence: {exc}", hint) from None
    except RecursionError:
        raise BadInput(f"{path}: malformed evidence: nested too deeply", hint) from None
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{path}: malformed evidence: not valid JSON (line {exc.lineno}: {exc.msg})", hint
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read evidence: {exc}", hint) from None
    except ValueError as exc:  # e.g. an integer longer than Python converts
        raise BadInput(f"{path}: malformed evidence: {exc}", hint) from None
    try:
        evidence = msgspec.convert(data, Evidence)
    except msgspec.ValidationError as exc:
        _, message = fielderrors.describe(exc, data, Evidence)
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
