"""What every command's CLI shares: the global context, output flags, and error-to-exit-code mapping.

Each `commands/<verb>.py` declares its click command with `@forkctl_command`, does its work through the
core, and returns a `Report`; this module renders it and turns errors into exit codes (0 ok, 1 a check
found problems, 2 bad input or usage).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from forkctl.errors import ForkctlError, Unexpected

if TYPE_CHECKING:
    from forkctl import report
    from forkctl.manifest import Manifest

# The manifest and report layers are imported when a command runs, not when the CLI starts: `--help`
# and usage errors must not pay for YAML, the schema or rich.


@dataclass
class Context:
    """Global options, with the manifest loaded once, on first use."""

    manifest_option: Path | None = None
    _manifest: Manifest | None = field(default=None, repr=False)

    def manifest_path(self) -> Path:
        from forkctl import manifest as manifest_mod

        if self.manifest_option is not None:
            return self.manifest_option
        try:
            here = Path.cwd()
        except OSError:
            raise ForkctlError(
                "the current directory no longer exists",
                hint="cd into the repository again, or pass --manifest",
            ) from None
        return manifest_mod.find_manifest(here)

    def manifest(self) -> Manifest:
        if self._manifest is None:
            from forkctl import manifest as manifest_mod

            self._manifest = manifest_mod.load(self.manifest_path())
        return self._manifest


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


def forkctl_command(func: Callable[..., report.Report]) -> Callable[..., None]:
    """Wrap a command body: give it the Context, render its Report, map errors to exit codes."""

    @functools.wraps(func)
    @click.pass_obj
    def wrapper(
        ctx: Context, *args: Any, as_json: bool = False, as_github: bool = False, **kwargs: Any
    ) -> None:
        from forkctl import report

        command = click.get_current_context().info_name
        fmt = report.Format.JSON if as_json else report.Format.GITHUB if as_github else report.Format.TEXT
        try:
            result = func(ctx, *args, **kwargs)
            code = report.emit(result, fmt)
        except ForkctlError as exc:
            code = report.error(exc, fmt, command)
        except KeyboardInterrupt:
            code = report.error(Unexpected("interrupted", hint="run the command again"), fmt, command)
        except Exception as exc:  # the contract: no traceback ever reaches a user
            code = report.error(unexpected_error(func.__name__, exc), fmt, command)
        sys.exit(code)

    return wrapper


def unexpected_error(command: str, exc: Exception) -> Unexpected:
    """Turn a crash into exit 3 with a short message; the traceback goes to a log file, not the screen."""
    text = "".join(traceback.format_exception(exc))
    log = None
    with contextlib.suppress(OSError):
        handle, name = tempfile.mkstemp(prefix="forkctl-crash-", suffix=".log")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(f"forkctl {command}: {sys.argv!r}\n{text}")
        log = name
    where = f"; the traceback is in {log}" if log else ""
    return Unexpected(
        f"unexpected error: {type(exc).__name__}: {exc}{where}",
        hint="this is a bug in forkctl: please report it with that file",
    )


def toolkit_locked(func: Callable[..., report.Report]) -> Callable[..., report.Report]:
    """Run a command that writes the manifest or patch files under the toolkit's lock; the manifest is
    read inside the lock, so a run that waited sees what the run before it wrote."""

    @functools.wraps(func)
    def wrapper(ctx: Context, *args: Any, **kwargs: Any) -> report.Report:
        from forkctl import locking
        from forkctl.git.remote import cache_root

        with locking.toolkit(ctx.manifest_path(), cache_root()):
            ctx._manifest = None
            return func(ctx, *args, **kwargs)

    return wrapper
