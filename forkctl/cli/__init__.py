"""forkctl's command line: global options, and one subcommand per module under forkctl/commands/.

This module and `verbs` are all that `forkctl --help` imports: click and the verb table. Each verb's
module (and through it the manifest, report and git layers) is imported only when that verb runs.
"""

from __future__ import annotations

import gc
import sys

import click

from forkctl import __version__
from forkctl.cli import verbs
from forkctl.errors import BadInput

EPILOG = """\b
Exit codes: 0 ok, 1 a check found problems, 2 bad input or usage, 3 an unexpected error.
The manifest is found by walking up from the current directory unless --manifest is given.
--manifest URL@REF:PATH reads it from a repository: split at the last '@', REF ends at the next ':'.
"""


class LazyGroup(click.Group):
    """Lists every verb from the verb table, imports only the one that runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(verbs.SUMMARIES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return verbs.load(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and verbs.load(name) is None:
            import difflib  # only for a mistyped verb: not a cost of every start

            guess = difflib.get_close_matches(name, list(verbs.SUMMARIES), n=1)
            tip = f" Did you mean {guess[0]!r}?" if guess else ""
            raise click.UsageError(f"No such command {name!r}.{tip}", ctx)
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_manifest(args))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl(list(verbs.SUMMARIES.items()))


def hoist_manifest(args: list[str]) -> list[str]:
    """`forkctl VERB ... --manifest SPEC` as `forkctl --manifest SPEC VERB ...`: the global option is also
    accepted after the verb (a pre-commit hook's `args:` come after its entry `forkctl check-pins`).
    Nothing after a `--` moves; the last --manifest given wins, as for any click option."""
    verb = next(
        (i for i, a in enumerate(args) if a in verbs.SUMMARIES and (i == 0 or args[i - 1] != "--manifest")),
        None,
    )
    if verb is None:
        return args
    moved: list[str]
    head, tail, moved = args[: verb + 1], [], []
    rest = iter(args[verb + 1 :])
    for arg in rest:
        if arg == "--":
            tail += [arg, *rest]
        elif arg == "--manifest":
            value = next(rest, None)
            # Without a value it stays where it is, for the verb to refuse as it would any stray option.
            moved, tail = ([*moved, arg, value], tail) if value is not None else (moved, [*tail, arg])
        elif arg.startswith("--manifest="):
            moved.append(arg)
        else:
            tail.append(arg)
    return [*head[:verb], *moved, head[verb], *tail] if moved else args


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.option(
    "--manifest",
    metavar="PATH|URL@REF:PATH",
    envvar="FORKCTL_MANIFEST",
    help="Path to manifest.yaml (default: the first one found walking up from the current directory), "
    "or URL@REF:PATH for one in another repository (any git URL, or OWNER/REPO for GitHub; e.g. "
    "OWNER/REPO@main:manifest.yaml): read-only, fetched into the cache.",
)
@click.version_option(__version__, prog_name="forkctl")
@click.pass_context
def cli(ctx: click.Context, manifest: str | None) -> None:
    """Keep a patch series alive on a moving upstream, and the consumers that pin it in step.

    The fork is a pure function of (upstream base, ordered patch series): forkctl builds it
    reproducibly, ports it to new bases, checks every consumer down the submodule pin chain, and
    gates merges on GPU evidence for exactly this series.
    """
    from forkctl.cli.kit import Context

    ctx.obj = Context(manifest_option=manifest)


def main() -> None:
    """Run the CLI. A usage error is exit 2 like any bad input; under --json it is one JSON document
    of the shape every command prints, so a CI step that parses stdout never gets click's text."""
    try:
        _run()
    finally:
        # The process ends here. At shutdown Python collects garbage over every object the imports made
        # (typing, click, msgspec): 25-30 ms of a 0.2 s re-apply on this machine. Frozen, they are left
        # to the OS. What atexit handlers make is collected as usual, and nothing forkctl writes relies
        # on a collector to be flushed or closed (files are closed explicitly, temp dirs by atexit).
        gc.freeze()


def _run() -> None:
    try:
        outcome = cli.main(prog_name="forkctl", standalone_mode=False)
    except click.exceptions.Abort:
        # Ctrl-C outside a command's body (while click parses or a verb's module loads): as inside one.
        from forkctl.cli.kit import EXIT_INTERRUPTED

        sys.stderr.write("forkctl: interrupted (Ctrl-C)\n")
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:  # --help or a usage error into a closed pipe; an error report's channel
        from forkctl.cli.kit import closed_pipe

        sys.exit(closed_pipe())
    except click.ClickException as exc:
        if "--json" in sys.argv[1:]:
            from forkctl import report  # the one error document shape, for usage errors too

            command = next((a for a in sys.argv[1:] if a in verbs.SUMMARIES), None)
            hint = f"see forkctl {command + ' ' if command else ''}--help"
            usage = BadInput(exc.format_message(), hint=hint)
            usage.exit_code = exc.exit_code
            report.error(usage, report.Format.JSON, command)
        else:
            from forkctl import report

            report.usage_error(exc)
        sys.exit(exc.exit_code)
    except Exception as exc:  # outside any command (e.g. loading a verb): still exit 3, no traceback
        from forkctl import report
        from forkctl.cli.kit import unexpected_error

        fmt = report.Format.JSON if "--json" in sys.argv[1:] else report.Format.TEXT
        sys.exit(report.error(unexpected_error("forkctl", exc), fmt))
    sys.exit(outcome if isinstance(outcome, int) else 0)
