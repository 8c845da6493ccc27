"""What git's transport needs from the environment reaches the git forkctl starts: a CI job behind a
TLS-inspecting proxy names the proxy's CA (`GIT_SSL_CAINFO`, `GIT_SSL_CAPATH`) and the proxy itself
(`http_proxy`, ...). Each test lists the refs of a real repository served by git's HTTP protocol on
127.0.0.1, through the real `git remote-http(s)`; nothing answers unless the variable reached git.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forkctl.errors import BadInput
from forkctl.git import remote
from tests.httpserve import PROXIED_HOST, serving, tunnel_to

# Every variable of this machine's that could let git trust the test's CA, or send it elsewhere.
AMBIENT = (
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_SSL_NO_VERIFY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "http_proxy",
    "https_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "all_proxy",
)


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in AMBIENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("FORKCTL_NETWORK_TIMEOUT", "30")
    return monkeypatch


@pytest.mark.parametrize("variable", ["GIT_SSL_CAINFO", "GIT_SSL_CAPATH"])
def test_the_ca_a_ci_job_names_reaches_git(
    tmp_path: Path, bare_env: pytest.MonkeyPatch, variable: str
) -> None:
    with serving(tmp_path) as served:
        with pytest.raises(BadInput, match="cannot list the refs"):
            remote.ls_remote(served.url)  # git trusts no such CA of its own accord
        bare_env.setenv(variable, str(served.ca_file if variable == "GIT_SSL_CAINFO" else served.ca_dir))
        refs = remote.ls_remote(served.url)
    assert refs["refs/heads/main"] == served.head


def test_git_ssl_no_verify_does_not_turn_verification_off(
    tmp_path: Path, bare_env: pytest.MonkeyPatch
) -> None:
    """A leftover GIT_SSL_NO_VERIFY must not make every answer of a remote forgeable: the CA is the way."""
    bare_env.setenv("GIT_SSL_NO_VERIFY", "1")
    with serving(tmp_path) as served, pytest.raises(BadInput, match="cannot list the refs"):
        remote.ls_remote(served.url)


def test_the_proxy_a_ci_job_names_reaches_git(tmp_path: Path, bare_env: pytest.MonkeyPatch) -> None:
    """`https_proxy` names a proxy that tunnels to the server: the repository's host resolves nowhere,
    so only a git that went through the proxy (and trusts its CA) lists the refs."""
    url = f"https://{PROXIED_HOST}/repo.git"
    with serving(tmp_path) as served, tunnel_to(served) as proxy:
        bare_env.setenv("GIT_SSL_CAINFO", str(served.ca_file))
        with pytest.raises(BadInput, match="cannot list the refs"):
            remote.ls_remote(url)
        bare_env.setenv("https_proxy", proxy)
        assert remote.ls_remote(url)["refs/heads/main"] == served.head
