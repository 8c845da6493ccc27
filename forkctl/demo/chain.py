"""The demo: the whole pin-chain story, offline, on a chain built from the installed megatron-core.

`build_chain` makes, under one folder: a synthetic upstream whose base commit is the installed package's
`megatron/` tree (fixed identity and date, so the same package gives the same SHA), the fork built from
it by the apply core and pushed to `farai/main`, a Bridge-shaped consumer that pins the plain upstream
base (as upstream Bridge does today) in its gitlink and in the pin files the manifest names (the Bridge's
`.main.commit`), a NeMo-RL-shaped consumer with the shallow Bridge submodule plus
Automodel and Gym, and a toolkit (the real manifest, URLs rewritten to those bare remotes, the real patch
series). `run_flow` then does what a maintainer does: check-pins (the mismatch), bump-bridge --through
the last consumer --push, check-pins on the bumped branches (passes). Everything runs through the same
cores as the commands; the user's repositories and ~/.cache/forkctl are never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import yaml

from forkctl import manifest as manifest_mod
from forkctl.chain import pinrecords
from forkctl.chain.bump import BumpPlan, BumpStep, apply_step, plan_bump, push_steps
from forkctl.chain.checks import check_chain
from forkctl.chain.forkhead import ForkContext, fork_context
from forkctl.chain.model import ChainResult, Progress
from forkctl.chain.sources import Source
from forkctl.demo.package import Installed
from forkctl.errors import BadInput
from forkctl.files import atomic_write_text
from forkctl.git import remote
from forkctl.git.commits import Identity
from forkctl.git.repo import GitRepo
from forkctl.git.sha import Sha, TreeSha
from forkctl.manifest import Manifest, plain
from forkctl.ops import apply, replay
from forkctl.series import load_series

if TYPE_CHECKING:
    from forkctl.git.index import Indexes

# Fixed identities and dates: the demo's commits (bumps included) are the same on every machine.
UPSTREAM_ID = Identity("Megatron-LM (demo upstream)", "upstream@demo.invalid", "2026-08-08T00:00:00+00:00")
CONSUMER_ID = Identity("forkctl demo", "demo@forkctl.invalid", "2026-08-09T00:00:00+00:00")
# The demo's consumers when the manifest lists fewer than two: neutral names; a manifest's own win.
DEFAULT_CONSUMERS: list[dict[str, str]] = [
    {
        "name": "consumer-1",
        "upstream": "example/consumer-1",
        "upstream_url": "https://example.invalid/consumer-1.git",
        "fork": "example/consumer-1-fork",
        "branch": "main",
        "gitlink": "3rdparty/upstream",
    },
    {
        "name": "consumer-2",
        "upstream": "example/consumer-2",
        "upstream_url": "https://example.invalid/consumer-2.git",
        "fork": "example/consumer-2-fork",
        "branch": "main",
        "gitlink": "3rdparty/consumer-1",
    },
]


# --- an isolated environment for the demo's git and cache ------------------------------------------


@contextlib.contextmanager
def isolated_environment(root: Path) -> Iterator[None]:
    """Point the cache and git's config at `root` for the duration, then restore the environment.

    The user's git config could sign commits, rewrite URLs or lack an identity; the demo's bump commits
    need one fixed identity and date to be reproducible.
    """
    config = root / "gitconfig"
    config.write_text(
        f"[user]\n\tname = {CONSUMER_ID.name}\n\temail = {CONSUMER_ID.email}\n"
        '[init]\n\tdefaultBranch = main\n[protocol "file"]\n\tallow = always\n'
    )
    wanted = {
        "FORKCTL_CACHE": str(root / "cache"),
        "GIT_CONFIG_GLOBAL": str(config),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": CONSUMER_ID.name,
        "GIT_AUTHOR_EMAIL": CONSUMER_ID.email,
        "GIT_AUTHOR_DATE": CONSUMER_ID.date,
        "GIT_COMMITTER_NAME": CONSUMER_ID.name,
        "GIT_COMMITTER_EMAIL": CONSUMER_ID.email,
        "GIT_COMMITTER_DATE": CONSUMER_ID.date,
    }
    dropped = ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE")
    saved = {key: os.environ.get(key) for key in (*wanted, *dropped)}
    os.environ.update(wanted)
    for key in dropped:
        os.environ.pop(key, None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# --- building the chain ----------------------------------------------------------------------------


class DemoChain(msgspec.Struct):
    root: Path
    package: Installed
    toolkit: Path
    manifest: Manifest
    base: str
    fork_head: str  # built by the apply core and pushed to the fork's branch
    remotes: dict[str, Path] = msgspec.field(default_factory=dict)  # upstream, fork, <consumer names>, ...


def _serve(path: Path) -> GitRepo:
    """A bare repository that answers like GitHub: partial clones and fetches of reachable SHAs."""
    repo = GitRepo.init_bare(path)
    repo.refs.set_head("refs/heads/main")
    for key in ("uploadpack.allowFilter", "uploadpack.allowReachableSHA1InWant"):
        repo.set_config(key, "true")
    return repo


def _url(path: Path) -> str:
    return path.resolve().as_uri()


def _snapshot(indexes: Indexes, files: dict[str, str], scratch: Path) -> TreeSha:
    """A tree holding `files` (path -> text), written through a scratch folder."""
    if scratch.exists():
        shutil.rmtree(scratch)
    for rel, text in files.items():
        target = scratch / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return indexes.tree_from_directory(scratch)


def _with_gitlinks(indexes: Indexes, tree: TreeSha, gitlinks: dict[str, str]) -> TreeSha:
    with indexes.private_index(tree) as index:
        for path, sha in gitlinks.items():
            index.set_entry("160000", sha, path)
        return index.write_tree()


def _gitmodules(sections: list[tuple[str, str, dict[str, str]]]) -> str:
    text = ""
    for path, url, extra in sections:
        text += f'[submodule "{path}"]\n\tpath = {path}\n\turl = {url}\n'
        text += "".join(f"\t{key} = {value}\n" for key, value in extra.items())
    return text


def _publish(repo: GitRepo, tree: TreeSha, message: str, identity: Identity, branches: list[str]) -> Sha:
    commit = repo.commits.commit_tree(tree, [], message, identity)
    for branch in branches:
        repo.refs.update_ref(f"refs/heads/{branch}", commit, None, "demo")
    return commit


def _make_upstream(root: Path, package: Installed, progress: Progress) -> tuple[Path, Sha]:
    """upstream.git whose `main` is one commit: the installed package's tree (bytecode left out)."""
    source = root / "src"
    progress(f"copying {package.folder} into a new upstream repository")
    shutil.copytree(
        package.folder, source / package.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    path = root / "upstream.git"
    repo = _serve(path)
    tree = repo.indexes.tree_from_directory(source)
    shutil.rmtree(source)
    version = package.version or "unknown version"
    message = f"{package.distribution or package.name} {version}, as installed (forkctl demo base)\n"
    return path, _publish(repo, tree, message, UPSTREAM_ID, ["main"])


def _tiny_repo(root: Path, name: str) -> tuple[Path, str]:
    path = root / f"{name.lower()}.git"
    repo = _serve(path)
    tree = _snapshot(repo.indexes, {"README.md": f"{name} (demo)\n"}, root / "scratch")
    return path, _publish(repo, tree, f"{name}: initial\n", CONSUMER_ID, ["main"])


def _consumer_entries(manifest_data: dict[str, Any]) -> list[dict[str, Any]]:
    """The real manifest's first two consumers (names, branches, gitlinks, pin files), defaults where
    missing."""
    real = manifest_data.get("consumers") or []
    entries = []
    for index, default in enumerate(DEFAULT_CONSUMERS):
        given = real[index] if index < len(real) and isinstance(real[index], dict) else {}
        entry: dict[str, Any] = {
            **default,
            **{k: str(v) for k, v in given.items() if k in default and v is not None},
        }
        if given.get("pin_files"):  # the consumer's other records of its pin (the Bridge's .main.commit)
            entry["pin_files"] = given["pin_files"]
        entries.append(entry)
    return entries


def _write_toolkit(
    root: Path, real: Manifest, base: str, urls: dict[str, str], consumers: list[dict[str, Any]]
) -> Path:
    """toolkit/: the real manifest pointed at the demo remotes, and the real patch files."""
    toolkit = root / "toolkit"
    data = yaml.safe_load(real.path.read_text(encoding="utf-8"))
    data["upstream"]["url"] = urls["upstream"]
    data["upstream"]["base"] = base
    data["fork"]["url"] = urls["fork"]
    data["consumers"] = [{**entry, "url": urls[entry["name"]]} for entry in consumers]
    data["dropped"] = []  # the real drops name real upstream commits, which this upstream lacks
    for entry in real.series:
        target = toolkit / entry.file
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(real.root / entry.file, target)
    path = toolkit / manifest_mod.MANIFEST_NAME
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))
    return path


