"""One module per verb; each exposes a click command named `command`.

Modules are imported on first use, so `forkctl apply` does not pay for importing validate or pins.
"""

from __future__ import annotations

import importlib

import click

# The order here is the order of `forkctl --help`.
VERBS = [
    "status",
    "lint",
    "apply",
    "export",
    "port",
    "check_pins",
    "bump_bridge",
    "demo",
    "validate",
    "gate",
    "sign",
]


def command_name(verb: str) -> str:
    return verb.replace("_", "-")


def load(name: str) -> click.Command | None:
    """The click command for a CLI name such as `check-pins`, or None when there is no such verb."""
    verb = name.replace("-", "_")
    if verb not in VERBS:
        return None
    return importlib.import_module(f"forkctl.commands.{verb}").command
