"""--manifest URL@REF:PATH: a consumer's CI reads the toolkit's manifest from its repository, no checkout.

The toolkit (tests/toolkit.py, tests/chain.py) is committed into a git repository in tmp and served by
its file:// URL; nothing here touches the network.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.errors import BadInput
from forkctl.manifest.remote import parse_spec
from tests.chain import make_fixed_chain
from tests.gitrepos import git
from tests.toolkit import make_toolkit


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FORKCTL_MANIFEST", raising=False)
    monkeypatch.chdir(tmp_path)


def serve(root: Path) -> tuple[str, str]:
    """Commit the toolkit at `root` into a git repository on branch main: (file:// URL, commit)."""
    git(root, "init", "-q", "-b", "main")
    for key in ("uploadpack.allowFilter", "uploadpack.allowReachableSHA1InWant"):
        git(root, "config", key, "true")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "toolkit")
    return root.resolve().as_uri(), git(root, "rev-parse", "HEAD")


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


# --- the spec -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "url", "ref", "path"),
    [
        (
            "https://github.com/o/r.git@main:manifest.yaml",
            "https://github.com/o/r.git",
            "main",
            "manifest.yaml",
        ),
        (
            "https://user:tok@github.com/o/r.git@release/1.0:sub/manifest.yaml",
            "https://user:tok@github.com/o/r.git",
            "release/1.0",
            "sub/manifest.yaml",
        ),
        ("git@github.com:o/r.git@main:manifest.yaml", "git@github.com:o/r.git", "main", "manifest.yaml"),
        ("ssh://git@host:2222/o/r.git@v1.2:m.yaml", "ssh://git@host:2222/o/r.git", "v1.2", "m.yaml"),
        (
            "file:///srv/toolkit@" + "a" * 40 + ":manifest.yaml",
            "file:///srv/toolkit",
            "a" * 40,
            "manifest.yaml",
        ),
        ("o/r@main:manifest.yaml", "https://github.com/o/r.git", "main", "manifest.yaml"),
        ("o/r@refs/tags/v1:./a//m.yaml", "https://github.com/o/r.git", "refs/tags/v1", "a/m.yaml"),
        (
            "https://h/o/r.git@main:dir:with:colons/m.yaml",
            "https://h/o/r.git",
            "main",
            "dir:with:colons/m.yaml",
        ),
    ],
)
def test_a_spec_splits_at_the_last_at_and_the_first_colon_after_it(
    text: str, url: str, ref: str, path: str
) -> None:
    spec = parse_spec(text)
    assert spec is not None and (spec.url, spec.ref, spec.path) == (url, ref, path)
    assert "tok" not in spec.shown


@pytest.mark.parametrize(
    "text", ["manifest.yaml", "/abs/manifest.yaml", "./o/r@main:m.yaml", "a/b/c@main:m.yaml", "x@y"]
)
def test_a_local_path_is_not_a_spec(text: str) -> None:
    assert parse_spec(text) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("https://h/o/r.git@-x:manifest.yaml", "is not a branch, tag or commit SHA"),
        ("https://h/o/r.git@a..b:manifest.yaml", "is not a branch, tag or commit SHA"),
        ("https://h/o/r.git@main:-m.yaml", "is not a path inside the repository"),
        ("https://h/o/r.git@main:/etc/m.yaml", "is not a path inside the repository"),
        ("https://h/o/r.git@main:../m.yaml", "is not a path inside the repository"),
        ("o/r@main:a/../../m.yaml", "is not a path inside the repository"),
        ("https://h/o/r.git@main", "expected REF:PATH"),
        ("https://h/o/r.git@:m.yaml", "expected REF:PATH"),
        ("https://h/o/r.git@main:dir@x/m.yaml", "neither may hold '@'"),
        ("https://h/o/r.git", "no '@REF:PATH'"),
        ("ext::sh -c evil@main:m.yaml", "remote helpers are not allowed"),
        ("http://h/o/r.git@main:m.yaml", "transport 'http' is not allowed"),
    ],
)
def test_a_bad_spec_is_refused_with_exit_2(text: str, says: str) -> None:
    with pytest.raises(BadInput, match=r".*") as caught:
        parse_spec(text)
    assert says in caught.value.message
    code, out, _ = run("--manifest", text, "lint", "--json")
    assert code == 2 and says in json.loads(out)["error"]


# --- reading a served toolkit ------------------------------------------------------------------


def _snapshots(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "manifests").glob("*/*"))


