"""A credential in a URL never leaves forkctl: not on stdout or stderr, not in --json, annotations or the
step summary, not in the cache's config, not in a consumer's .gitmodules, commits or pushed objects.

The manifest names the fork by a `https://forkctl:<token>@example.invalid/fork.git` URL that the test's
git config rewrites (`url.<path>.insteadOf`) to the local bare repository, so the whole check and bump
really run through the credentialed URL.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import Chain, make_chain, url
from tests.gitrepos import git

TOKEN = "ghp_PLANTEDtoken0123456789abcdef=="  # base64-style padding, as a token may end


def credentialed(name: str) -> str:
    return f"https://forkctl:{TOKEN}@example.invalid/{name}.git"


@pytest.fixture
def chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Chain:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    made = make_chain(tmp_path)
    config = tmp_path / "gitconfig"
    base_config = Path(os.environ["GIT_CONFIG_GLOBAL"]).read_text()
    # Both spellings reach the fork: with the token (the manifest's) and without (what a consumer's
    # .gitmodules gets, fetched in real life through a credential helper).
    rewrites = (
        f'[url "{url(made.fork)}"]\n\tinsteadOf = {credentialed("fork")}\n'
        f"\tinsteadOf = https://example.invalid/fork.git\n"
    )
    config.write_text(base_config + rewrites)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    data = yaml.safe_load(made.manifest.read_text())
    data["fork"]["url"] = credentialed("fork")
    made.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    return made


def invoke(chain: Chain, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), *args])
    return result.exit_code, result.stdout + result.stderr


def everything_in(path: Path) -> bytes:
    """Every object and file of a repository (loose objects decompressed through git)."""
    objects = git(path, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    contents = b"".join(
        subprocess.run(["git", "cat-file", "-p", sha], cwd=path, capture_output=True, check=True).stdout
        for sha in objects
    )
    files = b"".join(p.read_bytes() for p in path.rglob("*") if p.is_file() and "objects" not in p.parts)
    return contents + files


@pytest.mark.slow
def test_a_planted_token_reaches_no_output_channel_and_no_repository(
    chain: Chain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    outputs = []
    for args in (
        ("check-pins", "--github"),
        ("check-pins", "--json"),
        ("check-pins",),
        ("bump-bridge", "--no-gate", "--through", "nemo-rl", "--push"),
        ("bump-bridge", "--no-gate", "--through", "nemo-rl", "--push", "--json"),
        ("check-pins", "--json"),
    ):
        code, output = invoke(chain, *args)
        assert code in (0, 1, 2), output
        outputs.append(output)
    # The bump really went through the credentialed URLs: branches arrived on the bare remotes.
    assert git(chain.bridge, "for-each-ref", "refs/heads/forkctl/")
    assert git(chain.nemo, "for-each-ref", "refs/heads/forkctl/")
    assert any("***@example.invalid" in output for output in outputs)
    for output in outputs:
        assert TOKEN not in output
    assert TOKEN not in summary.read_text()
    for cached in (tmp_path / "cache").rglob("*"):  # config, FETCH_HEAD, logs, packs: every file
        if cached.is_file():
            assert TOKEN.encode() not in cached.read_bytes(), cached
    for repo in (chain.bridge, chain.nemo):
        assert TOKEN.encode() not in everything_in(repo)
    bumped = git(chain.bridge, "for-each-ref", "--format=%(refname)", "refs/heads/forkctl/").split()[0]
    assert "example.invalid/fork.git" in git(chain.bridge, "show", f"{bumped}:.gitmodules")


def test_an_unreachable_credentialed_url_is_reported_redacted(chain: Chain) -> None:
    data = yaml.safe_load(chain.manifest.read_text())
    data["fork"]["url"] = f"https://forkctl:{TOKEN}@unreachable.invalid/fork.git"
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    for args in (
        ("check-pins", "--json"),
        ("check-pins", "--github"),
        ("bump-bridge", "--no-gate", "--dry-run"),
    ):
        code, output = invoke(chain, *args)
        assert code in (1, 2), output
        assert TOKEN not in output


# --- credentials reach git through a helper, not through a config key or the command line ------

PADDED_TOKEN = "dG9rZW4tUExBTlRFRC1wYWRkZWQ=="  # base64 padding: '=' broke a `-c url.<url>.insteadOf=...`


class _AuthServer:
    """A smart-HTTP git server (`git http-backend` behind a small Python server) that answers 401
    unless the request carries Basic credentials `forkctl:PADDED_TOKEN`; it counts authorised requests."""

    def __init__(self, root: Path) -> None:
        import base64
        import http.server
        import threading

        expected = "Basic " + base64.b64encode(f"forkctl:{PADDED_TOKEN}".encode()).decode()
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                if self.headers.get("Authorization") != expected:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="test"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                served.authorised += 1
                path, _, query = self.path.partition("?")
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                env = {
                    **os.environ,
                    "GIT_PROJECT_ROOT": str(root),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "REQUEST_METHOD": self.command,
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                    "REMOTE_USER": "forkctl",
                }
                done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
                head, _, payload = done.stdout.partition(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                status = next((line.split()[1] for line in lines if line.startswith("Status:")), "200")
                self.send_response(int(status))
                for line in lines:
                    if ":" in line and not line.startswith("Status:"):
                        key, value = line.split(":", 1)
                        self.send_header(key, value.strip())
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.authorised = 0
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_token_with_padding_authenticates_and_is_written_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forkctl.git.remote import ls_remote
    from forkctl.git.snapshot import fetch_commit

    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FORKCTL_NETWORK_TIMEOUT", "30")
    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "a.txt").write_text("a\n")
    git(work, "add", "a.txt")
    git(work, "commit", "-q", "-m", "a")
    tip = git(work, "rev-parse", "HEAD").strip()
    served = tmp_path / "srv" / "repo.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(served)], check=True)
    git(served, "config", "uploadpack.allowFilter", "true")
    git(served, "config", "uploadpack.allowAnySHA1InWant", "true")
    # Nothing of the user's may answer for us: a credential helper of theirs would hide a broken lend.
    config = tmp_path / "gitconfig"
    config.write_text(Path(os.environ["GIT_CONFIG_GLOBAL"]).read_text())
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    server = _AuthServer(tmp_path / "srv")
    try:
        # git refuses https to a plain-http server, so the test speaks https's rules over http: the
        # code path is the one every https URL takes (checked_url only allows https).
        location = f"https://forkctl:{PADDED_TOKEN}@127.0.0.1:{server.port}/repo.git"
        config.write_text(
            config.read_text()
            + f'[url "http://127.0.0.1:{server.port}/"]\n\tinsteadOf = https://127.0.0.1:{server.port}/\n'
            # Today's spelling of the URL too (credentials in it), so that only the lend can fail.
            + f"\tinsteadOf = https://forkctl:{PADDED_TOKEN}@127.0.0.1:{server.port}/\n"
        )
        refs = ls_remote(location)
        assert refs["refs/heads/main"] == tip  # the server answers only an authorised request
        assert fetch_commit(location, tip).objects.has_object(
            f"{tip}^{{commit}}"
        )  # a fetch, through the cache
        assert server.authorised > 0
    finally:
        server.close()
    for cached in (tmp_path / "cache").rglob("*"):
        if cached.is_file():
            assert PADDED_TOKEN.encode() not in cached.read_bytes(), cached


# --- a local repository that only a pull request names is not listed ----------------------------


def test_a_local_url_only_a_gitmodules_names_is_a_finding_not_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PR's .gitmodules naming `file:///...` of the runner's disk: check-pins neither lists that
    repository nor prints its branch names; it reports the refusal. FORKCTL_ALLOW_LOCAL_URLS=1 is the
    deliberate opt-in that lists it."""
    from tests.chain import make_fixed_chain

    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    chain = make_fixed_chain(tmp_path)
    private = tmp_path / "private.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(chain.fork), str(private)], check=True)
    git(private, "branch", "secret-branch-of-the-runner", chain.head)
    bridge = chain.pin_bridge(chain.head, url_=private.as_uri())
    chain.pin_nemo(bridge)
    monkeypatch.chdir(chain.nemo_work.path)

    def check() -> str:
        result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins", "--json"])
        return result.stdout + result.stderr

    output = check()
    assert "secret-branch-of-the-runner" not in output
    assert "refusing to contact the local repository" in output
    monkeypatch.setenv("FORKCTL_ALLOW_LOCAL_URLS", "1")
    assert "refusing to contact the local repository" not in check()
