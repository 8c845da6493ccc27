"""A `git` on PATH that records every invocation and runs the real git: how tests count the git
processes forkctl spawns (the runner drops GIT_TRACE*, so git's own tracing cannot see them)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass
class GitShim:
    bin_dir: Path
    log: Path

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["PATH"] = os.pathsep.join([str(self.bin_dir), env.get("PATH", "")])
        return env

    def calls(self) -> list[str]:
        """The git subcommand of each recorded call, in order (global options such as `-c key=value`
        and `--git-dir=PATH` skipped)."""
        if not self.log.exists():
            return []
        found = []
        for line in self.log.read_text().splitlines():
            words = line.split("\x1f")
            while words and words[0].startswith("-"):
                words = words[2:] if words[0] in ("-c", "-C", "--git-dir", "--work-tree") else words[1:]
            found.append(words[0] if words else "")
        return found

    def reset(self) -> None:
        self.log.unlink(missing_ok=True)


def make_git_shim(tmp: Path) -> GitShim:
    real = shutil.which("git")
    assert real is not None
    bin_dir = tmp / "shim-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    log = tmp / "git-calls.log"
    script = bin_dir / "git"
    # One line per call, arguments separated by the unit separator (arguments may hold spaces).
    script.write_text(
        f"#!/bin/sh\n(IFS=$(printf '\\037'); printf '%s\\n' \"$*\") >> '{log}'\nexec '{real}' \"$@\"\n"
    )
    script.chmod(0o755)
    return GitShim(bin_dir=bin_dir, log=log)
