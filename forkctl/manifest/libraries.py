"""`validation.environments`: the library versions a required environment was validated with, and what
a pin matches. The manifest owns these combinations, not the patch: the patch stays upstreamable (it
knows no list of validated versions), and the gate refuses evidence from any other combination."""

from __future__ import annotations

import msgspec

from forkctl.fielderrors import FieldError

# The libraries a required environment's evidence records (gpu.evidence.Environment's fields of the same
# names) that the manifest can pin. cuBLASLt ships in the cuBLAS library and carries its version.
PINNABLE_LIBRARIES = ("torch", "cuda", "cublas", "transformer_engine")
_VERSION_BOUNDARY = ".+-"


def version_matches(pin: str, recorded: str) -> bool:
    """A pin is a version prefix cut at a component boundary: `13.0` matches 13.0 and 13.0.88, not 13.1
    or 13.01; `2.11.0` matches 2.11.0+cu130 (the local label is one more component: pin it to require
    it). Plain strings, no version ordering: `absent` (validate's word for a library not installed)
    matches only itself."""
    return recorded == pin or (recorded.startswith(pin) and recorded[len(pin)] in _VERSION_BOUNDARY)


class LibraryPins(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The library versions a required environment was validated with (`validation.environments`):
    evidence recorded with another version of a pinned library does not count for it. Unset: any."""

    torch: str | None = None  # torch.__version__, e.g. "2.11.0+cu130"
    cuda: str | None = None  # torch.version.cuda, e.g. "13.0"
    cublas: str | None = None  # the cuBLAS (and cuBLASLt) library version, e.g. "13.1.0"
    transformer_engine: str | None = None  # a version, or "absent": validated without Transformer Engine

    def __post_init__(self) -> None:
        pinned = self.pinned()
        if not pinned:
            # A ValueError, not a FieldError: the message belongs to the entry itself, not one of its keys.
            raise ValueError(
                f"the entry pins nothing; name one of {', '.join(PINNABLE_LIBRARIES)} or remove it"
            )
        for library, version in pinned.items():
            if not version.strip() or version != version.strip():
                raise FieldError(
                    library, f'{version!r} is empty or has spaces around it; write the version, e.g. "13.0"'
                )

    def pinned(self) -> dict[str, str]:
        """library -> pin, for the pinned ones only."""
        return {name: getattr(self, name) for name in PINNABLE_LIBRARIES if getattr(self, name) is not None}
