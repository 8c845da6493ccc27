from __future__ import annotations

from tests._patched import megatron_tree, plain_megatron_tree

__all__ = ["megatron_tree", "plain_megatron_tree"]  # the fixtures, defined once in tests/_patched.py
