"""What every command's CLI shares: the global context, output flags, and error-to-exit-code mapping.

Each `commands/<verb>.py` declares its click command with `@forkctl_command`, does its work through the
core, and returns a `Report`; this module renders it and turns errors into exit codes (0 ok, 1 the report
holds an error problem, 2 bad input or usage).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec

from forkctl.errors import ForkctlError, Unexpected

if TYPE_CHECKING:
    from forkctl import report
    from forkctl.manifest import Manifest
    from forkctl.manifest.remote import ManifestSpec

# The manifest and report layers are imported when a command runs, not when the CLI starts: `--help`
# and usage errors must not pay for YAML, the schema or rich.


class Context(msgspec.Struct):
    """Global options, with the manifest loaded once, on first use.

    `manifest_option` is a local path or, for a manifest in another repository, `URL@REF:PATH`
    (`forkctl.manifest.remote`): that one is read from a read-only snapshot in the cache.
    """

    manifest_option: str | None = None
    _manifest: Manifest | None = None
    _snapshot: Path | None = None

    def remote_spec(self) -> ManifestSpec | None:
        """The manifest's URL, ref and path when --manifest names one by URL (no network: parsing only)."""
        if self.manifest_option is None:
            return None
        if "@" not in self.manifest_option and "://" not in self.manifest_option:
            return None  # no URL@REF:PATH (nor a URL lacking its @REF): a local path, as parse_spec says
        from forkctl.manifest.remote import parse_spec

        return parse_spec(self.manifest_option)

    def require_local(self, what: str) -> None:
        """Refuse a command that writes the toolkit's files when the manifest is named by URL."""
        spec = self.remote_spec()
        if spec is not None:
            raise ForkctlError(
                f"{what}, but --manifest names a read-only manifest in another repository ({spec.shown})",
                hint="run it in a checkout of that repository, or pass --manifest PATH to a local manifest.yaml",
            )

    def manifest_path(self) -> Path:
        from forkctl import manifest as manifest_mod

        spec = self.remote_spec()
        if spec is not None:
            if self._snapshot is None:
                from forkctl import report
                from forkctl.manifest.remote import materialise

                verb = click.get_current_context(silent=True)
                deciding = verb is None or verb.info_name in FROM_SOURCE
                self._snapshot = materialise(spec, report.info, deciding=deciding)
            return self._snapshot
        if self.manifest_option is not None:
            return Path(self.manifest_option)
        try:
            here = Path.cwd()
        except OSError:
            raise ForkctlError(
                "the current directory no longer exists",
                hint="cd into the repository again, or pass --manifest",
            ) from None
        return manifest_mod.find_manifest(here)

    def manifest(self) -> Manifest:
        """The manifest, loaded once. A verb that gates, signs, checks the chain or moves it reads it
        from its YAML (`FROM_SOURCE`); the others may take it from the parsed-manifest cache."""
        if self._manifest is None:
            from forkctl import manifest as manifest_mod

            spec = self.remote_spec()
            verb = click.get_current_context(silent=True)
            from_source = verb is None or verb.info_name in FROM_SOURCE
            self._manifest = manifest_mod.load(
                self.manifest_path(), spec.shown if spec else None, from_source=from_source
            )
        return self._manifest


# The verbs whose verdict or move rests on the manifest: it is parsed from its bytes for them, never read
# from a cache entry (a CI cache is restored from places a pull request can write).
FROM_SOURCE = frozenset(
    {"check-pins", "gate", "validate", "sign", "publish", "bump-bridge", "sync", "fork-base", "describe"}
)


def output_options(github: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add --json (and optionally --github) and pass them on as `fmt`."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        func = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")(
            func
        )
        if github:
            func = click.option(
                "--github",
                "as_github",
                is_flag=True,
                help="Also print ::error annotations and append a Markdown step summary "
                "to $GITHUB_STEP_SUMMARY (for GitHub Actions).",
            )(func)
        return func

    return decorate


# Exit codes of a command ended by a signal, as a shell reports them (128 + the signal's number).
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM
# A reader that went away before the command finished (`forkctl ... | head -1`): what a shell reports
# for a process that SIGPIPE ended, which is how git and coreutils end there.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


