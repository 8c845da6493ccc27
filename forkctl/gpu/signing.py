"""Evidence a pull request cannot forge: SSH signatures over the evidence file, checked against the
manifest's allowed signers.

The format is git's own for SSH-signed commits and tags: `ssh-keygen -Y sign` with a namespace, and an
allowed-signers list (`<principal> <key-type> <base64-key>`, one per line, as in git's
`gpg.ssh.allowedSignersFile`). `forkctl validate --sign-key KEY` signs the evidence it writes
(`<digest>.json.sig` beside it); `forkctl gate` verifies it whenever `validation.allowed_signers` is set,
and refuses an unsigned file, a file edited after signing, and a file signed by a key not listed.
The private key never enters the repository: it stays with the GPU runner (or maintainer) that signs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import msgspec

from forkctl import process
from forkctl.errors import BadInput
from forkctl.files import atomic_write

NAMESPACE = "forkctl-evidence"
SIGNATURE_SUFFIX = ".sig"
TIMEOUT_S = 60


def signature_path(evidence: Path) -> Path:
    return evidence.with_name(evidence.name + SIGNATURE_SUFFIX)


def _ssh_keygen(args: list[str], stdin: bytes) -> _SshKeygen:
    program = shutil.which("ssh-keygen")
    if program is None:
        raise BadInput("ssh-keygen is not installed", hint="install OpenSSH's client tools (8.2 or newer)")
    try:
        done = process.run([program, *args], input=stdin, timeout=TIMEOUT_S, env=_env())
    except OSError as exc:
        raise BadInput(
            f"cannot run {program}: {exc.strerror}", hint="check the OpenSSH installation"
        ) from None
    except process.TimedOut:
        raise BadInput(
            f"ssh-keygen {args[1]} did not finish within {TIMEOUT_S} s",
            hint="a key that asks for a passphrase cannot be used here: use a key without one",
        ) from None
    assert isinstance(done.stdout, bytes) and isinstance(done.stderr, bytes)
    return _SshKeygen(done.returncode, done.stdout, done.stderr)


class _SshKeygen(msgspec.Struct, frozen=True):
    returncode: int
    stdout: bytes
    stderr: bytes


def _env() -> dict[str, str]:
    # No agent, no askpass: a key that needs a passphrase fails instead of prompting in CI.
    return {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "SSH_ASKPASS", "DISPLAY")}


def read_key(key: Path) -> bytes:
    """The private key's bytes, read once (validate reads them before any tested code runs and signs
    with these bytes after it, from a private copy no child was told of)."""
    try:
        return key.read_bytes()
    except OSError as exc:
        raise BadInput(
            f"signing key {key}: {exc.strerror}", hint="name the GPU runner's private key file (an SSH key)"
        ) from None


def sign_with(evidence: Path, key_bytes: bytes, label: str) -> Path:
    """Sign with a key held in memory: written to a fresh private folder (0700, the file 0600) only
    for ssh-keygen's run, then removed."""
    with tempfile.TemporaryDirectory(prefix="forkctl-sign-") as scratch:
        copy = Path(scratch) / "key"
        fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key_bytes)
        return _sign(evidence, copy, label)


def sign(evidence: Path, key: Path) -> Path:
    """Sign the evidence file's bytes with the private `key`; write `<file>.sig` atomically."""
    if not key.is_file():
        raise BadInput(
            f"signing key {key} does not exist", hint="name the GPU runner's private key file (an SSH key)"
        )
    return _sign(evidence, key, str(key))


def _sign(evidence: Path, key: Path, label: str) -> Path:
    data = evidence.read_bytes()
    _refuse_ambiguous(evidence, data)
    done = _ssh_keygen(["-Y", "sign", "-q", "-f", str(key), "-n", NAMESPACE], data)
    if done.returncode != 0 or b"BEGIN SSH SIGNATURE" not in done.stdout:
        message = done.stderr.decode(errors="replace").strip()
        raise BadInput(f"could not sign {evidence.name} with {label}: {message}", hint="check the key file")
    target = signature_path(evidence)
    atomic_write(target, done.stdout)
    return target


def signed_by_another_key(evidence: Path, key: Path) -> bool:
    """Is `<evidence>.sig` already a valid signature of the file's bytes, made by a key other than the
    private `key`? Signing again would silently replace someone's vouching with ours."""
    signature = signature_path(evidence)
    if not signature.is_file() or signature.is_symlink():
        return False
    public = _ssh_keygen(["-y", "-f", str(key)], b"")
    fields = public.stdout.decode(errors="replace").split()
    if public.returncode == 0 and len(fields) >= 2:
        with tempfile.TemporaryDirectory(prefix="forkctl-signers-") as scratch:
            ours = Path(scratch) / "allowed_signers"
            ours.write_text(f"this-key {fields[0]} {fields[1]}\n")
            found = _ssh_keygen(["-Y", "find-principals", "-s", str(signature), "-f", str(ours)], b"")
        if found.returncode == 0 and found.stdout.split():
            return False  # made by this very key: re-signing replaces like with like
    # Not provably ours (or our public half unreadable): does it still vouch for these bytes?
    checked = _ssh_keygen(
        ["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(signature)], evidence.read_bytes()
    )
    return checked.returncode == 0


def _refuse_ambiguous(evidence: Path, data: bytes) -> None:
    """The bytes about to be signed must read the same to every JSON reader: a signature vouches for
    one meaning (checked on these very bytes, not on an earlier read of the file)."""
    from forkctl.gpu.evidence import AmbiguousJSON, read_strict_json

    try:
        read_strict_json(data)
    except (AmbiguousJSON, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadInput(
            f"{evidence}: will not sign it: {exc}",
            hint="sign only evidence that forkctl validate wrote, unchanged",
        ) from None


class SignatureVerdict(msgspec.Struct, frozen=True):
    ok: bool
    principal: str | None
    problem: str | None  # "unsigned", "foreign", "edited"
    detail: str


def verify(evidence: Path, allowed_signers: list[str]) -> SignatureVerdict:
    """Is `<evidence>.sig` a valid signature of the file's bytes by one of `allowed_signers`?"""
    signature = signature_path(evidence)
    if not signature.is_file() or signature.is_symlink():
        return SignatureVerdict(
            False, None, "unsigned", f"{signature.name} is missing: the evidence is not signed"
        )
    data = evidence.read_bytes()
    with tempfile.TemporaryDirectory(prefix="forkctl-signers-") as scratch:
        allowed = Path(scratch) / "allowed_signers"
        allowed.write_text("".join(f"{line}\n" for line in allowed_signers))
        found = _ssh_keygen(["-Y", "find-principals", "-s", str(signature), "-f", str(allowed)], b"")
        principals = found.stdout.decode(errors="replace").split()
        if found.returncode != 0 or not principals:
            return SignatureVerdict(
                False,
                None,
                "foreign",
                f"{signature.name} was made by a key that validation.allowed_signers does not list "
                "(or it is not a signature)",
            )
        principal = principals[0]
        checked = _ssh_keygen(
            ["-Y", "verify", "-f", str(allowed), "-I", principal, "-n", NAMESPACE, "-s", str(signature)], data
        )
    if checked.returncode != 0:
        return SignatureVerdict(
            False,
            principal,
            "edited",
            f"{evidence.name} does not match its signature by {principal}: it was changed after signing",
        )
    return SignatureVerdict(True, principal, None, f"signed by {principal}")
