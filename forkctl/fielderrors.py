"""Validation errors of the file schemas (manifest.yaml, evidence JSON) in the user's words.

The schemas are msgspec structs. msgspec stops at the first problem and says where it is as a path
(`... - at `$.series[0].file``); `describe` turns that into a location (for a file:line) and a
message that names the key, what was expected and, for a misspelt key, the key that was meant.
A check in a struct's `__post_init__` raises `FieldError` so that the message names the key too
(msgspec itself reports such errors at the enclosing object).
"""

from __future__ import annotations

import re
from typing import Any, get_args, get_origin, get_type_hints

import msgspec

from forkctl.git.sha import FULL_NAME_FIELD_PATTERN

Loc = tuple[str | int, ...]
# What msgspec says of a value that fails the full-object-name pattern of `forkctl.git.sha`.
_NOT_A_FULL_NAME = f"Expected `str` matching regex {FULL_NAME_FIELD_PATTERN!r}"


class FieldError(ValueError):
    """A value that fails a check, with the key it belongs to."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _struct_of(annotation: Any) -> type[msgspec.Struct] | None:
    """The struct an annotation holds: `Fork`, `list[SeriesEntry]` -> SeriesEntry, else None."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, msgspec.Struct):
            return candidate
    return None


def _field_type(annotation: Any, part: str | int) -> Any:
    """The type one step down from `annotation`: a struct's field, a list's item, a mapping's value."""
    args = [arg for arg in get_args(annotation) if arg is not type(None)]
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        names = {f.encode_name: f.name for f in msgspec.structs.fields(annotation)}
        return get_type_hints(annotation)[names[part]] if part in names else None
    if get_origin(annotation) in (list, dict) and args:
        return args[-1]
    if len(args) == 1:  # `X | None`
        return _field_type(args[0], part)
    return None


def _fails(value: Any, annotation: Any) -> bool:
    try:
        msgspec.convert(value, annotation)
    except (msgspec.ValidationError, TypeError, ValueError):
        return True
    return False


def _named(loc: Loc, data: Any, root: type[msgspec.Struct]) -> Loc:
    """`loc` with each mapping key msgspec leaves unnamed (`[...]`) replaced by the key it failed on:
    the first whose value does not validate (msgspec checks a mapping in order)."""
    named: list[str | int] = []
    annotation: Any = root
    for part in loc:
        annotation = _field_type(annotation, part) if annotation is not None else None
        if part == _ANY_KEY and isinstance(data, dict) and data:
            part = next((key for key, value in data.items() if _fails(value, annotation)), next(iter(data)))
        named.append(part)
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            data = None
    return tuple(named)


def _holder(loc: Loc, root: type[msgspec.Struct]) -> type[msgspec.Struct] | None:
    """The struct that the mapping holding `loc`'s last key validates against (None: not a struct)."""
    annotation: Any = root
    for part in loc[:-1]:
        if annotation is None:
            return None
        annotation = _field_type(annotation, part)
    return _struct_of(annotation) if annotation is not None and get_origin(annotation) is None else None


def _allowed_keys(loc: Loc, root: type[msgspec.Struct]) -> list[str]:
    model = _holder(loc, root)
    return [] if model is None else [f.encode_name for f in msgspec.structs.fields(model)]


def _allowed_values(loc: Loc, root: type[msgspec.Struct]) -> str:
    """The literal values allowed at `loc` (e.g. `schema: 1`), for the error message."""
    model = _holder(loc, root)
    names = {} if model is None else {f.encode_name: f.name for f in msgspec.structs.fields(model)}
    if model is None or loc[-1] not in names:
        return "the allowed values"
    return ", ".join(repr(v) for v in get_args(get_type_hints(model)[names[str(loc[-1])]]))


# msgspec's messages end in " - at `$.series[0].file`"; the path is turned back into a location.
_AT_RE = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_PATH_PART_RE = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")
_ANY_KEY = "[...]"  # msgspec's name for a mapping key it does not print
_EXPECTED = {
    "str": "a string",
    "int": "an integer",
    "array": "a list",
    "object": "a mapping",
    "bool": "true or false",
}


def _loc_of(path: str) -> Loc:
    return tuple(
        key if key else int(index) if index else _ANY_KEY for key, index in _PATH_PART_RE.findall(path)
    )


def _value_at(data: Any, loc: Loc) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def describe(exc: msgspec.ValidationError, data: Any, root: type[msgspec.Struct]) -> tuple[Loc, str]:
    """(location, message) for a validation error, in the manifest's words."""
    match = _AT_RE.match(str(exc))
    assert match is not None  # the pattern matches any text
    what, loc = match.group("what"), _named(_loc_of(match.group("path") or ""), data, root)
    cause = exc.__cause__
    if isinstance(cause, FieldError):
        loc = (*loc, cause.key)
    where = ".".join(str(p) for p in loc) or "(top level)"
    if missing := re.match(r"Object missing required field `(.+)`", what):
        loc = (*loc, missing.group(1))
        where = ".".join(str(p) for p in loc)
        return loc, f"missing key {where!r}: add it"
    if unknown := re.match(r"Object contains unknown field `(.+)`", what):
        loc = (*loc, unknown.group(1))
        where = ".".join(str(p) for p in loc)
        allowed = _allowed_keys(loc, root)
        import difflib  # only for a misspelt key: not a cost of every load

        guess = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        tip = f"did you mean {guess[0]!r}?" if guess else f"allowed keys here: {', '.join(allowed)}"
        return loc, f"unknown key {where!r}: {tip}"
    if wrong := re.match(r"Expected `(\w+)(?: \| null)?`, got `\w+`", what):
        expected = _EXPECTED.get(wrong.group(1), wrong.group(1))
        value = _value_at(data, loc)
        # YAML reads an unquoted 13.10 as the number 13.1: a version must be quoted to stay itself.
        quote = (
            "; quote it (YAML reads 13.10 unquoted as the number 13.1)"
            if wrong.group(1) == "str" and isinstance(value, (int, float)) and not isinstance(value, bool)
            else ""
        )
        return loc, f"{where!r} has the wrong type: expected {expected}, got {value!r}{quote}"
    if what.startswith("Invalid enum value"):
        return loc, f"{where!r} must be one of {_allowed_values(loc, root)}, got {_value_at(data, loc)!r}"
    if what == _NOT_A_FULL_NAME:
        value = _value_at(data, loc)
        return loc, f"{where!r} is {value!r}, not a full object name (40 or 64 lowercase hex digits)"
    return loc, f"{where!r}: {what}"
