"""Everything forkctl does with git, and the only package that runs it.

- `runner`: the hermetic runner (environment stripped, byte-changing settings pinned).
- `patchtext`: patch-ids and the paths a diff names, from bytes alone (no repository).
- `gitdir`: what every repository object shares: the git dir, the way to run git in it, and the
  answers it owns (objects present, tree entries, ancestry, parsed `.gitmodules`).
- `batch`: one long-lived `cat-file --batch` per repository for object reads.
- `repo`: `GitRepo`, a repository addressed by path, handing out one part per concern, each from its
  own module: `objects` (existence, tree entries, blobs), `trees` (`treeedit`: trees read and written in
  process), `submodules`, `commits` (fixed identities, computed commit objects), `history` (ancestry,
  ranges), `patches` and `diffs` (format-patch, patch-ids, changed paths and lines), `refs`
  (compare-and-swap), `indexes` (`index`: private index files), `worktrees` (`worktree`: scratch
  worktrees; plain directory trees).
- `submodules`: `.gitmodules` and gitlinks read from commit objects.
- `merge`: three-way, rename-aware merges computed on objects (no checkout), the engine of port.
- `remote`: URL identity and checks, ls-remote (answers recorded), push.
- `clonecache`: the cache of partial clones keyed by URL, its fetches, reachability on a URL's branches;
  `graph` a URL's commit graph, `facts` what a cache repository recorded for later runs.
- `locations`: the local repositories the user named in this command (the only ones git may contact).

Callers import what they use from the module that defines it (`from forkctl.git.repo import GitRepo`):
a command that only reads patch text imports the runner and `patchtext`, not the repository layer.
"""
