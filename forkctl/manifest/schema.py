"""The manifest's schema: msgspec structs, validated on load (`forbid_unknown_fields` catches typos).

msgspec rather than pydantic: it imports in a tenth of the time, and every `forkctl lint` / `status`
pays for the import. A check in a `__post_init__` raises `FieldError`, so that the error names its key.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import msgspec

from forkctl import mail
from forkctl.fielderrors import FieldError
from forkctl.git.sha import is_commit_name
from forkctl.manifest.validation import LibraryPins, SlurmSettings

PATCHES_ROOT = "patches"
# git's allowed-signers lines (`gpg.ssh.allowedSignersFile`), as `forkctl gate` hands them to ssh-keygen.
# Checked here, not in gpu.signing: every lint and status validates the manifest, and must not import
# the signing code (subprocess, tempfile) to do it.
ALLOWED_SIGNER_RE = re.compile(
    r"^[A-Za-z0-9._@+-]+ (ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+$"
)


def _check_sha(key: str, value: str | None) -> None:
    if value is not None and not is_commit_name(value):
        raise FieldError(key, f"{value!r} is not a commit SHA (7 to 40 lowercase hex digits, or 64: SHA-256)")


def check_allowed_signers(lines: list[str]) -> list[str]:
    """The manifest's `validation.allowed_signers`, each `<principal> <key-type> <base64>`."""
    for line in lines:
        if not ALLOWED_SIGNER_RE.match(line.strip()):
            raise ValueError(f"not an allowed-signers line (`<principal> <key-type> <base64-key>`): {line!r}")
    return [line.strip() for line in lines]


def _check_relpath(key: str, value: str) -> None:
    path = PurePosixPath(value)
    if value.strip() == "":
        raise FieldError(key, "the path is empty")
    if path.is_absolute():
        raise FieldError(key, f"{value!r} is absolute; write it relative to the repository root")
    if ".." in path.parts:
        raise FieldError(key, f"{value!r} contains '..'; paths must stay inside the repository")


FORK_BASE_FILE = ".fork-base.json"  # the fork's record of its base (chain/forkbase.py): always fork-owned
# A path no fork owns on purpose: a glob that matches it claims the whole tree, series included.
_ANY_PATH = "forkctl-probe/any/path.x"


def _check_own_path(glob: str) -> None:
    """A `fork.own_paths` glob: relative, inside the repository, naming some paths and not every one."""
    _check_relpath("own_paths", glob)
    if glob.startswith(":") or glob.endswith("/"):
        raise FieldError(
            "own_paths", f"{glob!r} is not a file glob; write a path or a glob such as .github/**"
        )
    if fnmatch.fnmatchcase(_ANY_PATH, glob):
        raise FieldError(
            "own_paths",
            f"{glob!r} matches every path, so nothing would be the series'; list the fork's own files "
            "(e.g. README.fork.md, .github/**)",
        )


