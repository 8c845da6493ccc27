"""One module per verb; each exposes a click command named `command`."""

from __future__ import annotations

import importlib

import click

# The order here is the order of `forkctl --help`.
VERBS = ["status", "lint"]

COMMANDS: list[click.Command] = [importlib.import_module(f"forkctl.commands.{verb}").command for verb in VERBS]
