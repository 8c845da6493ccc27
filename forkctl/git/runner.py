"""The one way forkctl runs git: hermetic, so the same inputs give the same bytes on every machine.

Two things outside forkctl's control change what git prints or writes:

- the environment: `GIT_DIR`, `GIT_INDEX_FILE`, `GIT_WORK_TREE`, `GIT_OBJECT_DIRECTORY`, ... are set
  when forkctl runs from a git hook and would point our commands at another repository or index;
  `GIT_CONFIG_PARAMETERS` / `GIT_CONFIG_COUNT` inject settings; a terminal prompt would hang CI.
  Every `GIT_*` variable is dropped except the few a transport needs for credentials (ssh command,
  askpass) and the choice of config files, and `GIT_TERMINAL_PROMPT=0` is set.
- configuration: `color.ui=always` empties patch-ids, `diff.noprefix` changes them, `diff.context`
  changes exported bytes, `i18n.commitEncoding` changes commit SHAs, `commit.gpgSign` makes commits
  depend on a key, `rerere.enabled` resolves conflicts behind our back. Each such setting is pinned with
  `-c` (which wins over every config file). Settings git cannot reset from `-c` (`diff.external`,
  textconv drivers) are neutralised with flags by the callers that make diffs (`DIFF_FLAGS`).

Arguments are always a list (never a shell string). Callers put every string that came from outside
(a URL, a ref, a path) after `--` or validate it first; `run` refuses an argv whose non-option data
would start with `-` where the caller said so (`data=`). `git()` is the only entry point: `check=`
says whether a failure raises or is data; the repository objects add `--git-dir` (`GitDir.git`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import msgspec

from forkctl import process
from forkctl.errors import BadInput

# Settings that change bytes, SHAs or outcomes; pinned on every call (`git -c key=value`).
PINNED_CONFIG: tuple[tuple[str, str], ...] = (
    ("color.ui", "never"),
    ("color.diff", "never"),
    ("color.branch", "never"),
    ("color.status", "never"),
    ("color.interactive", "never"),
    ("core.quotePath", "true"),
    ("core.autocrlf", "false"),
    ("core.eol", "lf"),
    ("core.safecrlf", "false"),
    ("core.hooksPath", os.devnull),
    # The user's own attributes and ignore rules (and a template's, copied into every repository git
    # makes): a clean filter or `text eol=crlf` there would change every blob `git add` writes.
    ("core.attributesFile", os.devnull),
    ("core.excludesFile", os.devnull),
    ("init.templateDir", ""),
    ("core.fsmonitor", "false"),
    ("core.abbrev", "12"),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.context", "3"),
    ("diff.interHunkContext", "0"),
    ("diff.algorithm", "myers"),
    ("diff.orderFile", os.devnull),
    ("diff.indentHeuristic", "true"),
    ("diff.renames", "false"),
    ("diff.suppressBlankEmpty", "false"),
    ("diff.relative", "false"),
    ("diff.ignoreSubmodules", "none"),
    ("diff.submodule", "short"),
    ("apply.whitespace", "nowarn"),
    ("apply.ignoreWhitespace", "no"),
    ("merge.renames", "true"),
    ("merge.directoryRenames", "conflict"),
    ("merge.renormalize", "false"),
    ("merge.default", "text"),
    ("merge.conflictStyle", "merge"),
    ("merge.renameLimit", "7000"),
    ("rerere.enabled", "false"),
    ("rerere.autoUpdate", "false"),
    ("i18n.commitEncoding", "UTF-8"),
    ("i18n.logOutputEncoding", "UTF-8"),
    ("commit.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("log.mailmap", "false"),
    ("log.decorate", "false"),
    ("log.abbrevCommit", "false"),
    ("log.showRoot", "true"),
    ("format.signature", ""),
    ("format.signOff", "false"),
    ("format.numbered", "false"),
    ("format.subjectPrefix", "PATCH"),
    ("format.thread", "false"),
    ("format.coverLetter", "false"),
    ("format.useAutoBase", "false"),
    ("format.encodeEmailHeaders", "true"),
    ("format.forceInBodyFrom", "false"),
    ("format.noprefix", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("advice.detachedHead", "false"),
    ("protocol.ext.allow", "never"),
    ("protocol.fd.allow", "never"),
)

# Existence questions must not turn into fetches from a partial clone's promisor remote: git >= 2.44
# honours GIT_NO_LAZY_FETCH; git 2.39 (this project's floor) ignores it and would lazily fetch a missing
# object (a commit with its whole history, without negotiation), so every transport is also refused
# for the command (GIT_ALLOW_PROTOCOL wins over any protocol.* setting): the lazy fetch fails at once,
# without touching the network, and the object reads as missing. The explicit fetches (clonecache.py, graph.py)
# stay the only downloads.
NO_LAZY_FETCH = MappingProxyType({"GIT_NO_LAZY_FETCH": "1", "GIT_ALLOW_PROTOCOL": "forkctl-no-lazy-fetch"})

# For commands that talk to a remote: give up on a stalled HTTP transfer (bytes/s below the limit for
# that many seconds); ssh's connect timeout comes from NETWORK_SSH_OPTIONS when the user set no ssh command.
NETWORK_CONFIG: tuple[tuple[str, str], ...] = (("http.lowSpeedLimit", "1000"), ("http.lowSpeedTime", "30"))
DEFAULT_NETWORK_TIMEOUT_S = 300.0


def network_timeout() -> float:
    """Seconds one network operation may take in total: $FORKCTL_NETWORK_TIMEOUT, default 300."""
    raw = os.environ.get("FORKCTL_NETWORK_TIMEOUT", "")
    try:
        value = float(raw) if raw else DEFAULT_NETWORK_TIMEOUT_S
    except ValueError:
        raise BadInput(f"FORKCTL_NETWORK_TIMEOUT={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise BadInput(f"FORKCTL_NETWORK_TIMEOUT={raw!r} must be positive")
    return value


def network_args() -> list[str]:
    """`-c` settings that bound a network operation (prefix them to the git subcommand's argv)."""
    return [part for key, value in NETWORK_CONFIG for part in ("-c", f"{key}={value}")]


# Flags for every command that prints a diff: no external diff, no textconv, no order file, no colour.
DIFF_FLAGS: tuple[str, ...] = ("--no-ext-diff", "--no-textconv", "--no-color")

# GIT_* variables kept: what a transport needs to authenticate and to reach a remote through a CI's
# network (a TLS-inspecting proxy's CA, a client certificate, the proxy's own TLS), and which config files
# the user chose (identity, credentials, url.insteadOf live there; every byte-changing setting is pinned
# above anyway). None of them changes a byte forkctl writes: only whether a remote answers. Variables
# without the GIT_ prefix (SSL_CERT_FILE, SSL_CERT_DIR, CURL_CA_BUNDLE, http_proxy, https_proxy,
# HTTPS_PROXY, ALL_PROXY, NO_PROXY) are never dropped. GIT_SSL_NO_VERIFY is: a leftover variable would make
# every answer of every remote forgeable by whoever sits on the path (the pins check-pins compares, the
# refs a port reads); the way through an inspecting proxy is its CA. Every other GIT_* variable is dropped.
TRANSPORT_VARIABLES = frozenset(
    {
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_ASKPASS",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "GIT_SSL_CERT",
        "GIT_SSL_KEY",
        "GIT_SSL_CERT_PASSWORD_PROTECTED",
        "GIT_SSL_VERSION",
        "GIT_SSL_CIPHER_LIST",
        "GIT_PROXY_SSL_CAINFO",
        "GIT_PROXY_SSL_CERT",
        "GIT_PROXY_SSL_KEY",
        "GIT_PROXY_SSL_CERT_PASSWORD_PROTECTED",
        "GIT_HTTP_PROXY_AUTHMETHOD",
    }
)


class GitTimeout(BadInput):
    """A git command (a network operation) ran past its time limit and was killed."""


class GitFailed(BadInput):
    """A git command failed; `stderr` carries git's own words."""

    def __init__(self, message: str, stderr: str = "", hint: str | None = None) -> None:
        super().__init__(message if not stderr else f"{message}: {stderr.strip()}", hint)
        self.stderr = stderr


# git's trace family (GIT_TRACE, GIT_TRACE2_EVENT, ...): kept by the hermetic environment; git/trace.py
# routes the destinations that mean a descriptor.
TRACE_FAMILY = "GIT_TRACE"
TRACE_OFF = ("", "0", "false")  # FORKCTL_TRACE values that mean no trace (git/trace.py reads them too)


def trace_wanted(env: Mapping[str, str]) -> bool:
    """Whether a trace is asked for: `FORKCTL_TRACE` on, or one of git's trace variables in the child's
    `env`. An untraced run (nearly every run) never imports git/trace.py."""
    return os.environ.get("FORKCTL_TRACE", "").strip().lower() not in TRACE_OFF or any(
        key.startswith(TRACE_FAMILY) for key in env
    )


def hermetic_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment without the `GIT_*` variables that redirect or reconfigure git."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("GIT_") or key in TRANSPORT_VARIABLES or key.startswith(TRACE_FAMILY)
    }
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "GIT_OPTIONAL_LOCKS": "0",
            "LC_ALL": "C",
            "LANGUAGE": "C",
            # Replace refs would change what a commit reads as: forkctl reads the real objects.
            "GIT_NO_REPLACE_OBJECTS": "1",
            # $(prefix)/etc/gitattributes is the machine's, like a global core.attributesFile.
            "GIT_ATTR_NOSYSTEM": "1",
        }
    )
    if extra:
        env.update(extra)
    return env