class _Model(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Subclasses say frozen=True again: msgspec inherits it, a type checker (PEP 681) does not."""


class Upstream(_Model, frozen=True):
    repo: str
    url: str
    base: str
    branch: str = "main"

    def __post_init__(self) -> None:
        _check_sha("base", self.base)


class Fork(_Model, frozen=True):
    repo: str
    url: str
    branch: str
    # The fork's default branch mirrors upstream; only `branch` carries the series.
    mirror_branch: str = "main"
    # Upstreams that take contributions under the DCO (Megatron-LM does) want every patch signed off by
    # its author: then `forkctl lint` refuses a patch without `Signed-off-by: <its author>`.
    require_signoff: bool = False
    # `apply --tree` patches a plain directory (e.g. site-packages): only the series' paths matching this
    # glob go there (a fork whose package is `megatron/` sets `megatron/**`, leaving its tests out).
    tree_include: str = "**"
    # The branch forkctl creates in each consumer to move its pin: `<prefix><fork-head sha12>`.
    bump_branch_prefix: str = "forkctl/bump-"
    # `Name <email>` who signs bump commits off (and authors them: a DCO check wants the sign-off of the
    # commit's author), e.g. the bot that opens the bump pull requests; `bump-bridge --signoff` (or
    # FORKCTL_SIGNOFF) names another. None: bump commits are forkctl's own, with no sign-off.
    bump_signoff: str | None = None
    # How `forkctl publish` lands apply(series, base) on `branch`: `rebuild` pushes it only as a
    # fast-forward (or a new branch); `merge` (for merge-only branches) lands it as a merge commit onto
    # the old tip whose tree is the new head's, so the branch never needs a force-push.
    publish: Literal["rebuild", "merge"] = "rebuild"
    # Paths the fork branch holds beside the series (its README, CI, `.fork-base.json`): globs matched
    # as fork.tree_include is (`*` crosses `/`). `forkctl publish` carries them over from the branch
    # tip into what it pushes, and check-pins accepts them there; `.fork-base.json` is always one.
    own_paths: list[str] = msgspec.field(default_factory=lambda: [FORK_BASE_FILE])

    def __post_init__(self) -> None:
        if not self.tree_include.strip():
            raise FieldError("tree_include", "the glob is empty; use ** for every path")
        for glob in self.own_paths:
            _check_own_path(glob)
        if not self.bump_branch_prefix.strip() or self.bump_branch_prefix.startswith("-"):
            raise FieldError("bump_branch_prefix", f"{self.bump_branch_prefix!r} cannot start a branch name")
        if self.bump_signoff is not None and mail.address(self.bump_signoff) is None:
            raise FieldError(
                "bump_signoff", f"{self.bump_signoff!r} is not NAME <EMAIL>, e.g. Fork Bot <bot@example.com>"
            )


class SeriesEntry(_Model, frozen=True):
    file: str
    # What the patch's provenance lines name: one SHA, a list for several, none for an own patch.
    provenance: str | list[str] | None = None

    def __post_init__(self) -> None:
        _check_relpath("file", self.file)
        if PurePosixPath(self.file).parts[:1] != (PATCHES_ROOT,):
            raise FieldError(
                "file", f"{self.file!r} is outside {PATCHES_ROOT}/; patch files live under {PATCHES_ROOT}/"
            )
        if not self.file.endswith(".patch"):
            raise FieldError("file", f"{self.file!r} does not end in .patch")
        for name in [self.provenance] if isinstance(self.provenance, str) else self.provenance or []:
            _check_sha("provenance", name)


DropReason = Literal["patch-id", "patch-id-zero-context", "provenance", "reverse-applies", "empty", "skipped"]


class DroppedEntry(_Model, frozen=True):
    subject: str
    reason: DropReason
    base: str
    file: str | None = None
    skipped_by: str | None = None  # `skipped`: who dropped the patch by hand, and when (ISO 8601)
    skipped_at: str | None = None
    upstream_commit: str | None = None
    proof: str | None = None  # `provenance`: how the change was proved upstream_commit's
    reverted_by: str | None = None  # `skipped`: the commit that reverted upstream_commit
    provenance: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        for key in ("base", "upstream_commit", "reverted_by"):
            _check_sha(key, getattr(self, key))


# How a pin file is written (chain/pinrecords.py reads and writes each): a new format is a new value
# here and a codec there. `sha-line`: the full commit SHA and one newline, nothing else (the Bridge's
# `.main.commit`).
PinFileFormat = Literal["sha-line"]


class PinFile(_Model, frozen=True):
    """A file of the consumer's tree that records the commit its gitlink pins (besides the gitlink)."""

    path: str
    format: PinFileFormat

    def __post_init__(self) -> None:
        _check_relpath("path", self.path)
        if self.path.endswith("/"):
            raise FieldError("path", f"{self.path!r} names a folder; give the file's path")
        if PurePosixPath(self.path).parts[:1] == (".git",) or self.path == ".gitmodules":
            raise FieldError("path", f"{self.path!r} is git's own file, not a record of the pin")


class Consumer(_Model, frozen=True):
    name: str
    upstream: str
    fork: str
    url: str
    branch: str
    gitlink: str
    upstream_url: str | None = None
    # The consumer's other records of the commit its gitlink pins, which its own CI requires to agree
    # with the gitlink (Megatron-Bridge: `.main.commit`): bump-bridge writes them in the bump commit,
    # check-pins reports one that disagrees. Default: none.
    pin_files: list[PinFile] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.gitlink.strip() == "":
            raise FieldError(
                "gitlink", "the gitlink path is empty; give the submodule path, e.g. 3rdparty/Megatron-LM"
            )
        _check_relpath("gitlink", self.gitlink)
        _check_pin_files(self.gitlink, self.pin_files)


def _check_pin_files(gitlink: str, files: list[PinFile]) -> None:
    """Each pin file once, and outside the submodule (a path there is the submodule's, not the consumer's)."""
    seen: set[str] = set()
    submodule = PurePosixPath(gitlink)
    for entry in files:
        path = PurePosixPath(entry.path)
        if path == submodule:
            raise FieldError("pin_files", f"{entry.path!r} is the gitlink itself; name the file beside it")
        if submodule in path.parents:
            raise FieldError(
                "pin_files",
                f"{entry.path!r} is inside the submodule at {gitlink}; name a file of the consumer",
            )
        if str(path) in seen:
            raise FieldError("pin_files", f"{entry.path!r} is listed twice; list each file once")
        seen.add(str(path))


class Validation(_Model, frozen=True):
    evidence_dir: str = "validation"
    gpu_tests: str = "tests/gpu"
    # The expert-parallel suite `validate --ep N` runs with torchrun (tags such as sm90-ep2).
    multigpu_tests: str = "tests/multigpu"
    # Benchmarks `validate` runs after the tests (not with --quick), each a script of this repository that
    # writes JSON to --out: a microbenchmark over routed-row counts, and an end-to-end layer arm. Unset: skipped.
    benchmark: str | None = None
    benchmark_rows: str = "8192,32768,131072"
    layer_benchmark: str | None = None
    require: list[str] = msgspec.field(default_factory=list)
    # Required environments that cannot be recorded for the current series yet (tag -> why, e.g. no such
    # host is lent): the gate reports each as pending, never as covered, and older evidence never counts.
    pending: dict[str, str] = msgspec.field(default_factory=dict)
    # The library versions each required environment was validated with (tag -> pins): the gate refuses
    # evidence recorded with another version of a pinned library. The manifest, not the patch, owns the
    # validated combinations (docs/architecture.md says why). Unset: any versions.
    environments: dict[str, LibraryPins] = msgspec.field(default_factory=dict)
    # Upstream's own tests of the modules the series touches (paths in the upstream tree), which
    # `validate --source` runs on the base and on the fork head (a base pass must pass on the fork head).
    upstream_tests: list[str] = msgspec.field(default_factory=list)
    # Who may sign GPU evidence: git's allowed-signers lines, `<principal> <key-type> <base64-key>`.
    # When set, forkctl gate refuses evidence without a valid signature by one of these keys.
    allowed_signers: list[str] = msgspec.field(default_factory=list)
    slurm: SlurmSettings = msgspec.field(default_factory=SlurmSettings)  # validate --launcher slurm

    def __post_init__(self) -> None:
        _check_relpath("evidence_dir", self.evidence_dir)
        _check_relpath("gpu_tests", self.gpu_tests)
        _check_relpath("multigpu_tests", self.multigpu_tests)
        for key in ("benchmark", "layer_benchmark"):
            if getattr(self, key) is not None:
                _check_relpath(key, getattr(self, key))
        for path in self.upstream_tests:
            _check_relpath("upstream_tests", path)
        unknown = sorted(set(self.pending) - set(self.require))
        if unknown:
            raise FieldError(
                "pending",
                f"{', '.join(unknown)} is not in validation.require: only a required tag can be pending",
            )
        unknown = sorted(set(self.environments) - set(self.require))
        if unknown:
            raise FieldError(
                "environments",
                f"{', '.join(unknown)} is not in validation.require: only a required tag can name its libraries",
            )
        if not all(reason.strip() for reason in self.pending.values()):
            raise FieldError(
                "pending", "each pending environment needs a reason (tag: why it is not recorded)"
            )
        rows = self.benchmark_rows.split(",")
        if not all(row.strip().isdigit() and int(row) > 0 for row in rows):
            raise FieldError(
                "benchmark_rows", f"{self.benchmark_rows!r} is not a comma-separated list of row counts"
            )
        if self.allowed_signers:
            try:
                stripped = check_allowed_signers(self.allowed_signers)
            except ValueError as exc:
                raise FieldError("allowed_signers", str(exc)) from None
            msgspec.structs.force_setattr(self, "allowed_signers", stripped)


class Package(_Model, frozen=True):
    """The released package the series patches, as installed (what `apply --tree`, the demo and validate
    work on): its import folder, its distribution name, and the requirement that installs the release
    the series targets. Unset: the demo refuses and says which key to set."""

    name: str | None = None  # e.g. megatron (the folder on sys.path)
    distribution: str | None = None  # e.g. megatron-core (its version is read from the dist-info)
    requirement: str | None = None  # e.g. megatron-core==0.19.2 (named in hints)

    def __post_init__(self) -> None:
        if self.name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.name):
            raise FieldError("name", f"{self.name!r} is not an importable package name (e.g. megatron)")

    @property
    def folder_name(self) -> str:
        """The package's folder in a tree (what gate and validate look at): `name`; megatron for a
        manifest from before `package:` existed, as those verbs assumed then."""
        return self.name or "megatron"


