"""Every flag a message, hint or help text names is a real, visible option of the verb it is for.

Two halves. The source walk reads every string in forkctl (ast, docstrings of helpers aside) and, for
each `--flag` in prose, finds whose flag it is: the `forkctl VERB` (or `VERB --`) named before it in the
same clause, another tool's (`git ...`, `gh ...`: skipped), the verb of the `commands/` module it is in,
or else any verb (a core message reached from several verbs). The runs then make the messages that
name a flag for the verb that prints them and hold each to that verb's own options: a flag that exists
on another verb only (`sign` naming validate's `--sign-key`) is caught there.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from forkctl.cli import cli, verbs
from tests.test_evidence import gpu_toolkit, record
from tests.toolkit import make_toolkit

ROOT = Path(__file__).resolve().parent.parent
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")
TOOLS = "git|gh|ssh-keygen|pip|python|python3|pytest|torchrun|uv|pre-commit|quilt|nvcc|diff"
VERB_NAMES = "|".join(map(re.escape, sorted(verbs.SUMMARIES, key=len, reverse=True)))
# What a flag belongs to, nearest before it wins; a clause boundary forgets what came before.
OWNER = re.compile(
    rf"(?<![\w/-])forkctl\s+(?:(?P<verb>{VERB_NAMES})(?![\w-])|(?P<any_verb>\{{\}}))?"
    rf"|(?<![\w-])(?P<tool>(?:{TOOLS})(?:\s+[a-z][\w-]*)?)(?=\s)"
    rf"|(?<![\w-])(?P<bare>check-pins|bump-bridge|fork-base|(?:{VERB_NAMES})(?=\s+--))(?![\w-])"
    rf"|(?P<stop>[;,\n]|\.\s|:\s)"
)


def _visible(command: click.Command) -> set[str]:
    names = {"--help"}
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            names.update(n for n in [*param.opts, *param.secondary_opts] if n.startswith("--"))
    return names


GLOBAL = _visible(cli) | {"--version"}
OPTIONS = {name: _visible(verbs.load(name)) | GLOBAL for name in verbs.SUMMARIES}  # type: ignore[arg-type]
ANY_VERB = set().union(*OPTIONS.values())


def misnamed(text: str, verb: str | None) -> list[str]:
    """The flags in `text` that are not visible options of the verb they are for (`verb` by default;
    None: any verb's will do)."""
    wrong = []
    for flag in FLAG.finditer(text):
        owner = None
        for found in OWNER.finditer(text):
            if found.start() < flag.start():
                owner = found
        if owner is not None and owner.group("tool"):
            continue
        named = owner is not None and (owner.group("verb") or owner.group("bare"))
        if named:
            allowed = OPTIONS[named]
        elif owner is not None and owner.group("stop") is None:
            allowed = ANY_VERB if owner.group("any_verb") else GLOBAL  # `forkctl {verb}`, `forkctl --x`
        else:
            allowed = OPTIONS[verb] if verb else ANY_VERB
        if f"--{flag.group(1)}" not in allowed:
            wrong.append(f"--{flag.group(1)}")
    return wrong


def _texts(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Every string of a module with its line; an f-string with `{}` for what it formats. Docstrings
    are left out (they are for readers of the code) but a verb's, which is its --help."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = node.body[0] if node.body else None
            is_help = isinstance(node, ast.FunctionDef) and node.name == "command"
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and not is_help:
                skipped.add(id(first.value))
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(part) for part in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            parts = [p.value if isinstance(p, ast.Constant) else "{}" for p in node.values]
            yield node.lineno, "".join(str(p) for p in parts)


def test_every_flag_named_in_forkctl_is_a_visible_option() -> None:
    wrong = []
    for path in sorted((ROOT / "forkctl").rglob("*.py")):
        verb = path.stem.replace("_", "-") if path.parent.name == "commands" else None
        for line, text in _texts(ast.parse(path.read_text())):
            if " " not in text.strip() or text.startswith("--"):
                continue  # one argument of a command line (`--format=%H`), not prose
            for flag in misnamed(text, verb if verb in OPTIONS else None):
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {flag} in {text[:80]!r}")
    assert not wrong, "\n".join(wrong)


def test_the_walk_tells_a_flag_of_the_named_verb_from_another_tools() -> None:
    """The rules the walk applies, on sentences like forkctl's own."""
    assert misnamed("pass --sign-key with the key", "sign") == ["--sign-key"]
    assert misnamed("rerun forkctl validate --sign-key KEY", "sign") == []
    assert misnamed("rerun forkctl port --upstream-url URL", None) == ["--upstream-url"]
    assert misnamed("git apply --3way failed; pass --repo", "status") == []
    assert misnamed("forkctl {} --continue, or undo it with --abort", None) == []
    assert misnamed("see (validate --nope)", "gate") == ["--nope"]


def _error(args: list[str]) -> tuple[str, dict]:
    result = CliRunner().invoke(cli, [*args, "--json"])
    payload = json.loads(result.stdout)
    return args[args.index("--manifest") + 2], payload


@pytest.fixture
def toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_toolkit(tmp_path / "t")


def _assert_names_its_own_flags(verb: str, payload: dict) -> None:
    assert payload["ok"] is False, payload
    said = " ".join(f"{p['message']} {p.get('hint') or ''}" for p in payload["problems"])
    assert FLAG.search(said), f"this case should name a flag: {said}"
    assert misnamed(said, verb) == [], said


def test_sign_without_its_key_names_sign_s_own_flag(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path / "t")
    record(toolkit)
    verb, payload = _error(["--manifest", str(toolkit.manifest), "sign", "--key", str(tmp_path / "nokey")])
    _assert_names_its_own_flags(verb, payload)


@pytest.mark.parametrize("verb", ["port", "apply"])
def test_continue_with_nothing_in_progress_names_the_verbs_flags(toolkit, verb: str) -> None:  # type: ignore[no-untyped-def]
    args = ["--manifest", str(toolkit.manifest), verb, "--continue", "--repo", str(toolkit.upstream.path)]
    _assert_names_its_own_flags(*_error(args))


def test_export_of_a_missing_branch_names_export_s_flags(toolkit) -> None:  # type: ignore[no-untyped-def]
    args = ["--manifest", str(toolkit.manifest), "export", "--branch", "nosuch"]
    _assert_names_its_own_flags(*_error([*args, "--repo", str(toolkit.upstream.path)]))
