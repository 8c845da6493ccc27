""".fork-base.json, schema 1: the base a fork (or a consumer of it) says it is built on.

{"schema": 1, "fork_repo": "...", "upstream_repo": "...", "upstream_branch": "main", "upstream_base": "<40-hex>"}

The FAR.AI forks already commit this file; forkctl reads it from commit objects and cross-checks it
against the manifest, so the two records of "our base" cannot silently disagree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from forkctl.errors import BadInput
from forkctl.manifest import FULL_SHA_RE, Manifest

FORK_BASE_FILE = ".fork-base.json"
KEYS = ("schema", "fork_repo", "upstream_repo", "upstream_branch", "upstream_base")


@dataclass(frozen=True)
class ForkBase:
    fork_repo: str
    upstream_repo: str
    upstream_branch: str
    upstream_base: str


def parse(raw: bytes, where: str) -> ForkBase:
    """Validate the file's bytes; BadInput names `where` (e.g. `repo@sha:.fork-base.json`) and the fix."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"{where}: not valid JSON: {exc}", hint="rewrite it as schema 1 JSON") from None
    if not isinstance(data, dict):
        raise BadInput(f"{where}: must be a JSON object with keys {', '.join(KEYS)}")
    if data.get("schema") != 1:
        raise BadInput(f"{where}: schema is {data.get('schema')!r}, forkctl reads schema 1")
    unknown = sorted(set(data) - set(KEYS))
    missing = [k for k in KEYS if k not in data]
    if unknown or missing:
        raise BadInput(
            f"{where}: "
            + "; ".join(
                ([f"missing keys {missing}"] if missing else [])
                + ([f"unknown keys {unknown}"] if unknown else [])
            ),
            hint=f"schema 1 has exactly the keys {', '.join(KEYS)}",
        )
    for key in KEYS[1:]:
        if not isinstance(data[key], str) or not data[key]:
            raise BadInput(f"{where}: {key} must be a non-empty string")
    if not FULL_SHA_RE.match(data["upstream_base"]):
        raise BadInput(f"{where}: upstream_base {data['upstream_base']!r} is not a full 40-hex commit SHA")
    return ForkBase(
        fork_repo=data["fork_repo"],
        upstream_repo=data["upstream_repo"],
        upstream_branch=data["upstream_branch"],
        upstream_base=data["upstream_base"],
    )


def _same_name(a: str, b: str) -> bool:
    """`owner/name` compared case-insensitively; a URL on either side counts by its last two parts."""

    def tail(text: str) -> str:
        return "/".join(text.strip().removesuffix("/").removesuffix(".git").replace(":", "/").split("/")[-2:])

    return tail(a).lower() == tail(b).lower()


def cross_check(fork_base: ForkBase, manifest: Manifest) -> list[str]:
    """Where the file disagrees with the manifest: one sentence per key, empty when they agree."""
    problems = []
    base = manifest.upstream.base
    if not fork_base.upstream_base.startswith(base) and not base.startswith(fork_base.upstream_base):
        problems.append(
            f"upstream_base is {fork_base.upstream_base[:12]} but the manifest base is {base[:12]}"
        )
    if not _same_name(fork_base.fork_repo, manifest.fork.repo):
        problems.append(
            f"fork_repo is {fork_base.fork_repo!r} but the manifest fork is {manifest.fork.repo!r}"
        )
    if not _same_name(fork_base.upstream_repo, manifest.upstream.repo):
        problems.append(
            f"upstream_repo is {fork_base.upstream_repo!r} but the manifest upstream is {manifest.upstream.repo!r}"
        )
    if fork_base.upstream_branch != manifest.upstream.branch:
        problems.append(
            f"upstream_branch is {fork_base.upstream_branch!r} but the manifest says {manifest.upstream.branch!r}"
        )
    return problems
