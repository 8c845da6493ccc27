"""Pull requests and issues through the GitHub CLI (`gh`): open one for a pushed branch, or update the
one already open for that head branch; keep one issue (`forkctl sync`'s dashboard) found by a marker.

Ours only: branch names are predictable and `gh pr list --head` matches a branch of that name in any
fork, so a pull request is ours when its head repository is the one we pushed to (owner and name) AND
the identity gh acts as opened it (`author.login` against `gh api user`, or $FORKCTL_GH_LOGIN where the
token cannot ask, e.g. `app/github-actions`); the dashboard is ours when it holds the marker AND we
opened it. Anything else that looks like ours is a stranger's: reported (`Opened.strangers`), never
edited or closed.

gh is not git, so its runner lives here and not in forkctl/git/. Like every child, gh runs through
forkctl.process: an argument list (never a shell) in its own process group, with a time limit that ends
whatever it started. Every value is passed as `--flag=value`, so a repository, branch or title from the manifest
is data and never becomes an option. gh's credentials are its own (`gh auth login`, GH_TOKEN).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
from pathlib import Path

import msgspec

from forkctl import process
from forkctl.digests import sha256_hex
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
    strangers: list[str] = msgspec.field(default_factory=list)  # look-alikes left alone, as "#N by LOGIN ..."


LOGIN_ENV = "FORKCTL_GH_LOGIN"  # who gh acts as, where `gh api user` cannot answer (an app's token)
PR_FIELDS = "number,url,body,headRefName,headRepository,headRepositoryOwner,author"


def whoami(gh: str) -> str:
    """The login gh acts as: $FORKCTL_GH_LOGIN, else `gh api user`'s answer."""
    given = os.environ.get(LOGIN_ENV, "").strip()
    if given:
        return given
    command = ["gh", "api", "user", "--jq=.login"]
    try:
        login = _run(gh, command).strip()
    except GhFailed as exc:
        raise GhFailed(
            f"cannot tell which identity gh acts as ({exc.message}); forkctl edits only what that identity "
            f"opened: set ${LOGIN_ENV} to it (e.g. app/github-actions for a workflow's token)",
            command,
        ) from None
    if not login or any(c.isspace() for c in login):
        raise GhFailed(f"gh api user answered no login: {login[:100]!r}", command)
    return login


class _Item(msgspec.Struct, frozen=True):
    number: int
    url: str
    body: str
    author: str
    head_owner: str = ""
    head_repo: str = ""
    head_branch: str = ""

    def said(self) -> str:
        head = f" from {self.head_owner}/{self.head_repo}:{self.head_branch}" if self.head_branch else ""
        return f"#{self.number} by {self.author or 'an unknown author'}{head} ({self.url})"


class _Login(msgspec.Struct):
    login: str | None = None


class _Named(msgspec.Struct):
    name: str | None = None


class _Listed(msgspec.Struct, rename="camel"):
    """One entry of gh's JSON list, as `--json=` asks for it; other keys are ignored."""

    number: int
    url: str | None = None
    body: str | None = None
    author: _Login | None = None
    head_repository_owner: _Login | None = None
    head_repository: _Named | None = None
    head_ref_name: str | None = None


def _items(out: str, command: list[str]) -> list[_Item]:
    """gh's JSON list of pull requests or issues, as items. Anything else (a number past a float, a
    fraction for a number, nesting past any depth, another shape) is bad input from a remote: exit 2."""
    try:
        listed = msgspec.json.decode(out.encode() or b"[]", type=list[_Listed])
    except (msgspec.DecodeError, RecursionError, UnicodeError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:200]
        said = out.strip()[:200] + ("..." if len(out.strip()) > 200 else "")
        raise BadInput(
            f"{' '.join(command[:3])} answered what is not its JSON list ({why}): {said}",
            hint=f"check that gh is GitHub's CLI (gh --version) and retry: {shell_line(command)}",
        ) from None
    return [
        _Item(
            item.number,
            item.url or "",
            item.body or "",
            (item.author.login if item.author else None) or "",
            (item.head_repository_owner.login if item.head_repository_owner else None) or "",
            (item.head_repository.name if item.head_repository else None) or "",
            item.head_ref_name or "",
        )
        for item in listed
    ]


def stranger_warning(what: str, stranger: str) -> str:
    """The words for a look-alike forkctl left alone."""
    return (
        f"the {what}: {stranger} looks like forkctl's (same branch or marker) but is not ours (another "
        "head repository or author): left as it is, never edited or closed"
    )


def _same(a: str, b: str) -> bool:
    return a.casefold() == b.casefold()


def _ours_pr(item: _Item, repo: str, me: str) -> bool:
    """Opened by `me` from a branch of `repo` itself (GitHub names are case-insensitive)."""
    owner, _, name = repo.partition("/")
    return _same(item.author, me) and _same(item.head_owner, owner) and _same(item.head_repo, name)


def _sorted_out(items: list[_Item], ours) -> tuple[_Item | None, list[str]]:  # type: ignore[no-untyped-def]
    """(the first item that is ours, the others described)."""
    mine = [item for item in items if ours(item)]
    return (mine[0] if mine else None), [item.said() for item in items if not ours(item)]


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


