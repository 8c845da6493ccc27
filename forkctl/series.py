"""The patch series: `git format-patch` files parsed into typed `Patch` objects.

A format-patch file is one mbox message: `From <sha> <date>` line, mail headers (From, Date, Subject),
the commit message body, a `---` separator (the message ends at the first one, or at another patch
break, as `git am` ends it), an optional diffstat, and the diff. The paths a diff
names and its patch-id are git's own answers (`git apply --numstat`, `git patch-id --stable`, through
`git.patchtext`), kept in the cache by the diffs' content so that a series read before spawns no git.
"""

from __future__ import annotations

import os
import re
import stat
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from forkctl import contentcache, digests, mail
from forkctl.errors import BadInput
from forkctl.git.sha import COMMIT_NAME_PATTERN, FULL_NAME_PATTERN
from forkctl.manifest import Manifest
from forkctl.manifest.schema import SeriesEntry

PROVENANCE_RE = re.compile(rf"^\(cherry picked from commit ({COMMIT_NAME_PATTERN})\)\s*$", re.MULTILINE)
TRAILER_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*): (.+)$")
SUBJECT_PREFIX_RE = re.compile(r"^\[PATCH[^\]]*\]\s*")
# git mailinfo's patch break, the first of which ends a mail's commit message: `---` and nothing but
# whitespace, `--- ` and a name, a `diff -` header, a CVS `Index: ` line.
MESSAGE_END_RE = re.compile(r"^(?:---[ \t\v\f\r]*$|--- \S|diff -|Index: )", re.MULTILINE)
# export names patch n `f"{n:04d}-<slug>.patch"`: four digits, more from patch 10,000 on.
NAME_RE = re.compile(r"^(\d{4,})-([A-Za-z0-9][A-Za-z0-9._-]*)\.patch$")


class Patch(msgspec.Struct, frozen=True):
    path: Path
    subject: str
    author_name: str
    author_email: str
    date: datetime
    date_raw: str
    body: str  # the commit message after the subject line, provenance and trailers included
    trailers: list[tuple[str, str]]
    provenance: list[str]  # what its `(cherry picked from commit <sha>)` lines name, oldest first; all kept
    paths: list[str]
    diff: bytes
    patch_id: str
    raw: bytes

    def __repr__(self) -> str:  # the patch's bytes are in `diff` and `raw`: too long to show
        return f"Patch({str(self.path)!r}, {self.subject!r})"

    @property
    def message(self) -> str:
        """The full commit message, as `git am` would record it."""
        return f"{self.subject}\n\n{self.body}\n" if self.body else f"{self.subject}\n"

    @property
    def latest_provenance(self) -> str | None:
        return self.provenance[-1] if self.provenance else None

    @property
    def number(self) -> int | None:
        match = NAME_RE.match(self.path.name)
        return int(match.group(1)) if match else None


def listed_provenance(entry: SeriesEntry) -> list[str]:
    """The commits a `series:` entry's `provenance:` names, as a list whichever way it is written."""
    names = entry.provenance
    return [names] if isinstance(names, str) else list(names or [])


def _header(value: Any, path: Path | None = None, name: str = "header") -> str:
    """A mail header's text, RFC 2047 words decoded; a malformed encoding is a BadInput, not a crash.
    `value` is the header as the email package's compat32 policy gives it (a `str`, or a `Header` for
    raw non-ASCII bytes)."""
    if value is None:
        return ""
    if isinstance(value, str) and "=?" not in value:
        # No encoded word: `email.header` would hand the text back as it is, so spare its import.
        return value.replace("\n", "").replace("\r", "")
    from email.errors import HeaderParseError
    from email.header import decode_header, make_header

    try:
        text = str(make_header(decode_header(value)))
    except (UnicodeDecodeError, LookupError, ValueError, HeaderParseError) as exc:
        raise BadInput(
            f"{path}: the {name} header is not validly encoded ({exc})",
            hint="re-export the patch with forkctl export (or git format-patch --encode-email-headers)",
        ) from None
    return text.replace("\n", "").replace("\r", "")


