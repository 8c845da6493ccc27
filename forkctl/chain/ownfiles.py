"""The fork's own files: what the fork branch holds beside the series (`fork.own_paths`).

The fork head R = apply(series, base) stays a pure function of its inputs; the fork's scaffolding (its
`.fork-base.json`, README, CI files) lives on the fork branch only. A path matching one of the globs is
the fork's: what `forkctl publish` pushes has the branch tip's version of it (or none, where the tip
has none), never upstream's or the series', and `.fork-base.json` is rewritten to name the base
published (`forkbase.carried`). So the published tree is a function of (R, the tip, the manifest):
`published_tree`, the one definition publish builds and check-pins compares against.

Anything else the tip holds that R does not is either in the series (a commit whose patch-id is a
patch's; below the last publish, the old fork head's commits, known by subject) or foreign: publish
refuses rather than drop it (`foreign_changes`).

And a fork-owned path never touches what the series or the package owns (`own_path_conflicts`): a glob
matching a path a patch changes, or a path of the package tree (`fork.tree_include`, decided on the
globs; where that is every path, on the fork head's tree), would let the branch's own version replace
package code in what is published and what check-pins accepts. lint, publish, check-pins and bump-bridge
(every verb that builds the fork head) refuse such a manifest.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable

import msgspec

from forkctl.chain import forkbase
from forkctl.errors import BadInput
from forkctl.git.objects import Objects, TreeEntry
from forkctl.git.repo import GitRepo
from forkctl.git.sha import TreeSha
from forkctl.manifest import Manifest
from forkctl.manifest.globs import overlap
from forkctl.manifest.schema import FORK_BASE_FILE
from forkctl.series import Patch

MAX_NAMED_PATHS = 20  # a refusal or finding names this many paths, then a count


class OwnFiles(msgspec.Struct, frozen=True):
    """The fork-owned globs, and the manifest + full base its `.fork-base.json` must name."""

    globs: tuple[str, ...]
    manifest: Manifest
    base: str

    def owns(self, path: str) -> bool:
        # As fork.tree_include: fnmatch, where `*` also crosses `/`.
        return any(fnmatch.fnmatchcase(path, glob) for glob in self.globs)


class Foreign(msgspec.Struct, frozen=True):
    """A commit on the branch tip whose change is neither in the series nor in the fork's own files."""

    commit: str
    subject: str
    paths: list[str]  # the paths it changes outside fork.own_paths


OwnEntries = tuple[dict[str, TreeEntry], list[str]]


def own_files(manifest: Manifest, base: str) -> OwnFiles:
    globs = tuple(dict.fromkeys([FORK_BASE_FILE, *manifest.fork.own_paths]))
    return OwnFiles(globs, manifest, base)


OWN_PATHS_HINT = (
    "take those entries out of fork.own_paths in the manifest (or the change out of the patch): the fork's "
    "own files are what upstream's package and the series never hold (README.fork.md, .github/**)"
)


TreePaths = Callable[[], Iterable[str]]  # the fork head's paths, read only where needed


def own_path_conflicts(
    manifest: Manifest, patches: list[Patch], tree_paths: TreePaths | None = None
) -> list[str]:
    """For each `fork.own_paths` entry that touches what the series or the package owns, what it touches:
    a path a patch changes ('<patch file>: <path>'), the package tree (`fork.tree_include`, when that
    names less than every path: decided on the two globs), or, where the package is every path, a path
    of `tree_paths` (the fork head's tree, when the caller has it)."""
    include = manifest.fork.tree_include
    everything = fnmatch.fnmatchcase("forkctl-probe/any/path.x", include)
    paths = list(tree_paths()) if tree_paths is not None and everything else []
    found = []
    for glob in dict.fromkeys(manifest.fork.own_paths):
        claimed = [
            f"{patch.path.name}: {path}"
            for patch in patches
            for path in patch.paths
            if fnmatch.fnmatchcase(path, glob)
        ]
        in_tree = [path for path in paths if fnmatch.fnmatchcase(path, glob)]
        if claimed:
            found.append(f"{glob!r} matches what the series changes ({named(claimed)})")
        elif not everything and overlap(glob, include):
            found.append(f"{glob!r} matches paths of the package tree (fork.tree_include: {include!r})")
        elif in_tree:
            found.append(f"{glob!r} matches paths of the package tree, apply(series, base): {named(in_tree)}")
    return found


