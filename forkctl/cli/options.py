"""One name per idea across every verb: the options several verbs share are declared here, once.

A verb says what the option means for it (the help text); the name, the value's type, the metavar and
the parameter name come from here, so `--repo` is a local clone everywhere, `--branch` the fork branch
everywhere, `--upstream-repo` where upstream's objects are everywhere. tests/test_options.py holds every
verb to it. Spellings that earlier versions used are kept as hidden aliases (`RETIRED`), so scripts keep
working while `--help` shows one name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

# Retired spelling -> (the name that replaced it, the verb that had it). Each is accepted there, hidden,
# as the same parameter.
RETIRED = {
    "--from": ("--branch", "export"),
    "--upstream-url": ("--upstream-repo", "apply"),
}


def _with_retired(name: str, dest: str, retired: tuple[str, ...], **kwargs: Any) -> Decorator:
    """The option `name` plus, hidden, its retired spellings `retired`, all filling the parameter `dest`."""
    assert all(RETIRED[old][0] == name for old in retired), f"{retired} are not old names of {name}"
    # Each retired spelling fills a hidden parameter of its own, merged into `dest` before the command runs.
    hidden = {old: f"_{dest}_as_{old.strip('-').replace('-', '_')}" for old in retired}

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for old, key in hidden.items():
            func = click.option(old, key, hidden=True)(func)
        func = click.option(name, dest, **kwargs)(func)
        return _merge_retired(func, dest, hidden) if hidden else func

    return decorate


def _merge_retired(func: Callable[..., Any], dest: str, hidden: dict[str, str]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for old, key in hidden.items():
            value = kwargs.pop(key, None)
            if value is None:
                continue
            if kwargs.get(dest) not in (None, value):
                raise click.UsageError(f"{old} is the old name of {RETIRED[old][0]}: give one of them")
            kwargs[dest] = value
        return func(*args, **kwargs)

    return wrapper


def repo(help: str) -> Decorator:
    """`--repo PATH`: a local clone (bare or not) that forkctl reads or writes refs in."""
    return click.option(
        "--repo",
        "repo_path",
        type=click.Path(path_type=Path, file_okay=False, exists=True),
        callback=_a_folder,
        metavar="PATH",
        help=help,
    )


def _a_folder(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A path click let through as "not a file" that is no folder either (`/dev/null`, a FIFO)."""
    if value is not None and not value.is_dir():
        raise click.BadParameter(f"{str(value)!r} is not a folder (a clone of the repository is)")
    return value


def regular_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A file to read whole: a device (`/dev/zero`) or a FIFO would be read forever."""
    if value is not None and not value.is_file():
        raise click.BadParameter(f"{str(value)!r} is not a regular file")
    return value


def branch(help: str, retired: tuple[str, ...] = ()) -> Decorator:
    """`--branch NAME`: the fork branch a verb builds, moves or reads (default: manifest fork.branch)."""
    return _with_retired("--branch", "branch", retired, metavar="NAME", help=help)


def upstream_repo(help: str, retired: tuple[str, ...] = ()) -> Decorator:
    """`--upstream-repo PATH|URL`: where upstream's objects are (default: manifest upstream.url)."""
    return _with_retired("--upstream-repo", "upstream_repo", retired, metavar="PATH|URL", help=help)


def fork_repo(help: str) -> Decorator:
    """`--fork-repo PATH|URL`: where the fork's objects are (default: manifest fork.url)."""
    return click.option("--fork-repo", "fork_repo", metavar="PATH|URL", help=help)


def through(help: str) -> Decorator:
    """`--through CONSUMER`: the last consumer of the chain a verb moves (default: the first one)."""
    return click.option("--through", "through", metavar="CONSUMER", help=help)


def allow_pending() -> Decorator:
    """`--allow-pending ENV`: a move accepts a required environment that is only pending, by name."""
    return click.option(
        "--allow-pending",
        "allow_pending",
        multiple=True,
        metavar="ENV",
        help="Accept this required environment although validation.pending lists it (repeatable), as "
        "forkctl gate --allow-pending does; the acceptance is written into what is published "
        "('GPU evidence: ... accepted as pending') next to the evidence that passed.",
    )


def no_gate() -> Decorator:
    """`--no-gate`: a move (publish, bump-bridge, sync) goes past a failing gate, in the open."""
    return click.option(
        "--no-gate",
        "no_gate",
        is_flag=True,
        help="Publish even where the gate fails for the series (no GPU evidence for it: see forkctl gate). "
        "Without it such a move is refused (exit 1, nothing pushed) with the gate's findings and the "
        "forkctl validate that records the evidence. The override is written into what is published "
        "(the merge commit, the bump commits, the pull-request body): 'Published without GPU evidence'.",
    )


def resume(help: str) -> Decorator:
    """`--continue` (the parameter `resume`: `continue` is a keyword): go on with a stopped operation."""
    return click.option("--continue", "resume", is_flag=True, help=help)


def abort(help: str) -> Decorator:
    """`--abort`: give up a stopped operation."""
    return click.option("--abort", is_flag=True, help=help)
