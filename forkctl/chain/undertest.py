"""The commit under test (`check-pins --under-test`): which consumer a local repository is, and the
sources that check it from that commit down to the fork head, nothing above or beside it.

A consumer's pull request is judged on the pins its commit makes: its gitlink, its `.gitmodules` URL,
the reachability of what it pins, and recursively the commit it pins; never another consumer's branch
head (a NeMo-RL pull request must not fail because the Bridge's branch is broken). The repository is
recognised by its gitlinks (read from the commit object: shallow clones and uninitialised submodules
are fine) and by its remotes' URLs.
"""

from __future__ import annotations

from pathlib import Path

from forkctl import git
from forkctl.chain.sources import Source, parse_location
from forkctl.errors import BadInput
from forkctl.git import GitRepo, remote
from forkctl.manifest import Manifest

HERE = "HERE"  # the repository containing the current directory


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
    if not manifest.consumers:
        raise BadInput("the manifest lists no consumers", hint="add consumers: to manifest.yaml")
    path, rev = split_under_test(value, cwd)
    root = git.toplevel(path.resolve())
    if root is None:
        raise BadInput(
            f"{path} is not inside a git working tree", hint="run it in a clone, or give --under-test PATH"
        )
    repo = GitRepo(root)
    commit = repo.resolve_commit(rev or "HEAD")
    if commit is None:
        raise BadInput(
            f"{root}: {(rev or 'HEAD')!r} is not a commit", hint="give PATH@REV with an existing rev"
        )
    index = which_consumer(manifest, repo, commit, as_name)
    consumers = manifest.consumers
    label = f"{rev or 'HEAD'} of {root}, under test"
    return [Source(c) for c in consumers[:index]] + [
        Source(consumers[index], local=root, rev=commit, label=label)
    ], index


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
    entries = repo.tree_entries(commit, [c.gitlink for c in consumers])
    modules = git.sections_for_recognising(repo, commit)
    paths = {m.path for m in modules} | {p for p, e in entries.items() if e.kind == "commit"}
    by_gitlink = {i for i, c in enumerate(consumers) if c.gitlink in paths}
    urls = repo.remote_urls()
    by_url = {
        i
        for i, c in enumerate(consumers)
        for u in urls
        if remote.same_repo(u, c.url) or (c.upstream_url and remote.same_repo(u, c.upstream_url))
    }
    candidates = (by_gitlink & by_url) or by_gitlink or by_url
    if len(candidates) == 1:
        return candidates.pop()
    shown = ", ".join(names[i] for i in sorted(candidates)) if candidates else ""
    what = (
        f"could be any of the consumers {shown}"
        if candidates
        else f"is none of the manifest's consumers ({', '.join(names)}): it holds none of their "
        "gitlinks and no remote names their URLs"
    )
    raise BadInput(
        f"{repo.path} at {commit[:12]} {what}",
        hint="name it: --under-test PATH --as NAME (NAME one of: " + ", ".join(names) + ")",
    )
