"""An upstream repository plus a toolkit (manifest + patch series) for apply/export/port tests.

The series is made the way a maintainer makes it: feature commits on a dev branch, cherry-picked with
`-x` onto the base (so each message ends with a provenance line), then `git format-patch`.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from tests.gitrepos import FORMAT_PATCH, Repo, built_once, git, init_repo

UPSTREAM_FILES = {
    "megatron/core/a.py": "def a():\n    return 1\n\n\ndef helper():\n    return 'h'\n",
    "megatron/core/b.py": "def b():\n    return 2\n",
    "megatron/core/sub/c.py": "C = 3\n",
    "tests/test_a.py": "def test_a():\n    assert sorted([3, 1, 2]) == [1, 2, 3]\n",
    "README.md": "upstream\n",
}

# (subject, files) for each patch of the default series, in order.
DEFAULT_CHANGES: list[tuple[str, dict[str, str | None]]] = [
    (
        "feat(core): a returns 10",
        {"megatron/core/a.py": "def a():\n    return 10\n\n\ndef helper():\n    return 'h'\n"},
    ),
    (
        "feat(core): add new module and its test",
        {"megatron/core/new.py": "NEW = True\n", "tests/test_new.py": "def test_new():\n    pass\n"},
    ),
    ("docs: readme only", {"README.md": "upstream\nforked\n"}),
    (
        "fix(core): helper says hi",
        {"megatron/core/a.py": "def a():\n    return 10\n\n\ndef helper():\n    return 'hi'\n"},
    ),
]


@dataclass
class SeriesSetup:
    root: Path  # the toolkit: manifest.yaml + patches/
    upstream: Repo
    base: str
    dev_commits: list[str]  # the original authoring commits (what provenance names)
    patch_files: list[Path] = field(default_factory=list)

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.yaml"

    @property
    def dev(self) -> Repo:
        """The maintainer's clone the series was authored in (branches `dev` and `series`)."""
        return Repo(self.root.parent / "dev")

    @property
    def url(self) -> str:
        return self.upstream.path.resolve().as_uri()

    def manifest_data(self) -> dict:
        return yaml.safe_load(self.manifest.read_text())


def write_manifest(root: Path, base: str, url: str, files: list[str]) -> Path:
    data = {
        "schema": 1,
        "upstream": {"repo": "NVIDIA/Megatron-LM", "url": url, "branch": "main", "base": base},
        "fork": {
            "repo": "AlignmentResearch/Megatron-LM",
            "url": "https://github.com/AlignmentResearch/Megatron-LM.git",
            "branch": "farai/main",
            "tree_include": "megatron/**",
        },
        "series": [{"file": f} for f in files],
        "dropped": [],
    }
    path = root / "manifest.yaml"
    path.write_text("# test manifest\n" + yaml.safe_dump(data, sort_keys=False))
    return path


def make_series(
    tmp: Path,
    changes: list[tuple[str, dict[str, str | None]]] | None = None,
    extra_upstream_files: dict[str, str] | None = None,
) -> SeriesSetup:
    """Upstream, the dev clone and the toolkit for a test whose tmp dir is `tmp`. The default series is
    built once per process and copied back for each test (tests/gitrepos.py `built_once`): find its repos
    through the result (`setup.dev`, `setup.upstream`, `setup.root`), not under `tmp`."""
    if changes is None and extra_upstream_files is None:
        return built_once(tmp, "series", build_series)
    return build_series(tmp, changes, extra_upstream_files)


def build_series(
    tmp: Path,
    changes: list[tuple[str, dict[str, str | None]]] | None = None,
    extra_upstream_files: dict[str, str] | None = None,
) -> SeriesSetup:
    """make_series, built here and now in `tmp`."""
    changes = DEFAULT_CHANGES if changes is None else changes
    upstream = init_repo(tmp / "upstream", {**UPSTREAM_FILES, **(extra_upstream_files or {})})
    upstream.commit(
        "upstream: second",
        {"megatron/core/b.py": "def b():\n    return 22\n"},
        date="2026-01-02T00:00:00+00:00",
    )
    base = upstream.head()
    upstream.git("config", "uploadpack.allowFilter", "true")
    upstream.git("config", "uploadpack.allowAnySHA1InWant", "true")
    # Authoring happens in a separate clone so that upstream only ever holds upstream commits.
    dev = Repo(tmp / "dev")
    shutil.copytree(upstream.path, dev.path)
    dev.git("checkout", "-q", "-b", "dev")
    dev_commits = []
    for number, (subject, files) in enumerate(changes, start=1):
        dev_commits.append(
            dev.commit(
                f"{subject}\n\nWhy: patch {number}.\n", files, date=f"2026-02-0{number}T10:00:00+00:00"
            )
        )
    dev.git("checkout", "-q", "-b", "series", base)
    for sha in dev_commits:
        dev.git("cherry-pick", "-x", "--allow-empty", sha)
    root = tmp / "toolkit"
    out = root / "patches" / "megatron-lm"
    out.mkdir(parents=True)
    names = dev.git(
        *FORMAT_PATCH,
        "-o",
        str(out),
        f"{base}..series",
    ).splitlines()
    files = [str(Path(n).relative_to(root)) for n in names]
    write_manifest(root, base, upstream.path.resolve().as_uri(), files)
    return SeriesSetup(
        root=root,
        upstream=upstream,
        base=base,
        dev_commits=dev_commits,
        patch_files=[root / f for f in files],
    )