def refuse_own_path_conflicts(
    manifest: Manifest, patches: list[Patch], tree_paths: TreePaths | None = None
) -> None:
    """BadInput naming each fork.own_paths entry `own_path_conflicts` finds."""
    found = own_path_conflicts(manifest, patches, tree_paths)
    if found:
        raise BadInput(
            f"fork.own_paths may name only the fork's own files, never the series' or the package's: "
            f"{'; '.join(found)}. The branch's version of such a path would replace package code in what "
            "publish pushes and check-pins accepts",
            hint=OWN_PATHS_HINT,
        )


def checked_own(manifest: Manifest, objects: Objects, base: str, head: str, patches: list[Patch]) -> OwnFiles:
    """The fork's own files, once `fork.own_paths` is known to touch neither the series nor the package
    tree of the fork head `head` (in `objects`): what a published merge carries beside it is the fork's."""
    refuse_own_path_conflicts(manifest, patches, lambda: objects.all_entries(head))
    return own_files(manifest, base)


def _own_entries(objects: Objects, tip: str, head_tree: TreeSha, own: OwnFiles, write: bool) -> OwnEntries:
    """({fork-owned path: the tip's entry}, fork-owned paths of R the tip lacks), with the tip's
    `.fork-base.json` carried over as `forkbase.carried` rewrites it (its blob written when `write`)."""
    at_tip = {path: e for path, e in objects.all_entries(tip).items() if own.owns(path)}
    record = at_tip.get(FORK_BASE_FILE)
    if record is not None and record.kind == "blob":
        wanted = forkbase.carried(objects.blob_bytes(record.sha), own.manifest, own.base)
        sha = objects.write_blob(wanted) if write else objects.blob_id(wanted)
        at_tip[FORK_BASE_FILE] = msgspec.structs.replace(record, sha=sha)
    removed = [path for path in objects.all_entries(head_tree) if own.owns(path) and path not in at_tip]
    return at_tip, removed


REGULAR_MODES = ("100644", "100755")
_NOT_REGULAR = {"120000": "a symbolic link", "160000": "a submodule", "040000": "a folder"}


def not_regular(entries: dict[str, TreeEntry], own: OwnFiles) -> list[str]:
    """The fork-owned paths of `entries` that are not regular files, each with what it is: a symbolic
    link (its target is all a clone gets, and it may point into the package or out of the tree) or a
    submodule is never the fork's own file."""
    return [
        f"{path} ({_NOT_REGULAR.get(entry.mode, 'mode ' + entry.mode)})"
        for path, entry in sorted(entries.items())
        if own.owns(path) and entry.mode not in REGULAR_MODES
    ]


def refuse_not_regular(objects: Objects, tip: str, own: OwnFiles) -> None:
    """BadInput naming each fork-owned path of `tip` that is not a regular file."""
    found = not_regular(objects.all_entries(tip), own)
    if found:
        raise BadInput(
            f"the fork branch's tip {tip[:12]} holds fork-owned paths that are not regular files: "
            f"{named(found)}; publish carries only regular files as the fork's own",
            hint="commit each as a regular file on the fork branch (git rm the link, add the file), then "
            "publish again",
        )


