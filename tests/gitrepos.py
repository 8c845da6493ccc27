"""Real git repositories for tests, built with the git CLI in tmp dirs (no mocks of git)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

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
