"""Everything forkctl does with git, and the only package that runs it.

- `runner`: the hermetic runner (environment stripped, byte-changing settings pinned).
- `repo`: repositories as objects and refs; private indexes; commits with fixed identities.
- `merge`: three-way, rename-aware merges computed on objects (no checkout), the engine of port.
- `remote`: URLs, the cache of partial clones, fetch, ls-remote, push.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each name lives. Loaded on first use (PEP 562), so that a command that only reads patch text
# (lint, status) imports the runner and `patchtext`, not the repository layer.
_HOME = {
    "EMPTY_TREE": "repo",
    "ZERO_SHA": "repo",
    "CommitInfo": "repo",
    "GitFailed": "runner",
    "GitRepo": "repo",
    "Identity": "repo",
    "PrivateIndex": "repo",
    "SubmoduleEntry": "repo",
    "TreeEntry": "repo",
    "changed_line_count": "repo",
    "changed_lines_per_commit": "repo",
    "changed_paths_between": "repo",
    "check_branch_name": "repo",
    "checked_out_branches": "repo",
    "commit_patch_ids": "repo",
    "commit_with_identity": "repo",
    "committer_of": "repo",
    "diff_paths": "patchtext",
    "diff_paths_each": "patchtext",
    "gitmodules_with": "repo",
    "index_apply_check": "repo",
    "index_set_entry": "repo",
    "last_commit_touching": "repo",
    "parse_gitmodules": "repo",
    "patch_id": "patchtext",
    "patch_ids": "patchtext",
    "patch_ids_in_range": "repo",
    "range_diff": "repo",
    "read_gitmodules": "repo",
    "run": "runner",
    "run_bytes": "runner",
    "toplevel": "repo",
    "tree_apply": "repo",
    "tree_apply_check": "repo",
    "tree_from_directory": "repo",
    "try_run": "runner",
    "worktree_apply_3way": "repo",
    "worktree_checkout": "repo",
    "worktree_show_tree": "repo",
    "worktree_unmerged_paths": "repo",
    "worktree_write_tree": "repo",
    "write_blob": "repo",
    "zero_context_patch_id": "repo",
}

__all__ = [
    "EMPTY_TREE",
    "ZERO_SHA",
    "CommitInfo",
    "GitFailed",
    "GitRepo",
    "Identity",
    "PrivateIndex",
    "SubmoduleEntry",
    "TreeEntry",
    "changed_line_count",
    "changed_lines_per_commit",
    "changed_paths_between",
    "check_branch_name",
    "checked_out_branches",
    "commit_patch_ids",
    "commit_with_identity",
    "committer_of",
    "diff_paths",
    "diff_paths_each",
    "gitmodules_with",
    "index_apply_check",
    "index_set_entry",
    "last_commit_touching",
    "parse_gitmodules",
    "patch_id",
    "patch_ids",
    "patch_ids_in_range",
    "range_diff",
    "read_gitmodules",
    "run",
    "run_bytes",
    "toplevel",
    "tree_apply",
    "tree_apply_check",
    "tree_from_directory",
    "try_run",
    "worktree_apply_3way",
    "worktree_checkout",
    "worktree_show_tree",
    "worktree_unmerged_paths",
    "worktree_write_tree",
    "write_blob",
    "zero_context_patch_id",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'forkctl.git' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"forkctl.git.{_HOME[name]}"), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from forkctl.git.patchtext import diff_paths, diff_paths_each, patch_id, patch_ids
    from forkctl.git.repo import (
        EMPTY_TREE,
        ZERO_SHA,
        CommitInfo,
        GitRepo,
        Identity,
        PrivateIndex,
        SubmoduleEntry,
        TreeEntry,
        changed_line_count,
        changed_lines_per_commit,
        changed_paths_between,
        check_branch_name,
        checked_out_branches,
        commit_patch_ids,
        commit_with_identity,
        committer_of,
        gitmodules_with,
        index_apply_check,
        index_set_entry,
        last_commit_touching,
        parse_gitmodules,
        patch_ids_in_range,
        range_diff,
        read_gitmodules,
        toplevel,
        tree_apply,
        tree_apply_check,
        tree_from_directory,
        worktree_apply_3way,
        worktree_checkout,
        worktree_show_tree,
        worktree_unmerged_paths,
        worktree_write_tree,
        write_blob,
        zero_context_patch_id,
    )
    from forkctl.git.runner import GitFailed, run, run_bytes, try_run
