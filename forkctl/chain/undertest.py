"""The commit under test (`check-pins --under-test`, and check-pins' default in a consumer checkout):
which consumer a local repository is, and the sources that check it from that commit down to the fork
head, nothing above or beside it.

A consumer's pull request, or a push from a consumer clone (the pre-push hook), is judged on the pins
its commit makes: its gitlink, its `.gitmodules` URL, the reachability of what it pins, and recursively
the commit it pins; never another consumer's branch head (a NeMo-RL pull request must not fail because
the Bridge's branch is broken). The repository is recognised by its gitlinks (read from the commit
object: shallow clones and uninitialised submodules are fine) and by its remotes' URLs.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from forkctl.chain.sources import Source, parse_location
from forkctl.errors import BadInput
from forkctl.git import remote
from forkctl.git.repo import GitRepo, checkout_at, toplevel
from forkctl.git.sha import is_full_sha
from forkctl.manifest import Manifest

HERE = "HERE"  # the repository containing the current directory


class Here(msgspec.Struct, frozen=True):
    """The repository check-pins runs in, as the default start: the consumer it is (`index`, with the
    commit to judge), or None and the reason it is none."""

    index: int | None
    why: str  # how it was recognised, or why it is no consumer: said in the report either way
    root: Path | None = None
    commit: str | None = None


def split_under_test(value: str, cwd: Path) -> tuple[Path, str | None]:
    """`HERE`, `HERE@REV`, `PATH` or `PATH@REV` -> (a path inside the repository, rev)."""
    head, at, rev = value.partition("@")
    if head == HERE:
        return cwd, (rev or None) if at else None
    local, rev_, _url = parse_location(value)
    if local is None:
        raise BadInput(
            f"--under-test {value!r} is a URL; the commit under test is read from a local clone",
            hint="give the clone's path (PATH or PATH@REV), or HERE for the repository you are in",
        )
    return local, rev_


def under_test_sources(
    manifest: Manifest, value: str, as_name: str | None, cwd: Path
) -> tuple[list[Source], int]:
    """(sources, index of the consumer under test): the consumers below it from their manifest URLs
    (only ever read at the commits pinned), and the commit under test from the local clone."""
    _need_consumers(manifest)
    path, rev = split_under_test(value, cwd)
    root = toplevel(path.resolve())
    if root is None:
        raise BadInput(
            f"{path} is not inside a git working tree", hint="run it in a clone, or give --under-test PATH"
        )
    repo = GitRepo(root)
    commit = repo.objects.resolve_commit(rev or "HEAD")
    if commit is None:
        raise BadInput(
            f"{root}: {(rev or 'HEAD')!r} is not a commit", hint="give PATH@REV with an existing rev"
        )
    index = which_consumer(manifest, repo, commit, as_name)
    return sources_from(manifest, index, root, commit, rev or "HEAD"), index


def sources_from(manifest: Manifest, index: int, root: Path, commit: str, rev: str) -> list[Source]:
    """The sources that judge `commit` of the clone at `root` as consumer `index`, and nothing above it."""
    consumers = manifest.consumers
    label = f"{rev} of {root}, under test"
    return [Source(c) for c in consumers[:index]] + [
        Source(consumers[index], local=root, rev=commit, label=label)
    ]


def consumer_here(manifest: Manifest, cwd: Path, as_name: str | None, pushed: str | None = None) -> Here:
    """Is the repository holding `cwd` one of the manifest's consumers? By `--as NAME`, else by the
    gitlinks its commit holds and the URLs its remotes name (as `--under-test HERE` decides). Neither
    says one: not a consumer (the caller checks the consumers' branches and says why). Several:
    BadInput, since guessing one could judge the wrong chain. The commit is HEAD, or `pushed` (the
    full SHA a pre-push hook is given) when that is set."""
    _need_consumers(manifest)
    found = checkout_at(cwd)
    repo, head = found if found is not None else (None, None)
    if repo is not None and pushed is not None:
        head = _pushed_commit(repo, pushed)
    why = f"{cwd} is not inside a git working tree" if repo is None else f"{repo.path} has no commit yet"
    if repo is None or head is None:
        if as_name is not None:
            raise BadInput(
                f"--as {as_name} names the consumer under test, but {why}",
                hint="run it in that consumer's clone, or give --under-test PATH --as NAME",
            )
        return Here(None, why, root=repo.path if repo else None)
    names = [c.name for c in manifest.consumers]
    if as_name is not None:
        index = which_consumer(manifest, repo, head, as_name)
        return Here(index, f"--as {as_name}", root=repo.path, commit=head)
    by_gitlink, by_url = _recognised(manifest, repo, head)
    candidates = (by_gitlink & by_url) or by_gitlink or by_url
    if not candidates:
        return Here(None, f"{repo.path} {_none_of(names)}", root=repo.path)
    if len(candidates) > 1:
        raise BadInput(
            f"{repo.path} at {head[:12]} could be any of the consumers "
            + ", ".join(names[i] for i in sorted(candidates)),
            hint="name it with --as NAME (one of: " + ", ".join(names) + "), or check every consumer's "
            "branch with --branches",
        )
    (index,) = candidates
    how = [
        *([f"its gitlink {manifest.consumers[index].gitlink}"] if index in by_gitlink else []),
        *(["a remote naming its URL"] if index in by_url else []),
    ]
    return Here(index, "recognised by " + " and ".join(how), root=repo.path, commit=head)


def _pushed_commit(repo: GitRepo, pushed: str) -> str:
    """The commit being pushed, as pre-commit names it ($PRE_COMMIT_TO_REF): a full SHA this clone holds."""
    commit = repo.objects.resolve_commit(pushed) if is_full_sha(pushed) else None
    if commit is None:
        raise BadInput(
            f"the commit being pushed ({pushed!r}, from $PRE_COMMIT_TO_REF) is not a commit of {repo.path}",
            hint="run the hook from the clone that pushes, or unset PRE_COMMIT_TO_REF to judge HEAD",
        )
    return commit


def which_consumer(manifest: Manifest, repo: GitRepo, commit: str, as_name: str | None) -> int:
    """The index of the consumer `repo` is: `--as NAME`, else the one whose gitlink the commit holds
    and/or whose url (or upstream_url) a remote of the clone names. None or several: BadInput."""
    consumers = manifest.consumers
    names = [c.name for c in consumers]
    if as_name is not None:
        if as_name not in names:
            raise BadInput(
                f"--as {as_name!r} is not a consumer of the manifest", hint=f"one of: {', '.join(names)}"
            )
        return names.index(as_name)
    by_gitlink, by_url = _recognised(manifest, repo, commit)
    candidates = (by_gitlink & by_url) or by_gitlink or by_url
    if len(candidates) == 1:
        return candidates.pop()
    shown = ", ".join(names[i] for i in sorted(candidates)) if candidates else ""
    what = f"could be any of the consumers {shown}" if candidates else _none_of(names)
    raise BadInput(
        f"{repo.path} at {commit[:12]} {what}",
        hint="name it: --under-test PATH --as NAME (NAME one of: " + ", ".join(names) + ")",
    )


def _recognised(manifest: Manifest, repo: GitRepo, commit: str) -> tuple[set[int], set[int]]:
    """(consumers whose gitlink `commit` holds, consumers whose url or upstream_url a remote names)."""
    consumers = manifest.consumers
    entries = repo.objects.tree_entries(commit, [c.gitlink for c in consumers])
    modules = repo.submodules.sections_for_recognising(commit)
    paths = {m.path for m in modules} | {p for p, e in entries.items() if e.kind == "commit"}
    by_gitlink = {i for i, c in enumerate(consumers) if c.gitlink in paths}
    urls = repo.remote_urls()
    by_url = {
        i
        for i, c in enumerate(consumers)
        for u in urls
        if remote.same_repo(u, c.url) or (c.upstream_url and remote.same_repo(u, c.upstream_url))
    }
    return by_gitlink, by_url


def _none_of(names: list[str]) -> str:
    return (
        f"is none of the manifest's consumers ({', '.join(names)}): it holds none of their "
        "gitlinks and no remote names their URLs"
    )


def _need_consumers(manifest: Manifest) -> None:
    if not manifest.consumers:
        raise BadInput("the manifest lists no consumers", hint="add consumers: to manifest.yaml")