def _build_fork(root: Path, manifest: Manifest, upstream: Path, base: Sha, package: Installed) -> str:
    """apply(series, base) by the apply core in a work repository, pushed to fork.git farai/main."""
    series = load_series(manifest)
    work = _serve(root / "fork-work.git")
    remote.push_branch(GitRepo(upstream), _url(work.git_dir), base, "main")
    failures = [
        (p, msg) for p, msg in replay.check_series(work.indexes, base, series.patches) if msg is not None
    ]
    if failures:
        patch, message = failures[0]
        first_line = message.splitlines()[0] if message else "does not apply"
        raise BadInput(
            f"the real patch series does not apply to the installed {package.distribution or package.name} "
            f"{package.version or '(unknown version)'} at {package.folder}: {len(failures)} of "
            f"{len(series.patches)} patches fail, first {patch.path.name}: {first_line}",
            hint=f"the demo needs the release the series targets ({manifest.package.requirement or 'see package: in the manifest'}, "
            "what make setup installs); or port the series (forkctl port) and try again",
        )
    outcome = apply.start(work, manifest, series, base, manifest.fork.branch, force=False)
    if outcome.conflict is not None:  # check_series said it applies; a conflict here is a bug
        raise BadInput(f"the apply core stopped at {outcome.conflict}")
    head = outcome.state.head
    fork_url = manifest.fork.url
    remote.push_branch(work, fork_url, base, manifest.fork.mirror_branch)
    remote.push_branch(work, fork_url, head, manifest.fork.branch)
    return head


