"""forkctl check-pins: every link of the nested pin chain pins what it should, and can be cloned.

Nearest consumer first: the Bridge must pin exactly apply(series, base) at its gitlink (or the report
says why not), each further consumer must pin a commit of the previous one that itself passes, every
`.gitmodules` URL must name the fork, and every pinned SHA must be reachable from a branch or tag of
that URL. All of it is read from commit objects: no submodule is initialised or checked out.

`--under-test PATH[@REV]|HERE` judges one consumer commit on its own (a consumer's pull request): from
that commit down to the fork head, never another consumer's branch head, its `.gitmodules` findings
pointing at their lines. (Not `--from`: that is the retired spelling of export's `--branch`, and one
option name means one idea in every verb.)
"""

from __future__ import annotations

from pathlib import Path

import click

from forkctl import report
from forkctl.chain.checks import check_chain
from forkctl.chain.sources import default_sources
from forkctl.chain.undertest import under_test_sources
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
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
    help="With --under-test: which manifest consumer the repository is, when its gitlinks and remotes "
    "do not say (or say several).",
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
    fork_repo: str | None,
    upstream_repo: str | None,
) -> Report:
    """Check the nested pin chain: the nearest consumer pins exactly the fork head apply(series, base), each
    further consumer pins a passing commit of the previous one, .gitmodules URLs name the forks, and every
    pinned SHA is reachable from a branch or tag of its URL. Reads commit objects only (uninitialised and
    shallow submodules are fine). With --under-test, only the given consumer commit and what it pins,
    recursively (for a consumer's pull request). Exit 0 all good, 1 a link fails, 2 bad input or an
    unreadable repo."""
    if under_test is None and as_name is not None:
        raise BadInput("--as names the consumer under test", hint="give it with --under-test PATH --as NAME")
    if under_test is not None and consumers:
        raise BadInput(
            "--under-test and --consumer both say where the chain starts",
            hint="give one: --under-test for a consumer's own commit, --consumer for the whole chain",
        )
    manifest = ctx.manifest()
    start = None
    if under_test is not None:
        sources, start = under_test_sources(manifest, under_test, as_name, Path.cwd())
    else:
        sources = default_sources(manifest, list(consumers), Path.cwd())
    with report.phases("check-pins") as step:  # fetches can take a while on a cold cache
        result = check_chain(
            manifest, sources, upstream_repo, progress=step, fork_location=fork_repo, start=start
        )
    return chain_report("check-pins", manifest, result)
