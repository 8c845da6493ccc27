"""A patched copy of the installed megatron package, shared by tests/patches and tests/gpu.

The patch tests must exercise the series exactly as a consumer gets it: the released package
(megatron-core from PyPI, the closest release to the pinned base) with the series applied on top
of its `megatron/` files. The copy lives in a pytest temp dir and is put first on sys.path before
anything imports megatron, so the tests never see the unpatched site-packages copy by accident.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# A file the series adds: proves the tree carries the series after applying.
SERIES_MARKER = Path("megatron/core/transformer/moe/torch_grouped_linear.py")

# Set by `forkctl validate`: the folder holding the patched megatron/ it made, and (with --source) the
# folder holding the base's unpatched megatron/ it was made from.
PATCHED_ENV = "FORKCTL_PATCHED_MEGATRON"
PLAIN_ENV = "FORKCTL_PLAIN_MEGATRON"

_CACHE: dict[str, Path] = {}


@functools.cache  # first answer wins: later, a patched copy sits at sys.path[0]
def installed_megatron() -> Path:
    """The installed `megatron/` folder (site-packages or PYTHONPATH), found without running its code."""
    for entry in sys.path:
        path = Path(entry or ".") / "megatron"
        if (path.parent / SERIES_MARKER).exists():
            continue  # a patched copy (e.g. the one `forkctl validate` put first on PYTHONPATH)
        if (path / "core" / "__init__.py").is_file() and (path / "core" / "transformer").is_dir():
            return path.resolve()
    raise RuntimeError(f"megatron-core is not installed on sys.path ({sysconfig.get_paths()['purelib']})")


def _apply_series(tree: Path) -> None:
    cmd = [sys.executable, "-m", "forkctl", "apply", "--tree", str(tree)]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    if not (tree / SERIES_MARKER).is_file():
        raise RuntimeError(
            f"the series was not applied to {tree} ({SERIES_MARKER} is missing); "
            "check that manifest.yaml lists the patches under patches/megatron-lm/"
        )


def _copy_package(dest_root: Path) -> Path:
    dest_root.mkdir(parents=True, exist_ok=True)
    # With its bytecode (compiled at set-up): a child interpreter then does not compile megatron again.
    # copytree keeps modification times, so a file the series patches no longer matches its .pyc and
    # Python compiles that one from source.
    shutil.copytree(installed_megatron(), dest_root / "megatron")
    return dest_root


def patched_tree(tmp_path_factory) -> Path:
    """Folder holding a patched `megatron/` (made once per session)."""
    given = os.environ.get(PATCHED_ENV)
    if given and "patched" not in _CACHE:
        # `forkctl validate` already made and patched a copy: test exactly that one.
        if not (Path(given) / SERIES_MARKER).is_file():
            raise RuntimeError(
                f"{PATCHED_ENV}={given} does not hold a patched megatron/ ({SERIES_MARKER} missing)"
            )
        _CACHE["patched"] = Path(given)
    if "patched" not in _CACHE:
        _CACHE["patched"] = _shared(tmp_path_factory, "megatron-patched", _make_patched)
    return _CACHE["patched"]


def _make_patched(tree: Path) -> None:
    _copy_package(tree)
    _apply_series(tree)


def _shared(tmp_path_factory, name: str, make) -> Path:
    """`make(folder)` once per test run: under pytest-xdist every worker is a process of its own, so the
    first one to get here builds the copy in the run's shared temp root, under a lock, the others wait."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        tree = tmp_path_factory.mktemp(name)
        make(tree)
        return tree
    root = tmp_path_factory.getbasetemp().parent  # the same for every worker of this run
    tree, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if not done.exists():
            shutil.rmtree(tree, ignore_errors=True)  # a worker that died while making it
            make(tree)
            done.touch()
    return tree


def plain_tree(tmp_path_factory) -> Path:
    """Folder holding an unpatched `megatron/`: the upstream base validate built the fork head from, or a
    copy of the installed release (made once per session)."""
    given = os.environ.get(PLAIN_ENV)
    if given and "plain" not in _CACHE:
        if (Path(given) / SERIES_MARKER).exists() or not (Path(given) / "megatron/core").is_dir():
            raise RuntimeError(f"{PLAIN_ENV}={given} does not hold an unpatched megatron/")
        _CACHE["plain"] = Path(given)
    if "plain" not in _CACHE:
        _CACHE["plain"] = _shared(tmp_path_factory, "megatron-plain", _copy_package)
    return _CACHE["plain"]


@pytest.fixture(scope="session")
def megatron_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A patched copy of the installed megatron package, first on sys.path (a fixture of tests/gpu and
    tests/patches: their conftests import it).

    Nothing in those tests imports megatron at module level, so this runs before the first import.
    """
    tree = patched_tree(tmp_path_factory)
    activate(tree)
    import megatron.core

    assert str(megatron.core.__file__).startswith(str(tree.resolve()))
    return tree


@pytest.fixture(scope="session")
def plain_megatron_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An unpatched copy of the installed megatron package (for 'the old code fails' checks)."""
    return plain_tree(tmp_path_factory)


def activate(tree: Path) -> None:
    """Put `tree` first on sys.path and import megatron from it (must precede any megatron import)."""
    tree = tree.resolve()
    loaded = sys.modules.get("megatron.core")
    if loaded is None:
        if "megatron" in sys.modules:
            raise RuntimeError("megatron was imported before the patched copy was put on sys.path")
        sys.path.insert(0, str(tree))
        import megatron.core  # noqa: F401

        loaded = sys.modules["megatron.core"]
    origin = Path(loaded.__file__).resolve()
    if not origin.is_relative_to(tree):
        raise RuntimeError(f"megatron.core was imported from {origin}, not from the patched copy {tree}")


def subprocess_env(tree: Path) -> dict[str, str]:
    """Environment for a child interpreter that must import megatron from `tree`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return env


def init_single_rank() -> None:
    """Single-process torch.distributed (gloo) and megatron model-parallel state of size 1."""
    import torch.distributed as dist
    from megatron.core import parallel_state

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(1, 1)
