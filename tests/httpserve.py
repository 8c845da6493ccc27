"""Local HTTP(S) servers a real `git remote-http(s)` talks to: a bare repository served by git's dumb HTTP
protocol over TLS with a certificate no system store trusts, and a proxy that tunnels (`CONNECT`) any
host name to it.

Nothing here fakes git: a clone or ls-remote through them succeeds only when what git needs (the CA
file, the proxy) reached the git process forkctl started.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import select
import shutil
import socket
import ssl
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.gitrepos import git, init_repo

# A host name that resolves nowhere (RFC 2606): only a proxy can reach it.
PROXIED_HOST = "forkctl-proxied.invalid"


@dataclass
class Served:
    url: str  # the repository's URL: https://127.0.0.1:PORT/repo.git
    head: str  # the commit its main branch holds
    ca_file: Path  # the certificate that signs the server's (the "inspecting proxy's" CA)
    ca_dir: Path  # the same certificate in a hashed CA directory (`openssl rehash`)


def make_ca(folder: Path) -> tuple[Path, Path, Path]:
    """(certificate, key, hashed CA dir): a self-signed certificate for 127.0.0.1, valid one day."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
            ),
            *(
                "-addext",
                f"subjectAltName=IP:127.0.0.1,DNS:{PROXIED_HOST}",
                "-keyout",
                str(key),
                "-out",
                str(cert),
            ),
        ],
        check=True,
        capture_output=True,
    )
    ca_dir = folder / "ca-dir"
    ca_dir.mkdir()
    shutil.copy(cert, ca_dir / "forkctl-test.pem")
    subprocess.run(["openssl", "rehash", str(ca_dir)], check=True, capture_output=True)
    return cert, key, ca_dir


def bare_repository(root: Path) -> str:
    """root/repo.git, a bare repository git's dumb HTTP protocol can serve; returns its main commit."""
    work = init_repo(root / "work", {"README.md": "served over https\n"})
    git(root, "clone", "-q", "--bare", str(work.path), str(root / "repo.git"))
    git(root / "repo.git", "update-server-info")
    return work.head()


class _Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _Tunnel(http.server.BaseHTTPRequestHandler):
    """`CONNECT host:port`: whatever the host, a tunnel to the server at `target` (a TLS-inspecting
    proxy's position, without the inspection)."""

    target: tuple[str, int]

    def do_CONNECT(self) -> None:
        upstream = socket.create_connection(self.target)
        self.send_response(200, "Connection established")
        self.end_headers()
        sockets = [self.connection, upstream]
        with upstream:
            while True:
                readable, _, _ = select.select(sockets, [], [], 10)
                if not readable:
                    return
                for source in readable:
                    data = source.recv(65536)
                    if not data:
                        return
                    (upstream if source is self.connection else self.connection).sendall(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def _running(server: http.server.ThreadingHTTPServer) -> Iterator[int]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def tunnel_to(served: Served) -> Iterator[str]:
    """A CONNECT proxy that sends every tunnel to `served`'s server; yields its URL (http://127.0.0.1:P)."""
    port = int(urllib.parse.urlsplit(served.url).port or 443)
    handler = type("Tunnel", (_Tunnel,), {"target": ("127.0.0.1", port)})
    with _running(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)) as proxy_port:
        yield f"http://127.0.0.1:{proxy_port}"


@contextlib.contextmanager
def serving(root: Path) -> Iterator[Served]:
    """Serve root/repo.git on 127.0.0.1 over TLS, with a fresh CA, until the block ends."""
    head = bare_repository(root)
    cert, key, ca_dir = make_ca(root / "tls")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Files, directory=str(root)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with _running(server) as port:
        yield Served(f"https://127.0.0.1:{port}/repo.git", head, cert, ca_dir)
