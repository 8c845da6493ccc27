"""The parsed-manifest cache: a manifest that loaded cleanly, kept as JSON so that the next start reads
it back with msgspec instead of importing PyYAML (which costs more than the parse itself).

An entry (`forkctl.contentcache`: keyed by the sha256 of the manifest's bytes and forkctl's version,
checked against its own digest) holds the validated model as msgspec JSON. Decoding runs the schema's
checks again; an entry that does not decode or validate is ignored and the caller parses the YAML,
whose errors name file:line. Only a manifest that loaded cleanly is stored, so every error still comes
from the YAML path. A manifest with credentials in a URL is never stored.
"""

from __future__ import annotations

import msgspec

from forkctl import contentcache
from forkctl.manifest.schema import ManifestModel
from forkctl.redact import redact

FOLDER = "parsed-manifests"
_KIND = "manifest"


def lookup(manifest_bytes: bytes) -> ManifestModel | None:
    """The model stored for exactly these bytes, or None (no entry, or one that is not sound)."""
    payload = contentcache.read(FOLDER, contentcache.key_of(_KIND, manifest_bytes))
    if payload is None:
        return None
    try:
        return msgspec.json.decode(payload, type=ManifestModel)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError):
        return None  # the schema changed under an entry of the same version: parse the YAML


def store(manifest_bytes: bytes, model: ManifestModel) -> None:
    """Keep `model` as what these bytes load to; never a manifest with credentials in a URL (they are
    for fetching only and are written nowhere: such a manifest is parsed from its YAML every time)."""
    payload = msgspec.json.encode(model)
    text = payload.decode("utf-8")
    if redact(text) != text:
        return
    contentcache.write(FOLDER, contentcache.key_of(_KIND, manifest_bytes), payload)