def _make_bridge(
    root: Path,
    manifest: Manifest,
    real: Manifest,
    path: Path,
    upstream_url: str,
    base: str,
    progress: Progress,
) -> str:
    """The Bridge-shaped consumer: one commit pinning the plain upstream `base` in its gitlink and in
    each pin file the manifest names (as the real Bridge keeps `.main.commit` beside the gitlink), its
    `.gitmodules` naming upstream. Returns that commit."""
    consumer = manifest.consumers[0]
    progress(
        f"{consumer.name}: pins the plain upstream base at {consumer.gitlink}"
        + "".join(f" and in {pin_file.path}" for pin_file in consumer.pin_files)
        + ", .gitmodules names upstream"
    )
    repo = _serve(path)
    files = {
        "README.md": f"{consumer.name} (demo consumer)\n",
        ".gitmodules": _gitmodules([(consumer.gitlink, upstream_url, {})]),
        **{
            pin_file.path: pinrecords.render(pin_file, base).decode("ascii")
            for pin_file in consumer.pin_files
        },
    }
    tree = _snapshot(repo.indexes, files, root / "scratch")
    tree = _with_gitlinks(repo.indexes, tree, {consumer.gitlink: base})
    message = f"{consumer.name}: pin {real.upstream.repo} {real.upstream.branch}\n"
    return _publish(repo, tree, message, CONSUMER_ID, ["main", consumer.branch])


