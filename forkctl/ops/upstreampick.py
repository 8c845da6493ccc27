"""Is a patch a verbatim pick of an upstream commit? (`lint` with `fork.require_signoff`.)

The DCO asks the fork's own changes for their author's sign-off; a commit upstream already took comes
with upstream's own trailers, and a verbatim pick of it keeps them. A patch is one when its origin (its
first provenance line, as `git cherry-pick -x` writes it) names a commit U on upstream's branch in a
clone (the local branch or a remote's tracking branch of that name: upstream's, or the fork's mirror of
it), and the patch is U as the pick left it: U's author, U's message (the provenance line aside) and U's
change (equal patch-ids). Anything else is the fork's own and needs the sign-off: a commit of the fork's
branch, an amended message, an edited change.
"""

from __future__ import annotations

import msgspec

from forkctl.git.repo import GitRepo
from forkctl.series import PROVENANCE_RE, Patch


class PickCheck(msgspec.Struct, frozen=True):
    """The verdict on one patch's origin: `why_not` is empty for a verbatim upstream pick."""

    origin: str  # the full SHA when the clone has it, else the name the provenance line writes
    why_not: str = ""

    @property
    def verbatim(self) -> bool:
        return not self.why_not


def _normalised(message: str) -> str:
    """A message as format-patch and `git am` carry it: provenance lines out, the subject paragraph on
    one line (format-patch folds it into the Subject header), no trailing whitespace."""
    text = PROVENANCE_RE.sub("", message).strip()
    subject, _, rest = text.partition("\n\n")
    lines = [" ".join(subject.split()), *([rest] if rest else [])]
    return "\n\n".join(lines).rstrip()


def check_pick(repo: GitRepo, branches: list[str], patch: Patch) -> PickCheck | None:
    """Whether `patch` is a verbatim pick of an upstream commit in `repo` (None: it names no origin)."""
    if not patch.provenance:
        return None
    origin = patch.provenance[0]
    sha = repo.objects.resolve_commit(origin)
    if sha is None:
        return PickCheck(origin, f"the clone has no commit {origin}")
    tips = [tip for branch in dict.fromkeys(branches) for tip in repo.refs.branch_tips(branch)]
    if not any(repo.history.is_ancestor(sha, tip) for tip in tips):
        named = " or ".join(dict.fromkeys(branches))
        return PickCheck(sha, f"{sha[:12]} is on no {named} branch of the clone (a commit of the fork's own)")
    upstream = repo.commits.commit_info(sha)
    if (upstream.author.name, upstream.author.email) != (patch.author_name, patch.author_email):
        return PickCheck(
            sha,
            f"its author differs from upstream {sha[:12]}'s ({upstream.author.name} <{upstream.author.email}>)",
        )
    if _normalised(patch.message) != _normalised(upstream.message):
        return PickCheck(sha, f"its message differs from upstream {sha[:12]}'s (amended)")
    if repo.patches.commit_patch_id(sha) != patch.patch_id:
        return PickCheck(sha, f"its change differs from upstream {sha[:12]}'s")
    return PickCheck(sha)
