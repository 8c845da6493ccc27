"""What a consumer commit declares at the manifest's gitlink path, read as a fresh recursive clone reads
it: a gitlink there (a folder or file there, or a submodule found only elsewhere, is a finding), the
`.gitmodules` section git uses for that path (the last one claiming it), its URL and its `update` mode.
"""

from __future__ import annotations

import re
import shlex

import msgspec

from forkctl.chain.model import LinkResult, Status
from forkctl.chain.sources import CloneOrCache, Source
from forkctl.git import remote
from forkctl.git.objects import Objects, TreeEntry
from forkctl.git.repo import GitRepo
from forkctl.git.submodules import GitmodulesSyntax, SubmoduleEntry, gitmodules_key_lines
from forkctl.manifest import Consumer, Manifest


class PinTarget(msgspec.Struct, frozen=True):
    """What a consumer's gitlink must pin: the fork (nearest consumer), else the previous consumer."""

    name: str  # "fork", or the previous consumer's name
    url: str
    upstream_url: str | None
    likely: tuple[str, ...]  # the branches a pin is usually on (asked first for reachability)


def pin_target(manifest: Manifest, sources: list[Source], index: int) -> PinTarget:
    if index == 0:
        fork = manifest.fork
        return PinTarget("fork", fork.url, manifest.upstream.url, (fork.branch, fork.mirror_branch))
    previous = sources[index - 1].consumer
    return PinTarget(previous.name, previous.url, previous.upstream_url, (previous.branch,))


def declared_modules(
    objects: CloneOrCache, repo: GitRepo, entry: TreeEntry | None, link: LinkResult
) -> list[SubmoduleEntry] | None:
    """The sections of the commit's `.gitmodules` (its tree `entry`; None: it has none), or None with
    a finding when a fresh recursive clone fails on the file itself: git refuses to check out a
    `.gitmodules` that is a symbolic link (whatever its target text says), and `git submodule update`
    stops at one it cannot parse."""
    if entry is None or entry.kind != "blob":
        return []  # none, or a folder: git reads no submodule from it
    if entry.mode == SYMLINK_MODE:
        link.add(
            "gitmodules",
            Status.MISMATCH,
            "gitmodules-symlink",
            ".gitmodules is a symbolic link: git refuses to check it out (invalid path), so a fresh "
            "recursive clone fails",
            "commit .gitmodules as a regular file",
        )
        return None
    try:
        return objects.gitmodules(repo, entry.sha)
    except GitmodulesSyntax as exc:
        link.add(
            "gitmodules",
            Status.MISMATCH,
            "gitmodules-refused",
            f"git cannot read .gitmodules ({exc.reason}): `git submodule update` stops there, so a "
            "fresh recursive clone fails",
            "fix that line of .gitmodules (git config -f .gitmodules --list names it)",
        )
        return None


SYMLINK_MODE = "120000"


def _absolute(url: str, consumer: Consumer) -> str:
    return remote.resolve_relative_url(url, consumer.url)


def locate_gitlink(
    objects: Objects,
    commit: str,
    consumer: Consumer,
    modules: list[SubmoduleEntry],
    target: PinTarget,
    link: LinkResult,
    entries: dict[str, TreeEntry],
) -> tuple[str | None, SubmoduleEntry | None]:
    """The gitlink at the manifest's path and the `.gitmodules` section git uses for it. The declared
    path is what the consumer's code imports: a tree or file there, or nothing, is a finding, whatever
    submodule sits elsewhere (a fresh clone would build that one somewhere nobody reads it)."""
    path = consumer.gitlink
    entry = entries.get(path)
    if entry is not None and entry.kind == "commit":
        return path, next((m for m in modules if m.path == path), None)
    elsewhere = _gitlink_by_url(objects, commit, consumer, modules, target)
    also = f"; the submodule whose URL is {target.url} is at {elsewhere}, not there" if elsewhere else ""
    if entry is None:
        link.add(
            "gitlink",
            Status.MISMATCH,
            "no-gitlink",
            f"has no gitlink at {path}{also}",
            f"add the submodule at {path}, or fix consumers[].gitlink in the manifest",
        )
    else:
        what = "a folder of ordinary files" if entry.kind == "tree" else f"a {entry.kind}"
        link.add(
            "gitlink",
            Status.MISMATCH,
            "not-a-gitlink",
            f"{path} is {what}, not a gitlink: a fresh clone gets that code, not {target.name}'s{also}",
            f"git rm -r --cached {path}, then add the submodule there pinning {target.name}",
        )
    return None, None


