"""What git says about patch text, without a repository: patch-ids and the paths a diff names.

Kept apart from `repo` so that reading a series (`lint`, `status`) loads only the runner: these
functions run `git patch-id` and `git apply --numstat` on bytes, and need no repository object.
"""

from __future__ import annotations

from forkctl.git.runner import GitFailed, git


def patch_id(diff: bytes) -> str:
    """`git patch-id --stable` of a diff: the same for the same change, whatever its message."""
    output = git(["patch-id", "--stable"], stdin=diff).text
    return output.split()[0] if output else ""


def patch_ids(diffs: list[bytes]) -> list[str]:
    """`patch_id` of each diff, in one `git patch-id` process: each diff goes in under a made-up
    `commit <n>` header, which is how patch-id tells where one change ends and the next begins."""
    stream = b"".join(b"commit %040x\n%s\n" % (index + 1, diff) for index, diff in enumerate(diffs))
    by_index: dict[int, str] = {}
    for line in git(["patch-id", "--stable"], stdin=stream).text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            by_index[int(parts[1], 16) - 1] = parts[0]
    return [by_index.get(index, "") for index in range(len(diffs))]


def diff_paths(diff: bytes) -> list[str]:
    """Every path a diff names (old and new sides), in order, parsed by git itself (`apply --numstat
    -z`): spaces, quotes and non-ASCII names come out exactly, where a regex over headers guesses."""
    return diff_paths_each([diff])[0]


def diff_paths_each(diffs: list[bytes]) -> list[list[str]]:
    """`diff_paths` of each diff, in one `git apply --numstat -z` over them all. git gives one record
    per file patch, in order, so each diff takes as many records as it has `diff --git` headers (a
    header cannot appear inside a hunk, whose lines all start with ' ', '+', '-' or '\\')."""
    if not any(diff.strip() for diff in diffs):
        return [[] for _ in diffs]
    stream = b"".join(diff if diff.endswith(b"\n") or not diff else diff + b"\n" for diff in diffs)
    status, out, err = git(
        ["apply", "--numstat", "-z", "--allow-empty", "-"], stdin=stream, check=False
    ).parts()
    if status != 0:
        raise GitFailed("git cannot read the diff", err)
    records = _numstat_records(out)
    counts = [diff.count(b"\ndiff --git ") + diff.startswith(b"diff --git ") for diff in diffs]
    if len(diffs) == 1:
        counts = [len(records)]
    elif sum(counts) != len(records):  # not all git diffs: ask about each on its own
        return [diff_paths(diff) for diff in diffs]
    result: list[list[str]] = []
    for count in counts:
        names, records = records[:count], records[count:]
        paths: list[str] = []
        for record in names:
            paths.extend(name for name in record if name not in paths)
        result.append(paths)
    return result


def _numstat_records(out: str) -> list[list[str]]:
    """The path names of each `apply --numstat -z` record: one, or old and new for a rename."""
    fields = out.split("\x00")
    records: list[list[str]] = []
    position = 0
    while position < len(fields) and fields[position]:
        added_deleted_path = fields[position].split("\t", 2)
        if len(added_deleted_path) == 3 and added_deleted_path[2]:
            records.append([added_deleted_path[2]])
            position += 1
        else:  # a rename or copy: "added\tdeleted\t" then old and new as fields of their own
            records.append(fields[position + 1 : position + 3])
            position += 3
    return records
