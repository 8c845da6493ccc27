"""Reading manifest.yaml: composed into YAML nodes first, so every value keeps the line it came from;
the plain data is then validated into the schema's structs and an error is mapped back to file:line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml

from forkctl.errors import BadInput
from forkctl.manifest.schema import Manifest, ManifestModel
from forkctl.schema import Loc, describe

MANIFEST_NAME = "manifest.yaml"


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


PLAIN_TAGS = {"str", "int", "float", "bool", "null", "seq", "map"}
# libyaml when PyYAML was built with it (the wheels are): the pure-Python parser alone costs a
# tenth of a second on a real manifest, paid by every command.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALARS = yaml.constructor.SafeConstructor()


def _to_python(node: yaml.Node, loc: Loc, lines: dict[Loc, int], file: Path | str) -> Any:
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


def _refuse_aliases(text: str, path: Path | str) -> None:
    """A manifest needs no YAML aliases, and a few nested ones expand to gigabytes: refuse them all."""
    for event in yaml.parse(text, Loader=YAML_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            line = event.start_mark.line + 1
            raise BadInput(
                f"{path}:{line}: YAML anchors and aliases are not allowed in a manifest",
                hint="write the value out where it is used",
            )


def parse_manifest(text: str, path: Path | str) -> ManifestModel:
    """Validate manifest text; raise BadInput naming file:line (`path`: the name messages use) and the fix."""
    return _parse(text, path)[0]


def _parse(text: str, path: Path | str) -> tuple[ManifestModel, dict[Loc, int]]:
    """The validated manifest and the line of every key in it."""
    try:
        _refuse_aliases(text, path)
        node = yaml.compose(text, Loader=YAML_LOADER)
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


def read_manifest_text(path: Path, shown: str | None = None) -> str:
    """The manifest's text: a regular UTF-8 file of sane size, or a clear BadInput naming `shown`
    (default: the path)."""
    name = shown if shown is not None else path
    try:
        if not path.is_file():
            raise BadInput(
                f"{name}: no such manifest (or not a regular file)",
                hint="pass --manifest PATH to an existing file, or URL@REF:PATH for one in a repository",
            )
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise BadInput(
                f"{name}: {path.stat().st_size} bytes is too large for a manifest", hint="check the path"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(
            f"{name}: cannot read the manifest: {exc.strerror}", hint="check the path and its permissions"
        ) from None
    if b"\x00" in data:
        raise BadInput(
            f"{name}: not a text file (NUL bytes; UTF-16 or binary?)", hint="save the manifest as UTF-8"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{name}: not UTF-8 (byte {exc.start})", hint="save the manifest as UTF-8") from None


def load(path: Path, shown: str | None = None) -> Manifest:
    """Load and validate `path`, including that every listed patch file exists. `shown`: what
    file:line messages name instead of the path (a manifest named by URL: the spec, not its snapshot)."""
    text = read_manifest_text(path, shown)
    name = shown if shown is not None else path
    model, lines = _parse(text, name)
    manifest = Manifest(path=path.resolve(), model=model)
    for index, entry in enumerate(model.series):
        if not (manifest.root / entry.file).is_file():
            raise BadInput(
                f"{name}:{_line_for(('series', index, 'file'), lines)}: patch file {entry.file!r} does not exist",
                hint="fix the name, restore the file, or remove the entry (forkctl export rewrites the list)",
            )
    return manifest
