"""`forkctl port --help` says what port does, every way on from a stop included, in paragraphs that
wrap evenly (the text is laid out by hand: click keeps its lines as written)."""

from __future__ import annotations

from click.testing import CliRunner

from forkctl.cli import cli


def _help() -> str:
    return CliRunner().invoke(cli, ["port", "--help"], terminal_width=100).output


def test_port_help_wraps_evenly() -> None:
    description = _help().split("Options:")[0]
    for paragraph in description.split("\n\n")[1:]:
        lines = paragraph.strip("\n").splitlines()
        short = [line for line in lines[:-1] if len(line) < 80]
        assert not short, f"a line ends early inside its paragraph: {short}"


def test_port_help_names_what_a_port_does_and_every_way_on() -> None:
    description, options = _help().split("Options:")
    words = " ".join(description.split())
    for fact in (
        "partial",  # a patch upstream already holds part of is applied, its figures recorded
        "--continue",
        "--skip",  # a conflict can be dropped by hand, not only a reverted pick
        "--abort",
        "--reapply-reverted",
        "scratch worktree",
        "compare-and-swap",
    ):
        assert fact in words, (fact, words)
    flags = " ".join(options.split())
    # --continue and --abort also finish or undo a port that was interrupted while writing its results
    assert "--continue Go on after resolving a conflict" in flags and "interrupted" in flags, flags
