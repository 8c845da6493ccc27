"""port(series, new base): move every patch onto a new upstream commit, dropping what upstream absorbed.

Each patch is first rebuilt on the old base (apply(old base, series) is a pure function, so its commits
are known), then cherry-picked on objects on top of the new base plus the patches already ported
(`git/merge.py`: git's rename-aware 3-way merge, as `git rebase --onto` does it). Its effect decides:

- clean and changing nothing: absorbed, the one drop there is;
- clean and changing something: applied (reproducibly; "partial" when upstream already had some of its
  lines);
- a conflict: stops in the scratch worktree (`ops/state.py`), resumable with --continue / --skip.

A pick is first compared with the upstream commit U its provenance names, when the target holds U
(`provenance.py`): the same change as U's (equal patch-ids, or an empty interdiff) is absorbed whatever
the merge, an amended pick whose whole merge conflicts ports only its own lines (the interdiff), and a
pick of a U that upstream reverted in the range stops for a decision (--skip, --reapply-reverted).

Otherwise hashes and provenance only name the upstream commit, never decide: the rule that named it is the
evidence of a drop ("patch-id": a commit in old-base..new-base makes the same change; "patch-id-zero-
context": the same added and removed lines, `git diff -U0 | git patch-id --stable`; "provenance": the
patch says `(cherry picked from commit X)` and X is in the new base; "empty": none did, the last
upstream commit touching its files is named), the upstream part of a partial patch, or the hint on a
conflict that `--skip` exists (also "reverse-applies": the patch reverse-applies on the new head). The
same lines added elsewhere in a file share a zero-context patch-id, an amended `-x` pick carries more
than upstream's commit, and upstream may have rewritten a picked change since: a name alone would drop
own lines that `git rebase` keeps.

No patch is ever dropped silently: each absorbed or skipped patch becomes a `dropped:` entry with its
evidence. The target need not descend from the base (`backport`: e.g. a release branch).

The package: `judge` decides one patch's fate on a head; `run` is the port itself (start, --continue,
--skip, --abort) and `transaction` writes its result (files first, with a backup for --abort, the
branch last); `preview` judges the series on a target moving nothing (`status --onto`, `sync`), and
`bisect` names the upstream commit that first breaks a patch there (`--first-break`). Only the port's own
parts are exported here: `status` and `sync` import `preview` and `bisect` from their modules, so a port
loads neither.
"""

from __future__ import annotations

from forkctl.ops.port.judge import resolve_endpoints, upstream_hint
from forkctl.ops.port.run import PortOutcome, abort, resume, skip, start

__all__ = [
    "PortOutcome",
    "abort",
    "resolve_endpoints",
    "resume",
    "skip",
    "start",
    "upstream_hint",
]
