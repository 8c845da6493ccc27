"""`forkctl` on PATH for a test that runs a printed command through a shell: the forkctl of the Python
running the tests (`python -m forkctl`), whatever console script a virtual environment's bin folder
holds (a copied environment's script may name another checkout's interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def forkctl_env(folder: Path) -> dict[str, str]:
    """This environment with a `forkctl` in `folder` (made here) first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "forkctl"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m forkctl "$@"\n')
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def run_split(manifest: Path, env: dict[str, str], *args: str) -> tuple[int, dict[str, Any], list[str]]:
    """`forkctl --manifest M <args> --json` as its own process, the `forkctl` on env's PATH: (exit code,
    stdout's document, stderr's lines)."""
    done = subprocess.run(
        ["forkctl", "--manifest", str(manifest), *args, "--json"], capture_output=True, text=True, env=env
    )
    return done.returncode, json.loads(done.stdout), done.stderr.splitlines()
