"""forkctl describe: the pull-request body for moving the chain to the current fork head, as Markdown.

The body says why (the fork head = apply(series, base)), lists the series with provenance, what was
dropped as absorbed since the pinned fork head's base, the range-diff against that fork head, the chain
as a Mermaid graph (after the bump, planned as `bump-bridge --dry-run` plans it: objects only, no ref
moves), the GPU evidence and what the gate still needs. Where the chain cannot be reached it is written
from the manifest alone and says what is missing. `bump-bridge --open-pr` puts this body on its PRs.
"""

from __future__ import annotations

import click

from forkctl import report
from forkctl.chain.describe import gather
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.gpu.gate import summarise
from forkctl.report import Report
from forkctl.report.pullrequest import pr_body, pr_parts


def _through_index(names: list[str], through: str | None) -> int:
    if through is None:
        return 0
    if through not in names[1:]:
        raise BadInput(
            f"--through {through!r} is not a consumer after the first",
            hint=f"choose one of: {', '.join(names[1:]) or '(none)'}",
        )
    return names.index(through)


@click.command("describe", short_help=verbs.summary("describe"))
@options.through("Describe the move of every consumer up to this one (as bump-bridge --through).")
@options.upstream_repo("Where the base commit is (see check-pins).")
@output_options()
@forkctl_command
def command(ctx: Context, through: str | None, upstream_repo: str | None) -> Report:
    """Print the pull-request body (Markdown on stdout) for moving the chain to the fork head.

    \b
    Exit 0 when the body was written, also when parts of it could not be found out (offline, a
    consumer that does not answer): the body then says what is missing. Exit 2 on bad input.
    With --json: {"body": "<markdown>", "parts": {fork_head, series, dropped, range_diff, mermaid,
    gate, missing, ...}}.
    """
    manifest = ctx.manifest()
    last = _through_index([c.name for c in manifest.consumers], through)
    with report.phases("describe") as step:
        facts = gather(manifest, upstream_repo, last, step)
    summary = summarise(manifest)
    body = pr_body(manifest, facts, summary)
    out = Report(command="describe")
    out.lines = body.rstrip("\n").splitlines()
    out.data = {"body": body, "parts": pr_parts(manifest, facts, summary)}
    return out