class Demo(_Model, frozen=True):
    # Submodules the last consumer of the demo chain also pins (a bump must leave them alone).
    other_submodules: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        for path in self.other_submodules:
            _check_relpath("other_submodules", path)


MAX_CONSUMERS = 64  # the real chain has two (Megatron-Bridge, NeMo-RL)


class ManifestModel(_Model, frozen=True):
    schema_: Literal[1] = msgspec.field(name="schema")
    upstream: Upstream
    fork: Fork
    series: list[SeriesEntry] = msgspec.field(default_factory=list)
    dropped: list[DroppedEntry] = msgspec.field(default_factory=list)
    consumers: list[Consumer] = msgspec.field(default_factory=list)
    validation: Validation = msgspec.field(default_factory=Validation)
    package: Package = msgspec.field(default_factory=Package)
    demo: Demo = msgspec.field(default_factory=Demo)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for entry in self.series:
            if entry.file in seen:
                raise ValueError(f"duplicate patch {entry.file!r}: list each patch once")
            seen.add(entry.file)
        names = [c.name for c in self.consumers]
        if len(names) != len(set(names)):
            raise ValueError("consumer names must be unique")
        if len(self.consumers) > MAX_CONSUMERS:
            # check-pins follows a pin through every link before it: the chain is walked one link deep
            # per consumer, and a chain this long is a generated file, not a fork's consumers.
            raise ValueError(
                f"{len(self.consumers)} consumers is more than forkctl follows (at most {MAX_CONSUMERS})"
            )


