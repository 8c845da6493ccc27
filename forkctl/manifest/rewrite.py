"""Writing manifest.yaml, deliberately narrow: `rewrite()` replaces the text of a few known values (the
base, the series, the dropped list) in place, so the user's comments and layout elsewhere survive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forkctl.errors import BadInput
from forkctl.manifest.loader import parse_manifest


def _span(text: str, key_path: tuple[str, ...]) -> tuple[int, int, int] | None:
    """(start offset, end offset, indent) of the value under `key_path`, or None if absent."""
    import yaml  # only writers pay for PyYAML (`forkctl.manifest` is imported by every command)

    from forkctl.manifest.yamldata import YAML_LOADER

    node = yaml.compose(text, Loader=YAML_LOADER)
    for key in key_path:
        if not isinstance(node, yaml.MappingNode):
            return None
        match = next((v for k, v in node.value if k.value == key), None)
        if match is None:
            return None
        key_node = next(k for k, v in node.value if k.value == key)
        node = match
    if node is None:
        return None
    return node.start_mark.index, node.end_mark.index, key_node.start_mark.column


def _dump_value(value: Any, indent: int) -> str:
    import yaml

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
