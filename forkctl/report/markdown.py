"""Data in Markdown that GitHub renders (step summaries, pull-request bodies), made inert.

The one rule: every string that came from data (a patch subject, a `.gitmodules` URL, a commit message,
a remote's answer) is written inside code: an inline code span, or a fenced block for many lines.
GitHub renders nothing inside code: no HTML (`<img>` tracking pixels, `<h1>` headings), no Markdown
links or images, no `@mentions` (nobody is notified) and no `#123` / `owner/repo#4` references (no
other issue is cross-linked). The fence is one backtick longer than the longest run of backticks in
the data, so the data cannot close it; inside a table cell `|` is written `\\|`, which GFM reads as `|`
even inside code.
"""

from __future__ import annotations

import re

_BACKTICKS_RE = re.compile(r"`+")


def _fence_for(text: str, least: int) -> str:
    longest = max((len(run) for run in _BACKTICKS_RE.findall(text)), default=0)
    return "`" * max(least, longest + 1)


def code(text: str | None, empty: str = "-") -> str:
    """`text` as one inline code span (newlines become spaces, as inside any code span)."""
    if not text:
        return empty
    one_line = text.replace("\r", " ").replace("\n", " ")
    fence = _fence_for(one_line, 1)
    # A space on both sides is stripped by the renderer; it keeps a leading or trailing backtick
    # from joining the fence.
    pad = " " if one_line[0] in "` " or one_line[-1] in "` " else ""
    return f"{fence}{pad}{one_line}{pad}{fence}"


def cell(text: str | None, empty: str = "-") -> str:
    """`text` as a table cell: a code span with `|` escaped, so the cell stays one cell."""
    return code(text, empty).replace("|", "\\|")


def fenced(text: str, info: str = "") -> list[str]:
    """`text` as a fenced code block, its lines in a list; no line of it can close the fence."""
    fence = _fence_for(text, 3)
    return [f"{fence}{info}", *text.splitlines(), fence]
