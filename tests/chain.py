"""A realistic pin chain in tmp dirs, built with the git CLI: upstream -> fork -> Bridge -> NeMo-RL.

- upstream.git: a bare "NVIDIA/Megatron-LM" with commits before and after the manifest base;
- fork.git: a bare fork whose `farai/main` is the reproducible head apply(series, base);
- bridge.git (+ bridge-upstream.git): a Bridge-shaped repo, `3rdparty/Megatron-LM` gitlink pinning the
  plain upstream base with `.gitmodules` naming upstream, as upstream Bridge does today;
- nemo.git: a NeMo-RL-shaped repo, shallow Bridge submodule at
  `3rdparty/Megatron-Bridge-workspace/Megatron-Bridge` plus Automodel and Gym submodules;
- a toolkit (manifest.yaml + patches/) whose URLs are the file:// URLs of those bare remotes.
The servers allow filters and reachable-SHA wants, like GitHub.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from forkctl.git.repo import GitRepo
from forkctl.ops import replay as build
from forkctl.series import parse_patch
from tests.gitrepos import Repo, built_once, git, init_repo
from tests.seriesrepo import build_series

BRIDGE_GITLINK = "3rdparty/Megatron-LM"
NEMO_GITLINK = "3rdparty/Megatron-Bridge-workspace/Megatron-Bridge"
DATE = "2026-03-01T00:00:00+00:00"


def _serve(bare: Path) -> None:
    for key in ("uploadpack.allowFilter", "uploadpack.allowReachableSHA1InWant"):
        git(bare, "config", key, "true")


def bare_clone(source: Path, dest: Path) -> Path:
    git(source.parent, "clone", "-q", "--bare", str(source), str(dest))
    _serve(dest)
    return dest


def url(path: Path) -> str:
    return path.resolve().as_uri()


@dataclass
class Chain:
    tmp: Path
    toolkit: Path
    manifest: Path
    base: str
    base_parent: str  # an upstream commit behind the base
    upstream_tip: str  # upstream main, 2 commits ahead of the base
    head: str  # the reproducible fork head
    upstream: Path  # bare remotes below
    fork: Path
    bridge: Path
    bridge_upstream: Path
    nemo: Path
    bridge_work: Repo
    nemo_work: Repo
    patches: list[Path]

    # --- making variants --------------------------------------------------------------------------

    def fork_work(self) -> Repo:
        """A working clone of the fork (made once) for building hand-made fork branches with git am."""
        path = self.tmp / "fork-work"
        if not path.exists():
            git(self.tmp, "clone", "-q", url(self.fork), str(path))
        return Repo(path)

    def am_branch(
        self, name: str, onto: str, patches: list[Path], extra: dict[str, str] | None = None
    ) -> str:
        """A fork branch built by hand: `git am` of `patches` onto `onto`, an optional extra commit; pushed."""
        work = self.fork_work()
        work.git("checkout", "-q", "--detach", onto)
        for patch in patches:
            work.git("am", "-q", "--keep-non-patch", str(patch))
        if extra:
            work.commit("local: an extra change", extra, date=DATE)
        sha = work.head()
        work.git("push", "-q", "origin", f"HEAD:refs/heads/{name}")
        return sha

    def pin_bridge(
        self, sha: str, url_: str | None = None, push: bool = True, files: dict | None = None
    ) -> str:
        """A Bridge commit on farai/main pinning `sha` (and `.gitmodules` url `url_` if given)."""
        work = self.bridge_work
        if url_:
            work.git("config", "-f", ".gitmodules", f"submodule.{BRIDGE_GITLINK}.url", url_)
        work.git("update-index", "--cacheinfo", f"160000,{sha},{BRIDGE_GITLINK}")
        commit = commit_index(work, f"pin megatron {sha[:8]}", files)
        if push:
            work.git("push", "-q", "origin", "HEAD:refs/heads/farai/main")
        return commit

    def pin_nemo(self, sha: str, url_: str | None = None, push: bool = True) -> str:
        work = self.nemo_work
        if url_:
            work.git("config", "-f", ".gitmodules", f"submodule.{NEMO_GITLINK}.url", url_)
        work.git("update-index", "--cacheinfo", f"160000,{sha},{NEMO_GITLINK}")
        commit = commit_index(work, f"pin bridge {sha[:8]}")
        if push:
            work.git("push", "-q", "origin", "HEAD:refs/heads/farai/main")
        return commit

    def refs(self, bare: Path) -> dict[str, str]:
        out = git(bare, "for-each-ref", "--format=%(refname) %(objectname)")
        return dict(line.split() for line in out.splitlines())


def commit_index(work: Repo, message: str, files: dict[str, str] | None = None) -> str:
    """Commit what the index holds plus `files` (never `add -A`: it would drop uninitialised gitlinks)."""
    if files:
        work.write(files)
        work.git("add", "--", *files)
    work.git("add", "--", ".gitmodules")
    work.git("commit", "-q", "--allow-empty", "-m", message, "--date", DATE)
    return work.head()


def _gitmodules(sections: list[tuple[str, str, dict[str, str]]]) -> str:
    text = ""
    for path, url_, extra in sections:
        text += f'[submodule "{path}"]\n\tpath = {path}\n\turl = {url_}\n'
        text += "".join(f"\t{k} = {v}\n" for k, v in extra.items())
    return text


def _consumer_repo(
    path: Path, files: dict[str, str], modules: list[tuple[str, str, dict[str, str]]], pins: dict[str, str]
) -> Repo:
    repo = init_repo(path, branch="main")
    repo.write({**files, ".gitmodules": _gitmodules(modules)})
    repo.git("add", "-A")
    for gitlink, sha in pins.items():
        repo.git("update-index", "--add", "--cacheinfo", f"160000,{sha},{gitlink}")
    repo.git("commit", "-q", "-m", "initial", "--date", DATE)
    return repo


def make_chain(tmp: Path, consumer_files: int = 5) -> Chain:
    """The whole chain for a test whose tmp dir is `tmp` (the default one is built once per process and
    copied back for each test: tests/gitrepos.py `built_once`); `consumer_files` sets how many plain files
    each consumer has."""
    if consumer_files == 5:
        return built_once(tmp, "chain", _build_chain)
    return _build_chain(tmp, consumer_files)


def _build_chain(tmp: Path, consumer_files: int = 5) -> Chain:
    setup = build_series(tmp)  # built here: the chain's copy holds its own
    upstream_work = setup.upstream
    base = setup.base
    base_parent = upstream_work.head("HEAD~1")
    upstream_work.commit(
        "upstream: after base 1", {"megatron/core/sub/c.py": "C = 4\n"}, date="2026-01-03T00:00:00+00:00"
    )
    upstream_tip = upstream_work.commit(
        "upstream: after base 2", {"megatron/core/sub/d.py": "D = 1\n"}, date="2026-01-04T00:00:00+00:00"
    )
    upstream = bare_clone(upstream_work.path, tmp / "upstream.git")
    fork = bare_clone(upstream, tmp / "fork.git")
    patches = [parse_patch(p) for p in setup.patch_files]
    head = build.build_series(GitRepo(fork), base, patches).head
    git(fork, "update-ref", "refs/heads/farai/main", head)

    # Tiny plain repos for the submodules NeMo-RL carries besides the Bridge.
    others = {}
    for name in ("Automodel", "Gym"):
        work = init_repo(tmp / f"{name.lower()}-work", {"README.md": f"{name}\n"})
        others[name] = (bare_clone(work.path, tmp / f"{name.lower()}.git"), work.head())

    plain = {f"src/bridge/mod{i}.py": f"X = {i}\n" for i in range(consumer_files)}
    bridge_work = _consumer_repo(
        tmp / "bridge-work", plain, [(BRIDGE_GITLINK, url(upstream), {})], {BRIDGE_GITLINK: base}
    )
    bridge_upstream = bare_clone(bridge_work.path, tmp / "bridge-upstream.git")
    bridge = bare_clone(bridge_work.path, tmp / "bridge.git")
    git(bridge, "branch", "farai/main", "main")
    bridge_work.git("remote", "add", "origin", url(bridge))
    bridge_work.git("fetch", "-q", "origin")

    bridge_head = bridge_work.head()
    nemo_plain = {f"nemo_rl/mod{i}.py": f"Y = {i}\n" for i in range(consumer_files)}
    nemo_work = _consumer_repo(
        tmp / "nemo-work",
        nemo_plain,
        [
            (NEMO_GITLINK, url(bridge), {"shallow": "true", "branch": "main"}),
            ("3rdparty/Automodel-workspace/Automodel", url(others["Automodel"][0]), {"shallow": "true"}),
            ("3rdparty/Gym-workspace/Gym", url(others["Gym"][0]), {"shallow": "true"}),
        ],
        {
            NEMO_GITLINK: bridge_head,
            "3rdparty/Automodel-workspace/Automodel": others["Automodel"][1],
            "3rdparty/Gym-workspace/Gym": others["Gym"][1],
        },
    )
    nemo = bare_clone(nemo_work.path, tmp / "nemo.git")
    git(nemo, "branch", "farai/main", "main")
    nemo_work.git("remote", "add", "origin", url(nemo))
    nemo_work.git("fetch", "-q", "origin")

    data = yaml.safe_load(setup.manifest.read_text())
    data["upstream"]["url"] = url(upstream)
    data["fork"]["url"] = url(fork)
    data["consumers"] = [
        {
            "name": "megatron-bridge",
            "upstream": "NVIDIA-NeMo/Megatron-Bridge",
            "upstream_url": url(bridge_upstream),
            "fork": "AlignmentResearch/megatron-bridge-contrib",
            "url": url(bridge),
            "branch": "farai/main",
            "gitlink": BRIDGE_GITLINK,
        },
        {
            "name": "nemo-rl",
            "upstream": "NVIDIA-NeMo/RL",
            "upstream_url": "https://github.com/NVIDIA-NeMo/RL.git",
            "fork": "AlignmentResearch/nemo-rl",
            "url": url(nemo),
            "branch": "farai/main",
            "gitlink": NEMO_GITLINK,
        },
    ]
    setup.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    return Chain(
        tmp=tmp,
        toolkit=setup.root,
        manifest=setup.manifest,
        base=base,
        base_parent=base_parent,
        upstream_tip=upstream_tip,
        head=head,
        upstream=upstream,
        fork=fork,
        bridge=bridge,
        bridge_upstream=bridge_upstream,
        nemo=nemo,
        bridge_work=bridge_work,
        nemo_work=nemo_work,
        patches=setup.patch_files,
    )


def make_fixed_chain(tmp: Path) -> Chain:
    """A chain where every link passes: Bridge pins the fork head (url = fork), NeMo-RL pins that Bridge."""
    return built_once(tmp, "fixed-chain", _build_fixed_chain)


def _build_fixed_chain(tmp: Path) -> Chain:
    chain = _build_chain(tmp)
    bridge_sha = chain.pin_bridge(chain.head, url(chain.fork))
    chain.pin_nemo(bridge_sha)
    return chain


def use_private_cache(tmp_path: Path, monkeypatch) -> None:
    """A check-pins test's cache and working folder: its own tmp dir (never the user's cache)."""
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def check_pins_json(chain: Chain) -> tuple[int, dict]:
    """`forkctl --manifest M check-pins --json` in process: (exit code, the report)."""
    import json

    from click.testing import CliRunner

    from forkctl.cli import cli

    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins", "--json"])
    return result.exit_code, json.loads(result.stdout)


def forkctl_json(chain: Chain, *args: str) -> tuple[int, dict]:
    """`forkctl --manifest M ARGS --json` in process: (exit code, the report)."""
    import json

    from click.testing import CliRunner

    from forkctl.cli import cli

    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), *args, "--json"])
    return result.exit_code, json.loads(result.stdout)
