"""Three-way, rename-aware merges computed on objects: what `git cherry-pick` / `git rebase` would give.

Porting a patch is a cherry-pick: merge the patch's commit into the new head with the patch's parent as
the merge base, so git's own `ort` merge follows renames, moved directories and drifted context exactly
as `git rebase` does. `git merge-tree --write-tree` does that merge without a worktree or index; on git
2.39 it has no `--merge-base` option (2.40 added it), so a synthetic commit stands in for the new head:
the new head's tree with the patch's parent as its only parent, which makes that parent the merge base.
The synthetic commit has a fixed identity and the committer date of the commit being picked, so the
same inputs always give the same objects. (Not a fixed old date: merge-base walks history newest
first, and a stand-in dated 1970 made it walk the whole upstream history on every pick, 0.2-0.3 s each
on Megatron-LM; dated like its sibling, the walk stops at the shared parent.)
With git >= 2.40, `merge-tree --write-tree --merge-base=<parent> <head> <commit>` would need no
synthetic commit.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from forkctl.git.commits import Commits, Identity, commit_object
from forkctl.git.repo import GitRepo
from forkctl.git.runner import GitFailed
from forkctl.git.sha import TreeSha, printed_tree

SYNTHETIC_NAME, SYNTHETIC_EMAIL = "forkctl", "forkctl@localhost"


class MergeMessage(msgspec.Struct, frozen=True):
    kind: str  # git's conflict type, e.g. "CONFLICT (contents)", "Auto-merging", "CONFLICT (rename/delete)"
    paths: list[str]
    text: str  # git's own sentence


class Stage(msgspec.Struct, frozen=True):
    """One unmerged index entry of a conflict, as `git ls-files --stage` writes it."""

    mode: str
    sha: str
    stage: int  # 1 the merge base, 2 ours (the head picked onto), 3 theirs (the commit picked)
    path: str


class MergeResult(msgspec.Struct, frozen=True):
    tree: TreeSha  # the merged tree; on a conflict, files carry conflict markers (as in a worktree)
    clean: bool
    conflicted: list[str] = msgspec.field(default_factory=list)  # paths with unmerged entries
    messages: list[MergeMessage] = msgspec.field(default_factory=list)
    stages: list[Stage] = msgspec.field(default_factory=list)  # a conflict's index entries, for a worktree
    # The names git wrote on the markers (`<<<<<<< ours`, `>>>>>>> theirs`): object ids here.
    sides: tuple[str, str] = ("", "")

    def text(self) -> str:
        return "\n".join(message.text for message in self.messages)


def _parse(output: str) -> tuple[TreeSha, list[Stage], list[MergeMessage]]:
    """Parse `merge-tree --write-tree -z --messages` output: tree, unmerged entries, messages."""
    tokens = output.split("\x00")
    tree = printed_tree(tokens[0], "merge-tree")
    position = 1
    stages: list[Stage] = []
    while position < len(tokens) and tokens[position] != "":
        info, path = tokens[position].split("\t", 1)
        mode, sha, stage = info.split(" ")
        stages.append(Stage(mode=mode, sha=sha, stage=int(stage), path=path))
        position += 1
    position += 1  # the empty token that ends the conflicted-paths section
    messages: list[MergeMessage] = []
    while position < len(tokens) and tokens[position].isdigit():
        count = int(tokens[position])
        paths = tokens[position + 1 : position + 1 + count]
        kind, text = tokens[position + 1 + count], tokens[position + 2 + count]
        messages.append(MergeMessage(kind=kind, paths=paths, text=text.rstrip("\n")))
        position += 3 + count
    return tree, stages, messages


def stand_in(commits: Commits, tree: TreeSha, parent: str, date: str) -> str:
    """A commit with `tree` whose only parent is `parent` (fixed identity, given date: deterministic)."""
    message = "forkctl merge stand-in\n"
    made = commit_object(
        tree, [parent], message, SYNTHETIC_NAME, SYNTHETIC_EMAIL, datetime.fromisoformat(date)
    )
    if made is not None:
        return commits.write_loose_commit(made)
    identity = Identity(name=SYNTHETIC_NAME, email=SYNTHETIC_EMAIL, date=date)
    return commits.commit_tree(tree, [parent], message, identity)


def cherry_pick(
    repo: GitRepo,
    commit: str,
    parent: str,
    onto: str,
    onto_tree: TreeSha | None = None,
    date: str | None = None,
) -> MergeResult:
    """The tree `git cherry-pick <commit>` (whose parent is `parent`) gives on top of commit `onto`.
    `onto_tree` and `date` (the commit's committer date), when the caller knows them, save a process."""
    if onto_tree is None or date is None:
        onto_tree, date = repo.commits.tree_and_date(onto, commit)
    ours = stand_in(repo.commits, onto_tree, parent, date)
    status, out, err = repo.git(
        ["merge-tree", "--write-tree", "-z", "--messages", ours, commit], check=False
    ).parts()
    if status not in (0, 1):
        raise GitFailed("git merge-tree failed", err)
    tree, stages, messages = _parse(out)
    return MergeResult(
        tree=tree,
        clean=status == 0,
        conflicted=list(dict.fromkeys(stage.path for stage in stages)),
        messages=messages,
        stages=stages,
        sides=(ours, commit),
    )


def pick_change(
    repo: GitRepo,
    change: tuple[TreeSha, TreeSha],
    anchor: str,
    onto: str,
    date: str,
    onto_tree: TreeSha | None = None,
) -> MergeResult:
    """The tree that the change from tree `change[0]` to tree `change[1]` gives on commit `onto`, merged
    as `git cherry-pick` merges: for a change no commit holds on its own (a pick's own lines beyond the
    upstream commit it names; the reverse of a commit, as `git revert` makes it). Two stand-ins hold it
    (before on `anchor`, after on before), so the before side is the merge base."""
    before = stand_in(repo.commits, change[0], anchor, date)
    after = stand_in(repo.commits, change[1], before, date)
    return cherry_pick(repo, after, before, onto, onto_tree=onto_tree, date=date)
