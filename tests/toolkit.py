"""A toolkit repository in a tmp dir: a manifest plus a patch series made by git itself."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.gitrepos import Repo, init_repo

UPSTREAM_FILES = {
    "megatron/core/a.py": "def a():\n    return 1\n",
    "megatron/core/b.py": "def b():\n    return 2\n",
    "README.md": "upstream\n",
}


@dataclass
class Toolkit:
    root: Path
    upstream: Repo
    base: str
    patch_files: list[Path]

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.yaml"

    def manifest_data(self) -> dict:
        return yaml.safe_load(self.manifest.read_text())

    def write_manifest(self, data: dict) -> None:
        self.manifest.write_text(yaml.safe_dump(data, sort_keys=False))


def manifest_dict(base: str, files: list[str]) -> dict:
    return {
        "schema": 1,
        "upstream": {
            "repo": "NVIDIA/Megatron-LM",
            "url": "https://github.com/NVIDIA/Megatron-LM.git",
            "branch": "main",
            "base": base,
        },
        "fork": {
            "repo": "AlignmentResearch/Megatron-LM",
            "url": "https://github.com/AlignmentResearch/Megatron-LM.git",
            "branch": "farai/main",
            "tree_include": "megatron/**",
        },
        "series": [{"file": f} for f in files],
        "dropped": [],
        "consumers": [
            {
                "name": "megatron-bridge",
                "upstream": "NVIDIA-NeMo/Megatron-Bridge",
                "fork": "AlignmentResearch/megatron-bridge-contrib",
                "url": "https://github.com/AlignmentResearch/megatron-bridge-contrib.git",
                "branch": "farai/main",
                "gitlink": "3rdparty/Megatron-LM",
            }
        ],
        "validation": {"require": ["sm90"]},
    }


# The toolkit each series length gave, built once per process: about 200 tests of a run ask for one, and
# building it runs 20 git processes (40 ms of CPU) where copying it takes a few. A copy is the same
# repository and series: git records no absolute path in a plain repository, and the manifest names
# only github.com URLs and paths relative to the toolkit.
_BUILT: dict[int, Toolkit] = {}


def make_toolkit(tmp: Path, patches: int = 2) -> Toolkit:
    """Upstream repo with a base commit (`tmp/upstream`); `patches` feature commits exported with
    provenance tags into a toolkit beside it (`tmp/toolkit`). A copy of the one this process built
    first, as the same commits and files (a folder already there: built in it, as before)."""
    upstream, root = tmp / "upstream", tmp / "toolkit"
    if upstream.exists() or root.exists():
        return _build_toolkit(tmp, patches)
    if patches not in _BUILT:
        folder = Path(tempfile.mkdtemp(prefix="forkctl-tests-toolkit-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _BUILT[patches] = _build_toolkit(folder, patches)
    built = _BUILT[patches]
    shutil.copytree(built.upstream.path, upstream, symlinks=True)
    shutil.copytree(built.root, root, symlinks=True)
    return Toolkit(
        root=root,
        upstream=Repo(upstream),
        base=built.base,
        patch_files=[root / path.relative_to(built.root) for path in built.patch_files],
    )


def _build_toolkit(tmp: Path, patches: int) -> Toolkit:
    upstream = init_repo(tmp / "upstream", UPSTREAM_FILES)
    base = upstream.head()
    upstream.git("checkout", "-q", "-b", "feature")
    root = tmp / "toolkit"
    series_dir = root / "patches" / "megatron-lm"
    series_dir.mkdir(parents=True)
    files = []
    for number in range(1, patches + 1):
        upstream.commit(
            f"feat(core): change number {number}\n\nWhy: test series patch {number}.\n\nSigned-off-by: Dev <dev@example.com>",
            {"megatron/core/a.py": f"def a():\n    return {number + 1}\n"}
            if number == 1
            else {f"megatron/core/new_{number}.py": f"X = {number}\n"},
            date=f"2026-02-0{number}T10:00:00+00:00",
        )
        # The provenance tag names the commit the patch was exported from.
        sha = upstream.head()
        message = upstream.git("log", "-1", "--format=%B")
        upstream.git("commit", "-q", "--amend", "-m", f"{message}\n(cherry picked from commit {sha})")
        files.append(upstream.format_patch("HEAD", series_dir, number))
    upstream.git("checkout", "-q", "main")
    toolkit = Toolkit(root=root, upstream=upstream, base=base, patch_files=files)
    toolkit.write_manifest(manifest_dict(base, [str(f.relative_to(root)) for f in files]))
    return toolkit


def flat(text: str) -> str:
    """Output as one line: what wrapping between words for the width (forkctl/report/layout.py) changes is
    gone, so a message can be looked for whole."""
    return " ".join(text.split())


def many_consumers(count: int) -> list[dict[str, str]]:
    """`count` well-formed manifest consumers, each its own fork and gitlink (a chain longer than any real one)."""
    return [
        {
            "name": f"consumer-{number}",
            "upstream": f"org/upstream-{number}",
            "fork": f"org/fork-{number}",
            "url": f"https://example.com/org/fork-{number}.git",
            "branch": "main",
            "gitlink": f"3rdparty/link-{number}",
        }
        for number in range(count)
    ]
