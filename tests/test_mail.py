"""forkctl.mail reads git's mail headers without the email package: wherever it answers, the answer is the
email package's own (compat32 policy, `parseaddr`, `parsedate_to_datetime`), compared here on the
real series, on patches git writes in the tests, and on shapes built to sit at the edges."""

from __future__ import annotations

import itertools
from datetime import datetime
from email import message_from_bytes
from email.header import decode_header, make_header
from email.utils import parseaddr, parsedate_to_datetime
from pathlib import Path

import pytest

from forkctl import mail
from forkctl.series import SUBJECT_PREFIX_RE, parse_patch
from tests.gitrepos import init_repo

ROOT = Path(__file__).resolve().parent.parent
REAL_SERIES = sorted((ROOT / "patches").rglob("*.patch"))


def _by_email_package(raw: bytes) -> tuple[str, str, str, datetime, bytes]:
    """Subject, author name, author email, date and body, read the way forkctl read them before."""
    message = message_from_bytes(raw)

    def text(name: str) -> str:
        return str(make_header(decode_header(message.get(name)))).replace("\n", "").replace("\r", "")

    name, email = parseaddr(text("From"))
    payload = message.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return text("Subject"), name, email, parsedate_to_datetime(text("Date")), payload


def _same_as_email_package(path: Path) -> None:
    raw = path.read_bytes()
    subject, name, email, date, payload = _by_email_package(raw)
    patch = parse_patch(path)
    assert patch.subject == SUBJECT_PREFIX_RE.sub("", subject).strip()
    assert (patch.author_name, patch.author_email) == (name, email)
    assert patch.date.isoformat() == date.isoformat()
    split = mail.split(raw)
    assert split is not None, f"{path.name}: git's own shape must take the fast path"
    assert split[1] == payload


@pytest.mark.parametrize("path", REAL_SERIES, ids=[p.name[:20] for p in REAL_SERIES])
def test_the_real_series_reads_as_the_email_package_reads_it(path: Path) -> None:
    _same_as_email_package(path)


def test_patches_git_writes_read_as_the_email_package_reads_them(tmp_path: Path) -> None:
    """Long folded subjects, non-ASCII names and subjects (encoded words), dates on either side of UTC."""
    repo = init_repo(tmp_path / "r", {"a.py": "A = 0\n"})
    cases = [
        ("Test User", "fix: short", "2026-03-04T05:06:07+02:00"),
        ("Zoë Müller", "feat: naïve façade über alles", "2026-12-31T23:59:59-09:30"),
        (
            "J. R. Dev",
            "perf(moe): " + "a long subject that git folds over lines " * 4,
            "2026-01-01T00:00:00+00:00",
        ),
        ("李雷", "docs: 中文 subject", "2025-07-09T08:07:06+05:45"),
    ]
    for number, (author, subject, when) in enumerate(cases, 1):
        repo.git("config", "user.name", author)
        repo.commit(subject, {"a.py": f"A = {number}\n"}, date=when)
        path = repo.format_patch("HEAD", tmp_path / f"out{number}")
        _same_as_email_package(path)
        patch = parse_patch(path)
        assert patch.subject == subject.strip() and patch.author_name == author
        assert patch.date.isoformat() == when


