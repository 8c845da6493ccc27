"""manifest.yaml: the single source of truth, loaded into typed objects or an error naming file:line.

The YAML is composed with PyYAML's safe loader into nodes first, so that every value keeps the line it
came from; the plain data is then validated into msgspec structs (`forbid_unknown_fields` catches
typos) and the error is mapped back to the line of the offending key. msgspec rather than pydantic:
it imports in a tenth of the time, and every `forkctl lint` / `status` pays for the import.

Writing is deliberately narrow: `rewrite()` replaces the text of a few known values (the base, the
series, the dropped list) in place, so the user's comments and layout elsewhere survive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import msgspec
import yaml

from forkctl.errors import BadInput
from forkctl.schema import FieldError, describe

MANIFEST_NAME = "manifest.yaml"
PATCHES_ROOT = "patches"
SHA_RE = re.compile(r"^[0-9a-f]{7,40}$")
FULL_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


def _check_sha(key: str, value: str | None) -> None:
    if value is not None and not SHA_RE.match(value):
        raise FieldError(key, f"{value!r} is not a commit SHA (7 to 40 lowercase hex digits)")


def _check_relpath(key: str, value: str) -> None:
    path = PurePosixPath(value)
    if value.strip() == "":
        raise FieldError(key, "the path is empty")
    if path.is_absolute():
        raise FieldError(key, f"{value!r} is absolute; write it relative to the repository root")
    if ".." in path.parts:
        raise FieldError(key, f"{value!r} contains '..'; paths must stay inside the repository")


class _Model(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pass


class Upstream(_Model):
    repo: str
    url: str
    base: str
    branch: str = "main"

    def __post_init__(self) -> None:
        _check_sha("base", self.base)


class Fork(_Model):
    repo: str
    url: str
    branch: str
    # The fork's default branch mirrors upstream; only `branch` carries the series.
    mirror_branch: str = "main"
    # Upstreams that take contributions under the DCO (Megatron-LM does) want every patch signed off by
    # its author: then `forkctl lint` refuses a patch without `Signed-off-by: <its author>`.
    require_signoff: bool = False


class SeriesEntry(_Model):
    file: str
    provenance: str | None = None

    def __post_init__(self) -> None:
        _check_relpath("file", self.file)
        if PurePosixPath(self.file).parts[:1] != (PATCHES_ROOT,):
            raise FieldError(
                "file", f"{self.file!r} is outside {PATCHES_ROOT}/; patch files live under {PATCHES_ROOT}/"
            )
        if not self.file.endswith(".patch"):
            raise FieldError("file", f"{self.file!r} does not end in .patch")
        _check_sha("provenance", self.provenance)


DropReason = Literal["patch-id", "patch-id-zero-context", "provenance", "reverse-applies", "empty", "skipped"]


class DroppedEntry(_Model):
    subject: str
    reason: DropReason
    base: str
    file: str | None = None
    # For `skipped`: who dropped the patch by hand, and when (ISO 8601).
    skipped_by: str | None = None
    skipped_at: str | None = None
    upstream_commit: str | None = None
    provenance: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        _check_sha("base", self.base)
        _check_sha("upstream_commit", self.upstream_commit)


class Consumer(_Model):
    name: str
    upstream: str
    fork: str
    url: str
    branch: str
    gitlink: str
    upstream_url: str | None = None

    def __post_init__(self) -> None:
        if self.gitlink.strip() == "":
            raise FieldError(
                "gitlink", "the gitlink path is empty; give the submodule path, e.g. 3rdparty/Megatron-LM"
            )
        _check_relpath("gitlink", self.gitlink)


class Validation(_Model):
    evidence_dir: str = "validation"
    gpu_tests: str = "tests/gpu"
    require: list[str] = msgspec.field(default_factory=list)
    # Who may sign GPU evidence: git's allowed-signers lines, `<principal> <key-type> <base64-key>`.
    # When set, forkctl gate refuses evidence without a valid signature by one of these keys.
    allowed_signers: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        _check_relpath("evidence_dir", self.evidence_dir)
        _check_relpath("gpu_tests", self.gpu_tests)
        if self.allowed_signers:
            from forkctl.gpu.signing import check_allowed_signers

            try:
                stripped = check_allowed_signers(self.allowed_signers)
            except ValueError as exc:
                raise FieldError("allowed_signers", str(exc)) from None
            msgspec.structs.force_setattr(self, "allowed_signers", stripped)


class ManifestModel(_Model):
    schema_: Literal[1] = msgspec.field(name="schema")
    upstream: Upstream
    fork: Fork
    series: list[SeriesEntry] = msgspec.field(default_factory=list)
    dropped: list[DroppedEntry] = msgspec.field(default_factory=list)
    consumers: list[Consumer] = msgspec.field(default_factory=list)
    validation: Validation = msgspec.field(default_factory=Validation)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for entry in self.series:
            if entry.file in seen:
                raise ValueError(f"duplicate patch {entry.file!r}: list each patch once")
            seen.add(entry.file)
        names = [c.name for c in self.consumers]
        if len(names) != len(set(names)):
            raise ValueError("consumer names must be unique")


def plain(model: msgspec.Struct, *, drop_none: bool = False) -> dict[str, Any]:
    """A struct as plain JSON-able data under its manifest key names (`schema`, not `schema_`)."""
    data = msgspec.to_builtins(model)
    if drop_none:
        data = {key: value for key, value in data.items() if value is not None}
    return data


@dataclass(frozen=True)
class Manifest:
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

    def patch_paths(self) -> list[Path]:
        return [self.root / entry.file for entry in self.series]

    def series_dir(self) -> Path:
        """Where exported patches go: the folder of the first patch, else patches/<upstream name>."""
        if self.series:
            return (self.root / self.series[0].file).parent
        return self.root / PATCHES_ROOT / self.upstream.repo.split("/")[-1].lower()


# --- loading --------------------------------------------------------------------------------------


def find_manifest(start: Path) -> Path:
    """Walk up from `start` to the first directory holding manifest.yaml."""
    for folder in [start, *start.parents]:
        candidate = folder / MANIFEST_NAME
        if candidate.is_file():
            return candidate
    raise BadInput(
        f"no {MANIFEST_NAME} in {start} or any folder above it",
        hint="run forkctl inside the toolkit repository, or pass --manifest PATH",
    )


Loc = tuple[str | int, ...]
PLAIN_TAGS = {"str", "int", "float", "bool", "null", "seq", "map"}
# libyaml when PyYAML was built with it (the wheels are): the pure-Python parser alone costs a
# tenth of a second on a real manifest, paid by every command.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALARS = yaml.constructor.SafeConstructor()


def _to_python(node: yaml.Node, loc: Loc, lines: dict[Loc, int], file: Path) -> Any:
    """Turn a composed YAML node into plain data, remembering the 1-based line of every location."""
    lines[loc] = node.start_mark.line + 1
    if node.tag.removeprefix("tag:yaml.org,2002:") not in PLAIN_TAGS:
        # Only plain YAML types: a custom tag (e.g. !!python/object) would mean code, never data.
        raise BadInput(
            f"{file}:{node.start_mark.line + 1}: not valid YAML for a manifest: tag {node.tag!r} is not allowed",
            hint="use plain strings, numbers, lists and mappings",
        )
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str):
                raise BadInput(f"{file}:{key_node.start_mark.line + 1}: keys must be strings, got {key!r}")
            if key in out:
                raise BadInput(
                    f"{file}:{key_node.start_mark.line + 1}: key {key!r} appears twice",
                    hint="keep one of them",
                )
            lines[(*loc, key)] = key_node.start_mark.line + 1
            out[key] = _to_python(value_node, (*loc, key), lines, file)
            lines[(*loc, key)] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(item, (*loc, i), lines, file) for i, item in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.Node) -> Any:
    """A scalar through the safe constructor, so `1` is an int and `yes` a bool, as YAML 1.1 says."""
    return _SCALARS.construct_object(node, deep=True)


def _line_for(loc: Loc, lines: dict[Loc, int]) -> int:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return 1


def _refuse_aliases(text: str, path: Path) -> None:
    """A manifest needs no YAML aliases, and a few nested ones expand to gigabytes: refuse them all."""
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            line = event.start_mark.line + 1
            raise BadInput(
                f"{path}:{line}: YAML anchors and aliases are not allowed in a manifest",
                hint="write the value out where it is used",
            )


def parse_manifest(text: str, path: Path) -> ManifestModel:
    """Validate manifest text; raise BadInput naming file:line and the fix."""
    return _parse(text, path)[0]


def _parse(text: str, path: Path) -> tuple[ManifestModel, dict[Loc, int]]:
    """The validated manifest and the line of every key in it."""
    try:
        _refuse_aliases(text, path)
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        raise BadInput(f"{path}:{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if node is None:
        raise BadInput(f"{path}:1: the manifest is empty", hint="start from the manifest in forkctl's README")
    lines: dict[Loc, int] = {}
    data = _to_python(node, (), lines, path)
    if not isinstance(data, dict):
        raise BadInput(f"{path}:1: the manifest must be a mapping of keys (schema, upstream, fork, ...)")
    try:
        return msgspec.convert(data, ManifestModel), lines
    except msgspec.ValidationError as exc:
        loc, message = describe(exc, data, ManifestModel)
        raise BadInput(f"{path}:{_line_for(loc, lines)}: {message}") from None


MAX_MANIFEST_BYTES = 1 << 20  # a manifest is a few kilobytes; anything far larger is not one


def read_manifest_text(path: Path) -> str:
    """The manifest's text: a regular UTF-8 file of sane size, or a clear BadInput."""
    try:
        if not path.is_file():
            raise BadInput(
                f"{path}: no such manifest (or not a regular file)",
                hint="pass --manifest PATH to an existing file",
            )
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise BadInput(
                f"{path}: {path.stat().st_size} bytes is too large for a manifest", hint="check the path"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(
            f"{path}: cannot read the manifest: {exc.strerror}", hint="check the path and its permissions"
        ) from None
    if b"\x00" in data:
        raise BadInput(
            f"{path}: not a text file (NUL bytes; UTF-16 or binary?)", hint="save the manifest as UTF-8"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8 (byte {exc.start})", hint="save the manifest as UTF-8") from None


def load(path: Path) -> Manifest:
    """Load and validate `path`, including that every listed patch file exists."""
    text = read_manifest_text(path)
    model, lines = _parse(text, path)
    manifest = Manifest(path=path.resolve(), model=model)
    for index, entry in enumerate(model.series):
        if not (manifest.root / entry.file).is_file():
            raise BadInput(
                f"{path}:{_line_for(('series', index, 'file'), lines)}: patch file {entry.file!r} does not exist",
                hint="fix the name, restore the file, or remove the entry (forkctl export rewrites the list)",
            )
    return manifest


# --- writing --------------------------------------------------------------------------------------


def _span(text: str, key_path: tuple[str, ...]) -> tuple[int, int, int] | None:
    """(start offset, end offset, indent) of the value under `key_path`, or None if absent."""
    node = yaml.compose(text, Loader=_LOADER)
    for key in key_path:
        if not isinstance(node, yaml.MappingNode):
            return None
        match = next((v for k, v in node.value if k.value == key), None)
        if match is None:
            return None
        key_node = next(k for k, v in node.value if k.value == key)
        node = match
    return node.start_mark.index, node.end_mark.index, key_node.start_mark.column


def _dump_value(value: Any, indent: int) -> str:
    if not isinstance(value, (list, dict)):
        return yaml.safe_dump(value, default_flow_style=True, width=1_000).removesuffix("\n...\n").strip()
    if not value:
        return "[]" if isinstance(value, list) else "{}"
    body = yaml.safe_dump(value, default_flow_style=False, sort_keys=False, width=1_000)
    pad = " " * (indent + 2)
    return "\n" + "".join(pad + line + "\n" for line in body.splitlines()).rstrip("\n")


def _trim_trailing_comments(text: str, start: int, end: int) -> int:
    """Pull `end` back over blank and comment lines: PyYAML ends a block node where the next key
    starts, but comments and blank lines before that key belong to it, not to the value we replace."""
    lines = text[start:end].splitlines(keepends=True)
    while len(lines) > 1 and (not lines[-1].strip() or lines[-1].lstrip().startswith("#")):
        end -= len(lines.pop())
    return end


def rewrite(path: Path, updates: dict[tuple[str, ...], Any]) -> None:
    """Replace the values at the given key paths in place, keeping every other byte of the file.

    A top-level key that is absent is appended at the end. The result is validated before it is
    written, so a bad update never leaves a broken manifest behind.
    """
    text = path.read_text(encoding="utf-8")
    for key_path, value in updates.items():
        span = _span(text, key_path)
        if span is None:
            if len(key_path) != 1:
                raise BadInput(f"{path}: cannot add nested key {'.'.join(key_path)}")
            text = text.rstrip("\n") + f"\n{key_path[0]}: {_dump_value(value, 0).lstrip()}\n"
            continue
        start, end, indent = span
        end = _trim_trailing_comments(text, start, end)
        rendered = _dump_value(value, indent)
        # The value starts right after `key:`; a block value goes on the next line, a flow one after a space.
        prefix = text[:start].rstrip(" \n") + ("" if rendered.startswith("\n") else " ")
        suffix = text[end:]
        if text[start:end].endswith("\n") and not rendered.endswith("\n"):
            suffix = "\n" + suffix  # the old block value owned its line end; the rendered one does not
        text = prefix + rendered + suffix
    parse_manifest(text, path)
    from forkctl.files import atomic_write_text  # only writers pay for tempfile

    atomic_write_text(path, text)