def test_lint_and_status_read_a_manifest_by_url_as_they_read_the_local_one(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    url, sha = serve(toolkit.root)
    for verb in (["lint"], ["status"], ["status", "--json"], ["lint", "--json"]):
        local = run("--manifest", str(toolkit.manifest), *verb)
        remote = run("--manifest", f"{url}@main:manifest.yaml", *verb)
        assert remote[:2] == local[:2], verb
        assert local[0] == 0
    [snapshot] = _snapshots(tmp_path)
    assert snapshot.parent.name == sha
    assert sorted(p.name for p in (snapshot / "patches" / "megatron-lm").iterdir()) == sorted(
        p.name for p in toolkit.patch_files
    )
    written = snapshot / "manifest.yaml"
    assert written.read_bytes() == toolkit.manifest.read_bytes()
    assert not os.access(written, os.W_OK) or os.geteuid() == 0
    assert written.stat().st_mode & 0o222 == 0


def test_the_environment_variable_names_it_too(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    url, _ = serve(toolkit.root)
    code, out, _ = run("status", "--json", env={"FORKCTL_MANIFEST": f"{url}@main:manifest.yaml"})
    assert code == 0 and json.loads(out)["ok"]
    assert len(json.loads(out)["patches"]) == len(toolkit.patch_files)


@pytest.mark.slow
def test_a_snapshot_is_reused_offline_by_sha_and_by_recorded_branch(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    url, sha = serve(toolkit.root)
    assert run("--manifest", f"{url}@main:manifest.yaml", "lint")[0] == 0
    shutil.rmtree(toolkit.root)  # the server is gone
    code, out, err = run("--manifest", f"{url}@{sha}:manifest.yaml", "lint")
    assert code == 0, out + err
    assert "fetching" not in err
    code, out, err = run("--manifest", f"{url}@main:manifest.yaml", "lint")
    assert code == 0, out + err
    assert "working offline" in err and sha[:12] in err
    assert len(_snapshots(tmp_path)) == 1


def test_an_unreachable_server_gives_gits_reason_and_exit_2(tmp_path: Path) -> None:
    gone = (tmp_path / "nowhere").as_uri()
    code, out, _ = run("--manifest", f"{gone}@main:manifest.yaml", "lint", "--json")
    assert code == 2
    error = json.loads(out)["error"]
    assert "cannot list the refs of" in error and "does not appear to be a git repository" in error
    code, out, _ = run("--manifest", f"{gone}@{'b' * 40}:manifest.yaml", "lint", "--json")
    assert code == 2 and "cannot fetch commit bbbbbbbbbbbb" in json.loads(out)["error"]


def test_an_unknown_ref_or_path_is_exit_2(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    url, _ = serve(toolkit.root)
    code, out, _ = run("--manifest", f"{url}@nope:manifest.yaml", "lint", "--json")
    assert code == 2 and "has no branch or tag 'nope'" in json.loads(out)["error"]
    code, out, _ = run("--manifest", f"{url}@main:sub/manifest.yaml", "lint", "--json")
    assert code == 2 and "no file sub/manifest.yaml in commit" in json.loads(out)["error"]
    assert _snapshots(tmp_path) == []


def test_a_manifest_error_names_the_spec_and_line_not_the_cache(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    toolkit.manifest.write_text(toolkit.manifest.read_text() + "surprise: 1\n")
    url, _ = serve(toolkit.root)
    spec = f"{url}@main:manifest.yaml"
    code, out, _ = run("--manifest", spec, "lint", "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error.startswith(f"{spec}:") and "surprise" in error
    assert str(tmp_path / "cache") not in error


def test_credentials_in_the_url_are_never_shown_or_stored(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    url, _ = serve(toolkit.root)
    secret_url = url.replace("file://", "file://someone:s3cr3t-token@")
    code, out, err = run("--manifest", f"{secret_url}@main:manifest.yaml", "status")
    assert code == 0, out + err
    assert "s3cr3t" not in out + err
    shutil.rmtree(toolkit.root)
    code, out, err = run("--manifest", f"{secret_url}@main:manifest.yaml", "status", "--json")
    assert code == 0 and "working offline" in err and "s3cr3t" not in out + err
    for path in (tmp_path / "cache").rglob("*"):
        assert "s3cr3t" not in str(path)
        if path.is_file():
            assert b"s3cr3t" not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("verb", "says"),
    [
        (["export"], "export writes the patch files"),
        (["port", "--onto", "HEAD"], "port writes the patch files"),
        (["sign", "--key", "k"], "sign writes a signature"),
        (["validate"], "validate runs the toolkit's tests"),
    ],
)
def test_commands_that_write_the_toolkit_refuse_a_manifest_by_url(
    tmp_path: Path, verb: list[str], says: str
) -> None:
    gone = (tmp_path / "nowhere").as_uri()  # refused before anything is fetched
    code, out, _ = run("--manifest", f"{gone}@main:manifest.yaml", *verb, "--json")
    data = json.loads(out)
    assert code == 2 and says in data["error"] and "read-only manifest" in data["error"]


@pytest.mark.slow
def test_check_pins_reads_the_manifest_by_url(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    url, _ = serve(chain.toolkit)
    local = run("--manifest", str(chain.manifest), "check-pins", "--json")
    remote = run(
        "--manifest", f"{url}@main:{chain.manifest.relative_to(chain.toolkit)}", "check-pins", "--json"
    )
    assert remote[0] == local[0] == 0
    assert json.loads(remote[1]) == json.loads(local[1])


# --- the snapshot cache: keyed by URL, bounded, only inside its folder, one fetch at a time --------


def test_a_sha_fetched_from_one_url_is_not_served_for_another_that_lacks_it(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    url, sha = serve(toolkit.root)
    other = tmp_path / "other"
    other.mkdir()
    (other / "README").write_text("not the toolkit\n")
    other_url, _ = serve(other)
    assert run("--manifest", f"{url}@{sha}:manifest.yaml", "lint")[0] == 0
    code, out, _ = run("--manifest", f"{other_url}@{sha}:manifest.yaml", "lint", "--json")
    assert code == 2, out
    assert f"cannot fetch commit {sha[:12]}" in json.loads(out)["error"]


@pytest.mark.slow
def test_a_manifest_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    from forkctl.manifest.loader import MAX_MANIFEST_BYTES

    toolkit = make_toolkit(tmp_path)
    # A schema error at the top: a parse would report it; the size check must come first.
    padding = "# padding\n" * (MAX_MANIFEST_BYTES // 10 + 10)
    toolkit.manifest.write_text("surprise: 1\n" + toolkit.manifest.read_text() + padding)
    url, _ = serve(toolkit.root)
    code, out, _ = run("--manifest", f"{url}@main:manifest.yaml", "lint", "--json")
    assert code == 2, out
    assert "too large" in json.loads(out)["error"]
    assert _snapshots(tmp_path) == []


def test_a_tree_entry_that_climbs_out_of_the_snapshot_is_exit_2(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    url, sha = serve(toolkit.root)
    root = toolkit.root
    blob = git(root, "hash-object", "-w", "--stdin", input=b"escaped\n")
    inner = git(root, "mktree", input=f"100644 blob {blob}\tevil.txt\n".encode())
    climb = git(root, "mktree", input=f"040000 tree {inner}\t..\n".encode())
    patches = git(root, "rev-parse", f"{sha}:patches")
    listing = git(root, "ls-tree", patches) + f"\n040000 tree {climb}\t..\n"
    bad_patches = git(root, "mktree", input=listing.encode())
    top = [line for line in git(root, "ls-tree", sha).splitlines() if not line.endswith("\tpatches")]
    entries = "\n".join([*top, f"040000 tree {bad_patches}\tpatches"]) + "\n"
    tree = git(root, "mktree", input=entries.encode())
    commit = git(root, "commit-tree", tree, "-p", sha, "-m", "climbs out")
    git(root, "update-ref", "refs/heads/evil", commit)
    code, out, _ = run("--manifest", f"{url}@evil:manifest.yaml", "lint", "--json")
    assert code == 2, out
    assert "points outside its folder" in json.loads(out)["error"]
    assert not (tmp_path / "cache" / "manifests" / "evil.txt").exists()
    assert _snapshots(tmp_path) == []


@pytest.mark.slow
def test_concurrent_first_fetches_into_one_empty_cache_all_succeed(tmp_path: Path) -> None:
    """Real processes, started together: each imports forkctl, then waits for one signal file, so
    that their first fetches into the empty cache overlap."""
    import subprocess
    import sys
    import time

    toolkit = make_toolkit(tmp_path)
    url, _ = serve(toolkit.root)
    go = tmp_path / "go"
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
        "FORKCTL_CACHE": str(tmp_path / "cache"),
    }
    script = (
        "import os, sys, time; from forkctl.cli import main\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.005)\n"
        f"sys.argv = ['forkctl', '--manifest', {url + '@main:manifest.yaml'!r}, 'status', '--json']\n"
        "main()\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    time.sleep(3)  # every process has imported forkctl and waits
    go.write_text("go\n")
    results = [(proc.wait(timeout=300), *proc.communicate()) for proc in procs]
    failed = [out + err for code, out, err in results if code != 0]
    assert failed == [], failed
    assert len(_snapshots(tmp_path)) == 1


def test_a_fetch_waits_for_another_into_the_same_cache_repository_past_the_lock_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch into a cache repository another run is fetching into waits for it (as long as a fetch
    may take), not only $FORKCTL_LOCK_TIMEOUT: a big first fetch takes minutes."""
    import threading
    import time

    from forkctl import locking
    from forkctl.git import snapshot
    from forkctl.git.clonecache import cache_repo_for

    toolkit = make_toolkit(tmp_path)
    url, sha = serve(toolkit.root)
    monkeypatch.setenv("FORKCTL_LOCK_TIMEOUT", "0.2")
    monkeypatch.setenv("FORKCTL_ALLOW_LOCAL_URLS", "1")  # called directly: no command line names it
    lock = cache_repo_for(url).git_dir / "forkctl-fetch.lock"
    taken = threading.Event()

    def other_fetch() -> None:
        with locking.held(lock, "the other fetch"):
            taken.set()
            time.sleep(1.0)

    other = threading.Thread(target=other_fetch)
    other.start()
    taken.wait(10)
    try:
        assert snapshot.fetch_commit(url, sha).objects.has_object(f"{sha}^{{commit}}")
    finally:
        other.join()