def build_chain(root: Path, real: Manifest, package: Installed, progress: Progress) -> DemoChain:
    """Every repository of the demo under `root` (which must be empty); see the module docstring."""
    upstream, base = _make_upstream(root, package, progress)
    progress(
        f"upstream base {base[:12]} = {package.distribution or package.name} {package.version or '?'} ({upstream})"
    )
    consumers = _consumer_entries(plain(real.model))
    bridge, nemo = consumers
    paths = {"upstream": upstream, "fork": root / "fork.git"}
    _serve(paths["fork"])
    paths[bridge["name"]] = root / "bridge.git"
    paths[nemo["name"]] = root / "nemo-rl.git"
    urls = {name: _url(path) for name, path in paths.items()}
    toolkit_manifest = _write_toolkit(root, real, base, urls, consumers)
    manifest = manifest_mod.load(toolkit_manifest)

    progress(
        f"building the fork: apply({len(manifest.series)} patches, {base[:12]}) -> {manifest.fork.branch}"
    )
    head = _build_fork(root, manifest, upstream, base, package)

    bridge_head = _make_bridge(root, manifest, real, paths[bridge["name"]], urls["upstream"], base, progress)

    others = {path: _tiny_repo(root, path.rsplit("/", 1)[-1]) for path in real.demo.other_submodules}
    progress(
        f"{nemo['name']}: pins {bridge['name']}@{bridge_head[:12]} (shallow)"
        + (f" plus {', '.join(p.rsplit('/', 1)[-1] for p in others)}" if others else "")
    )
    nemo_repo = _serve(paths[nemo["name"]])
    sections = [(nemo["gitlink"], urls[bridge["name"]], {"shallow": "true", "branch": "main"})]
    sections += [(path, _url(repo_path), {"shallow": "true"}) for path, (repo_path, _) in others.items()]
    files = {
        "README.md": f"{nemo['name']} (demo consumer)\n",
        ".gitmodules": _gitmodules(sections),
    }
    tree = _snapshot(nemo_repo.indexes, files, root / "scratch")
    gitlinks = {nemo["gitlink"]: bridge_head, **{path: sha for path, (_, sha) in others.items()}}
    tree = _with_gitlinks(nemo_repo.indexes, tree, gitlinks)
    _publish(
        nemo_repo, tree, f"{nemo['name']}: pin {bridge['name']}\n", CONSUMER_ID, ["main", nemo["branch"]]
    )
    shutil.rmtree(root / "scratch", ignore_errors=True)
    return DemoChain(root, package, toolkit_manifest.parent, manifest, base, head, paths)


# --- the flow: check, bump, check ------------------------------------------------------------------


class Flow(msgspec.Struct):
    fork: ForkContext
    first: ChainResult
    steps: list[BumpStep]
    bump_check: ChainResult
    final: ChainResult
    branch: str


def bump_and_push(
    manifest: Manifest, fork: ForkContext, progress: Progress, note: list[str] | None = None
) -> BumpPlan:
    """bump-bridge --through <last consumer> --push, through the chain core: plan every consumer's
    commit, check the planned chain (it must pass), then create and push the branches (never forced).
    `note`: the override the bump commits carry (the demo's series has no GPU evidence: --no-gate)."""
    plan = plan_bump(manifest, fork, len(manifest.consumers) - 1, {}, progress, note=note)
    if plan.check.ok:
        for step in plan.steps:
            apply_step(step)
        push_steps(plan.steps, progress)
    return plan


def run_flow(chain: DemoChain, progress: Progress, note: list[str] | None = None) -> Flow:
    """check-pins, bump-bridge --push (its commits carrying `note`), check-pins on the bumped branches."""
    manifest = chain.manifest
    fork = fork_context(manifest, None, progress)
    if fork.head != chain.fork_head:  # two builds of one function must agree, or nothing else matters
        raise BadInput(
            f"check-pins built {fork.head[:12]} but the apply core built {chain.fork_head[:12]}",
            hint="apply(series, base) is not reproducible here: report this as a forkctl bug",
        )
    progress("step 1: check-pins on the consumers' branches as they are")
    first = check_chain(manifest, [Source(c) for c in manifest.consumers], progress=progress, fork=fork)
    flag = " --no-gate" if note else ""
    progress(f"step 2: bump-bridge --through {manifest.consumers[-1].name} --push{flag}")
    plan = bump_and_push(manifest, fork, progress, note)
    if not plan.check.ok:
        return Flow(fork, first, plan.steps, plan.check, plan.check, plan.branch)
    progress(f"step 3: check-pins on the pushed {plan.branch} branches")
    bumped = [Source(c, rev=plan.branch) for c in manifest.consumers]
    final = check_chain(manifest, bumped, progress=progress, fork=fork)
    return Flow(fork, first, plan.steps, plan.check, final, plan.branch)
