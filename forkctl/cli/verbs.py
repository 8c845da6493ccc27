"""The verbs of forkctl, in `--help` order, with the one-line summary each shows there.

`forkctl --help` is printed from this table alone, so it imports no verb module (and so none of the
manifest, report or git layers); each verb's command takes its short help from here too, so the two
cannot drift apart.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click

SUMMARIES: dict[str, str] = {
    "status": "Show the series: order, subject, provenance, files; with --onto, preview a port.",
    "lint": "Check that the manifest and the patch files agree.",
    "apply": "Apply the patch series onto the base, as a branch or onto a plain tree.",
    "export": "Export a branch's commits after the base as the patch series.",
    "edit": "Give the series as a branch in a worktree on the base, to edit with git (then export).",
    "refresh": "Rewrite patch files edited by hand so that their index lines match (quilt refresh).",
    "port": "Move the series to a new upstream base (--continue / --skip / --abort).",
    "check-pins": "Check the nested pin chain: fork base, fork head and every consumer's gitlink.",
    "publish": "Push the fork head to the fork's branch: a fast-forward, or a merge (publish: merge).",
    "bump-bridge": "Pin the fork head in the Bridge, and with --through the Bridge in NeMo-RL.",
    "sync": "Port the series onto what the consumers' upstream pins; open the sync PR or the dashboard.",
    "describe": "Print the pull-request body (Markdown) for moving the chain to the fork head.",
    "fork-base": "Check .fork-base.json in the fork against the manifest; --write updates it.",
    "demo": "Run the whole flow offline on a chain built from the installed megatron-core.",
    "validate": "Run the GPU suite on the patched megatron-core and record the evidence.",
    "gate": "Check that signed GPU evidence exists for exactly the current series.",
    "sign": "Sign the GPU evidence of the current series with an SSH key.",
}


def summary(name: str) -> str:
    return SUMMARIES[name]


def load(name: str) -> click.Command | None:
    """The click command for a CLI name such as `check-pins`, or None when there is no such verb."""
    if name not in SUMMARIES:
        return None
    module = importlib.import_module(f"forkctl.commands.{name.replace('-', '_')}")
    command: click.Command = module.command
    return command
