"""Credentials lent to one git process: an https URL's user name and token reach git through a
credential helper that reads them from that process's environment, never through its command line or
a config key (a token with `=` or `/` would break `url.<...>.insteadOf`, and a config key is printed)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

# The helper answers git's `get` with what the environment of this one git process holds; `store` and
# `erase` are ignored. The empty value first drops the user's helpers for this command, so that none of
# them stores the lent token.
_HELPER = (
    '!f() { test "$1" = get || exit 0; printf "username=%s\\npassword=%s\\n" '
    '"$FORKCTL_LENT_USERNAME" "$FORKCTL_LENT_PASSWORD"; }; f'
)


def lent_credentials(url: str) -> tuple[list[str], dict[str, str]]:
    """How git is given the user name and password of an https `url`: `-c` settings naming a
    credential helper (no secret in them) and the environment of the git child that holds the secret.
    ([], {}) for a URL without credentials, or not https (an ssh login name is no secret)."""
    if "://" not in url or url.split("://", 1)[0].lower() != "https":
        return [], {}
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return [], {}
    env = {
        "FORKCTL_LENT_USERNAME": unquote(parts.username or ""),
        "FORKCTL_LENT_PASSWORD": unquote(parts.password or ""),
    }
    return ["-c", "credential.helper=", "-c", f"credential.helper={_HELPER}"], env
