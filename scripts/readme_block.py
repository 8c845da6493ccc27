"""The one way the README's generated blocks are rewritten or checked (scripts/gpu_tables.py, cpu_tables.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from forkctl.files import atomic_write_text

README = Path(__file__).resolve().parent.parent / "README.md"


def main(description: str, begin: str, end: str, block: Callable[[], str], source: str) -> int:
    """Rewrite the text between `begin` and `end` with block(), or with --check exit 1 when it differs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 when README.md is out of date")
    parser.add_argument("--readme", type=Path, default=README, help="the file to check or rewrite")
    args = parser.parse_args()
    text = args.readme.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        print(f"{args.readme} lacks the markers {begin!r} ... {end!r}", file=sys.stderr)
        return 2
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    updated = head + block() + tail
    if args.check:
        if updated != text:
            print(f"{args.readme.name} differs from {source}: run python scripts/{Path(sys.argv[0]).name}")
            return 1
        return 0
    atomic_write_text(args.readme, updated)  # a kill leaves the old README or the new one
    return 0
