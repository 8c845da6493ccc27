"""What export writes, lint accepts: from patch 10,000 on export names a patch with five digits
(`f"{number:04d}"`), and lint takes those names as long as their number is their place in the series."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.manifest.loader import MAX_SERIES_ENTRIES
from forkctl.ops.export import SLUG_MAX
from forkctl.series import parse_patch
from tests.toolkit import make_toolkit

PATCHES = MAX_SERIES_ENTRIES  # the longest series forkctl keeps: patch 10,000 has a five-digit name


def _series(tmp_path: Path, name_of) -> Path:
    """A toolkit whose series is PATCHES copies of one real patch, the n-th named name_of(n)."""
    toolkit = make_toolkit(tmp_path, patches=1)
    source = toolkit.patch_files[0]
    raw = source.read_bytes()
    provenance = parse_patch(source).provenance
    folder = source.parent
    source.unlink()
    entries = []
    for number in range(1, PATCHES + 1):
        path = folder / name_of(number)
        path.write_bytes(raw)
        entries.append({"file": str(path.relative_to(toolkit.root)), "provenance": provenance[-1]})
    data = toolkit.manifest_data()
    data["series"] = entries
    # libyaml's emitter where PyYAML has it: the pure-Python one took 1.2 s of CPU for 10,000 entries.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    toolkit.manifest.write_text(yaml.dump(data, Dumper=dumper, sort_keys=False))
    return toolkit.manifest


def _lint(manifest: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(manifest), "lint"])
    return result.exit_code, result.output


@pytest.mark.slow
def test_lint_accepts_the_five_digit_names_export_writes(tmp_path: Path) -> None:
    manifest = _series(tmp_path, lambda n: f"{n:04d}-{'x' * SLUG_MAX}.patch")
    code, output = _lint(manifest)
    assert code == 0, output[-2000:]
    assert f"lint: ok ({PATCHES} patches" in output


@pytest.mark.slow
def test_lint_still_refuses_a_number_out_of_place_or_padded_past_four_digits(tmp_path: Path) -> None:
    def name_of(number: int) -> str:
        if number == 9_999:
            return "10000-late.patch"  # the wrong number
        if number == 10_000:
            return "010000-padded.patch"  # not how export writes 10,000
        return f"{number:04d}-p.patch"

    code, output = _lint(_series(tmp_path, name_of))
    assert code == 1, output[-2000:]
    flat = " ".join(output.split())
    assert "number 10000 but it is patch 9999" in flat
    assert "010000-padded.patch" in flat and "rename it to 10000-padded.patch" in flat
