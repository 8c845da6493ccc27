"""Reading manifest.yaml: composed into YAML nodes first (`yamldata`), so every value keeps the line it
came from; the plain data is then validated into the schema's structs and an error is mapped back to
file:line. A manifest that loaded cleanly is kept in the parsed-manifest cache (`cache`), so the next
start with the same bytes neither imports nor runs YAML.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from forkctl.errors import BadInput
from forkctl.fielderrors import Loc, describe
from forkctl.manifest import cache
from forkctl.manifest.schema import Manifest, ManifestModel

MANIFEST_NAME = "manifest.yaml"


def find_manifest(start: Path) -> Path:
    """Walk up from `start` to the first directory holding manifest.yaml."""
    for folder in [start, *start.parents]:
        candidate = folder / MANIFEST_NAME
        if candidate.is_file():
            return candidate
    raise BadInput(
        f"no {MANIFEST_NAME} in {start} or any folder above it",
        hint="run forkctl inside the toolkit repository, or pass --manifest PATH",
    )


def parse_manifest(text: str, path: Path | str) -> ManifestModel:
    """Validate manifest text; raise BadInput naming file:line (`path`: the name messages use) and the fix."""
    if len(text) > MAX_MANIFEST_BYTES:  # characters: never fewer than its UTF-8 bytes; checked before YAML
        raise too_large(path, len(text), "characters")
    return _parse(text, path)[0]


def _parse(text: str, path: Path | str) -> tuple[ManifestModel, dict[Loc, int]]:
    """The validated manifest and the line of every key in it."""
    from forkctl.manifest.yamldata import compose  # only a manifest the cache does not hold pays for YAML

    data, lines = compose(text, path)
    try:
        model = msgspec.convert(data, ManifestModel)
    except msgspec.ValidationError as exc:
        loc, message = describe(exc, data, ManifestModel)
        raise BadInput(f"{path}:{_line_for(loc, lines)}: {message}") from None
    return _checked_length(model, path), lines


def _line_for(loc: Loc, lines: dict[Loc, int]) -> int:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return 1


# A guard against reading something that is not a manifest, sized by what forkctl itself writes: a
# series holds at most MAX_SERIES_ENTRIES patches (export refuses a branch with more; their names are
# NNNN-<slug>.patch, five digits from patch 10,000 on), and a `series:` entry export writes is about 150
# bytes (patches/NNNN-<52-character slug>.patch and a 40-hex provenance), a `dropped:` entry a few
# hundred with its subject. MAX_SERIES_ENTRIES entries of up to MAX_ENTRY_BYTES each, on top of a
# megabyte for what people write by hand, always fit; anything larger is refused before it is read
# (local) or fetched (by URL): parsing YAML costs about 0.5 s and 30 MB per MB on one core.
MAX_SERIES_ENTRIES = 10_000
MAX_ENTRY_BYTES = 640
MAX_MANIFEST_BYTES = (1 << 20) + MAX_SERIES_ENTRIES * MAX_ENTRY_BYTES  # about 7.1 MiB
SIZE_LIMIT_SAID = (
    f"at most {MAX_MANIFEST_BYTES:,} bytes: a series of {MAX_SERIES_ENTRIES:,} patches as export writes it, "
    "and a megabyte more"
)


def too_large(name: Path | str, size: int, unit: str = "bytes") -> BadInput:
    """The one message for a manifest past MAX_MANIFEST_BYTES."""
    return BadInput(
        f"{name}: {size:,} {unit} is too large for a manifest ({SIZE_LIMIT_SAID})",
        hint="check the path; a longer series is split, or its patches squashed",
    )


def _checked_length(model: ManifestModel, name: Path | str) -> ManifestModel:
    count = len(model.series)
    if count > MAX_SERIES_ENTRIES:
        raise BadInput(
            f"{name}: a series of {count:,} patches is longer than forkctl keeps (at most "
            f"{MAX_SERIES_ENTRIES:,}, what export writes)",
            hint="squash patches, or split the series",
        )
    return model


def _read_manifest_bytes(path: Path, shown: str | None) -> bytes:
    name = shown if shown is not None else path
    try:
        if not path.is_file():
            raise BadInput(
                f"{name}: no such manifest (or not a regular file)",
                hint="pass --manifest PATH to an existing file, or URL@REF:PATH for one in a repository",
            )
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise too_large(name, path.stat().st_size)
        return path.read_bytes()
    except OSError as exc:
        raise BadInput(
            f"{name}: cannot read the manifest: {exc.strerror}", hint="check the path and its permissions"
        ) from None


def _decoded(data: bytes, name: Path | str) -> str:
    if b"\x00" in data:
        raise BadInput(
            f"{name}: not a text file (NUL bytes; UTF-16 or binary?)", hint="save the manifest as UTF-8"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{name}: not UTF-8 (byte {exc.start})", hint="save the manifest as UTF-8") from None


def _allow_named_locations(model: ManifestModel) -> None:
    """The manifest is reviewed like code: the local repositories it names may be contacted."""
    from forkctl.git import locations  # git.remote admits them if it ever runs

    locations.name(
        model.upstream.url,
        model.fork.url,
        *(c.url for c in model.consumers),
        *(c.upstream_url for c in model.consumers if c.upstream_url),
    )


def load(path: Path, shown: str | None = None, from_source: bool = False) -> Manifest:
    """Load and validate `path`, including that every listed patch file exists. `shown`: what
    file:line messages name instead of the path (a manifest named by URL: the spec, not its snapshot).
    `from_source`: parse the YAML whatever the parsed-manifest cache holds. A cache entry's key is the
    sha256 of public bytes, which anyone who can write the cache can compute, so a verb whose verdict
    or move rests on the manifest (its signers, base, series, consumers) never takes it from there."""
    data = _read_manifest_bytes(path, shown)
    name = shown if shown is not None else path
    model = None if from_source else cache.lookup(data)
    if model is None:
        model = _parse(_decoded(data, name), name)[0]
        cache.store(data, model)
    manifest = Manifest(path=path.resolve(), model=_checked_length(model, name))
    _allow_named_locations(model)
    root = str(manifest.root)  # strings, not Path objects: a 100-patch series pays per entry
    for index, entry in enumerate(model.series):
        if not os.path.isfile(os.path.join(root, entry.file)):
            # The line of the entry is the YAML's to say: parse it (the cache keeps no lines).
            lines = _parse(_decoded(data, name), name)[1]
            raise BadInput(
                f"{name}:{_line_for(('series', index, 'file'), lines)}: patch file {entry.file!r} does not exist",
                hint="fix the name, restore the file, or remove the entry (forkctl export rewrites the list)",
            )
    return manifest
