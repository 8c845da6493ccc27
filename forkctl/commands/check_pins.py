"""forkctl check-pins: every link of the nested pin chain pins what it should, and can be cloned.

Nearest consumer first: the Bridge must pin exactly apply(series, base) at its gitlink (or the report
says why not), each further consumer must pin a commit of the previous one that itself passes, every
`.gitmodules` URL must name the fork, and every pinned SHA must be reachable from a branch or tag of
that URL. All of it is read from commit objects: no submodule is initialised or checked out.
"""

from __future__ import annotations

from pathlib import Path

import click

from forkctl import report
from forkctl.chain.checks import check_chain
from forkctl.chain.sources import default_sources
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.report import Report
from forkctl.report.chain import chain_report


@click.command("check-pins", short_help=verbs.summary("check-pins"))
@click.option(
    "--consumer",
    "consumers",
    multiple=True,
    metavar="PATH[@REV]|URL",
    help="Where to find a consumer, in chain order, nearest first (repeat): a local clone (its HEAD, or REV "
    "after '@'), or a URL (its manifest branch, or BRANCH/SHA after '@'). Default: the checkout you are in when it is a consumer, "
    "else every manifest consumer's URL and branch.",
)
@options.fork_repo("The fork (for its branch's .fork-base.json); default: the manifest's fork URL.")
@options.upstream_repo(
    "Where the base commit is: a local clone of upstream "
    "(read only, saves the network) or a URL; default: the manifest's upstream URL via the cache."
)
@output_options(github=True)
@forkctl_command
def command(
    ctx: Context, consumers: tuple[str, ...], fork_repo: str | None, upstream_repo: str | None
) -> Report:
    """Check the nested pin chain: the nearest consumer pins exactly the fork head apply(series, base), each
    further consumer pins a passing commit of the previous one, .gitmodules URLs name the forks, and every
    pinned SHA is reachable from a branch or tag of its URL. Reads commit objects only (uninitialised and
    shallow submodules are fine). Exit 0 all good, 1 a link fails, 2 bad input or an unreadable repo."""
    manifest = ctx.manifest()
    sources = default_sources(manifest, list(consumers), Path.cwd())
    result = check_chain(manifest, sources, upstream_repo, progress=report.info, fork_location=fork_repo)
    return chain_report("check-pins", manifest, result)
