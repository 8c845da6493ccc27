"""Everything forkctl does with git, and the only package that runs it.

- `runner`: the hermetic runner (environment stripped, byte-changing settings pinned).
- `repo`: repositories as objects and refs; private indexes; commits with fixed identities.
- `merge`: three-way, rename-aware merges computed on objects (no checkout), the engine of port.
- `remote`: URLs, the cache of partial clones, fetch, ls-remote, push.
"""

from __future__ import annotations

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
    checked_out_branches,
    commit_with_identity,
    committer_of,
    gitmodules_with,
    index_apply_check,
    index_set_entry,
    last_commit_touching,
    parse_gitmodules,
    patch_id,
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
    "checked_out_branches",
    "commit_with_identity",
    "committer_of",
    "gitmodules_with",
    "index_apply_check",
    "index_set_entry",
    "last_commit_touching",
    "parse_gitmodules",
    "patch_id",
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
