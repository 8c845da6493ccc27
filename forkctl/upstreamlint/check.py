"""Upstream's own pre-commit hooks on the files the series touches, on the base and on the fork head.

Both trees are written from git objects into a temporary folder (never a user's checkout): every file at
the top of the tree (where upstream keeps `.pre-commit-config.yaml`, `.pylintrc`, `pyproject.toml`,
`setup.cfg`), the files the series touches, and the `__init__.py` of each folder above them (so that a
linter names modules as it does in a checkout). The hooks are those of the base's
`.pre-commit-config.yaml`: the fork's pull request is judged by what upstream pins, not by a config the
series might bring. What the fork head has that the base has not is new; the rest is upstream's own.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import msgspec

from forkctl.errors import BadInput
from forkctl.git.repo import GitRepo
from forkctl.ops import replay
from forkctl.series import Patch
from forkctl.upstreamlint import hooks, tools
from forkctl.upstreamlint.hooks import Skipped
from forkctl.upstreamlint.run import Finding, new_on_head, run_hook

if TYPE_CHECKING:
    from forkctl.git.objects import Objects

_FILE_MODES = {"100644", "100755"}


class HookResult(msgspec.Struct, frozen=True):
    id: str
    tool: str
    files: list[str]  # the touched files this hook was given on the fork head
    base_findings: int
    head_findings: int
    new: list[Finding]


class UpstreamLint(msgspec.Struct, frozen=True):
    base: str
    head: str
    touched: list[str]
    hooks: list[HookResult]
    skipped: list[Skipped]  # not hooks.Skipped: in this class, `hooks` is the field above

    @property
    def new(self) -> list[Finding]:
        return [finding for result in self.hooks for finding in result.new]


def _wanted(entries: Mapping[str, object], touched: list[str], named: set[str]) -> list[str]:
    folders = {
        str(parent) for path in touched for parent in PurePosixPath(path).parents if str(parent) != "."
    }
    keep = set(touched) | named | {f"{folder}/__init__.py" for folder in folders}
    return sorted(path for path in entries if "/" not in path or path in keep)


def _named_by(runnable: list[hooks.Hook]) -> set[str]:
    """Paths a hook's command line names (a local hook's script, a config file given as an argument)."""
    return {word.removeprefix("./") for hook in runnable for word in hook.argv}


def materialise(objects: Objects, commit: str, touched: list[str], dest: Path, named: set[str]) -> list[str]:
    """Write the files of `commit` a hook run needs into `dest`; the touched files it has, sorted."""
    entries = objects.all_entries(commit)
    for path in _wanted(entries, touched, named):
        entry = entries[path]
        if entry.kind != "blob" or entry.mode not in _FILE_MODES:
            continue  # links and gitlinks: no linter reads them as files
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(objects.blob_bytes(entry.sha))
        if entry.mode == "100755":
            target.chmod(0o755)
    return sorted(path for path in touched if path in entries and (dest / path).is_file())


def _config(objects: Objects, base: str) -> hooks.PreCommitConfig:
    text = objects.read_blob(base, hooks.CONFIG_FILE)
    if text is None:
        raise BadInput(
            f"upstream has no {hooks.CONFIG_FILE} at the base {base[:12]}: there is no upstream lint to run",
            hint="run forkctl lint without --upstream",
        )
    return hooks.parse(text.decode(errors="replace"))


def fork_head(repo: GitRepo, base: str, patches: list[Patch]) -> str:
    """apply(series, base), as forkctl apply builds it; a stale series has none."""
    full = repo.objects.resolve_commit(base)
    if full is None:
        raise BadInput(f"the base {base} is not in {repo.git_dir}", hint="fetch upstream into that clone")
    built = replay.build_series(repo, full, patches)
    if built.conflict is not None:
        raise BadInput(
            f"{built.conflict.patch.path.name} does not apply as written on the base {base[:12]}: "
            "the series has no fork head to lint",
            hint=replay.stale_fix(base),
        )
    return built.head


def check(
    repo: GitRepo,
    base: str,
    patches: list[Patch],
    progress: Callable[[str], None],
    trust_local: bool = False,
) -> UpstreamLint:
    """Run the base's pre-commit hooks on the touched files of the base and of the fork head, compared."""
    config = _config(repo.objects, base)
    head = fork_head(repo, base, patches)
    touched = sorted({path for patch in patches for path in patch.paths})
    runnable, skipped = hooks.hooks_of(config, trust_local)
    results = []
    with tempfile.TemporaryDirectory(prefix="forkctl-upstream-lint-") as folder:
        scratch = Path(folder)
        named = _named_by(runnable)
        base_files = materialise(repo.objects, base, touched, scratch / "base", named)
        head_files = materialise(repo.objects, head, touched, scratch / "head", named)
        for hook in runnable:
            bin_dir = tools.ensure(hook, progress)
            base_paths = hooks.selected(hook, config, base_files)
            head_paths = hooks.selected(hook, config, head_files)
            progress(f"{hook.tool} ({hook.id}) on {len(head_paths)} file(s) of the base and the fork head")
            on_base = run_hook(hook, bin_dir, scratch / "base", base_paths, scratch / "cache-base")
            on_head = run_hook(hook, bin_dir, scratch / "head", head_paths, scratch / "cache-head")
            new = new_on_head(on_base, on_head)
            results.append(HookResult(hook.id, hook.tool, head_paths, len(on_base), len(on_head), new))
    return UpstreamLint(base=base, head=head, touched=touched, hooks=results, skipped=skipped)