def clone(source: Repo, dest: Path, bare: bool = False) -> Repo:
    args = ["clone", "-q", *(["--bare"] if bare else []), str(source.path), str(dest)]
    git(source.path.parent, *args)
    return Repo(dest)


def insert_patch(
    setup: SeriesSetup, position: int, start: str, subject: str, files: dict[str, str | None], date: str
) -> Path:
    """Author a commit on top of `start` in the dev clone and insert its patch at `position` (0-based).

    With `start` other than the base, the patch's context is another commit's: a conflict on the base.
    """
    dev = setup.dev
    dev.git("checkout", "-q", "--detach", start)
    sha = dev.commit(
        f"{subject}\n\nWhy: inserted.\n\n(cherry picked from commit {'e' * 40})\n", files, date=date
    )
    out = setup.root / "patches" / "megatron-lm"
    name = dev.git(
        *FORMAT_PATCH,
        "-o",
        str(out),
        "-1",
        sha,
    )
    target = out / f"{position + 1:04d}x-{Path(name).name[5:]}"
    Path(name).rename(target)
    data = setup.manifest_data()
    data["series"].insert(position, {"file": str(target.relative_to(setup.root))})
    write_manifest(
        setup.root, data["upstream"]["base"], data["upstream"]["url"], [e["file"] for e in data["series"]]
    )
    setup.patch_files.insert(position, target)
    return target


def run_json(setup: SeriesSetup, verb: str, *args: str) -> tuple[int, dict]:
    """`forkctl <verb> ... --json` against the setup's manifest: (exit code, parsed stdout; progress goes
    to stderr)."""
    result = CliRunner().invoke(cli, ["--manifest", str(setup.manifest), verb, *args, "--json"])
    try:
        return result.exit_code, json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not JSON (exit {result.exit_code}): {result.output}") from None


LONG = "".join(f"line {number}\n" for number in range(1, 13))
STALE_FILE = "megatron/core/long.py"


def make_stale_series(tmp: Path) -> tuple[SeriesSetup, Path, str]:
    """The default series plus, at position 2, a patch that is stale on the manifest's base.

    It was written on the setup's first base and changes line 5 of long.py; the manifest's base is one
    upstream commit later, which changed line 8: inside the patch's context, not next to its change. So
    plain `git apply` refuses it, and `git apply --3way` merges it cleanly from its pre-image blob,
    which only the older commit holds. Returns (setup, the stale patch file, its pre-image blob).
    """
    setup = make_series(tmp, extra_upstream_files={STALE_FILE: LONG})
    written_on = setup.base
    pre_image = setup.upstream.git("rev-parse", f"{written_on}:{STALE_FILE}")
    stale = insert_patch(
        setup,
        1,
        written_on,
        "fix(core): line five",
        {STALE_FILE: LONG.replace("line 5\n", "line five\n")},
        "2026-02-01T12:00:00+00:00",
    )
    base = setup.upstream.commit(
        "upstream: line eight",
        {STALE_FILE: LONG.replace("line 8\n", "line eight\n")},
        date="2026-01-03T00:00:00+00:00",
    )
    data = setup.manifest_data()
    write_manifest(setup.root, base, data["upstream"]["url"], [entry["file"] for entry in data["series"]])
    setup.base = base
    return setup, stale, pre_image


def shallow_clone(source: Repo, dest: Path) -> Repo:
    """A bare clone of `source`'s main tip alone (depth 1): no blob of an older commit is in it."""
    git(
        source.path.parent, "clone", "-q", "--bare", "--depth", "1", source.path.resolve().as_uri(), str(dest)
    )
    return Repo(dest)
