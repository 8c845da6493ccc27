"""Which local repositories a command may contact: those its user named.

A local location (`file://`, a path) that the manifest or the command line names was named by the user:
git may list or fetch it. One that only a repository names (a consumer's `.gitmodules`, a pull request)
is refused (`remote.checked_local`), so a pull request cannot make a CI runner read a repository of its
disk. The names are scoped: the CLI opens one scope per command (`named_by_user`) and the manifest it
loads adds to it (`name`); when the command ends the scope ends with it, so nothing carries over to the
next command in the same process. Kept apart from `remote` so that a command that contacts no remote
never imports it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

# The texts named in the current scope, as given: `remote` decides which are local and normalises them.
_NAMED: ContextVar[set[str]] = ContextVar("forkctl_named_locations")


@contextlib.contextmanager
def named_by_user(texts: Iterable[str] = ()) -> Iterator[None]:
    """A scope (one command) whose user named `texts`; what `name` adds inside it ends with it."""
    token = _NAMED.set(set(texts))
    try:
        yield
    finally:
        _NAMED.reset(token)


def name(*texts: str) -> None:
    """The user named `texts` (the manifest, a `--manifest URL`): add them to the current scope. Outside
    any scope (a library caller), the scope is the caller's context."""
    try:
        _NAMED.get().update(texts)
    except LookupError:
        _NAMED.set(set(texts))


def named() -> frozenset[str]:
    """What the user named in the current scope (nothing outside one)."""
    try:
        return frozenset(_NAMED.get())
    except LookupError:
        return frozenset()
