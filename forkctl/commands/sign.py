"""forkctl sign: sign the current series' GPU evidence with a runner's or maintainer's SSH key."""

from __future__ import annotations

from pathlib import Path

import click

from forkctl.cli import verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.gpu import evidence, signing
from forkctl.report import Report
from forkctl.series import load_series


@click.command("sign", short_help=verbs.summary("sign"))
@click.option(
    "--key",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="FORKCTL_SIGNING_KEY",
    required=True,
    help="The private SSH key to sign with (default: $FORKCTL_SIGNING_KEY).",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Replace a valid signature that another key made (without it, sign refuses, exit 2).",
)
@output_options()
@forkctl_command
def command(ctx: Context, key: Path, replace: bool) -> Report:
    """Sign <evidence_dir>/<series-digest>.json (writes <file>.sig, git's SSH signature format).

    \b
    `forkctl validate --sign-key KEY` signs as it records; use this on a machine that holds the key
    when the GPU host has no ssh-keygen, after copying the evidence from it unchanged. Signing says
    "I vouch for these results": the key's public half must be in validation.allowed_signers for
    `forkctl gate` to accept it, and the signature is checked before anything else.
    """
    ctx.require_local("sign writes a signature beside the evidence in the toolkit")
    manifest = ctx.manifest()
    series = load_series(manifest)
    path = evidence.evidence_path(evidence.evidence_dir(manifest), series.digest)
    if not path.is_file():
        raise BadInput(
            f"no evidence for the current series ({path.name})",
            hint="run forkctl validate on a GPU host first",
        )
    evidence.load_evidence(path)  # refuse to sign something that is not well-formed evidence
    if not key.is_file():
        raise BadInput(f"signing key {key} does not exist", hint="pass --key with your private SSH key file")
    if not replace and signing.signed_by_another_key(path, key):
        raise BadInput(
            f"{signing.signature_path(path).name} is already a valid signature of this evidence by "
            + _signer(path, manifest.validation.allowed_signers)
            + f", not by {key.name}: signing would replace it",
            hint="leave it as it is, or pass --replace to sign with this key instead",
        )
    signature = signing.sign(path, key)
    verdict = (
        signing.verify(path, manifest.validation.allowed_signers)
        if manifest.validation.allowed_signers
        else None
    )
    result = Report(command="sign")
    result.data = {
        "evidence_file": str(path.relative_to(manifest.root)),
        "signature": str(signature.relative_to(manifest.root)),
        "trusted_by_manifest": bool(verdict and verdict.ok),
        "signed_by": verdict.principal if verdict else None,
    }
    result.lines.append(f"signed {path.name}: {signature.name}")
    if verdict is not None and not verdict.ok:
        result.lines.append(f"note: forkctl gate will not accept it: {verdict.detail}")
    return result


def _signer(path: Path, allowed_signers: list[str]) -> str:
    """Who made the signature already there, in the manifest's words when it lists them."""
    if allowed_signers:
        verdict = signing.verify(path, allowed_signers)
        if verdict.principal:
            return verdict.principal
    return "another key"
