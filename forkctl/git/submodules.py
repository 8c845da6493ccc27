"""Submodules read from commit objects, never from a checkout (check-pins, bump-bridge): the sections
of a `.gitmodules` blob, read by git's own config parser, and a `.gitmodules` blob with one value
changed and every other byte kept."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from forkctl.git.gitdir import GitDir
from forkctl.git.objects import FULL_OBJECT_NAME, ObjectReads, write_blob
from forkctl.git.runmemo import memo
from forkctl.git.runner import GitFailed, run, run_bytes


class SubmoduleEntry(msgspec.Struct, frozen=True):
    """One `[submodule "<name>"]` section of a `.gitmodules` blob."""

    name: str
    path: str | None
    url: str | None
    options: dict[str, str]  # every key of the section (path, url, shallow, branch, ...)


# Sections of `.gitmodules` blobs parsed this run, by blob name: a blob's name is its content, and two
# commits (or two repositories) often hold the same one.
_PARSED: dict[str, list[SubmoduleEntry]] = memo({})


def parse_gitmodules(repo: GitDir, blob: str) -> list[SubmoduleEntry]:
    """The sections of a `.gitmodules` blob, read by git's own config parser (`--blob`), in file order;
    remembered for the run, and in a cache repository for later runs (git/facts.py)."""
    recorded = recorded_gitmodules(repo, blob)
    if recorded is not None:
        return recorded
    status, out, err = repo.try_git(["config", "--blob", blob, "--null", "--list"])
    if status != 0:
        raise GitFailed(f"cannot parse .gitmodules ({blob})", err, hint="fix the .gitmodules syntax")
    entries = _remember(blob, out)
    if repo.facts is not None and FULL_OBJECT_NAME.fullmatch(blob):
        repo.facts.put(f"gitmodules {blob}", [[e.name, e.options] for e in entries])
    return entries


def recorded_gitmodules(repo: GitDir, blob: str) -> list[SubmoduleEntry] | None:
    """The sections of `blob` as parsed before (this run, or an earlier one in this cache repository),
    or None: then the blob may have to be fetched before it is parsed."""
    if blob in _PARSED:
        return list(_PARSED[blob])
    return _recorded(repo, blob)


def _recorded(repo: GitDir, blob: str) -> list[SubmoduleEntry] | None:
    """The sections an earlier run recorded for `blob` in this cache repository, or None."""
    recorded = repo.facts.get(f"gitmodules {blob}") if repo.facts is not None else None
    if not isinstance(recorded, list):
        return None
    entries = []
    for item in recorded:
        name, opts = item if isinstance(item, list) and len(item) == 2 else (None, None)
        if not isinstance(name, str) or not isinstance(opts, dict):
            return None
        entries.append(SubmoduleEntry(name=name, path=opts.get("path"), url=opts.get("url"), options=opts))
    _PARSED[blob] = entries
    return list(entries)


def _remember(blob: str, listing: str) -> list[SubmoduleEntry]:
    """The sections of `config --null --list` output, remembered for `blob` when that is an object name."""
    sections: dict[str, dict[str, str]] = {}
    for item in listing.split("\x00"):
        if not item:
            continue
        key, _, value = item.partition("\n")
        if not key.startswith("submodule.") or key.count(".") < 2:
            continue
        name, variable = key[len("submodule.") :].rsplit(".", 1)
        sections.setdefault(name, {})[variable.lower()] = value
    entries = [
        SubmoduleEntry(name=name, path=opts.get("path"), url=opts.get("url"), options=opts)
        for name, opts in sections.items()
    ]
    if FULL_OBJECT_NAME.fullmatch(blob):
        _PARSED[blob] = entries
    return list(entries)


_SECTION = re.compile(r'^\s*\[\s*submodule\s+"((?:[^"\\]|\\.)*)"\s*\]')
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=|$|[;#])")


def gitmodules_key_lines(data: bytes, name: str) -> dict[str, int]:
    """The 1-based line of each key of `[submodule "<name>"]` in `.gitmodules` text `data` (the last
    one where a key repeats: the value git uses), for annotations that point at the line to edit."""
    lines: dict[str, int] = {}
    section: str | None = None
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        header = _SECTION.match(line)
        if header is not None:
            section = re.sub(r"\\(.)", r"\1", header.group(1))
            continue
        if line.lstrip().startswith("["):
            section = None
            continue
        key = _KEY.match(line)
        if key is not None and section == name:
            lines[key.group(1).lower()] = number
    return lines


def read_gitmodules(repo: ObjectReads, commit: str) -> list[SubmoduleEntry] | None:
    """`.gitmodules` of `commit` (no checkout), or None when the commit has none."""
    entry = repo.tree_entry(commit, ".gitmodules")
    if entry is None or entry.kind != "blob":
        return None
    return parse_gitmodules(repo, entry.sha)


def gitmodules_with(repo: GitDir, blob: str, name: str, key: str, value: str) -> str:
    """A new `.gitmodules` blob: `blob` with `submodule.<name>.<key>` set to `value`, every other
    line byte for byte (git config edits the file in place, keeping comments and order)."""
    data = run_bytes(["--git-dir", str(repo.git_dir), "cat-file", "blob", blob])
    import tempfile  # only this writer needs it: a check reads .gitmodules without it

    with tempfile.TemporaryDirectory(prefix="forkctl-gitmodules-") as scratch:
        path = Path(scratch) / "gitmodules"
        path.write_bytes(data)
        run(["config", "--file", str(path), f"submodule.{name}.{key}", value])
        return write_blob(repo, path.read_bytes())
