"""manifest.yaml's text as plain data, every key remembering its line: the only code that reads YAML.

Kept apart from `loader` so that a manifest read back from the parsed-manifest cache (`cache`) never
imports PyYAML (about a tenth of every `lint` / `status` start). The YAML is composed to nodes first
(safe loader, plain tags only), so that a schema error can be mapped back to the line of its key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from forkctl.errors import BadInput
from forkctl.fielderrors import Loc

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
            where = (*loc, key)  # a name: mypy reads a starred tuple in brackets as 3.11 syntax
            lines[where] = key_node.start_mark.line + 1
            out[key] = _to_python(value_node, where, lines, file)
            lines[where] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(item, (*loc, i), lines, file) for i, item in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.Node) -> Any:
    """A scalar through the safe constructor, so `1` is an int and `yes` a bool, as YAML 1.1 says."""
    return _SCALARS.construct_object(node, deep=True)


def _refuse_aliases(text: str, path: Path | str) -> None:
    """A manifest needs no YAML aliases, and a few nested ones expand to gigabytes: refuse them all."""
    for event in yaml.parse(text, Loader=YAML_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            line = event.start_mark.line + 1 if event.start_mark is not None else "?"
            raise BadInput(
                f"{path}:{line}: YAML anchors and aliases are not allowed in a manifest",
                hint="write the value out where it is used",
            )


def compose(text: str, path: Path | str) -> tuple[dict[str, Any], dict[Loc, int]]:
    """The manifest's mapping as plain data and the line of every location in it; BadInput naming
    file:line (`path`: the name messages use) when it is not YAML or not a mapping."""
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
    return data, lines
