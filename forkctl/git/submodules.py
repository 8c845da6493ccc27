"""Submodules read from commit objects, never from a checkout (check-pins, bump-bridge): the sections
of a `.gitmodules` blob, read by git's own config parser, and a `.gitmodules` blob with one value
changed and every other byte kept."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import msgspec

from forkctl.git.gitdir import GitDir, Part
from forkctl.git.objects import Objects
from forkctl.git.runner import GitFailed, git
from forkctl.git.sha import is_full_sha


class SubmoduleEntry(msgspec.Struct, frozen=True):
    """One `[submodule "<name>"]` section of a `.gitmodules` blob, as git reads it."""

    name: str
    # The path git gives this section: None when it has none, or when a later section claims the same
    # path (git maps a path to the last section that sets it, and clones that one's URL).
    path: str | None
    url: str | None
    options: dict[str, str]  # every key of the section (path, url, shallow, branch, update, ...)


# The facts key of a blob's `config --list` output: the listing itself is kept (not what was made of
# it), so that how git reads it is decided here, each run, from git's own parse. (v2: read without
# includes; a listing recorded before may hold a file an `[include]` named.)
_FACT = "gitmodules-listing-v2 {}"


class GitmodulesSyntax(GitFailed):
    """A `.gitmodules` blob that `git submodule update` dies on: git's config parser refuses its
    syntax ("bad config line 4"), or git's submodule code a value in it (`refusal`)."""

    def __init__(self, blob: str, reason: str) -> None:
        super().__init__(
            f"git cannot read .gitmodules ({blob}): {reason}", hint="fix that line of .gitmodules"
        )
        self.reason = reason


_NEEDS_A_VALUE = ("path", "url", "branch", "ignore", "update")
_UPDATES = ("checkout", "rebase", "merge", "none")
_BOOL = re.compile(r"(?i)(true|false|yes|no|on|off|[-+]?[0-9]+[kmg]?)?")


def _settings(listing: str) -> Iterator[tuple[str, str, bool, str]]:
    """(section name, variable in lower case, has a value, value) for each `submodule.<name>.<var>` of a
    `config --null --list` listing whose section name git accepts, in file order."""
    for item in listing.split("\x00"):
        key, has_value, value = item.partition("\n")
        if not key.startswith("submodule.") or key.count(".") < 2:
            continue
        name, variable = key[len("submodule.") :].rsplit(".", 1)
        if _acceptable_name(name):
            yield name, variable.lower(), bool(has_value), value


def refusal(listing: str) -> str | None:
    """Why `git submodule update` (git 2.39) dies on `.gitmodules` with this `config --null --list`
    listing, or None: git's submodule code reads every occurrence of every key of every section with
    an acceptable name, and stops the whole command at a path, url, branch, ignore or update without
    a value, an update that is no strategy (`!command` included), a shallow that is no boolean or a
    fetchRecurseSubmodules that is neither a boolean nor on-demand, whichever submodule it is in."""
    for name, variable, has_value, value in _settings(listing):
        if variable in _NEEDS_A_VALUE and not has_value:
            return f"missing value for 'submodule.{name}.{variable}'"
        if variable == "update" and value not in _UPDATES:
            return f"invalid value for 'submodule.{name}.update': {value!r}"
        if variable == "shallow" and has_value and not _BOOL.fullmatch(value):
            return f"bad boolean config value {value!r} for 'submodule.{name}.shallow'"
        recurse = variable == "fetchrecursesubmodules" and has_value
        if recurse and value.lower() != "on-demand" and not _BOOL.fullmatch(value):
            return f"bad submodule.{name}.fetchrecursesubmodules argument: {value!r}"
    return None


def resolve_sections(listing: str) -> list[SubmoduleEntry]:
    """The sections of `.gitmodules` (`config --null --list` output) as `git submodule update` reads
    the checked-out file: a key set twice keeps its last value; a path set by several sections belongs
    to the last one that set it; sections with a suspicious name (a `..` component) and path or url
    values that look like options are ignored, as git ignores them."""
    sections: dict[str, dict[str, str]] = {}
    owner: dict[str, str] = {}  # path -> the section that set it last
    for name, variable, has_value, value in _settings(listing):
        if not has_value:
            continue
        options = sections.setdefault(name, {})
        if variable in ("path", "url") and value.startswith("-"):
            options[f"{variable} (ignored)"] = value  # kept only to say why the section has none
            continue
        if variable == "path":
            if owner.get(options.get("path", "")) == name:
                del owner[options["path"]]
            owner[value] = name
        options[variable] = value
    return [
        SubmoduleEntry(
            name=name,
            path=opts["path"] if owner.get(opts.get("path", "")) == name else None,
            url=opts.get("url"),
            options=opts,
        )
        for name, opts in sections.items()
    ]


def _acceptable_name(name: str) -> bool:
    """git's check of a submodule name: not empty, no `..` path component (it names a directory under
    `.git/modules`)."""
    return bool(name) and ".." not in re.split(r"[/\\]", name)


