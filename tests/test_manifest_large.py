"""What forkctl writes, forkctl reads: a 10,000-patch series written by forkctl's own manifest writer
(the way export writes `series:`) loads again through forkctl's own loader."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from forkctl import manifest
from forkctl.ops.export import SLUG_MAX
from tests.toolkit import make_toolkit

PATCHES = 10_000


@pytest.mark.slow
def test_a_ten_thousand_patch_series_round_trips(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path, patches=1)
    loaded = manifest.load(toolkit.manifest)
    folder = loaded.series_dir()
    entries = []
    for number in range(1, PATCHES + 1):
        # The longest name export gives a patch: a four-digit-plus number and a slug of SLUG_MAX characters.
        name = f"{number:04d}-{('x' * SLUG_MAX)}.patch"
        (folder / name).write_text(f"Subject: [PATCH] patch {number}\n")
        entries.append(
            {
                "file": str((folder / name).relative_to(loaded.root)),
                "provenance": hashlib.sha1(str(number).encode()).hexdigest(),
            }
        )
    manifest.rewrite(toolkit.manifest, {("series",): entries})
    written = toolkit.manifest.stat().st_size
    assert written > 1 << 20  # larger than the limit forkctl used to refuse its own output at
    started = time.monotonic()
    again = manifest.load(toolkit.manifest)
    assert [(e.file, e.provenance) for e in again.series] == [(e["file"], e["provenance"]) for e in entries]
    assert time.monotonic() - started < 120
