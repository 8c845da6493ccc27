"""The two ways a forkctl command ends badly, each with its exit code.

`BadInput` (exit 2): the user's input, files or repositories cannot be used as given.
`Unexpected` (exit 3): anything else; the traceback goes to a log file, never to the user's screen.
A check that found problems is not an error: its Report holds them, and one of level error makes the
command exit 1.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNEXPECTED = 3


class ForkctlError(Exception):
    """Base class: `message` says what failed, `hint` how to fix it."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class BadInput(ForkctlError):
    exit_code = EXIT_BAD_INPUT


class Unexpected(ForkctlError):
    """Not the user's fault: a bug or an environment forkctl did not foresee."""

    exit_code = EXIT_UNEXPECTED
