"""A repository object owns its answers: the git layer keeps nothing at module level, a cache repository
is one object while a command holds it, its facts are written when it is dropped (whoever used it: the
CLI, a bench, a library caller), and its objects are read through one `cat-file --batch`."""

from __future__ import annotations

import ast
import gc
import json
import subprocess
import weakref
from pathlib import Path

import pytest

from forkctl.git import clonecache, locations
from forkctl.git.batch import ObjectReader
from forkctl.git.facts import FILE
from forkctl.git.repo import GitRepo
from tests.gitrepos import git, init_repo
from tests.gitshim import make_git_shim

GIT_LAYER = Path(__file__).resolve().parents[1] / "forkctl" / "git"


def _module_level_containers(source: str) -> list[str]:
    """Names bound at module level to a mutable container (a dict, set or list display or call)."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            called = isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            mutable = isinstance(value, (ast.Dict, ast.Set, ast.List)) or (
                called and value.func.id in ("dict", "set", "list", "memo")  # memo(): the old runmemo's
            )
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if mutable and names != ["__all__"]:
                found += names
    return found


def test_the_git_layer_keeps_no_answers_at_module_level() -> None:
    """What git answered lives on the repository object that asked: no module of forkctl/git holds a
    dict, set or list at module level that a command could leave behind for the next one."""
    held = {
        path.name: names
        for path in sorted(GIT_LAYER.glob("*.py"))
        if (names := _module_level_containers(path.read_text()))
    }
    assert held == {}


def test_a_cache_repository_is_one_object_while_it_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    init_repo(tmp_path / "upstream", {"a.txt": "1\n"})
    url = (tmp_path / "upstream").as_uri()
    first = clonecache.cache_repo_for(url)
    assert clonecache.cache_repo_for(url) is first  # the same answers for everyone who asks now
    first.present.add("kept")
    del first
    gc.collect()
    assert "kept" not in clonecache.cache_repo_for(url).present  # dropped: the next user asks afresh


def test_a_cache_repository_writes_its_facts_when_dropped_outside_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library caller (a bench, a tool driving the core) that never runs the CLI still keeps what the
    cache learnt: the facts are the repository object's, written when it is dropped."""
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    upstream = init_repo(tmp_path / "upstream", {"a.txt": "1\n"})
    url = (tmp_path / "upstream").as_uri()
    with locations.named_by_user([url]):  # called directly: the test is the user who names it
        cache = clonecache.cache_repo_for(url)
        clonecache.fetch_history(cache, url)
        head = upstream.head()
        assert set(cache.objects.tree_entries(head, ["a.txt"])) == {"a.txt"}
        facts_file = cache.git_dir / FILE
        assert not facts_file.exists()
        del cache
        gc.collect()
    # A contentcache entry: a header, an empty line, the payload.
    recorded = json.loads(facts_file.read_bytes().partition(b"\n\n")[2])
    assert any(key.startswith(f"tree {head}") for key in recorded)


