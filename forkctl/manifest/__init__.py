"""manifest.yaml: the single source of truth, loaded into typed objects or an error naming file:line.

- `schema`: the msgspec structs (`Manifest` is a loaded one: the validated model plus where it lives);
- `loader`: finding, reading and validating the file, every error pointing at file:line;
- `rewrite`: replacing a few known values in place, keeping the user's comments and layout.

Callers use the names below (`from forkctl import manifest as manifest_mod`; `manifest_mod.load`).
"""

from __future__ import annotations

from forkctl.manifest.loader import MANIFEST_NAME, find_manifest, load

# Binds the function over the submodule of the same name: `manifest_mod.rewrite(path, updates)`.
from forkctl.manifest.rewrite import rewrite
from forkctl.manifest.schema import PATCHES_ROOT, Consumer, Manifest, plain

__all__ = [
    "MANIFEST_NAME",
    "PATCHES_ROOT",
    "Consumer",
    "Manifest",
    "find_manifest",
    "load",
    "plain",
    "rewrite",
]
