"""The trees a validate run tests: the fork head built from upstream's own base, and the base itself.

GPU hosts have no network and no upstream clone, so the base travels as a `git archive` of the
manifest's base commit (`git archive --format=tar.gz -o base.tgz <base> megatron tests`, made on any
clone). git writes the commit id into the archive's header, so the archive says which commit it holds;
forkctl refuses one made from another commit. The series is applied to a copy of it exactly as
`forkctl apply` builds the fork head (git apply, no 3-way), so the tested `megatron/` folder is
apply(series, base)'s, which its git tree id (recorded in the evidence) shows. The base copy keeps
upstream's tests beside it for the regression run (`forkctl.gpu.upstream`).

The header is only the archive's word: before any test runs, every top-level folder and file of the
extracted archive is hashed as git would (`git.treehash`) and compared with the base commit's own tree
entries, read from upstream as check-pins reaches it (`BaseEntries`, given by the command): an archive
labelled with the base whose `megatron/` (or `tests/`) differs is refused.

What the source lacks because it is built at install time (compiled helpers such as
`megatron/core/datasets/helpers_cpp*.so`) is copied from the installed distribution into both trees,
after their tree ids were taken, and listed in the evidence.
"""

from __future__ import annotations

import shutil
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import msgspec

from forkctl.errors import BadInput
from forkctl.git.treehash import file_blob_id, folder_tree_id
from forkctl.gpu.evidence import TestedTree
from forkctl.ops import patch_dir
from forkctl.series import Series

# Built at install time, never in the source: what may be overlaid from the installed distribution.
COMPILED_SUFFIXES = (".so", ".pyd")
ARCHIVE_HINT = "make it on any upstream clone: git archive --format=tar.gz -o base.tgz {base} {package} tests"
# {top-level name: object id} of the base commit's tree for the names asked (a name it lacks is absent).
BaseEntries = Callable[[list[str]], dict[str, str]]


class PreparedTrees(msgspec.Struct, frozen=True):
    """Where the tested package and the two upstream trees are, and what the evidence says of them."""

    site: Path  # holds megatron/ (the fork head's): first on the GPU suite's PYTHONPATH
    tested: TestedTree
    plain: Path | None = None  # holds the base's megatron/, for the suites' "fails without the series" checks
    base_root: Path | None = None  # upstream's base tree (megatron/ + tests/), for the regression run
    head_root: Path | None = None  # the same with the series applied


def unreadable(archive: Path, what: str, exc: BaseException) -> BadInput:
    """The archive cannot be read (most often an interrupted copy that cut it short)."""
    return BadInput(
        f"{archive}: {what}: {exc}",
        hint="make it again (git archive --format=tar.gz -o base.tgz BASE megatron tests); an "
        "interrupted copy leaves it cut short",
    )


def archive_commit(archive: Path) -> str | None:
    """The commit id `git archive` wrote into the archive's global header (None for a tree's archive)."""
    try:
        with tarfile.open(archive) as tar:
            comment = tar.pax_headers.get("comment")
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:  # EOFError: a truncated archive
        raise unreadable(archive, "not a readable tar archive", exc) from None
    return comment.strip() if comment else None


def check_whole(archive: Path) -> None:
    """BadInput unless `archive` reads as a tar archive to its end (an interrupted copy is cut short)."""
    try:
        with tarfile.open(archive) as tar:
            _safe_members(tar, archive)
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:
        raise BadInput(
            f"{archive}: not a readable tar archive: {exc}",
            hint="make it again (git archive --format=tar.gz -o base.tgz BASE megatron tests); an "
            "interrupted copy leaves it cut short",
        ) from None


def _safe_members(tar: tarfile.TarFile, archive: Path) -> list[tarfile.TarInfo]:
    """Only plain files and folders inside the destination: an archive is data, not instructions."""
    members = []
    for member in tar.getmembers():
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts:
            raise BadInput(f"{archive}: member {member.name!r} points outside the archive's folder")
        if not (member.isfile() or member.isdir() or member.issym()):
            raise BadInput(f"{archive}: member {member.name!r} is not a file or folder")
        if member.issym() and (PurePosixPath(member.linkname).is_absolute() or ".." in member.linkname):
            raise BadInput(f"{archive}: link {member.name!r} points outside the archive's folder")
        members.append(member)
    return members


def extract(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    try:
        with tarfile.open(archive) as tar:
            members = _safe_members(tar, archive)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=members, filter="data")
            else:  # Python < 3.10.12 / 3.11.4: the members were checked above
                tar.extractall(dest, members=members)
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:  # EOFError: a truncated archive
        raise unreadable(archive, "cannot extract", exc) from None


