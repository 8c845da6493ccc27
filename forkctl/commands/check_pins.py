"""forkctl check-pins: every link of the nested pin chain pins what it should, and can be cloned.

Nearest consumer first: the Bridge must pin exactly apply(series, base) at its gitlink (or the report
says why not), each further consumer must pin a commit of the previous one that itself passes, every
`.gitmodules` URL must name the fork, every pinned SHA must be reachable from a branch or tag of
that URL, and every other record of a pin (manifest `pin_files`, the Bridge's `.main.commit`) must name
the gitlink's commit. All of it is read from commit objects: no submodule is initialised or checked out.

`--under-test PATH[@REV]|HERE` judges one consumer commit on its own (a consumer's pull request): from
that commit down to the fork head, never another consumer's branch head, its `.gitmodules` findings
pointing at their lines. (Not `--from`: that is the retired spelling of export's `--branch`, and one
option name means one idea in every verb.) Run in a consumer's checkout with neither, that is the
default (`--under-test HERE`): the pre-push hook and the Action judge the commit being pushed or tested;
`--branches` checks every consumer's branch at its URL instead, the default anywhere else.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from forkctl import report
from forkctl.chain.checks import check_chain
from forkctl.chain.sources import Source, default_sources
from forkctl.chain.undertest import Here, consumer_here, sources_from, under_test_sources
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.manifest import Manifest
from forkctl.report import Report
from forkctl.report.chain import chain_report


@click.command("check-pins", short_help=verbs.summary("check-pins"))
@click.option(
    "--consumer",
    "consumers",
    multiple=True,
    metavar="PATH[@REV]|URL",
    help="Where to find a consumer, in chain order, nearest first (repeat): a local clone (its HEAD, or REV "
    "after '@'), or a URL (its manifest branch, or BRANCH/SHA after '@'). Default: the checkout you are in, "
    "judged on its own (as --under-test HERE), when it is a consumer; else every consumer's branch (--branches).",
)
@click.option(
    "--under-test",
    "under_test",
    metavar="PATH[@REV]|HERE",
    help="Judge one consumer commit on its own: the local clone at PATH (its HEAD, or REV after '@'; HERE = "
    "the repository you are in), checked from that commit DOWN to the fork head only: its gitlink, its "
    ".gitmodules URL, the reachability of its pin, and recursively the commit it pins; never another "
    "consumer's branch head. Findings about its .gitmodules carry file and line (--github annotations). "
    "For a consumer's pull request CI.",
)
@click.option(
    "--as",
    "as_name",
    metavar="NAME",
    help="Which manifest consumer the repository under test (--under-test, or the checkout you are in) "
    "is, when its gitlinks and remotes do not say (or say several).",
)
@click.option(
    "--branches",
    is_flag=True,
    help="Check every consumer's manifest branch at its URL, nearest first (the chain as published), even "
    "when run in a consumer's checkout, where the default judges that checkout's HEAD on its own.",
)
@options.fork_repo("The fork (for its branch's .fork-base.json); default: the manifest's fork URL.")
@options.upstream_repo(
    "Where the base commit is: a local clone of upstream "
    "(read only, saves the network) or a URL; default: the manifest's upstream URL via the cache."
)
@output_options(github=True)
@forkctl_command
def command(
    ctx: Context,
    consumers: tuple[str, ...],
    under_test: str | None,
    as_name: str | None,
    branches: bool,
    fork_repo: str | None,
    upstream_repo: str | None,
) -> Report:
    """Check the nested pin chain: the nearest consumer pins exactly the fork head apply(series, base), each
    further consumer pins a passing commit of the previous one, .gitmodules URLs name the forks, every
    pinned SHA is reachable from a branch or tag of its URL, and each pin file the manifest names
    (pin_files, e.g. .main.commit) names the gitlink's commit. Reads commit objects only (uninitialised and
    shallow submodules are fine). With --under-test, only the given consumer commit and what it pins,
    recursively (for a consumer's pull request); run in a consumer's checkout, that is the default for
    its HEAD (--branches: every consumer's branch instead). Exit 0 all good, 1 a link fails, 2 bad input or an
    unreadable repo."""
    manifest = ctx.manifest()
    sources, start, here = _starting_point(manifest, consumers, under_test, as_name, branches)
    with report.phases("check-pins") as step:  # fetches can take a while on a cold cache
        result = check_chain(
            manifest, sources, upstream_repo, progress=step, fork_location=fork_repo, start=start
        )
    out = chain_report("check-pins", manifest, result)
    if here is not None:  # the default start: say which one it took, and why
        out.lines.insert(0, _here_line(manifest, here))
        out.data["in_consumer"] = manifest.consumers[here.index].name if here.index is not None else None
    return out


def _starting_point(
    manifest: Manifest,
    consumers: tuple[str, ...],
    under_test: str | None,
    as_name: str | None,
    branches: bool,
) -> tuple[list[Source], int | None, Here | None]:
    """(sources, the index of the consumer under test or None, the checkout we are in when the default
    decided): what the options name, else the checkout we are in when it is a consumer, else every
    consumer's branch."""
    given = [name for name, on in (("--under-test", under_test), ("--consumer", consumers)) if on]
    if branches:
        given.insert(0, "--branches")
    if len(given) > 1:
        raise BadInput(
            f"{' and '.join(given)} both say where the chain starts",
            hint="give one: --under-test for a consumer's own commit, --consumer for the whole chain from "
            "the clones or URLs you name, --branches for every consumer's branch",
        )
    if as_name is not None and (branches or consumers):
        raise BadInput(
            f"--as names the consumer under test, which {'--branches' if branches else '--consumer'} does "
            "not judge",
            hint="give it with --under-test PATH --as NAME, or alone in the consumer's checkout",
        )
    if under_test is not None:
        sources, start = under_test_sources(manifest, under_test, as_name, Path.cwd())
        return sources, start, None
    if consumers or branches:
        return default_sources(manifest, list(consumers)), None, None
    # pre-commit's pre-push stage names the commit being pushed: that one is under test, not HEAD
    # (`git push origin other-branch`). Elsewhere (manual stage, CI, a shell) it is HEAD.
    pushed = os.environ.get("PRE_COMMIT_TO_REF") or None
    here = consumer_here(manifest, Path.cwd(), as_name, pushed)
    if here.index is None:
        return default_sources(manifest, []), None, here
    assert here.root is not None and here.commit is not None
    rev = "HEAD" if pushed is None else f"pushed commit {here.commit[:12]}"
    return sources_from(manifest, here.index, here.root, here.commit, rev), here.index, here


def _here_line(manifest: Manifest, here: Here) -> str:
    if here.index is None:
        return f"not in a consumer checkout ({here.why}): checked every consumer's branch at its URL"
    name = manifest.consumers[here.index].name
    assert here.commit is not None  # a consumer checkout comes with its commit
    return (
        f"in a checkout of consumer {name} ({here.why}): judged its commit {here.commit[:12]} on its own, "
        "as --under-test HERE (--branches checks every consumer's branch instead)"
    )
