""".fork-base.json, schema 1: the base a fork (or a consumer of it) says it is built on.

{"schema": 1, "fork_repo": "...", "upstream_repo": "...", "upstream_branch": "main", "upstream_base": "<40-hex>"}

The FAR.AI forks already commit this file; forkctl reads it from commit objects and cross-checks it
against the manifest, so the two records of "our base" cannot silently disagree, and `forkctl fork-base
--write` writes it from the manifest (`updated`, `render`). The file is the fork's own (always one of
`fork.own_paths`): `forkctl publish` carries it over from the branch tip into what it pushes, rewritten by
`carried` to name the base it publishes, so the branch never says a stale base.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from forkctl.errors import BadInput
from forkctl.files import atomic_write
from forkctl.git.sha import require_full_sha
from forkctl.git.worktree import Worktree
from forkctl.manifest import Manifest
from forkctl.manifest.schema import FORK_BASE_FILE as FORK_BASE_FILE  # offered here too (the file's module)

KEYS = ("schema", "fork_repo", "upstream_repo", "upstream_branch", "upstream_base")


class ForkBase(msgspec.Struct, frozen=True):
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
    except RecursionError:
        raise BadInput(
            f"{where}: not schema 1: nested too deeply", hint="rewrite it as schema 1 JSON"
        ) from None
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
    require_full_sha(data["upstream_base"], f"{where}: upstream_base")
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


def from_manifest(manifest: Manifest, base: str | None = None) -> ForkBase:
    """The record the manifest implies: its fork, its upstream, the branch it follows and the pinned base
    (`base`: the full SHA the manifest's base resolved to, when it is written abbreviated)."""
    return ForkBase(
        fork_repo=manifest.fork.repo,
        upstream_repo=manifest.upstream.repo,
        upstream_branch=manifest.upstream.branch,
        upstream_base=base or manifest.upstream.base,
    )


def updated(current: ForkBase | None, manifest: Manifest, base: str | None = None) -> ForkBase:
    """The record to write: the manifest's values, keeping the file's own spelling of a repository that
    names the same one (a URL or another case for `owner/name`), so a rewrite changes only what differs."""
    wanted = from_manifest(manifest, base)
    if current is None:
        return wanted
    return msgspec.structs.replace(
        wanted,
        fork_repo=current.fork_repo if _same_name(current.fork_repo, wanted.fork_repo) else wanted.fork_repo,
        upstream_repo=(
            current.upstream_repo
            if _same_name(current.upstream_repo, wanted.upstream_repo)
            else wanted.upstream_repo
        ),
    )


def as_dict(record: ForkBase) -> dict[str, object]:
    return {
        "schema": 1,
        "fork_repo": record.fork_repo,
        "upstream_repo": record.upstream_repo,
        "upstream_branch": record.upstream_branch,
        "upstream_base": record.upstream_base,
    }


def render(record: ForkBase) -> bytes:
    """Schema 1 as the file holds it: the keys in schema order, two-space indent, a final newline."""
    return (json.dumps(as_dict(record), indent=2) + "\n").encode("utf-8")


def carried(raw: bytes, manifest: Manifest, base: str) -> bytes:
    """What the file becomes where `forkctl publish` carries it over: its own bytes when they agree
    with the manifest and the full `base`, else the record `--write` would write (the same rules)."""
    try:
        current: ForkBase | None = parse(raw, FORK_BASE_FILE)
    except BadInput:
        current = None  # not schema 1: replaced, as --write replaces it
    if current is not None and not cross_check(current, manifest) and current.upstream_base == base:
        return raw
    return render(updated(current, manifest, base))


class FileState(msgspec.Struct, frozen=True):
    """`.fork-base.json` in a working tree, against what the manifest implies."""

    path: Path
    exists: bool
    problems: list[str]  # one sentence per disagreement; ["missing"] when there is no file
    wanted: bytes  # what --write would leave there

    @property
    def up_to_date(self) -> bool:
        return self.exists and not self.problems


def inspect(worktree: Path, manifest: Manifest) -> FileState:
    """Read and judge the file (BadInput when it exists but is not schema 1: --write then replaces it)."""
    require_full_sha(
        manifest.upstream.base,
        "the manifest base",
        hint=f"write the full SHA in upstream.base: {FORK_BASE_FILE} records it whole",
    )
    path = worktree / FORK_BASE_FILE
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise BadInput(
            f"{path} is not a regular file (a folder, a link or a device)",
            hint=f"remove or rename it; {FORK_BASE_FILE} is a JSON file (schema 1)",
        )
    if not path.is_file():
        return FileState(path, False, [f"{FORK_BASE_FILE} is missing"], render(from_manifest(manifest)))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}", hint="check its permissions") from None
    try:
        current = parse(raw, str(path))
    except BadInput as exc:
        return FileState(path, True, [exc.message], render(from_manifest(manifest)))
    problems = cross_check(current, manifest)
    return FileState(path, True, problems, render(updated(current, manifest)))


def write(state: FileState, worktree: Path, force: bool = False) -> bool:
    """Write the record when the file differs; False when it already holds it. Uncommitted changes to the
    file are the user's work: refused, never overwritten. A file git does not track (untracked or
    ignored) has no copy anywhere else: replaced only when the caller says so (`force`)."""
    if state.up_to_date:
        return False  # a file that agrees is left as it is, its formatting included
    if state.exists and not force and not Worktree(worktree).is_tracked(FORK_BASE_FILE):
        raise BadInput(
            f"{state.path} exists but git does not track it (untracked or ignored); forkctl will not "
            "replace a file it cannot be restored from",
            hint="move it aside, or pass --force to replace it with the manifest's record",
        )
    if (
        state.exists
        and Worktree(worktree).is_tracked(FORK_BASE_FILE)
        and Worktree(worktree).has_uncommitted_changes(FORK_BASE_FILE)
    ):
        raise BadInput(
            f"{state.path} has uncommitted changes; forkctl will not overwrite them",
            hint=f"commit or stash your change to {FORK_BASE_FILE}, then run `forkctl fork-base --write` again",
        )
    atomic_write(state.path, state.wanted)
    return True
