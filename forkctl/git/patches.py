"""Changes between commits as patches and measures: format-patch mails, full-index diffs, patch-ids
(also zero-context, batched over a range), changed paths and line counts, range-diff.

Every diff goes through `DIFF_FLAGS` and `--no-renames`, so the bytes (and hence the patch-ids) do not
depend on anyone's configuration. Patch-ids of bytes alone are `patchtext`'s.
"""

from __future__ import annotations

from forkctl.errors import BadInput
from forkctl.git.gitdir import Part
from forkctl.git.patchtext import patch_id, patch_ids
from forkctl.git.runner import DIFF_FLAGS, git
from forkctl.git.sha import is_full_sha

FORMAT_PATCH = (
    "format-patch",
    *DIFF_FLAGS,
    "--no-to",
    "--no-cc",
    "--no-add-header",
    "--no-attach",
    "--no-thread",
    "--no-cover-letter",
    "--no-signoff",
    "--no-base",
    "--stdout",
    "--zero-commit",
    "--no-signature",
    "--full-index",
    "--no-stat",
    "--no-numbered",
    "--binary",
    "--no-renames",
    "--encode-email-headers",
)


class Patches(Part):
    """Commits as mails and diffs."""

    def format_patch(self, sha: str) -> bytes:
        """One commit as a byte-stable format-patch mail: zero commit, full index, no stat/signature."""
        return self.repo.git([*FORMAT_PATCH, "-1", sha]).stdout

    def format_patches(self, base: str, shas: list[str]) -> list[bytes]:
        """`format_patch` of each commit of the chain `base..shas[-1]` (shas oldest first), in one
        process: the mails are split at the `From <zero id> ...` line each one starts with. When the
        split does not give one mail per commit (a message holding that very line), ask per commit."""
        if not shas:
            return []
        out = self.repo.git([*FORMAT_PATCH, f"{base}..{shas[-1]}"]).stdout
        marker = b"From " + b"0" * len(shas[0]) + b" Mon Sep 17 00:00:00 2001\n"
        # Mails are separated by one empty line: a mail ends "...\n", then "\n", then the next marker.
        parts = out.split(b"\n" + marker)
        mails = parts[:1] + [marker + part for part in parts[1:]]
        well_formed = all(mail.startswith(marker) and mail.endswith(b"\n") for mail in mails)
        if len(mails) != len(shas) or not well_formed:
            return [self.format_patch(sha) for sha in shas]
        return mails

    def diff_commits(self, old: str, new: str) -> bytes:
        """Full-index binary diff from `old` to `new` (either a commit or a tree)."""
        return self.repo.git(
            [
                "diff",
                *DIFF_FLAGS,
                "--no-renames",
                "--full-index",
                "--binary",
                old,
                new,
            ]
        ).stdout

    def commit_patch_id(self, sha: str) -> str:
        return patch_id(self.diff_commits(f"{sha}^", sha))

    def change_and_reverse_ids(self, sha: str, parent: str) -> tuple[str, str]:
        """(patch-id of parent..sha, patch-id of its reverse sha..parent): the ids a pick of `sha` and a
        revert of it have (`git revert` makes the reverse diff), in one `git patch-id`."""
        forward, backward = patch_ids([self.diff_commits(parent, sha), self.diff_commits(sha, parent)])
        return forward, backward

    def range_diff(self, old_range: str, new_range: str) -> str:
        """`git range-diff` of two series, e.g. old-base..old-head vs new-base..new-head (no colour)."""
        status, out, err = self.repo.git(
            ["range-diff", "--no-color", old_range, new_range], check=False
        ).parts()
        return out if status == 0 else err

    def series_range_diff(self, old: tuple[str, str], new: tuple[str, str]) -> str | None:
        """`git range-diff` of (base, head) `old` against `new`, or None when git cannot compute it. The four
        must be full SHAs (each one read from a commit, never an option)."""
        shas = [*old, *new]
        if not all(map(is_full_sha, shas)):
            raise BadInput(f"range-diff needs full commit SHAs, got {shas}")
        status, out, _ = self.repo.git(
            ["range-diff", "--no-color", f"{old[0]}..{old[1]}", f"{new[0]}..{new[1]}"], check=False
        ).parts()
        return out if status == 0 else None

    def patch_ids_in_range(
        self, range_spec: str, zero_context: bool = False, touching: list[str] | None = None
    ) -> dict[str, str]:
        """{patch-id: oldest commit with it} for every non-merge commit in `range_spec`, in two processes.

        `zero_context`: ids of `-U0` diffs, which match a change whose surrounding lines upstream rewrote.
        `touching`: only the commits that change one of these paths (each with its whole diff): a patch-id
        hashes the paths of the diff too, so a commit that changes none of a patch's files cannot share its
        id, and the diffs of the others need not be made (most of upstream's, for a series' patch-ids).
        """
        ids: dict[str, str] = {}
        for commit, patch in self.commit_patch_ids(range_spec, zero_context, touching).items():
            ids.setdefault(patch, commit)
        return ids

    def commit_patch_ids(
        self, range_spec: str, zero_context: bool = False, touching: list[str] | None = None
    ) -> dict[str, str]:
        """{commit: patch-id}, oldest first, for every non-merge commit in `range_spec` (with `touching`:
        those changing one of these paths, literally, their whole diff hashed), in two processes."""
        limit = ["--full-diff", "--end-of-options", range_spec, "--", *touching] if touching else [range_spec]
        log = self.repo.git(
            [
                *(["--literal-pathspecs"] if touching else []),
                "log",
                "-p",
                "--no-merges",
                "--reverse",
                "--format=commit %H",
                *DIFF_FLAGS,
                "--no-renames",
                "--full-index",
                "--binary",
                *(["-U0"] if zero_context else []),
                *limit,
            ]
        ).stdout
        ids: dict[str, str] = {}
        for line in git(["patch-id", "--stable"], stdin=log).text.splitlines():
            parts = line.split()
            if len(parts) == 2:
                ids[parts[1]] = parts[0]
        return ids


