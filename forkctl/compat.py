"""What the supported Pythons (3.10-3.13) do not all have, in one place.

`enum.StrEnum` arrived in 3.11; this one behaves as it does there: members are strings, and `str()` and
`format()` give the value (a plain `(str, Enum)` on 3.10 would print `Level.ERROR`).
"""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)