def _our_pull_request(spec: PullRequestSpec, gh: str) -> tuple[_Item | None, list[str]]:
    """The open pull request from `spec.head` of `spec.repo` that we opened, and any look-alikes."""
    listing = ["gh", "pr", "list", f"--repo={spec.repo}", f"--head={spec.head}", f"--json={PR_FIELDS}"]
    items = [item for item in _items(_run(gh, listing), listing) if item.head_branch in ("", spec.head)]
    if not items:
        return None, []
    me = whoami(gh)
    return _sorted_out(items, lambda item: _ours_pr(item, spec.repo, me))


def _one_at_a_time(repo: str) -> contextlib.AbstractContextManager[None]:
    """One forkctl at a time finding-or-making a pull request or issue on `repo` (a lock in forkctl's
    cache, held across the look-up and the making): two runs at once (two syncs) would each find none
    and each make one. The one that waited looks again once it holds the lock, and finds the other's."""
    from forkctl import locking
    from forkctl.files import cache_root

    key = sha256_hex(repo.casefold().encode())[:16]  # GitHub names are case-insensitive
    wait = locking.wait_limit() + 4 * GH_TIMEOUT_S  # the holder may run a few gh commands
    return locking.held(
        cache_root() / "locks" / f"github-{key}.lock", f"pull requests and issues of {repo}", wait
    )


def open_or_update(spec: PullRequestSpec, gh: str) -> Opened:
    """Update the body of our open pull request whose head is `spec.head`, or create one."""
    with _one_at_a_time(spec.repo):
        return _open_or_update(spec, gh)


def _open_or_update(spec: PullRequestSpec, gh: str) -> Opened:
    found, strangers = _our_pull_request(spec, gh)
    if found is not None:
        edit = ["gh", "pr", "edit", str(found.number), f"--repo={spec.repo}", f"--body-file={spec.body_file}"]
        _run(gh, edit)
        return Opened("updated", edit, url=found.url, number=found.number, strangers=strangers)
    create = create_command(spec)
    out = _run(gh, create)
    link = next((line.strip() for line in out.splitlines() if line.strip().startswith("http")), None)
    num = int(link.rstrip("/").rsplit("/", 1)[-1]) if link and link.rstrip("/")[-1:].isdigit() else None
    return Opened("created", create, url=link, number=num, strangers=strangers)


def open_or_update_unless_same(spec: PullRequestSpec, gh: str) -> Opened:
    """As `open_or_update`, but our open pull request whose body already is the new one is left alone
    (action `unchanged`): a rerun with nothing new edits nothing."""
    with _one_at_a_time(spec.repo):
        found, strangers = _our_pull_request(spec, gh)
        if found is None:
            return _open_or_update(spec, gh)
        return msgspec.structs.replace(_edited("pr", found, spec, gh), strangers=strangers)


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
        f"--json={PR_FIELDS}",
    ]
    items = _items(_run(gh, listing), listing)
    me = whoami(gh) if items else ""
    closed = []
    for item in items:
        if (
            item.head_branch.startswith(prefix)
            and item.head_branch != spec.head
            and _ours_pr(item, spec.repo, me)
        ):
            comment = f"Superseded by {link} (forkctl sync: the consumers' upstream moved on)."
            _run(gh, ["gh", "pr", "close", str(item.number), f"--repo={spec.repo}", f"--comment={comment}"])
            closed.append(item.number)
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
    or create it when `create`; `absent` when there is none and none is to be made. Looked up and
    made under the repository's lock (`_one_at_a_time`): one dashboard under concurrent syncs."""
    with _one_at_a_time(spec.repo):
        return _keep_issue(spec, gh, create)


def _keep_issue(spec: IssueSpec, gh: str, create: bool) -> Opened:
    listing = [
        "gh",
        "issue",
        "list",
        f"--repo={spec.repo}",
        "--state=open",
        f"--search={spec.title} in:title",
        "--limit=100",
        "--json=number,url,body,author",
    ]
    marked = [item for item in _items(_run(gh, listing), listing) if spec.marker in item.body]
    me = whoami(gh) if marked else ""
    found, strangers = _sorted_out(marked, lambda item: _same(item.author, me))
    if found is None:
        if not create:
            return Opened("absent", listing, strangers=strangers)
        command = issue_create_command(spec)
        url = next((line.strip() for line in _run(gh, command).splitlines() if line.startswith("http")), None)
        number = int(url.rsplit("/", 1)[-1]) if url and url.rsplit("/", 1)[-1].isdigit() else None
        return Opened("created", command, url=url, number=number, strangers=strangers)
    return msgspec.structs.replace(_edited("issue", found, spec, gh), strangers=strangers)


def _edited(kind: str, found: _Item, spec: PullRequestSpec | IssueSpec, gh: str) -> Opened:
    """Our pull request or issue `found` given `spec`'s body: left as it is when the body is already
    that, else edited with `gh <kind> edit`."""
    number, url, body = found.number, found.url, found.body
    edit = ["gh", kind, "edit", str(number), f"--repo={spec.repo}", f"--body-file={spec.body_file}"]
    if _same_body(body, spec.body_file):
        return Opened("unchanged", edit, url=url, number=number)
    _run(gh, edit)
    return Opened("updated", edit, url=url, number=number)


def _same_body(body: str, body_file: Path) -> bool:
    """GitHub keeps a body as sent, but may end its lines with CRLF: compare without either."""
    new = body_file.read_text()
    return body.replace("\r\n", "\n").strip() == new.replace("\r\n", "\n").strip()


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