def git_identity() -> str:
    """Which git binary runs (the first `git` on PATH, as exec finds it): its path, size and change
    time, without running it. Part of the key of what forkctl keeps about git's byte-exact output
    (the export record), so that another git build is asked again rather than trusted."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", "git")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            real = os.path.realpath(candidate)
            stat = os.stat(real)
            return f"{real}:{stat.st_size}:{stat.st_mtime_ns}"
    return "no-git-on-path"


def argv(args: Sequence[str]) -> list[str]:
    pinned = [part for key, value in PINNED_CONFIG for part in ("-c", f"{key}={value}")]
    return ["git", *pinned, *args]


class Completed(msgspec.Struct, frozen=True):
    """A finished git: its status and raw output (`status, out, _ = repo.git([...], check=False).parts()`
    where the failure is data)."""

    status: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def text(self) -> str:
        """stdout as text, without its final newline(s): what a one-line answer reads."""
        return self.out.rstrip("\n")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    def parts(self) -> tuple[int, str, str]:
        """(status, text out, text err): the shape a check whose failure is data reads."""
        return self.status, self.out, self.err


def git(
    args: Sequence[str],
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float | None = None,
    check: bool = True,
) -> Completed:
    """Run `git <args>` hermetically: the one way forkctl runs git. `check`: a non-zero exit raises
    GitFailed with git's stderr (`check=False`: the status is data, for the caller to read).

    git runs in its own process group and the whole group (remote helpers, ssh) is killed when the time
    is up or forkctl is stopped (forkctl.process): a silent server cannot hang forkctl. Every command is
    bounded, local ones too, because in a partial clone a local-looking read can turn into a lazy fetch
    (default: `network_timeout()`).
    """
    timeout = network_timeout() if timeout is None else timeout
    child_env = hermetic_env(env)
    tracing = trace_wanted(child_env)
    if tracing:  # only a traced run imports the trace module
        from forkctl.git import trace
    trace_fds = trace.route_to_stderr(child_env) if tracing else []
    started = time.monotonic()
    try:
        done = process.run(
            argv(args),
            timeout=timeout,
            input=stdin if stdin is not None else b"",
            env=child_env,
            cwd=cwd or None,
            pass_fds=trace_fds,
        )
    except FileNotFoundError:
        raise BadInput("git is not installed or not on PATH", hint="install git (2.39 or newer)") from None
    except process.TimedOut:
        if tracing:
            trace.log(args, _where(cwd), f"killed after {timeout:.0f} s (its time limit)")
        raise GitTimeout(f"git {_verb(args)} did not finish within {timeout:.0f} s") from None
    finally:
        for fd in trace_fds:
            os.close(fd)
    if tracing:
        trace.log(args, _where(cwd), trace.finished(done.returncode, time.monotonic() - started))
    assert isinstance(done.stdout, bytes) and isinstance(done.stderr, bytes)
    completed = Completed(done.returncode, done.stdout, done.stderr)
    if check and completed.status != 0:
        raise GitFailed(f"git {_verb(args)} failed", completed.err.strip())
    return completed


def _where(cwd: Path | None) -> str:
    return str(Path(cwd).resolve() if cwd else Path.cwd())


def _verb(args: Sequence[str]) -> str:
    """The git subcommand in `args` (after any `--git-dir X` / `-C X` / `-c k=v` prefixes)."""
    skip_next = False
    for part in args:
        if skip_next:
            skip_next = False
            continue
        if part in ("--git-dir", "-C", "-c", "--work-tree"):
            skip_next = True
            continue
        if not part.startswith("-"):
            return part
    return "command"
