"""forkctl's command line: global options, and one subcommand per module under forkctl/commands/.

This module and `verbs` are all that `forkctl --help` imports: click and the verb table. Each verb's
module (and through it the manifest, report and git layers) is imported only when that verb runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from forkctl import __version__
from forkctl.cli import verbs

EPILOG = """\b
Exit codes: 0 ok, 1 a check found problems, 2 bad input or usage, 3 an unexpected error.
The manifest is found by walking up from the current directory unless --manifest is given.
"""


class LazyGroup(click.Group):
    """Lists every verb from the verb table, imports only the one that runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(verbs.SUMMARIES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return verbs.load(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl(list(verbs.SUMMARIES.items()))


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.option(
    "--manifest",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="FORKCTL_MANIFEST",
    help="Path to manifest.yaml (default: the first one found walking up from the current directory).",
)
@click.version_option(__version__, prog_name="forkctl")
@click.pass_context
def cli(ctx: click.Context, manifest: Path | None) -> None:
    """Keep a patch series alive on a moving upstream, and the consumers that pin it in step.

    The fork is a pure function of (upstream base, ordered patch series): forkctl builds it
    reproducibly, ports it to new bases, checks every consumer down the submodule pin chain, and
    gates merges on GPU evidence for exactly this series.
    """
    from forkctl.cli.kit import Context

    ctx.obj = Context(manifest_option=manifest)


def main() -> None:
    cli(prog_name="forkctl")
