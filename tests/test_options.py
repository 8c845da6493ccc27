"""One name per idea: an option several verbs share means the same thing, spelled once, in each."""

from __future__ import annotations

import click
from click.testing import CliRunner

from forkctl.cli import cli, options, verbs

# Options whose meaning is per verb by design, with the reason.
PER_VERB = {
    "--onto": "port moves to it; status previews a move to it: the same idea, a target commit",
}


def _commands() -> dict[str, click.Command]:
    loaded = {name: verbs.load(name) for name in verbs.SUMMARIES}
    assert all(loaded.values())
    return loaded  # type: ignore[return-value]


def _visible_options(command: click.Command) -> dict[str, click.Option]:
    return {
        name: param
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden
        for name in param.opts
        if name.startswith("--")
    }


def test_a_shared_option_has_one_name_type_and_meaning_in_every_verb() -> None:
    seen: dict[str, tuple[str, tuple]] = {}
    clashes = []
    for verb, command in _commands().items():
        for name, param in _visible_options(command).items():
            shape = (param.name, type(param.type).__name__, param.metavar, param.is_flag)
            if name in seen and seen[name][1] != shape and name not in PER_VERB:
                clashes.append(f"{name}: {seen[name][0]} {seen[name][1]} vs {verb} {shape}")
            seen.setdefault(name, (verb, shape))
    assert not clashes, clashes


def test_retired_spellings_are_hidden_and_one_name_per_idea_is_shown() -> None:
    for verb, command in _commands().items():
        visible = set(_visible_options(command))
        assert not visible & set(options.RETIRED), f"{verb} still shows {visible & set(options.RETIRED)}"
        # Every idea of a repository, a branch, a kept folder has exactly one spelling.
        assert not {"--repository", "--clone", "--from", "--upstream-url"} & visible, verb


def test_a_retired_spelling_still_works_as_its_new_name(tmp_path) -> None:
    # apply refuses every repository option by name with --tree: the message names the new spelling,
    # so the old one reached the same parameter.
    result = CliRunner().invoke(cli, ["apply", "--tree", str(tmp_path), "--upstream-url", "x"])
    assert result.exit_code == 2 and "--upstream-repo has no effect with --tree" in result.output
    assert {old: verb for old, (_, verb) in options.RETIRED.items()} == {
        "--from": "export",
        "--upstream-url": "apply",
    }


def test_an_old_and_a_new_spelling_that_disagree_are_refused() -> None:
    result = CliRunner().invoke(cli, ["export", "--from", "a", "--branch", "b"])
    assert result.exit_code == 2 and "--from is the old name of --branch" in result.output