def _headers_and_payload(raw: bytes, path: Path) -> tuple[dict[str, Any], bytes]:
    """Subject, From and Date as the email package's compat32 policy gives them, and the body's bytes:
    read by `mail` when the file has git's plain shape, by the email package (imported only then)
    otherwise."""
    plain = mail.split(raw)
    if plain is not None:
        headers, payload = plain
        return {name: headers.get(name) for name in ("subject", "from", "date")}, payload
    from email import message_from_bytes

    message = message_from_bytes(raw)  # the compat32 policy: raw header strings, decoded by _header
    payload_bytes = message.get_payload(decode=True)
    if not isinstance(payload_bytes, bytes):
        raise BadInput(
            f"{path}: a multipart mail, not a git format-patch file", hint="make it with git format-patch"
        )
    found: dict[str, str | None] = {}
    for name in ("subject", "from", "date"):
        value: object = message.get(name)  # typed str, but a Header for raw 8-bit bytes with no charset
        found[name] = _eight_bit(raw, name) if value is not None and not isinstance(value, str) else value
    return found, payload_bytes


def _eight_bit(raw: bytes, name: str) -> str:
    """The header `name` of `raw` written in 8-bit bytes with no charset, read as `git mailinfo` reads
    it: UTF-8 when it is valid UTF-8, else Latin-1 (so `Jos\xe9` is José, never U+FFFD)."""
    head = raw.partition(b"\n\n")[0].replace(b"\r\n", b"\n")
    unfolded = re.sub(rb"\n[ \t]+", b" ", head)
    match = re.search(rb"^" + re.escape(name.encode()) + rb":[ \t]*(.*)$", unfolded, re.I | re.M)
    value = match.group(1) if match else b""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def _author(text: str) -> tuple[str, str]:
    plain = mail.address(text)
    if plain is not None:
        return plain
    from email.utils import parseaddr

    return parseaddr(text)


def _date(date_raw: str, path: Path) -> datetime:
    plain = mail.date(date_raw)
    if plain is not None:
        return plain
    from email.utils import parsedate_to_datetime

    try:
        return parsedate_to_datetime(date_raw)
    except (TypeError, ValueError):
        raise BadInput(f"{path}: Date header {date_raw!r} is not an RFC 2822 date") from None


def _split_message_and_diff(payload: str, path: Path) -> tuple[str, str]:
    """Split the mail body into the commit message and the diff, dropping the diffstat and signature."""
    if payload.startswith("diff --git "):
        diff_start = 0
    else:
        diff_start = payload.find("\ndiff --git ") + 1
        if diff_start == 0:
            raise BadInput(f"{path}: no 'diff --git' section: this is not a git format-patch file")
    head = payload[:diff_start]
    # The message ends where `git am` ends it: at the first patch break (a diffstat may follow it).
    separator = MESSAGE_END_RE.search(head)
    message = head[: separator.start()] if separator else head
    diff = payload[diff_start:]
    # format-patch ends with a version signature ("-- \n2.39.5\n") unless --no-signature was used.
    signature = re.search(r"^-- \n[^\n]*\n*\Z", diff, re.MULTILINE)
    if signature:
        diff = diff[: signature.start()]
    return message.strip("\n"), diff


def _trailers(body: str) -> list[tuple[str, str]]:
    paragraphs = [p for p in body.strip().split("\n\n") if p.strip()]
    if not paragraphs:
        return []
    found = []
    for line in paragraphs[-1].splitlines():
        match = TRAILER_RE.match(line)
        if match:
            found.append((match.group(1), match.group(2).strip()))
        elif not PROVENANCE_RE.match(line):
            return []
    return found


