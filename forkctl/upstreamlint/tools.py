"""The tools upstream's hooks pin, each in its own virtual environment under forkctl's cache.

One venv per tool and version (and the Python that runs it): `$FORKCTL_CACHE/upstream-lint/<tool>-py<X.Y>-
<key>/`, made with the interpreter that runs forkctl (`python -m venv`) and filled by its pip from the
package index the user's pip is configured for. A venv is complete when its marker file names exactly
the requirements it was made for; the marker is written last, so an interrupted install is made again,
and a complete one is used without the network.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from forkctl import locking, process
from forkctl.digests import sha256_hex
from forkctl.errors import BadInput
from forkctl.files import atomic_write_text, cache_root
from forkctl.upstreamlint.hooks import Hook

TOOLS_FOLDER = "upstream-lint"
MARKER = "forkctl-installed.json"
VENV_TIMEOUT_S = 300
INSTALL_TIMEOUT_S = 900  # a first install downloads the tool and its dependencies


def venv_path(hook: Hook) -> Path:
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    key = sha256_hex("\n".join([sys.version, *hook.requirements]).encode())[:12]
    name = re.sub(r"[^A-Za-z0-9.]+", "-", hook.tool).strip("-") or "hook"
    return cache_root() / TOOLS_FOLDER / f"{name}-py{python}-{key}"


def _complete(venv: Path, requirements: list[str]) -> bool:
    try:
        recorded = json.loads((venv / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return recorded == {"requirements": requirements} and (venv / "bin" / "python").exists()


def _install_failed(hook: Hook, venv: Path, output: str) -> BadInput:
    wanted = " ".join(hook.requirements)
    tail = " | ".join(line.strip() for line in output.strip().splitlines()[-3:])
    return BadInput(
        f"cannot install {hook.tool} ({wanted}), which upstream's pre-commit hook {hook.id!r} pins: "
        f"pip says: {tail or 'nothing'}",
        hint=f"the first run needs the package index (pip's own settings such as PIP_INDEX_URL apply): run "
        f"the same forkctl command where it is reachable, or install by hand: V={venv}; {sys.executable} -m "
        f"venv $V && $V/bin/python -m pip install {wanted} && "
        f"echo '{json.dumps({'requirements': hook.requirements})}' > $V/{MARKER}; later runs need no network",
    )


def _make(hook: Hook, venv: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    pip = [] if hook.requirements else ["--without-pip"]
    process.run([sys.executable, "-m", "venv", *pip, str(venv)], timeout=VENV_TIMEOUT_S, check=True)
    if hook.requirements:
        install = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
        install += ["--no-input", "--quiet", "--retries", "1", *hook.requirements]
        done = process.run(install, timeout=INSTALL_TIMEOUT_S, text=True, merge_stderr=True)
        if done.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise _install_failed(hook, venv, str(done.stdout))
    atomic_write_text(venv / MARKER, json.dumps({"requirements": hook.requirements}))


def ensure(hook: Hook, progress: Callable[[str], None]) -> Path | None:
    """The `bin` folder of the hook's venv, installed on first use; None for a `system` hook."""
    if hook.system:
        return None
    venv = venv_path(hook)
    if not _complete(venv, hook.requirements):
        with locking.held(
            venv.with_name(venv.name + ".lock"), f"the {hook.tool} environment", INSTALL_TIMEOUT_S
        ):
            if not _complete(venv, hook.requirements):
                progress(f"installing {hook.tool} for upstream's hook {hook.id} into {venv}")
                try:
                    _make(hook, venv)
                except (process.Failed, process.TimedOut, OSError) as exc:
                    shutil.rmtree(venv, ignore_errors=True)
                    raise _install_failed(hook, venv, str(exc)) from None
    return venv / "bin"
