"""Whether two path globs can match one path, decided on the globs themselves (no tree needed).

The manifest's globs (`fork.tree_include`, `fork.own_paths`) are matched as `fnmatch.fnmatchcase` does:
`*` matches any run of characters (`/` included), `?` any one, `[...]` / `[!...]` one of (or none of) a
set with ranges. Each glob is a small automaton over characters; two globs overlap when the product of
the two automata reaches both ends, which a breadth-first walk over position pairs decides.
"""

from __future__ import annotations

import msgspec

# Characters tried where two sets meet: each set's own range ends, then these.
_PROBES = "aZ0_.-/x"


class _Token(msgspec.Struct, frozen=True):
    kind: str  # "lit" | "any" (?) | "star" (*) | "set"
    char: str = ""
    ranges: tuple[tuple[str, str], ...] = ()
    negated: bool = False

    def matches(self, c: str) -> bool:
        if self.kind == "lit":
            return c == self.char
        if self.kind == "set":
            inside = any(lo <= c <= hi for lo, hi in self.ranges)
            return inside != self.negated
        return True

    def candidates(self) -> str:
        if self.kind == "lit":
            return self.char
        return "".join(end for pair in self.ranges for end in pair) + _PROBES


def _set(glob: str, start: int) -> tuple[_Token, int] | None:
    """The set that opens at `glob[start]` ('['), and the position after it; None: no closing ']'."""
    i = start + 1
    negated = i < len(glob) and glob[i] == "!"
    i += negated
    first = i
    while i < len(glob) and (glob[i] != "]" or i == first):
        i += 1
    if i >= len(glob):
        return None
    body, ranges = glob[first:i], []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            ranges.append((body[k], body[k + 2]))
            k += 3
        else:
            ranges.append((body[k], body[k]))
            k += 1
    return _Token("set", ranges=tuple(ranges), negated=negated), i + 1


def tokens(glob: str) -> list[_Token]:
    found: list[_Token] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            if not found or found[-1].kind != "star":
                found.append(_Token("star"))
            i += 1
        elif c == "?":
            found.append(_Token("any"))
            i += 1
        elif c == "[" and (parsed := _set(glob, i)) is not None:
            found.append(parsed[0])
            i = parsed[1]
        else:
            found.append(_Token("lit", c))
            i += 1
    return found


def _meet(a: _Token, b: _Token) -> bool:
    """Is there one character both tokens match?"""
    if a.kind in ("any", "star"):
        return b.kind in ("any", "star") or any(b.matches(c) for c in b.candidates()) or b.negated
    if b.kind in ("any", "star"):
        return _meet(b, a)
    if a.negated and b.negated:
        return True
    return any(a.matches(c) and b.matches(c) for c in a.candidates() + b.candidates())


def overlap(one: str, other: str) -> bool:
    """Is there a path that both globs match (as fnmatch.fnmatchcase matches them)?"""
    a, b = tokens(one), tokens(other)
    seen: set[tuple[int, int]] = set()
    todo = [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i].kind == "star":
            todo.append((i + 1, j))
        if j < len(b) and b[j].kind == "star":
            todo.append((i, j + 1))
        if i < len(a) and j < len(b) and _meet(a[i], b[j]):
            todo.append((i if a[i].kind == "star" else i + 1, j if b[j].kind == "star" else j + 1))
    return False