def _read_mail(path: Path) -> Patch:
    """A patch file parsed, all but what git reads from its diff (paths, patch-id); BadInput when it is
    not a format-patch file."""
    try:
        mode = os.lstat(path).st_mode  # one call: not a link, and a regular file
    except OSError:
        mode = 0
    if not stat.S_ISREG(mode):
        raise BadInput(
            f"{path}: a patch file must be a regular file (not a link or a device)",
            hint="replace the link with the file it points to",
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    if not raw.startswith(b"From "):
        raise BadInput(
            f"{path}: not a git format-patch file (it must start with a 'From <sha>' line)",
            hint="make patch files with `forkctl export` or `git format-patch`",
        )
    headers, payload_bytes = _headers_and_payload(raw, path)
    subject = SUBJECT_PREFIX_RE.sub("", _header(headers["subject"], path, "Subject")).strip()
    author_name, author_email = _author(_header(headers["from"], path, "From"))
    date_raw = _header(headers["date"], path, "Date")
    if not subject or not author_email or not date_raw:
        raise BadInput(f"{path}: missing Subject, From or Date header: not a git format-patch file")
    date = _date(date_raw, path)
    payload = payload_bytes.decode("utf-8", errors="surrogateescape")
    body, diff = _split_message_and_diff(payload, path)
    return Patch(
        path=path,
        subject=subject,
        author_name=author_name,
        author_email=author_email,
        date=date,
        date_raw=date_raw,
        body=body,
        trailers=_trailers(body),
        provenance=PROVENANCE_RE.findall(body),
        paths=[],  # filled in by parse_patches, which asks git about every diff at once
        diff=diff.encode("utf-8", errors="surrogateescape"),
        patch_id="",
        raw=raw,
    )


def parse_patch(path: Path) -> Patch:
    """Parse one format-patch file; raise BadInput when it is not one."""
    return parse_patches([path])[0]


def parse_patches(paths: list[Path]) -> list[Patch]:
    """Parse format-patch files; git reads all their diffs in two processes, not two per patch, and
    what it said is kept by the diffs' content (`_FACTS`), so the same series again spawns no git.
    Raise BadInput for the first file that is not a format-patch file or whose diff does not parse."""
    mails = [_read_mail(path) for path in paths]
    diffs = [parsed.diff for parsed in mails]
    key = contentcache.key_of(_FACTS, *diffs)
    facts = _cached_facts(key, len(diffs))
    if facts is None:
        facts = _git_facts(mails)
        contentcache.write(_FACTS, key, msgspec.json.encode(facts))
    return [
        msgspec.structs.replace(parsed, paths=list(p), patch_id=i)
        for parsed, (p, i) in zip(mails, facts, strict=True)
    ]


# Cache entries of git's answers about a series' diffs: [(paths, patch-id)] per diff, in order. Both
# are functions of the diff's bytes alone (`patch-id --stable` is stable across git versions).
_FACTS = "patch-facts"
_PATCH_ID_RE = re.compile(rf"{FULL_NAME_PATTERN}?")


def _cached_facts(key: str, count: int) -> list[tuple[list[str], str]] | None:
    payload = contentcache.read(_FACTS, key)
    if payload is None:
        return None
    try:
        facts = msgspec.json.decode(payload, type=list[tuple[list[str], str]])
    except msgspec.MsgspecError:
        return None
    sound = len(facts) == count and all(_PATCH_ID_RE.fullmatch(i) for _p, i in facts)
    return facts if sound else None


def _git_facts(mails: list[Patch]) -> list[tuple[list[str], str]]:
    from forkctl.git import patchtext  # only a series not seen before starts git (and subprocess)

    diffs = [parsed.diff for parsed in mails]
    try:
        paths_each = patchtext.diff_paths_each(diffs)
    except BadInput:
        for parsed in mails:  # find the one git refused, and say so
            _diff_paths_of(parsed.path, parsed.diff)
        raise
    return list(zip(paths_each, patchtext.patch_ids(diffs), strict=True))


def _diff_paths_of(path: Path, diff: bytes) -> list[str]:
    from forkctl.git import patchtext

    try:
        return patchtext.diff_paths(diff)
    except BadInput as exc:
        raise BadInput(
            f"{path}: the diff does not parse: {exc.message}", hint="restore or re-export the patch"
        ) from None


class Series(msgspec.Struct, frozen=True):
    base: str
    patches: list[Patch]

    @property
    def digest(self) -> str:
        """sha256 over the base SHA and each patch file's bytes in order: what GPU evidence names."""
        hasher = digests.sha256()
        hasher.update(self.base.encode())
        for patch in self.patches:
            hasher.update(b"\0")
            hasher.update(patch.raw)
        return hasher.hexdigest()


def load_series(manifest: Manifest) -> Series:
    return Series(base=manifest.upstream.base, patches=parse_patches(manifest.patch_paths()))
