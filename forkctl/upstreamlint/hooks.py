"""Upstream's `.pre-commit-config.yaml` read as the hooks forkctl runs, each with what it installs.

pre-commit itself installs a remote hook by cloning the hook's git repository at `rev` and building it:
that needs the hook's host (github.com), which CI runners and GPU hosts often cannot reach, and it keeps
its environments in its own cache. The hooks upstreams pin are nearly always Python tools published on
PyPI under the version their hook repository is tagged with (black, isort, pylint, flake8, ruff's
mirror), so a remote hook forkctl knows becomes `<package>==<rev>` installed from the package index, run
with the entry and file types its hook repository declares (`KNOWN_REPOS`, written from those
repositories' `.pre-commit-hooks.yaml`). `repo: local` hooks of language `python` (with their
`additional_dependencies`) and `system` run as declared, only with `--trust-local-hooks`. Anything else is listed as not run, never
passed silently.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import msgspec

from forkctl.errors import BadInput

CONFIG_FILE = ".pre-commit-config.yaml"
PYTHON_SUFFIXES = (".py", ".pyi")
# A requirement is data from upstream's config: a name, extras and version clauses, never a pip option.
REQUIREMENT_RE = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?([<>=!~]=?[A-Za-z0-9.*+!_-]+,?)*$"
)
VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*([a-z]+[0-9]*)?(\.post[0-9]+)?(\.dev[0-9]+)?$")


class KnownHook(msgspec.Struct, frozen=True):
    package: str  # on PyPI, at the version the hook repository's tag names
    entry: list[str]
    suffixes: tuple[str, ...] = PYTHON_SUFFIXES  # the hook's `types` / `types_or`, as file suffixes
    args: list[str] = msgspec.field(default_factory=list)  # the hook definition's own args


# Hook repositories (lower case, no scheme, no .git) -> hook id -> what it runs.
KNOWN_REPOS: dict[str, dict[str, KnownHook]] = {
    "github.com/psf/black": {"black": KnownHook("black", ["black"])},
    "github.com/psf/black-pre-commit-mirror": {"black": KnownHook("black", ["black"])},
    "github.com/pycqa/isort": {
        "isort": KnownHook("isort", ["isort"], (".py", ".pyi", ".pyx"), ["--filter-files"])
    },
    "github.com/pycqa/pylint": {"pylint": KnownHook("pylint", ["pylint"], (".py",))},
    "github.com/pycqa/flake8": {"flake8": KnownHook("flake8", ["flake8"], (".py",))},
    "github.com/astral-sh/ruff-pre-commit": {
        "ruff": KnownHook("ruff", ["ruff", "check", "--force-exclude"]),
        "ruff-check": KnownHook("ruff", ["ruff", "check", "--force-exclude"]),
        "ruff-format": KnownHook("ruff", ["ruff", "format", "--force-exclude"]),
    },
}


class HookConfig(msgspec.Struct, frozen=True):
    id: str
    entry: str | None = None
    language: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    files: str = ""
    exclude: str = "^$"
    types: list[str] | None = None
    types_or: list[str] | None = None
    additional_dependencies: list[str] = msgspec.field(default_factory=list)
    stages: list[str] | None = None
    name: str | None = None


class RepoConfig(msgspec.Struct, frozen=True):
    repo: str
    rev: str | None = None
    hooks: list[HookConfig] = msgspec.field(default_factory=list)


class PreCommitConfig(msgspec.Struct, frozen=True):
    repos: list[RepoConfig]
    files: str = ""
    exclude: str = "^$"


class Hook(msgspec.Struct, frozen=True):
    """One hook as forkctl runs it: `argv` + the selected files, in a venv holding `requirements`
    (`system`: no venv, the entry from PATH)."""

    id: str
    tool: str  # what reports and cache folders call it: `pylint 3.2.6`, or the hook id for a local hook
    requirements: list[str]
    argv: list[str]
    files: str
    exclude: str
    suffixes: tuple[str, ...] | None  # None: every file
    system: bool = False


class Skipped(msgspec.Struct, frozen=True):
    id: str
    repo: str
    why: str


_TYPE_SUFFIXES = {"python": (".py",), "pyi": (".pyi",), "cython": (".pyx",), "jupyter": (".ipynb",)}
_COMMIT_STAGES = {"pre-commit", "commit"}


def repo_key(url: str) -> str:
    key = re.sub(r"^[a-z+]+://", "", url.strip().lower()).rstrip("/")
    return key.removesuffix(".git")


def version_of(rev: str) -> str | None:
    """The release a hook repository's `rev` names (`v3.2.6`, `refs/tags/26.3.0:refs/tags/26.3.0`),
    or None for a commit or branch (nothing on the package index is named after it)."""
    tag = rev.rsplit(":", 1)[-1].removeprefix("refs/tags/").removeprefix("v")
    return tag if VERSION_RE.match(tag) else None


def _suffixes(hook: HookConfig, default: tuple[str, ...] | None) -> tuple[str, ...] | None:
    named = [*(hook.types or []), *(hook.types_or or [])]
    if not named or named == ["file"]:
        return default
    suffixes = [s for name in named for s in _TYPE_SUFFIXES.get(name, ())]
    return tuple(suffixes) or default


def _requirements(hook: HookConfig, first: list[str]) -> list[str]:
    requirements = [*first, *hook.additional_dependencies]
    for requirement in requirements:
        if not REQUIREMENT_RE.match(requirement):
            raise BadInput(
                f"{CONFIG_FILE}: hook {hook.id!r} asks to install {requirement!r}, not a plain requirement "
                "(name, extras, version)",
                hint="forkctl installs only plain requirements from upstream's config; run that hook by hand",
            )
    return requirements


# Options of the known tools that load or run code named in the option (pylint's init hook and plugins).
CODE_RUNNING_ARGS = ("--init-hook", "--load-plugins")


def runs_named_code(hook: HookConfig) -> bool:
    """Does the configuration make a known hook run something it names (its own `entry`, extra
    packages, an option that loads code)? Then it is trusted by name, as a local hook is."""
    loads = any(arg.split("=", 1)[0] in CODE_RUNNING_ARGS for arg in hook.args)
    return bool(hook.entry or hook.additional_dependencies or loads)


def _remote(repo: RepoConfig, hook: HookConfig) -> Hook | Skipped:
    known = KNOWN_REPOS.get(repo_key(repo.repo), {}).get(hook.id)
    if known is None:
        return Skipped(
            hook.id, repo.repo, "forkctl does not know which package this hook repository installs"
        )
    version = version_of(repo.rev or "")
    if version is None:
        return Skipped(hook.id, repo.repo, f"rev {repo.rev!r} names no release on the package index")
    entry = hook.entry.split() if hook.entry else known.entry
    return Hook(
        id=hook.id,
        tool=f"{known.package} {version}",
        requirements=_requirements(hook, [f"{known.package}=={version}"]),
        argv=[*entry, *known.args, *hook.args],
        files=hook.files,
        exclude=hook.exclude,
        suffixes=_suffixes(hook, known.suffixes),
    )


def _local(repo: RepoConfig, hook: HookConfig) -> Hook | Skipped:
    if hook.language not in ("python", "system") or not hook.entry:
        return Skipped(hook.id, repo.repo, f"language {hook.language!r} is not one forkctl runs")
    return Hook(
        id=hook.id,
        tool=hook.id,
        requirements=_requirements(hook, []) if hook.language == "python" else [],
        argv=[*hook.entry.split(), *hook.args],
        files=hook.files,
        exclude=hook.exclude,
        suffixes=_suffixes(hook, None),
        system=hook.language == "system",
    )


def parse(text: str) -> PreCommitConfig:
    from forkctl.manifest.yamldata import compose  # the one reader of YAML: plain tags, no aliases

    data, _ = compose(text, CONFIG_FILE)
    try:
        return msgspec.convert(data, PreCommitConfig)
    except msgspec.ValidationError as exc:
        raise BadInput(
            f"upstream's {CONFIG_FILE} does not read as a pre-commit configuration: {exc}"
        ) from None


TRUST_OPTION = "--trust-local-hooks"


def hooks_of(config: PreCommitConfig, trust_local: bool = False) -> tuple[list[Hook], list[Skipped]]:
    """The hooks that run at commit time, in the config's order, and those forkctl does not run. A
    `repo: local` hook runs a command (and installs packages) upstream's configuration names: that is
    data, run only when the user trusts it by name (`trust_local`); a known remote hook runs forkctl's
    own command for a pinned release."""
    hooks: list[Hook] = []
    skipped: list[Skipped] = []
    for repo in config.repos:
        for hook in repo.hooks:
            if hook.stages is not None and not _COMMIT_STAGES & set(hook.stages):
                continue
            if (repo.repo == "local" or runs_named_code(hook)) and not trust_local:
                why = f"the hook runs a command, package or plugin upstream's configuration names: pass {TRUST_OPTION}"
                skipped.append(Skipped(hook.id, repo.repo, why))
                continue
            made = _local(repo, hook) if repo.repo == "local" else _remote(repo, hook)
            (hooks if isinstance(made, Hook) else skipped).append(made)  # type: ignore[arg-type]
    return hooks, skipped


def selected(hook: Hook, config: PreCommitConfig, paths: list[str]) -> list[str]:
    """The paths this hook is given, as pre-commit selects them: the config's and the hook's `files`
    and `exclude` (searched, not matched, as pre-commit does) and the hook's file types."""
    chosen = []
    for path in paths:
        if not (re.search(config.files, path) and re.search(hook.files, path)):
            continue
        if re.search(config.exclude, path) or re.search(hook.exclude, path):
            continue
        if hook.suffixes is not None and PurePosixPath(path).suffix not in hook.suffixes:
            continue
        chosen.append(path)
    return chosen