_SECTION = re.compile(r'^\s*\[\s*submodule\s+"((?:[^"\\]|\\.)*)"\s*\]')
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=|$|[;#])")


def gitmodules_key_lines(data: bytes, name: str) -> dict[str, int]:
    """The 1-based line of each key of `[submodule "<name>"]` in `.gitmodules` text `data` (the last
    one where a key repeats: the value git uses), for annotations that point at the line to edit."""
    lines: dict[str, int] = {}
    section: str | None = None
    for number, line in enumerate(data.decode("utf-8-sig", "replace").splitlines(), start=1):
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


class Submodules(Part):
    """`.gitmodules` blobs read by git's own config parser, as a clone reads them; kept on the object."""

    def __init__(self, repo: GitDir, objects: Objects) -> None:
        super().__init__(repo)
        self.objects = objects

    def parse_gitmodules(self, blob: str) -> list[SubmoduleEntry]:
        """The sections of a `.gitmodules` blob, read by git's own config parser (`--blob`) and resolved
        as a clone resolves them (`resolve_sections`), in file order; kept on the repository object (a blob's
        name is its content, and many commits hold the same one), and in a
        cache repository for later runs (git/facts.py)."""
        recorded = self.recorded_gitmodules(blob)
        if recorded is not None:
            return recorded
        # No includes: git's submodule code reads none (`git config --blob` would follow an absolute
        # `[include] path`, so a pull request could make forkctl read a URL from a file git never reads).
        status, out, err = self.repo.git(
            ["config", "--no-includes", "--blob", blob, "--null", "--list"], check=False
        ).parts()
        if status != 0 and "bad config" in err:
            status, out = self._parse_as_a_file(blob)
            if status != 0:
                said = next(line for line in err.splitlines() if "bad config" in line)
                raise GitmodulesSyntax(
                    blob, re.sub(r"^(fatal|error): ", "", said.strip()).replace(f" in blob {blob}", "")
                )
        if status != 0:
            raise GitFailed(f"cannot read .gitmodules ({blob})", err, hint="check that the repository has it")
        if self.repo.facts is not None and is_full_sha(blob):
            self.repo.facts.put(_FACT.format(blob), out)
        return self._remember(blob, out)

    def _parse_as_a_file(self, blob: str) -> tuple[int, str]:
        """`blob` parsed as git parses the checked-out `.gitmodules` file `git submodule update` reads,
        which differs from `--blob` in one way: a leading UTF-8 byte-order mark is skipped (git 2.39)."""
        data = self.objects.blob_bytes(blob)
        if not data.startswith(b"\xef\xbb\xbf"):
            return 1, ""
        status, out, _ = self.repo.git(
            ["config", "--no-includes", "--file", "-", "--null", "--list"], stdin=data, check=False
        ).parts()
        return status, out

    def recorded_gitmodules(self, blob: str) -> list[SubmoduleEntry] | None:
        """The sections of `blob` as parsed before (for this repository object, or by an earlier run in this
        cache repository), or None: then the blob may have to be fetched before it is parsed."""
        if blob in self.repo.refused:
            raise GitmodulesSyntax(blob, self.repo.refused[blob])
        if blob in self.repo.sections_of:
            return list(self.repo.sections_of[blob])
        recorded = self.repo.facts.get(_FACT.format(blob)) if self.repo.facts is not None else None
        return self._remember(blob, recorded) if isinstance(recorded, str) else None

    def _remember(self, blob: str, listing: str) -> list[SubmoduleEntry]:
        """The sections of `config --null --list` output, remembered for `blob` when that is an object
        name; GitmodulesSyntax when git's submodule code would die on them."""
        refused = refusal(listing)
        if refused is not None:
            if is_full_sha(blob):
                self.repo.refused[blob] = refused
            raise GitmodulesSyntax(blob, refused)
        entries = resolve_sections(listing)
        if is_full_sha(blob):
            self.repo.sections_of[blob] = entries
        return list(entries)

    def read_gitmodules(self, commit: str) -> list[SubmoduleEntry] | None:
        """`.gitmodules` of `commit` (no checkout), or None when the commit has none."""
        entry = self.objects.tree_entry(commit, ".gitmodules")
        if entry is None or entry.kind != "blob" or entry.mode == "120000":  # git reads no symlinked one
            return None
        return self.parse_gitmodules(entry.sha)

    def sections_for_recognising(self, commit: str) -> list[SubmoduleEntry]:
        """`read_gitmodules` for recognising which consumer a commit is: [] when it has none, or one git
        cannot parse (the check of its link says so; recognition goes by gitlinks and remotes)."""
        try:
            return self.read_gitmodules(commit) or []
        except GitmodulesSyntax:
            return []

    def gitmodules_with(self, blob: str, name: str, key: str, value: str) -> str:
        """A new `.gitmodules` blob: `blob` with `submodule.<name>.<key>` set to `value`, every other
        line byte for byte (git config edits the file in place, keeping comments and order)."""
        data = self.objects.blob_bytes(blob)
        import tempfile  # only this writer needs it: a check reads .gitmodules without it

        with tempfile.TemporaryDirectory(prefix="forkctl-gitmodules-") as scratch:
            path = Path(scratch) / "gitmodules"
            path.write_bytes(data)
            git(["config", "--file", str(path), f"submodule.{name}.{key}", value])
            return self.objects.write_blob(path.read_bytes())
