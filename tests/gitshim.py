"""A `git` on PATH that records every invocation and runs the real git: how tests count the git
processes forkctl spawns, whatever trace variables the environment holds (FORKCTL_TRACE logs the same calls)."""

from __future__ import annotations

import json
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


class Trace2:
    """The git processes started while `GIT_CONFIG_GLOBAL` names this file (`env`): git's own trace2
    events, one file each, so a count sees every process, git's children apart."""

    def __init__(self, folder: Path, name: str) -> None:
        self.events = folder / f"trace2-{name}.json"
        self.config = folder / f"gitconfig-trace2-{name}"
        self.config.write_text(
            f'[trace2]\n\teventTarget = {self.events}\n[protocol "file"]\n\tallow = always\n'
        )

    @property
    def env(self) -> dict[str, str]:
        return {"GIT_CONFIG_GLOBAL": str(self.config)}

    def argvs(self) -> list[list[str]]:
        """The argv of each git process started (not git's own children), in order."""
        starts = [json.loads(line) for line in self.events.read_text().splitlines()]
        return [e["argv"] for e in starts if e["event"] == "start" and "/" not in e["sid"]]
