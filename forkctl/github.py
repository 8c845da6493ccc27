"""Pull requests and issues through the GitHub CLI (`gh`): open one for a pushed branch, or update the
one already open for that head branch; keep one issue (`forkctl sync`'s dashboard) found by a marker.

gh is not git, so its runner lives here and not in forkctl/git/. Like every child, gh runs through
forkctl.process: an argument list (never a shell) in its own process group, with a time limit that ends
whatever it started. Every value is passed as `--flag=value`, so a repository, branch or title from the manifest
is data and never becomes an option. gh's credentials are its own (`gh auth login`, GH_TOKEN).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import msgspec

from forkctl import process
from forkctl.errors import BadInput

GH_TIMEOUT_S = 120.0
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.][A-Za-z0-9_.-]*$")


def _checked(repo: str, hint: str, whose: str, **one_line: str) -> None:
    """BadInput unless `repo` is a GitHub OWNER/NAME and each named value is one non-empty line (a value
    gh gets as one argument)."""
    if not REPO_RE.match(repo):
        raise BadInput(f"{repo!r} is not a GitHub OWNER/NAME", hint=hint)
    for name, value in one_line.items():
        if not value.strip() or "\n" in value:
            raise BadInput(f"the {whose} {name} {value!r} is empty or spans lines")


class PullRequestSpec(msgspec.Struct, frozen=True):
    """One pull request: from `head` to `base` in `repo` (OWNER/NAME), with this title and body file."""

    repo: str
    base: str
    head: str
    title: str
    body_file: Path

    def __post_init__(self) -> None:
        _checked(
            self.repo,
            "fix consumers[].fork in the manifest",
            "pull request's",
            base=self.base,
            head=self.head,
            title=self.title,
        )


class Opened(msgspec.Struct, frozen=True):
    """What became of a pull request: `created`, `updated`, or `not-opened` (no gh; run `command`)."""

    action: str
    command: list[str]
    url: str | None = None
    number: int | None = None


class GhFailed(Exception):
    """gh ran and said no (not logged in, no permission, ...): its own words, and the command to retry."""

    def __init__(self, message: str, command: list[str]) -> None:
        super().__init__(message)
        self.message = message
        self.command = command


def gh_on_path() -> str | None:
    return shutil.which("gh")


def create_command(spec: PullRequestSpec) -> list[str]:
    """`gh pr create ...` for `spec`, every value joined to its flag."""
    return [
        "gh",
        "pr",
        "create",
        f"--repo={spec.repo}",
        f"--base={spec.base}",
        f"--head={spec.head}",
        f"--title={spec.title}",
        f"--body-file={spec.body_file}",
    ]


def shell_line(command: list[str]) -> str:
    """The command as a person pastes it into a shell."""
    return shlex.join(command)


def open_or_update(spec: PullRequestSpec, gh: str) -> Opened:
    """Update the body of the open pull request whose head is `spec.head`, or create one."""
    listing = ["gh", "pr", "list", f"--repo={spec.repo}", f"--head={spec.head}", "--json=number,url"]
    existing = _parse_list(_run(gh, listing), listing)
    if existing is not None:
        number, url = existing
        edit = ["gh", "pr", "edit", str(number), f"--repo={spec.repo}", f"--body-file={spec.body_file}"]
        _run(gh, edit)
        return Opened("updated", edit, url=url, number=number)
    create = create_command(spec)
    out = _run(gh, create)
    link = next((line.strip() for line in out.splitlines() if line.strip().startswith("http")), None)
    num = int(link.rstrip("/").rsplit("/", 1)[-1]) if link and link.rstrip("/")[-1:].isdigit() else None
    return Opened("created", create, url=link, number=num)


def open_or_update_unless_same(spec: PullRequestSpec, gh: str) -> Opened:
    """As `open_or_update`, but an open pull request whose body already is the new one is left alone
    (action `unchanged`): a rerun with nothing new edits nothing."""
    listing = ["gh", "pr", "list", f"--repo={spec.repo}", f"--head={spec.head}", "--json=number,url,body"]
    found = _first_with_body(_run(gh, listing), listing, None)
    if found is None:
        return open_or_update(spec, gh)
    return _edited("pr", found, spec, gh)


def close_superseded(spec: PullRequestSpec, prefix: str, link: str, gh: str) -> list[int]:
    """Close the other open pull requests into `spec.base` whose head branch starts with `prefix` (older
    sync branches), each with a comment naming `link`, so one sync pull request stays open."""
    listing = [
        "gh",
        "pr",
        "list",
        f"--repo={spec.repo}",
        f"--base={spec.base}",
        "--state=open",
        "--limit=100",
        "--json=number,headRefName",
    ]
    out = _run(gh, listing)
    try:
        listed = [(int(item["number"]), str(item["headRefName"])) for item in json.loads(out or "[]")]
    except (ValueError, TypeError, KeyError):
        raise GhFailed(f"gh pr list answered what is not its JSON: {out.strip()[:200]}", listing) from None
    closed = []
    for number, head in listed:
        if head.startswith(prefix) and head != spec.head:
            comment = f"Superseded by {link} (forkctl sync: the consumers' upstream moved on)."
            _run(gh, ["gh", "pr", "close", str(number), f"--repo={spec.repo}", f"--comment={comment}"])
            closed.append(number)
    return closed


class IssueSpec(msgspec.Struct, frozen=True):
    """One issue kept in place: found again among the open issues of `repo` by `marker` in its body."""

    repo: str
    title: str
    body_file: Path
    marker: str

    def __post_init__(self) -> None:
        _checked(self.repo, "fix fork.repo in the manifest", "issue's", title=self.title)


def issue_create_command(spec: IssueSpec) -> list[str]:
    return [
        "gh",
        "issue",
        "create",
        f"--repo={spec.repo}",
        f"--title={spec.title}",
        f"--body-file={spec.body_file}",
    ]


def keep_issue(spec: IssueSpec, gh: str, create: bool = True) -> Opened:
    """Update the open issue whose body holds `spec.marker` (unless its body is already the new one),
    or create it when `create`; `absent` when there is none and none is to be made."""
    listing = [
        "gh",
        "issue",
        "list",
        f"--repo={spec.repo}",
        "--state=open",
        f"--search={spec.title} in:title",
        "--limit=100",
        "--json=number,url,body",
    ]
    found = _first_with_body(_run(gh, listing), listing, spec.marker)
    if found is None:
        if not create:
            return Opened("absent", listing)
        command = issue_create_command(spec)
        url = next((line.strip() for line in _run(gh, command).splitlines() if line.startswith("http")), None)
        number = int(url.rsplit("/", 1)[-1]) if url and url.rsplit("/", 1)[-1].isdigit() else None
        return Opened("created", command, url=url, number=number)
    return _edited("issue", found, spec, gh)


def _edited(kind: str, found: tuple[int, str, str], spec: PullRequestSpec | IssueSpec, gh: str) -> Opened:
    """The pull request or issue `found` (number, url, body) given `spec`'s body: left as it is when the
    body is already that, else edited with `gh <kind> edit`."""
    number, url, body = found
    edit = ["gh", kind, "edit", str(number), f"--repo={spec.repo}", f"--body-file={spec.body_file}"]
    if _same_body(body, spec.body_file):
        return Opened("unchanged", edit, url=url, number=number)
    _run(gh, edit)
    return Opened("updated", edit, url=url, number=number)


def _same_body(body: str, body_file: Path) -> bool:
    """GitHub keeps a body as sent, but may end its lines with CRLF: compare without either."""
    new = body_file.read_text()
    return body.replace("\r\n", "\n").strip() == new.replace("\r\n", "\n").strip()


def _first_with_body(out: str, command: list[str], marker: str | None) -> tuple[int, str, str] | None:
    """(number, url, body) of the first listed item (holding `marker` in its body, when given)."""
    try:
        for item in json.loads(out or "[]"):
            body = str(item.get("body") or "")
            if marker is None or marker in body:
                return int(item["number"]), str(item["url"]), body
        return None
    except (ValueError, TypeError, KeyError, AttributeError):
        raise GhFailed(f"gh answered what is not its JSON: {out.strip()[:200]}", command) from None


def _parse_list(out: str, command: list[str]) -> tuple[int, str] | None:
    """(number, url) of the first pull request `gh pr list --json number,url` names, or None."""
    try:
        listed = json.loads(out or "[]")
        if not listed:
            return None
        first = listed[0]
        return int(first["number"]), str(first["url"])
    except (ValueError, TypeError, KeyError, IndexError):
        raise GhFailed(f"gh pr list answered what is not its JSON: {out.strip()[:200]}", command) from None


def _run(gh: str, command: list[str]) -> str:
    """Run gh (`command[0]` is replaced by the resolved `gh`) and return its stdout; GhFailed otherwise."""
    env = {**os.environ, "GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1", "NO_COLOR": "1"}
    try:
        done = process.run([gh, *command[1:]], timeout=GH_TIMEOUT_S, env=env, text=True)
    except OSError as exc:
        raise GhFailed(f"cannot run {gh}: {exc.strerror}", command) from None
    except process.TimedOut:
        raise GhFailed(f"gh did not finish within {GH_TIMEOUT_S:.0f} s", command) from None
    out, err = str(done.stdout), str(done.stderr)
    if done.returncode != 0:
        words = (err or out).strip() or f"exit status {done.returncode}"
        raise GhFailed(f"gh {command[1]} {command[2]} failed: {words}", command)
    return out