def _apply_series(root: Path, series: Series) -> None:
    """The series onto the copy of the base, as apply builds the fork head: all patches, git apply."""
    plan = patch_dir.plan(root, series.patches)
    if plan.state != patch_dir.TreeState.UNAPPLIED:
        failing = [
            f"{v.patch.path.name}: {v.message or v.status}"
            for v in plan.verdicts
            if v.status != patch_dir.PatchStatus.NOT_APPLIED
        ]
        raise BadInput(
            "the series does not apply to the base archive as forkctl apply applies it: "
            + ("; ".join(failing) or str(plan.state)),
            hint="a patch that needs a 3-way merge on its own base is stale: port or re-export the series",
        )
    patch_dir.execute(plan)


def _overlay(installed: Path, roots: list[Path], package: str) -> list[str]:
    """Copy compiled files of the installed package that the source lacks into each tree's <package>/."""
    overlaid = []
    for path in sorted(installed.rglob("*")):
        rel = path.relative_to(installed)
        if not path.is_file() or path.suffix not in COMPILED_SUFFIXES or "__pycache__" in rel.parts:
            continue
        if all((root / package / rel).exists() for root in roots):
            continue
        for root in roots:
            target = root / package / rel
            if not target.exists() and target.parent.is_dir():
                shutil.copy2(path, target)
        overlaid.append(f"{package}/{rel.as_posix()}")
    return overlaid


def checked_base(
    archive: Path, series: Series, scratch: Path, package: str, base_entries: BaseEntries
) -> Path:
    """Extract the base into scratch/base and check it is the manifest's base: the header's commit
    id, then each top-level entry's git object id against the base commit's (`base_entries`)."""
    commit = archive_commit(archive)
    hint = ARCHIVE_HINT.format(base=series.base, package=package)
    if commit != series.base:
        what = f"commit {commit}" if commit else "no commit id (an archive of a tree, or not made by git)"
        raise BadInput(f"{archive} holds {what}, not the manifest's base {series.base}", hint=hint)
    base_root = scratch / "base"
    extract(archive, base_root)
    if not (base_root / package).is_dir():
        raise BadInput(f"{archive} has no {package}/ folder", hint=hint)
    names = sorted(path.name for path in base_root.iterdir())
    wanted = base_entries(names)
    differs = []
    for name in names:
        path = base_root / name
        got = folder_tree_id(path) if path.is_dir() and not path.is_symlink() else file_blob_id(path)
        if got != wanted.get(name):
            differs.append(f"{name} ({got[:12]}, the base has {(wanted.get(name) or 'no such entry')[:12]})")
    if differs:
        raise BadInput(
            f"{archive} is labelled with the base {series.base[:12]} but does not hold the base's tree: "
            f"{', '.join(differs)}; nothing was tested",
            hint=hint,
        )
    return base_root


def from_base_archive(
    archive: Path,
    series: Series,
    installed: Path,
    scratch: Path,
    package: str,
    base_entries: BaseEntries | None = None,
) -> PreparedTrees:
    """Extract the base, check it is the manifest's base, build the fork head beside it; `package` is
    the manifest's package.name, the folder tested. An archive already checked (`checked_base`) is used
    as extracted there."""
    base_root = scratch / "base"
    if not base_root.is_dir():
        checked_base(archive, series, scratch, package, base_entries or no_base_entries)
    head_root = scratch / "head"
    base_tree = folder_tree_id(base_root / package)
    shutil.copytree(base_root, head_root, symlinks=True)
    _apply_series(head_root, series)
    head_tree = folder_tree_id(head_root / package)
    overlaid = _overlay(installed, [base_root, head_root], package)
    # Only the package's folder goes on the suites' PYTHONPATH: upstream's `tests` package would shadow the
    # toolkit's. Copies, not links: the suites check that megatron is imported from inside the folder.
    site, plain = scratch / "site", scratch / "plain"
    shutil.copytree(head_root / package, site / package, symlinks=True)
    shutil.copytree(base_root / package, plain / package, symlinks=True)
    tested = TestedTree(
        source="upstream-base",
        package_tree=head_tree,
        base_commit=series.base,
        base_package_tree=base_tree,
        overlaid=overlaid,
    )
    return PreparedTrees(site=site, tested=tested, plain=plain, base_root=base_root, head_root=head_root)


def no_base_entries(names: list[str]) -> dict[str, str]:
    """No upstream to compare with (a library caller that passed none): the archive cannot be trusted."""
    raise BadInput(
        "the archive's tree cannot be checked without the base commit's tree",
        hint="pass the upstream repository (forkctl validate --upstream-repo CLONE)",
    )