class Diffs(Part):
    """Diffs between commits: the paths and lines they change, the blobs a range touches."""

    def blobs_in_range(self, base: str, head: str) -> list[str]:
        """The blob ids (both sides) every non-merge commit of base..head changes: what a range-diff reads.
        Trees only are read, so a partial clone can fetch the blobs first, in one request."""
        if not (is_full_sha(base) and is_full_sha(head)):
            raise BadInput(f"blobs_in_range needs full commit SHAs, got {base!r}, {head!r}")
        out = self.repo.git(
            ["log", "--no-merges", "--raw", "--no-abbrev", "--no-renames", "--format=", f"{base}..{head}"]
        ).text
        blobs = []
        for line in out.splitlines():
            fields = line.split("\t", 1)[0].split()
            if line.startswith(":") and len(fields) >= 4:
                blobs += [
                    sha
                    for sha in fields[2:4]
                    if sha.strip("0") and "160000" not in (fields[0][1:], fields[1])
                ]
        return list(dict.fromkeys(blobs))

    def changed_lines_per_commit(self, range_spec: str) -> dict[str, int]:
        """{commit: added plus removed lines (a binary file counts one)} over `range_spec`, one process."""
        out = self.repo.git(
            [
                "log",
                "--numstat",
                "--no-renames",
                "--format=commit %H",
                *DIFF_FLAGS,
                range_spec,
            ]
        ).text
        counts: dict[str, int] = {}
        current = None
        for line in out.splitlines():
            if line.startswith("commit "):
                current = line.split()[1]
                counts[current] = 0
            elif line.strip() and current is not None:
                added, removed, _ = line.split("\t", 2)
                counts[current] += 1 if added == "-" else int(added) + int(removed)
        return counts

    def changed_paths(self, old: str, new: str) -> set[str]:
        """Every path that differs between two commits (no rename pairing: both names count)."""
        out = self.repo.git(
            [
                "diff",
                "--name-only",
                "-z",
                "--no-renames",
                *DIFF_FLAGS,
                old,
                new,
            ]
        ).text
        return set(filter(None, out.split("\x00")))

    def changed_lines_text(self, old: str, new: str) -> str:
        """The lines that differ from `old` to `new` (commits or trees) as a zero-context diff: exactly
        the changed lines, each under its file and hunk header, for a person to read."""
        return self.repo.git(["diff", "-U0", "--no-renames", *DIFF_FLAGS, old, new]).text

    def changed_line_count(self, old: str, new: str) -> int:
        """Added plus removed lines from `old` to `new` (binary files count one each)."""
        out = self.repo.git(["diff", "--numstat", "--no-renames", *DIFF_FLAGS, old, new]).text
        total = 0
        for line in out.splitlines():
            added, removed, _ = line.split("\t", 2)
            total += 1 if added == "-" else int(added) + int(removed)
        return total