class Terminated(BaseException):
    """SIGTERM arrived. Raised in the main thread, like KeyboardInterrupt for SIGINT, so that what is
    under way unwinds: a running git child's group is killed, temp files are removed, locks released.
    A BaseException, so that no `except Exception` in the core swallows it."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler (a command run from a test's worker thread)
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Interrupted(ForkctlError):
    """The command was stopped by a signal: `exit_code` is 130 (SIGINT) or 143 (SIGTERM)."""

    def __init__(self, exit_code: int, what: str) -> None:
        super().__init__(f"{what}: stopped before it finished", hint="run the command again")
        self.exit_code = exit_code


def forkctl_command(func: Callable[..., report.Report]) -> Callable[..., None]:
    """Wrap a command body: give it the Context, render its Report, map errors to exit codes."""

    @functools.wraps(func)
    @click.pass_obj
    def wrapper(
        ctx: Context, /, *args: Any, as_json: bool = False, as_github: bool = False, **kwargs: Any
    ) -> None:
        from forkctl import report

        command = click.get_current_context().info_name
        fmt = report.Format.JSON if as_json else report.Format.GITHUB if as_github else report.Format.TEXT
        try:
            from forkctl.git import locations

            _refuse_empty_names(kwargs)
            with _sigterm_unwinds(), locations.named_by_user(_command_line_locations(kwargs)):
                result = func(ctx, *args, **kwargs)
            code = report.emit(result, fmt)
        except ForkctlError as exc:
            code = report.error(exc, fmt, command)
        except KeyboardInterrupt:
            code = report.error(Interrupted(EXIT_INTERRUPTED, "interrupted (Ctrl-C)"), fmt, command)
        except Terminated:
            code = report.error(Interrupted(EXIT_TERMINATED, "terminated (SIGTERM)"), fmt, command)
        except BrokenPipeError:  # not a bug: the output's reader is gone, and nobody reads an error
            code = closed_pipe()
        except Exception as exc:  # the contract: no traceback ever reaches a user
            known = environment_error(exc)
            code = report.error(known or unexpected_error(func.__name__, exc), fmt, command)
        sys.exit(code)

    return wrapper


# What the machine, not forkctl, did wrong: a full disk or quota, a file over the size limit (ulimit -f),
# a read-only file system, no permission.
_ENVIRONMENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}
)


def environment_error(exc: BaseException) -> ForkctlError | None:
    """Bad input (exit 2) for an OSError that says what is wrong with the place forkctl works in: the
    cache folder (`FORKCTL_CACHE` under /proc, a cache folder that is a file, a read-only cache) or a
    full or read-only disk; None for anything else (a bug: exit 3)."""
    if not isinstance(exc, OSError):
        return None
    where = exc.filename if isinstance(exc.filename, str) else None
    if where is not None and _in_cache(Path(where)):
        from forkctl.files import cache_root

        return ForkctlError(
            f"forkctl's cache {cache_root()} cannot be used: {exc.strerror or exc} ({where})",
            hint="point FORKCTL_CACHE at a folder forkctl can write (it is made if missing), or unset it",
        )
    if exc.errno in _ENVIRONMENT_ERRNOS:
        return ForkctlError(
            f"cannot write {where or 'a file'}: {exc.strerror or exc}",
            hint="free space (or raise the limit), check the permissions, then run the command again: "
            "what was written is either whole or not there",
        )
    return None


def _in_cache(path: Path) -> bool:
    from forkctl.files import cache_root

    try:
        root = cache_root()
    except ForkctlError as cause:  # the cache names a file: say that
        return bool(cause)
    except RuntimeError:
        return False
    return path == root or root in path.parents or path in root.parents


def _refuse_empty_names(options: dict[str, Any]) -> None:
    """`--branch ''` (an unset variable in a script) is a mistake, never "the default branch"."""
    if options.get("branch") == "":
        from forkctl.errors import BadInput

        raise BadInput(
            "'' is not a usable branch name: --branch must not be empty",
            hint="leave --branch out for the manifest's branch, or name one",
        )


def closed_pipe() -> int:
    """End quietly on a closed stdout or stderr: both pointed at /dev/null, exit as SIGPIPE would."""
    from forkctl import report

    report.output_closed(sys.stdout)
    report.output_closed(sys.stderr)
    return EXIT_BROKEN_PIPE


def _command_line_locations(options: dict[str, Any]) -> list[str]:
    """What the command line names (`--to file:///...`, `--consumer PATH@REV`): a local repository among
    them was named by the user and may be contacted; one only a repository's `.gitmodules` names may not
    (git/locations.py)."""
    named: list[str] = []
    for value in options.values():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, (str, Path)):
                text = str(item)
                named.append(text)
                if "@" in text:
                    named.append(text.rpartition("@")[0])  # PATH@REV, URL@REV
    return named


def unexpected_error(command: str, exc: Exception) -> Unexpected:
    """Turn a crash into exit 3 with a short message; the traceback goes to a log file, not the screen."""
    import tempfile  # only a crash pays for these (about 13 ms of every start otherwise)
    import traceback

    from forkctl.redact import clean

    text = "".join(traceback.format_exception(exc))
    log = None
    with contextlib.suppress(OSError):
        handle, name = tempfile.mkstemp(prefix="forkctl-crash-", suffix=".log")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            # Users are asked to attach this file: redacted like every other channel.
            stream.write(clean(f"forkctl {command}: {sys.argv!r}\n{_versions()}\n{text}"))
        log = name
    where = f"; the traceback is in {log}" if log else ""
    return Unexpected(
        f"unexpected error: {type(exc).__name__}: {exc}{where}",
        hint="this is a bug in forkctl: please report it with that file",
    )


def _versions() -> str:
    """What a bug report needs to reproduce a crash: forkctl's, Python's and git's versions, the platform."""
    import platform

    from forkctl import __version__
    from forkctl.git import runner

    try:
        git = runner.git(["--version"], timeout=10, check=False).out.strip()
    except Exception:  # a crash report must not crash: git missing, a bad timeout variable, ...
        git = "git: not runnable"
    return f"forkctl {__version__}; Python {platform.python_version()}; {git or 'git: unknown'}; {platform.platform()}"


def toolkit_locked(func: Callable[..., report.Report]) -> Callable[..., report.Report]:
    """Run a command that writes the manifest or patch files under the toolkit's lock; the manifest is
    read inside the lock, so a run that waited sees what the run before it wrote. A manifest named by
    URL is a read-only snapshot that no forkctl writes: there is nothing to lock (and a command that
    would write refuses it with `Context.require_local` before anything is fetched)."""

    @functools.wraps(func)
    def wrapper(ctx: Context, *args: Any, **kwargs: Any) -> report.Report:
        from forkctl import locking
        from forkctl.files import cache_root

        if ctx.remote_spec() is not None:
            return func(ctx, *args, **kwargs)
        with locking.toolkit(ctx.manifest_path(), cache_root()):
            ctx._manifest = None
            return func(ctx, *args, **kwargs)

    return wrapper