def test_a_raw_utf8_header_is_read_by_the_email_package(tmp_path: Path) -> None:
    """A subject written without encoded words (raw UTF-8 bytes) is not the plain shape: the email
    package reads it, and its raw 8-bit headers are read as `git mailinfo` reads them (UTF-8, else
    Latin-1), never with replacement characters (issue 37)."""
    raw = (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Zoë <z@example.com>\nDate: Mon, 5 Jan 2026 10:00:00 +0100\nSubject: [PATCH] feat: façade\n\n"
        "why\n---\ndiff --git a/x b/x\nindex 0000000..1111111 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    ).encode()
    assert mail.split(raw) is None
    path = tmp_path / "0001-x.patch"
    path.write_bytes(raw)
    subject, name, email, date, _payload = _by_email_package(raw)
    patch = parse_patch(path)
    assert (patch.subject, patch.author_name, patch.author_email) == ("feat: façade", "Zoë", "z@example.com")
    assert "\ufffd" in subject + name  # what the email package alone would have given
    assert email == patch.author_email
    assert patch.date == date


DATES = [
    *(
        f"{weekday}{day} {month} {year} {time} {offset}"
        for weekday, day, month, year, time, offset in itertools.product(
            ["", "Mon, ", "Fri, "],
            ["1", "09", "29", "30", "31"],
            ["Jan", "Feb", "Jun", "Dec"],
            ["1970", "2024", "2026", "9999"],
            ["00:00:00", "23:59:59", "12:34:56", "24:00:00", "12:60:00"],
            ["+0000", "-0000", "+0200", "-0930", "+0545", "+1400", "-1200", "+2359", "+2400", "+0099"],
        )
    ),
    "Mon, 5 Jan 2026 10:00:00 GMT",
    "5 Jan 26 10:00:00 +0000",
    "Mon,  5 Jan 2026 10:00:00 +0000",
    "Mon, 5 jan 2026 10:00:00 +0000",
    "Mon, 5 Jan 2026 10:00 +0000",
    "Mon, 5 Jan 0099 10:00:00 +0000",
]


def test_dates_read_as_the_email_package_reads_them() -> None:
    answered = 0
    for text in DATES:
        fast = mail.date(text)
        if fast is None:
            continue  # the email package decides this one
        answered += 1
        expected = parsedate_to_datetime(text)
        assert fast.isoformat() == expected.isoformat(), text
        assert (fast.tzinfo is None) == (expected.tzinfo is None), text
    assert answered > 1000  # the fast path is what git's dates take
    assert mail.date("Mon, 5 Jan 2026 10:00:00 +0100") is not None


ADDRESSES = [
    "Test User <test@example.com>",
    "J. R. Dev <j.r.dev@mail.example.org>",
    "Zoë Müller <zoe@example.com>",
    "dev <dev+tag@example.com>",
    "A  B <a@b>",
    '"Doe, John" <john@example.com>',
    "John (the dev) <john@example.com>",
    "john@example.com",
    "<john@example.com>",
    "John <john@example.com> extra",
    "John <john@a@b>",
    "John <john>",
    "Jo\\hn <john@example.com>",
    "John <.john..x.@example..com.>",
]


@pytest.mark.parametrize("text", ADDRESSES)
def test_addresses_read_as_the_email_package_reads_them(text: str) -> None:
    fast = mail.address(text)
    if fast is not None:
        assert fast == parseaddr(text)


@pytest.mark.parametrize(
    "head",
    [
        b"From x\nSubject: a\n b\nFrom: A <a@b>\nDate: Mon, 5 Jan 2026 10:00:00 +0000\n",
        b"From x\nsubject:\ta  \nSUBJECT: second\nFrom: A <a@b>\nX-Empty:\nDate: Mon, 5 Jan 2026 10:00:00 +0000\n",
        b"From x\nSubject:\n folded only\nFrom: A <a@b>\nDate: 5 Jan 2026 10:00:00 +0000\n",
        b"From x\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\nSubject: s\n",
    ],
)
def test_headers_and_body_split_as_the_email_package_splits_them(head: bytes) -> None:
    raw = head + b"\nbody line\r\nwith a CR\n\n\nand blank lines\n"
    split = mail.split(raw)
    assert split is not None
    headers, body = split
    message = message_from_bytes(raw)
    for name in ("subject", "from", "date", "content-type", "x-empty"):
        assert headers.get(name) == message.get(name), name
    assert body == message.get_payload(decode=True)


@pytest.mark.parametrize(
    "head",
    [
        b"From x\n Subject: continuation first\n",
        b"From x\nSubject: a\nnot a header line\n",
        b"From x\nSubject: a\r\n",
        b"From x\nContent-Transfer-Encoding: quoted-printable\nSubject: a\n",
        b"From x\nContent-Transfer-Encoding: base64\n",
        b"From x\nContent-Type: multipart/mixed; boundary=x\n",
        b"From x\nSubject: caf\xc3\xa9\n",
        b"From x\nFrom y\nSubject: a\n",
    ],
)
def test_other_shapes_are_left_to_the_email_package(head: bytes) -> None:
    assert mail.split(head + b"\nbody\n") is None
