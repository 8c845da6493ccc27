"""What leaves forkctl is clean: no credentials from URLs, no raw control characters.

`redact` removes the userinfo of every URL in a text (`https://user:token@host/...` becomes
`https://***@host/...`); `printable` escapes control characters (a patch subject or a remote's message
could carry terminal escape sequences); `clean` does both and is applied by the report layer to every
string it prints or writes (text, JSON, annotations, step summary, progress). `inert` keeps a text from
being read as a GitHub workflow command (`::stop-commands::`, `::add-mask::`, ...): the report layer
applies it to every line of text and progress, where the runner parses each line it sees. URLs that forkctl writes
into repositories (`.gitmodules`, commit messages) and its cache's config go through `without_credentials`.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# scheme://userinfo@ where userinfo has no '/', '@' or whitespace; keeps the scheme and the host.
_USERINFO_RE = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
# The runner reads a line as a workflow command when it starts with `::` once leading whitespace is
# trimmed, or when it holds the legacy `##[name]` form anywhere.
_COMMAND_START_RE = re.compile(r"(?P<start>^|\n)(?P<space>[^\S\n]*):(?=:)")
_LEGACY_COMMAND = "##["


def redact(text: str) -> str:
    return _USERINFO_RE.sub(lambda m: f"{m.group('scheme')}***@", text)


def printable(text: str) -> str:
    return _CONTROL_RE.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def inert(text: str) -> str:
    """`text` with no line the runner would execute: a `:` that would open a command is written as
    `\\x3a` (the escape `printable` uses), and a legacy `##[` as `\\x23#[`. Visible, never dropped."""
    text = _COMMAND_START_RE.sub(lambda m: f"{m.group('start')}{m.group('space')}\\x3a", text)
    return text.replace(_LEGACY_COMMAND, "\\x23#[")


def clean(text: str) -> str:
    return printable(redact(text))


def clean_data(value: Any) -> Any:
    """`clean` applied to every string inside a JSON-like structure (keys included)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean_data(key): clean_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_data(item) for item in value]
    return value


def without_credentials(url: str) -> str:
    """`url` with any user name and password removed (scp-like `user@host:path` keeps its user)."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