def _gitlink_by_url(
    objects: Objects, commit: str, consumer: Consumer, modules: list[SubmoduleEntry], target: PinTarget
) -> str | None:
    """The path of a gitlink whose `.gitmodules` URL is the target's (told in the finding, never used
    as the pin: the manifest's path is authoritative)."""
    wanted = [u for u in (target.url, target.upstream_url) if u]
    for module in modules:
        if not module.url or not module.path or module.path == consumer.gitlink:
            continue
        if any(remote.same_repo(_absolute(module.url, consumer), u) for u in wanted):
            found = objects.tree_entry(commit, module.path)
            if found is not None and found.kind == "commit":
                return module.path
    return None


def check_update(module: SubmoduleEntry | None, link: LinkResult) -> None:
    """Add an `update` finding when `.gitmodules` keeps a fresh recursive clone from checking out the
    gitlink: `update = none` (rebase and merge act as checkout on a just-cloned submodule; a value
    git refuses made the whole file a finding already, `declared_modules`)."""
    if module is None or module.options.get("update") != "none":
        return
    link.add(
        "update",
        Status.MISMATCH,
        "update-none",
        f".gitmodules says update = none for {link.gitlink}: a recursive clone skips the submodule",
        shlex.join(["git", "config", "-f", ".gitmodules", "--unset", f"submodule.{module.name}.update"]),
    )


def check_url(
    module: SubmoduleEntry | None, consumer: Consumer, target: PinTarget, link: LinkResult
) -> str | None:
    """Add the `url` finding: `.gitmodules` names the target for the gitlink. The absolute URL, or None
    when there is no entry (then nothing can be fetched, and reachability is not asked)."""
    ignored = module.options.get("url (ignored)") if module is not None and not module.url else None
    if ignored is not None:
        link.add(
            "url",
            Status.MISMATCH,
            "url-refused",
            f"refusing repository location {ignored!r} (the .gitmodules url for {link.gitlink}): it looks "
            "like an option, which git ignores, so a fresh clone has no URL to fetch the pin from",
            _set_url_command(module.name, target.url) if module else "",
        )
        return None
    if module is None or not module.url:
        link.add(
            "url",
            Status.MISMATCH,
            "no-gitmodules-entry",
            f".gitmodules has no entry with path = {link.gitlink}: a fresh clone cannot fetch the pin",
            f"add [submodule] path = {link.gitlink}, url = {target.url}",
        )
        return None
    url = _absolute(module.url, consumer)
    link.url = url
    if remote.same_repo(url, target.url):
        link.add("url", Status.OK, "ok", f".gitmodules url is {module.url}")
    elif target.upstream_url and remote.same_repo(url, target.upstream_url):
        link.add(
            "url",
            Status.MISMATCH,
            "url-upstream",
            f".gitmodules url for {link.gitlink} still points upstream ({module.url}), not at {target.url}",
            f"{_set_url_command(module.name, target.url)} (forkctl bump-bridge does it)",
        )
    else:
        link.add(
            "url",
            Status.MISMATCH,
            "url-other",
            f".gitmodules url for {link.gitlink} is {module.url}, expected {target.url}",
            _set_url_command(module.name, target.url),
        )
    return url


def point_at_gitmodules(repo: GitRepo | None, commit: str, link: LinkResult) -> None:
    """Give the link's `url` and `gitlink` findings the place to edit: `.gitmodules` of `commit`, at the
    line of the submodule's `url =` (for `url`), `update =` (for `update`) or `path =` (for `gitlink`)
    when the section exists."""
    entry = repo.objects.tree_entry(commit, ".gitmodules") if repo is not None else None
    if repo is None or entry is None or entry.kind != "blob" or entry.mode == SYMLINK_MODE:
        return
    try:
        modules = repo.submodules.parse_gitmodules(entry.sha)
    except GitmodulesSyntax as exc:  # the finding names git's line: point there
        number = re.search(r"line (\d+)", exc.reason)
        lines = {"syntax": int(number.group(1))} if number else {}
    else:
        module = next((m for m in modules if m.path == link.gitlink), None)
        lines = gitmodules_key_lines(repo.objects.blob_bytes(entry.sha), module.name) if module else {}
    key = {"url": "url", "gitlink": "path", "update": "update", "gitmodules": "syntax"}
    link.findings = [
        msgspec.structs.replace(f, file=".gitmodules", line=lines.get(key[f.check]))
        if f.check in key and (f.check == "url" or key[f.check] in lines)
        else f
        for f in link.findings
    ]


def _set_url_command(name: str, url: str) -> str:
    """The fix for a submodule's url, shell-quoted: a name or URL from `.gitmodules` is data, and the
    pasted command runs exactly what is shown."""
    return shlex.join(["git", "config", "-f", ".gitmodules", f"submodule.{name}.url", url])