def test_object_reads_of_one_repository_start_one_git_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Budget: reading many blobs (a snapshot, the `.gitmodules` of every link) costs one git process,
    not one each (measured 2026-12-02 on this 2-core machine: 2.4 ms per `cat-file blob` process)."""
    repo_dir = tmp_path / "repo"
    files = {f"f{i}.txt": f"{i}\n" for i in range(20)}
    init_repo(repo_dir, files)
    blobs = {name: git(repo_dir, "rev-parse", f"HEAD:{name}") for name in files}
    shim = make_git_shim(tmp_path)
    monkeypatch.setenv("PATH", shim.env()["PATH"])
    repo = GitRepo(repo_dir)
    shim.reset()
    read = {name: repo.objects.blob_bytes(blob).decode() for name, blob in blobs.items()}
    assert read == files
    assert shim.calls() == ["cat-file"]


def test_the_reader_fetches_a_missing_blob_as_cat_file_blob_did_and_goes_on_when_it_cannot(
    tmp_path: Path,
) -> None:
    """A read in a partial clone fetches the blob it lacks from the promisor remote (as `git cat-file
    blob` does); when that fails (the server is gone), git 2.39's `cat-file --batch` ends: the reader
    says "not here" for it and reads the next object with a new process."""
    server = init_repo(tmp_path / "server", {"small.txt": "here\n", "big.txt": "x" * 5000 + "\n"})
    git(server.path, "config", "uploadpack.allowFilter", "true")
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", "--bare", "--filter=blob:limit=1k", server.path.as_uri(), str(clone)],
        check=True,
    )
    big = git(server.path, "rev-parse", "HEAD:big.txt")
    small = git(server.path, "rev-parse", "HEAD:small.txt")
    bigger = init_repo(tmp_path / "elsewhere", {"big2.txt": "y" * 5000 + "\n"})
    reader = ObjectReader(clone)
    try:
        assert reader.read(big) == ("blob", b"x" * 5000 + b"\n")  # fetched lazily from the server
        server.path.rename(tmp_path / "server-gone")
        assert reader.read(git(bigger.path, "rev-parse", "HEAD:big2.txt")) is None
        assert reader.read(small) == ("blob", b"here\n")
        assert reader.read("0" * 40) is None
        assert reader.read(small) == ("blob", b"here\n")
    finally:
        reader.close()
    assert git(clone, "cat-file", "-t", small) == "blob"


def test_a_blob_that_is_not_here_is_a_git_failure(tmp_path: Path) -> None:
    from forkctl.git.runner import GitFailed

    init_repo(tmp_path / "repo", {"a.txt": "1\n"})
    repo = GitRepo(tmp_path / "repo")
    with pytest.raises(GitFailed, match="no blob"):
        repo.objects.blob_bytes("1" * 40)
    tree = git(tmp_path / "repo", "rev-parse", "HEAD^{tree}")
    with pytest.raises(GitFailed, match="no blob"):  # a tree is no blob
        repo.objects.blob_bytes(tree)
    assert repo.objects.read_blob("HEAD", "a.txt") == b"1\n"


def test_the_reader_sees_objects_an_alternate_added_after_it_started(tmp_path: Path) -> None:
    """A cache names a local clone as an alternate when a command first needs it (`store`): the
    repository's reader, started earlier for other reads (a port's trees), must read a blob that only
    that alternate holds, as a fresh `cat-file` would (sync read the fork's files this way)."""
    init_repo(tmp_path / "a", {"a.txt": "1\n"})
    init_repo(tmp_path / "b", {"b.txt": "only in b\n"})
    blob = git(tmp_path / "b", "rev-parse", "HEAD:b.txt")
    repo = GitRepo(tmp_path / "a")
    assert repo.objects.read_blob("HEAD", "a.txt") == b"1\n"  # the reader runs now
    info = tmp_path / "a" / ".git" / "objects" / "info"
    info.mkdir(exist_ok=True)
    (info / "alternates").write_text(f"{tmp_path / 'b' / '.git' / 'objects'}\n")
    assert repo.objects.blob_bytes(blob) == b"only in b\n"


def test_a_dropped_repository_closes_its_reader_without_waiting_for_the_collector(tmp_path: Path) -> None:
    """A part (`repo.objects`, `repo.trees`, ...) holds its repository and the repository holds no part
    (each is made on access): no reference cycle keeps a dropped repository, and its `cat-file --batch`,
    alive until the garbage collector runs."""
    init_repo(tmp_path / "repo", {"a.txt": "1\n"})
    repo = GitRepo(tmp_path / "repo")
    assert repo.objects.read_blob("HEAD", "a.txt") == b"1\n"
    assert repo.trees.commit_tree_id("HEAD")  # a part built on sibling parts
    reader = repo.reader
    assert reader is not None and reader._proc is not None
    held = weakref.ref(repo)
    gc.disable()
    try:
        del repo
        assert held() is None
        assert reader._proc is None  # closed by the repository's finaliser
    finally:
        gc.enable()
