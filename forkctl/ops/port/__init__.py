"""port(series, new base): move every patch onto a new upstream commit, dropping what upstream absorbed.

Each patch is first rebuilt on the old base (apply(old base, series) is a pure function, so its commits
are known), then judged on top of the new base plus the patches already ported, rules in this order:

- absorbed, "patch-id": a commit in old-base..new-base makes the same change (any message);
- absorbed, "patch-id-zero-context": the same added and removed lines, whatever upstream did around them
  (`git diff -U0 | git patch-id --stable`);
- absorbed, "provenance": the patch says `(cherry picked from commit X)` and X is in the new base;
- otherwise the patch is cherry-picked on objects (`git/merge.py`: git's rename-aware 3-way merge, as
  `git rebase` does it). Clean and changing something: applied (reproducibly; "partial" when upstream
  already had some of its lines). Clean and changing nothing: absorbed, "empty";
- a real conflict whose reverse applies on the new head: absorbed, "reverse-applies";
- any other conflict stops in the scratch worktree (`ops/state.py`), resumable with --continue / --skip.

No patch is ever dropped silently: each absorbed or skipped patch becomes a `dropped:` entry with its
evidence. The target need not descend from the base (`backport`: e.g. a release branch).

The package: `judge` decides one patch's fate on a head; `run` is the port itself (start, --continue,
--skip, --abort) and `transaction` writes its result (files first, with a backup for --abort, the
branch last); `preview` judges the series on a target moving nothing (`status --onto`).
"""

from __future__ import annotations

from forkctl.ops.port.judge import resolve_endpoints
from forkctl.ops.port.preview import FirstBreak, PreviewEntry, first_break, preview
from forkctl.ops.port.run import PortOutcome, abort, resume, skip, start

__all__ = [
    "FirstBreak",
    "PortOutcome",
    "PreviewEntry",
    "abort",
    "first_break",
    "preview",
    "resolve_endpoints",
    "resume",
    "skip",
    "start",
]
