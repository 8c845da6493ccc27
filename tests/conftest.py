from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# The user's home, cache folder and forkctl cache as the session found them, handed on to xdist's workers
# (which start after pytest_configure below has moved HOME): what no test may write into.
REAL = ("FORKCTL_TESTS_REAL_HOME", "FORKCTL_TESTS_REAL_XDG_CACHE", "FORKCTL_TESTS_REAL_CACHE")
# Compiled-kernel caches that default to the home: one per session, so a GPU test does not compile again
# what the test before it compiled, while the user's own stays untouched.
KERNEL_CACHES = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
CHANGES = {"open", "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.truncate"}
# What the running test did to the user's files, as this process's audit hook saw it.
seen_by_hook: dict[str, list[str]] = {"writes": [], "homeless_children": []}


def pytest_configure(config: pytest.Config) -> None:
    """Before collection: a home of the session's own, so not even import-time code sees the user's."""
    home = os.environ.setdefault(REAL[0], os.path.expanduser("~"))
    xdg = os.environ.setdefault(REAL[1], os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"))
    os.environ.setdefault(REAL[2], os.environ.get("FORKCTL_CACHE") or os.path.join(home, ".cache", "forkctl"))
    session = Path(tempfile.mkdtemp(prefix="forkctl-tests-"))
    config.add_cleanup(lambda: shutil.rmtree(session, ignore_errors=True))
    _point_home_at(session, os.environ.__setitem__)
    for name in KERNEL_CACHES:
        os.environ.setdefault(name, str(session / "kernels" / name.lower()))
    sys.addaudithook(_audit(home, (xdg, os.environ[REAL[2]])))


def _point_home_at(folder: Path, setenv) -> None:
    setenv("HOME", str(folder / "home"))
    setenv("XDG_CACHE_HOME", str(folder / "home" / ".cache"))
    setenv("FORKCTL_CACHE", str(folder / "forkctl-cache"))
    (folder / "home").mkdir(exist_ok=True)


def _audit(home: str, caches: tuple[str, ...]):
    """An audit hook that notes every change this process makes to a file directly in the user's home
    or anywhere in their caches (not below the home as such: a checkout often lives there), and every
    child started with an environment that has no HOME (it would find the user's through pwd)."""
    under = tuple(os.path.join(cache, "") for cache in caches)

    def hook(event: str, args: tuple) -> None:
        if event == "subprocess.Popen":
            if args[3] is not None and "HOME" not in args[3]:
                seen_by_hook["homeless_children"].append(str(args[1]))
        elif event in CHANGES and (event != "open" or _writes(args)):
            for target in args[:2] if event in ("os.rename", "os.symlink", "os.link") else args[:1]:
                if isinstance(target, str | bytes | os.PathLike):
                    path = os.path.abspath(os.fsdecode(target))
                    if os.path.dirname(path) == home or path.startswith(under) or path in caches:
                        seen_by_hook["writes"].append(f"{event} {path}")

    return hook


def _writes(args: tuple) -> bool:
    _path, mode, flags = args
    return any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & WRITE_FLAGS)


def _fingerprint() -> dict[str, object]:
    """What a write into the user's home or forkctl cache changes: the names in the home, and the names
    and change times two levels into the forkctl cache (a new entry, or a partial clone fetched into)."""
    home, _xdg, cache = (os.environ[name] for name in REAL)
    seen: dict[str, object] = {os.path.join(home, name): True for name in _listing(home)}
    with contextlib.suppress(OSError):  # gone while it was read: the listing shows that
        seen[cache] = os.stat(cache).st_mtime_ns
        for entry in os.scandir(cache):
            seen[entry.path] = entry.stat(follow_symlinks=False).st_mtime_ns
            if entry.is_dir(follow_symlinks=False):
                seen[entry.path + "/"] = sorted(_listing(entry.path))
    return seen


def _listing(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


@pytest.fixture(autouse=True, scope="session")
def _isolated_git(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every git call in the tests sees the same identity and no user or system config."""
    home = tmp_path_factory.mktemp("home")
    config = home / ".gitconfig"
    config.write_text(
        "[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
        '[protocol "file"]\n\tallow = always\n'
    )
    os.environ["GIT_CONFIG_GLOBAL"] = str(config)
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    os.environ.pop("GIT_DIR", None)
    os.environ.pop("GIT_INDEX_FILE", None)


@pytest.fixture(autouse=True)
def _own_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Every test gets a HOME, XDG_CACHE_HOME and FORKCTL_CACHE of its own, and fails if it wrote into
    the user's: in this process (the audit hook), or through a child that had no HOME to go by (the
    user's home and forkctl cache changed while it ran; another program writing there then is not
    told apart, so only such a test is asked)."""
    _point_home_at(tmp_path_factory.mktemp("own-home"), monkeypatch.setenv)
    for found in seen_by_hook.values():
        found.clear()
    before = _fingerprint()
    yield
    changed = list(seen_by_hook["writes"])
    if seen_by_hook["homeless_children"]:
        after = _fingerprint()
        changed += sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))
    if changed:
        pytest.fail(
            f"the test wrote into the user's home or caches: {changed[:10]}; write under tmp_path, or "
            "under the HOME / FORKCTL_CACHE this fixture set (a child needs HOME in its environment)",
            pytrace=False,
        )


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