def published_tree(repo: GitRepo, tip: str, head_tree: TreeSha, own: OwnFiles) -> TreeSha:
    """R's tree with the fork-owned paths as the tip has them (`.fork-base.json` rewritten for the base),
    written in `repo` (objects only, a private index): the same tip, R and manifest give the same tree.
    Trees only are listed; the one blob read is the tip's `.fork-base.json`. A fork-owned path that is
    not a regular file on the tip is refused (`refuse_not_regular`)."""
    refuse_not_regular(repo.objects, tip, own)
    at_tip, removed = _own_entries(repo.objects, tip, head_tree, own, write=True)
    if not removed and not at_tip:
        return head_tree
    with repo.indexes.private_index(head_tree) as index:
        index.replace_entries(removed, [(e.mode, e.sha, path) for path, e in at_tip.items()])
        return index.write_tree()


def unpublished_paths(
    objects: Objects, tree: TreeSha, tip: str, head_tree: TreeSha, own: OwnFiles
) -> list[str]:
    """Where `tree` differs from `published_tree(tip, R)`, sorted, then each fork-owned path of `tree`
    that is not a regular file (publish refuses those); read only (nothing is written, so a check may
    ask it of a user's clone): the whole trees' entries compared."""
    at_tip, removed = _own_entries(objects, tip, head_tree, own, write=False)
    expected = {path: (e.mode, e.sha) for path, e in objects.all_entries(head_tree).items()}
    for path in removed:
        expected.pop(path, None)
    expected.update({path: (e.mode, e.sha) for path, e in at_tip.items()})
    entries = objects.all_entries(tree)
    actual = {path: (e.mode, e.sha) for path, e in entries.items()}
    off = sorted(path for path in expected.keys() | actual.keys() if expected.get(path) != actual.get(path))
    return off + not_regular(entries, own)  # what publish refuses to carry is never the published tree


def named(paths: list[str]) -> str:
    shown = ", ".join(paths[:MAX_NAMED_PATHS])
    return shown + (f" and {len(paths) - MAX_NAMED_PATHS} more" if len(paths) > MAX_NAMED_PATHS else "")


def last_publish(repo: GitRepo, tip: str, upstream: str, own: OwnFiles) -> str | None:
    """The newest merge on the tip's first-parent line (above upstream) whose tree is its second
    parent's but for fork-owned paths: where the branch last was a published fork head (None: never)."""
    merges = repo.history.rev_list(f"{upstream}..{tip}", "--first-parent", "--merges")
    for merge in reversed(merges):  # newest first
        tree, parents = repo.commits.recorded_parents(merge)
        if len(parents) < 2:
            continue
        second = repo.commits.commit_info(parents[1]).tree
        if all(own.owns(path) for path in repo.diffs.changed_paths(tree, second)):
            return merge
    return None


def foreign_changes(
    repo: GitRepo, tip: str, head: str, upstream: str, patches: list[Patch], own: OwnFiles
) -> list[Foreign]:
    """The tip's commits that R lacks and publishing R would drop: commits since the last publish (or,
    never published, since upstream) whose change touches a path outside fork.own_paths and is not a
    patch of the series. Below any other commit of a never-published branch sit the old fork head's
    commits, on an older base, so there a commit is the series' also when its subject is a patch's
    or a dropped one's (a port changes a patch's context, hence its patch-id)."""
    since = last_publish(repo, tip, upstream, own)
    commits = repo.history.commits_not_in(tip, [head, upstream, *([since] if since else [])])
    patch_ids = {patch.patch_id for patch in patches}
    subjects = {patch.subject for patch in patches} | {d.subject for d in own.manifest.model.dropped}
    old_head_run = since is None
    found: list[Foreign] = []
    for info in repo.commits.commit_infos(commits):
        if len(info.parents) != 1:
            continue  # a merge's own sides are listed as commits of their own
        paths = [p for p in repo.diffs.changed_paths(info.parents[0], info.sha) if not own.owns(p)]
        if not paths or repo.patches.commit_patch_id(info.sha) in patch_ids:
            continue
        if old_head_run and info.subject in subjects:
            continue
        old_head_run = False
        found.append(Foreign(info.sha, info.subject, sorted(paths)))
    return found