def plain(model: msgspec.Struct, *, drop_none: bool = False) -> dict[str, Any]:
    """A struct as plain JSON-able data under its manifest key names (`schema`, not `schema_`)."""
    data = msgspec.to_builtins(model)
    return {key: value for key, value in data.items() if value is not None} if drop_none else data


class Manifest(msgspec.Struct, frozen=True):
    """A loaded manifest: the validated model plus where it lives."""

    path: Path
    model: ManifestModel

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def upstream(self) -> Upstream:
        return self.model.upstream

    @property
    def fork(self) -> Fork:
        return self.model.fork

    @property
    def series(self) -> list[SeriesEntry]:
        return self.model.series

    @property
    def consumers(self) -> list[Consumer]:
        return self.model.consumers

    @property
    def validation(self) -> Validation:
        return self.model.validation

    @property
    def package(self) -> Package:
        return self.model.package

    @property
    def demo(self) -> Demo:
        return self.model.demo

    def patch_paths(self) -> list[Path]:
        return [self.root / entry.file for entry in self.series]

    def series_dir(self) -> Path:
        """Where exported patches go: the folder of the first patch, else patches/<upstream name>."""
        if self.series:
            return (self.root / self.series[0].file).parent
        return self.root / PATCHES_ROOT / self.upstream.repo.split("/")[-1].lower()
