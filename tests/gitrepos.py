"""Real git repositories for tests, built with the git CLI in tmp dirs (no mocks of git)."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

# How the project stores patches: byte-stable format-patch output.
FORMAT_PATCH = ("format-patch", "--zero-commit", "--no-signature", "--full-index", "--no-stat")


def git(cwd: Path, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> str:
    """Run git in `cwd` and return stripped stdout; fail the test with git's stderr on error."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, env=env, input=input, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.decode()}")
    return proc.stdout.decode().strip()


@dataclass
class Repo:
    path: Path

    def git(self, *args: str) -> str:
        return git(self.path, *args)

    def write(self, files: dict[str, str | None]) -> None:
        """Write (or, for None, delete) files relative to the repo root."""
        for rel, content in files.items():
            target = self.path / rel
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)

    def commit(
        self, message: str, files: dict[str, str | None] | None = None, date: str | None = None
    ) -> str:
        if files:
            self.write(files)
        self.git("add", "-A")
        args = ["commit", "-q", "--allow-empty", "-m", message]
        if date:
            args += ["--date", date]
        self.git(*args)
        return self.head()

    def head(self, rev: str = "HEAD") -> str:
        return self.git("rev-parse", rev)

    def format_patch(self, rev: str, out: Path, number: int = 1) -> Path:
        """`git format-patch` of one commit, as the project stores patches."""
        out.mkdir(parents=True, exist_ok=True)
        name = self.git(
            *FORMAT_PATCH,
            f"--start-number={number}",
            "-1",
            rev,
            "-o",
            str(out),
        )
        return Path(name)


def init_repo(path: Path, files: dict[str, str] | None = None, branch: str = "main") -> Repo:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    repo = Repo(path)
    if files:
        repo.commit("initial", files, date="2026-01-01T00:00:00+00:00")
    return repo


# --- building once per process ------------------------------------------------------------------

# What build returned and a pristine copy of what it built, per fixed folder, in this process.
_BUILT: dict[Path, tuple[object, Path]] = {}
# The test each fixed folder was last handed to (PYTEST_CURRENT_TEST without its phase).
_HANDED_TO: dict[Path, str] = {}


def _link_or_copy(src: str, dst: str) -> None:
    # git never rewrites an object or a sample hook in place (it writes new files), so a hard link is as
    # good as a copy there; everything else (refs, config, index, work trees) is copied.
    parts = Path(src).parts
    if "objects" in parts or "hooks" in parts:
        os.link(src, dst)
    else:
        shutil.copy2(src, dst)


T = TypeVar("T")


def built_once(tmp: Path, name: str, build: Callable[[Path], T]) -> T:
    """`build(folder)` for the test whose tmp dir is `tmp`: built once per process, restored for each test.

    What the builders make records its own absolute location (file:// URLs in manifests, in committed
    `.gitmodules` and in remotes), so a copy is only valid where it was built. So every test of this
    process gets the same folder, `tmp.parent / name` (next to the tests' own tmp dirs), put back to the
    state `build` left, a fraction of the git processes building costs. That is safe because a pytest
    process runs one test at a time (each xdist worker is a process of its own, with its own base temp
    dir). Outside a test, or when the same test asks twice, it builds in `tmp` as before.
    """
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    folder = tmp.parent / name
    if not test or _HANDED_TO.get(folder) == test:
        return build(tmp)
    _HANDED_TO[folder] = test
    if folder not in _BUILT:
        shutil.rmtree(folder, ignore_errors=True)
        built = build(folder)
        pristine = tmp.parent / f"{name}.pristine"
        shutil.rmtree(pristine, ignore_errors=True)
        shutil.copytree(folder, pristine, symlinks=True, copy_function=_link_or_copy)
        _BUILT[folder] = (built, pristine)
    else:
        built, pristine = _BUILT[folder]
        shutil.rmtree(folder)
        shutil.copytree(pristine, folder, symlinks=True, copy_function=_link_or_copy)
    return copy.deepcopy(built)  # type: ignore[return-value]
