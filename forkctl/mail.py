"""The mail headers of a `git format-patch` file, read without the email package.

The email package costs a start about 15 ms (its parser, `email.utils` with socket and calendar) to read
three headers that git writes in one fixed shape. Measured again for issue 25 (median of 15, the real
series of 3 patches): reading every file with the email package instead made `lint` 26 ms and a
re-apply 27 ms slower; `git mailinfo` (one process per patch) 30 and 33 ms, and 460 ms at 100 patches. These functions read exactly that shape and answer
None for anything else, and the caller then asks the email package (`forkctl.series`), so every file
reads as the email package reads it:

- `split`: the headers (first occurrence of each name, the value as the email package's compat32 policy
  keeps it: continuation lines joined with their line breaks) and the body's bytes; None unless the
  header block is ASCII with LF line ends, every line a header or a continuation, and the body plain
  (no multipart, no quoted-printable or base64 transfer encoding);
- `address`: `Name <local@domain>` with a plain name, as `email.utils.parseaddr` splits it;
- `date`: `[Day, ]D Mon YYYY HH:MM:SS +HHMM`, as `email.utils.parsedate_to_datetime` reads it.

RFC 2047 encoded words (`=?UTF-8?q?...?=`, how git writes a non-ASCII subject or name) are decoded by
the caller with `email.header`, imported only for such a header.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

# A header line as the email package's feed parser recognises one (name: printable ASCII but ':').
_HEADER_RE = re.compile(rb"([\041-\071\073-\176]+):(.*)")
# Transfer encodings whose body the email package passes through unchanged.
_PLAIN_ENCODINGS = {"", "7bit", "8bit", "binary"}
# An atom of an address (RFC 5322 specials, whitespace and backslash excluded; dots allowed, as the
# email package joins dotted atoms of a phrase or an address unchanged).
_ATOM = r'[^\s()<>@,:;"\[\]\\]+'
_ADDRESS_RE = re.compile(rf"({_ATOM}(?: {_ATOM})*) <({_ATOM}@{_ATOM})>")
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_DATE_RE = re.compile(
    r"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), )?(\d{1,2}) (" + "|".join(_MONTHS) + r") ([1-9]\d{3}) "
    r"(\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})"
)


def split(raw: bytes) -> tuple[dict[str, str], bytes] | None:
    """The headers (lower-case names) and the body of a format-patch file, or None when it is not in
    the plain shape (then the email package must read it)."""
    head, separator, body = raw.partition(b"\n\n")
    if not separator or not head.startswith(b"From ") or not head.isascii() or b"\r" in head:
        return None
    headers: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in head.split(b"\n")[1:]:
        if line[:1] in (b" ", b"\t"):
            if current is None:
                return None  # a continuation before any header: the email package records a defect
            current.append(line.decode("ascii"))
            continue
        match = _HEADER_RE.fullmatch(line)
        if match is None:
            return None
        current = [match.group(2).decode("ascii").lstrip(" \t")]
        headers.setdefault(match.group(1).decode("ascii").lower(), current)
    values = {name: "\n".join(parts) for name, parts in headers.items()}
    if not _plain_body(values):
        return None
    return values, body


def _plain_body(headers: dict[str, str]) -> bool:
    content_type = headers.get("content-type", "text/plain").lower()
    encoding = headers.get("content-transfer-encoding", "").lower()
    return content_type.startswith("text/") and encoding in _PLAIN_ENCODINGS


def address(text: str) -> tuple[str, str] | None:
    """(name, email) of `Name <local@domain>`, or None for any other shape."""
    match = _ADDRESS_RE.fullmatch(text)
    return (match.group(1), match.group(2)) if match else None


def date(text: str) -> datetime | None:
    """The datetime of git's mail date, with its UTC offset; None for any other shape or an
    impossible date (the email package then decides what it is)."""
    match = _DATE_RE.fullmatch(text)
    if match is None:
        return None
    day, month, year, hour, minute, second, sign, off_hours, off_minutes = match.groups()
    if sign == "-" and off_hours == off_minutes == "00":
        return None  # -0000 means "offset unknown": a naive datetime, the email package's rule
    offset = (int(off_hours) * 3600 + int(off_minutes) * 60) * (-1 if sign == "-" else 1)
    try:
        zone = timezone(timedelta(seconds=offset))
        return datetime(
            int(year), _MONTHS.index(month) + 1, int(day), int(hour), int(minute), int(second), tzinfo=zone
        )
    except ValueError:
        return None
