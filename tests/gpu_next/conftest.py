"""GPU tests written and run once on a GPU host, waiting for signed evidence before they join the suite.

`forkctl validate` runs the manifest's `validation.gpu_tests` (tests/gpu) and the gate's digest covers that
folder alone, so a test here changes no evidence. Move a file into tests/gpu in the same change as the
signed evidence of a validate run that passed it (see CHANGELOG.md, 2026-12-06, for this one: it passed on
an H100 with Transformer Engine 2.20.2 installed, in a run that failed on other grounds).
"""

from __future__ import annotations

from tests._patched import megatron_tree, plain_megatron_tree

__all__ = ["megatron_tree", "plain_megatron_tree"]  # the fixtures, defined once in tests/_patched.py
