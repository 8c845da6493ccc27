"""Everything forkctl does with git, and the only package that runs it.

- `runner`: the hermetic runner (environment stripped, byte-changing settings pinned).
- `patchtext`: patch-ids and the paths a diff names, from bytes alone (no repository).
- `repo`: `GitRepo`, a repository addressed by path, composed of one part per concern:
  `objects` (existence, tree entries, blobs), `commits` (fixed identities, computed commit objects),
  `history` (ancestry, ranges), `refs` (compare-and-swap), `index` (private index files),
  `worktree` (scratch worktrees, plain directory trees), `patches` (format-patch, diffs, patch-ids);
  `gitdir` is what they share (the git dir and the way to run git in it).
- `submodules`: `.gitmodules` and gitlinks read from commit objects.
- `merge`: three-way, rename-aware merges computed on objects (no checkout), the engine of port.
- `remote`: URL identity and checks, ls-remote (answers recorded), push.
- `store`: the cache of partial clones keyed by URL, its fetches, reachability on a URL's branches.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each name lives. Loaded on first use (PEP 562), so that a command that only reads patch text
# (lint, status) imports the runner and `patchtext`, not the repository layer.
_HOME = {
    "EMPTY_TREE": "objects",
    "ZERO_SHA": "refs",
    "CommitInfo": "commits",
    "GitFailed": "runner",
    "GitRepo": "repo",
    "GitmodulesSyntax": "submodules",
    "Identity": "commits",
    "PrivateIndex": "index",
    "SubmoduleEntry": "submodules",
    "TreeEntry": "objects",
    "changed_line_count": "patches",
    "changed_lines_per_commit": "patches",
    "changed_paths_between": "patches",
    "check_branch_name": "refs",
    "checked_out_branches": "worktree",
    "commit_patch_ids": "patches",
    "committer_of": "commits",
    "diff_paths": "patchtext",
    "diff_paths_each": "patchtext",
    "git_identity": "runner",
    "gitmodules_key_lines": "submodules",
    "gitmodules_with": "submodules",
    "index_apply_check": "index",
    "index_replace_entries": "index",
    "index_set_entry": "index",
    "last_commit_touching": "history",
    "parse_gitmodules": "submodules",
    "recorded_gitmodules": "submodules",
    "patch_id": "patchtext",
    "patch_ids": "patchtext",
    "patch_ids_in_range": "patches",
    "range_diff": "patches",
    "save_facts": "facts",
    "series_range_diff": "patches",
    "end_run": "runmemo",
    "start_run": "runmemo",
    "blobs_in_range": "patches",
    "read_gitmodules": "submodules",
    "sections_for_recognising": "submodules",
    "run": "runner",
    "run_bytes": "runner",
    "toplevel": "repo",
    "checkout_at": "repo",
    "tree_apply": "worktree",
    "tree_apply_check": "worktree",
    "tree_from_directory": "index",
    "try_run": "runner",
    "worktree_apply_3way": "worktree",
    "worktree_checkout": "worktree",
    "worktree_set_unmerged": "worktree",
    "worktree_show_tree": "worktree",
    "worktree_unmerged_paths": "worktree",
    "worktree_write_tree": "worktree",
    "write_blob": "objects",
    "blob_id": "objects",
}

__all__ = [
    "EMPTY_TREE",
    "ZERO_SHA",
    "CommitInfo",
    "GitFailed",
    "GitRepo",
    "GitmodulesSyntax",
    "Identity",
    "PrivateIndex",
    "SubmoduleEntry",
    "TreeEntry",
    "blob_id",
    "blobs_in_range",
    "changed_line_count",
    "changed_lines_per_commit",
    "changed_paths_between",
    "check_branch_name",
    "checked_out_branches",
    "checkout_at",
    "commit_patch_ids",
    "committer_of",
    "diff_paths",
    "diff_paths_each",
    "end_run",
    "git_identity",
    "gitmodules_key_lines",
    "gitmodules_with",
    "index_apply_check",
    "index_replace_entries",
    "index_set_entry",
    "last_commit_touching",
    "parse_gitmodules",
    "patch_id",
    "patch_ids",
    "patch_ids_in_range",
    "range_diff",
    "read_gitmodules",
    "recorded_gitmodules",
    "run",
    "run_bytes",
    "save_facts",
    "sections_for_recognising",
    "series_range_diff",
    "start_run",
    "toplevel",
    "tree_apply",
    "tree_apply_check",
    "tree_from_directory",
    "try_run",
    "worktree_apply_3way",
    "worktree_checkout",
    "worktree_set_unmerged",
    "worktree_show_tree",
    "worktree_unmerged_paths",
    "worktree_write_tree",
    "write_blob",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'forkctl.git' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"forkctl.git.{_HOME[name]}"), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from forkctl.git.commits import CommitInfo, Identity, committer_of
    from forkctl.git.facts import save_facts
    from forkctl.git.history import last_commit_touching
    from forkctl.git.index import (
        PrivateIndex,
        index_apply_check,
        index_replace_entries,
        index_set_entry,
        tree_from_directory,
    )
    from forkctl.git.objects import EMPTY_TREE, TreeEntry, blob_id, write_blob
    from forkctl.git.patches import (
        blobs_in_range,
        changed_line_count,
        changed_lines_per_commit,
        changed_paths_between,
        commit_patch_ids,
        patch_ids_in_range,
        range_diff,
        series_range_diff,
    )
    from forkctl.git.patchtext import diff_paths, diff_paths_each, patch_id, patch_ids
    from forkctl.git.refs import ZERO_SHA, check_branch_name
    from forkctl.git.repo import GitRepo, checkout_at, toplevel
    from forkctl.git.runmemo import end_run, start_run
    from forkctl.git.runner import GitFailed, run, run_bytes, try_run
    from forkctl.git.submodules import (
        GitmodulesSyntax,
        SubmoduleEntry,
        gitmodules_key_lines,
        gitmodules_with,
        parse_gitmodules,
        read_gitmodules,
        recorded_gitmodules,
        sections_for_recognising,
    )
    from forkctl.git.worktree import (
        checked_out_branches,
        tree_apply,
        tree_apply_check,
        worktree_apply_3way,
        worktree_checkout,
        worktree_set_unmerged,
        worktree_show_tree,
        worktree_unmerged_paths,
        worktree_write_tree,
    )
