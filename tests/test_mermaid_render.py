"""Every Mermaid diagram forkctl writes renders: mermaid-cli in a real headless Chromium (Debian's), no
parse error, a picture with the nodes it names.

The diagrams come from real runs: `describe` on a chain (the checked chain), the manifest-only chain,
and `sync`'s pull-request body and dashboard (clean, a conflict, and labels holding every character
Mermaid would read as syntax). mermaid-cli and the browser are brought under .tools/ without root by
`make setup-mermaid` (scripts/mermaid-setup.sh; CI runs it before `make test`, a plain `make test` does
not: ~0.8 GiB and a minute of rendering); where they are not, the tests skip and say how to bring them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import Chain, make_chain
from tests.test_sync import HELPER_HELLO, FakeGh, bridge_upstream_pins, sync, upstream_commit

ROOT = Path(__file__).resolve().parent.parent
MMDC = Path(os.environ.get("FORKCTL_MMDC", ROOT / ".tools" / "mermaid" / "node_modules" / ".bin" / "mmdc"))
UNPACKED = ROOT / ".tools" / "chromium" / "chromium"  # Debian's chromium, unpacked by mermaid-setup.sh
CHROMIUM = shutil.which("chromium") or (str(UNPACKED) if UNPACKED.exists() else None)
NODE_PATH = os.environ.get("PATH", "")  # as the test run started: the fake gh's PATH has no node
BLOCK_RE = re.compile(r"^```mermaid\n(.*?)\n```$", re.S | re.M)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not MMDC.exists() or CHROMIUM is None,
        reason="mermaid-cli or chromium is not under .tools/: `make setup-mermaid` brings both, no root needed",
    ),
]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def render(diagrams: list[str], tmp_path: Path) -> list[str]:
    """Render each diagram in one browser (mermaid-cli's Markdown mode): the SVG text of each."""
    assert diagrams
    config = tmp_path / "puppeteer.json"
    # As root (CI), Chromium needs --no-sandbox; the browser is Debian's, never one puppeteer downloads.
    config.write_text(json.dumps({"executablePath": CHROMIUM, "args": ["--no-sandbox", "--disable-gpu"]}))
    source = tmp_path / "diagrams.md"
    source.write_text("\n\n".join(f"```mermaid\n{d}\n```" for d in diagrams) + "\n")
    out = tmp_path / "rendered.md"
    env = {**os.environ, "PATH": NODE_PATH, "PUPPETEER_SKIP_DOWNLOAD": "1"}
    result = subprocess.run(
        [str(MMDC), "-p", str(config), "-i", str(source), "-o", str(out), "-b", "white"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    svgs = [(tmp_path / f"rendered-{n}.svg").read_text() for n in range(1, len(diagrams) + 1)]
    for svg in svgs:
        assert "<svg" in svg and "Syntax error" not in svg
    return svgs


def blocks(text: str) -> list[str]:
    return BLOCK_RE.findall(text)


def test_mermaid_cli_refuses_a_diagram_that_does_not_parse(tmp_path: Path) -> None:
    """The check is not vacuous: a broken label fails the render."""
    with pytest.raises(AssertionError):
        render(['graph LR\n  A["unclosed] --> B'], tmp_path)


def test_the_chain_diagrams_of_describe_render(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    result = CliRunner().invoke(
        cli, ["--manifest", str(chain.manifest), "describe", "--through", "nemo-rl", "--json"]
    )
    assert result.exit_code == 0, result.stdout
    checked = blocks(json.loads(result.stdout)["parts"]["mermaid"])
    (svg,) = render(checked, tmp_path)
    assert "megatron-bridge" in svg and "nemo-rl" in svg and chain.head[:12] in svg


def _sync_bodies(chain: Chain, gh: FakeGh) -> list[str]:
    return [item["body"] for kind in ("pr", "issue") for item in gh.items(kind)]


def test_the_sync_pull_request_and_dashboard_diagrams_render(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    bridge_upstream_pins(chain, chain.upstream_tip)
    upstream_commit(chain, "refactor: helper shouts", {"megatron/core/a.py": HELPER_HELLO})
    code, done = sync(chain)  # a clean target (the PR) and an early warning (the dashboard)
    assert code == 0, done
    bodies = _sync_bodies(chain, gh)
    assert len(bodies) == 2
    diagrams = [d for body in bodies for d in blocks(body)]
    svgs = render(diagrams, tmp_path)
    assert all(done["head"][:12] in svg for svg in svgs)
    assert all("NVIDIA-NeMo/Megatron-Bridge" in svg for svg in svgs)


def test_a_conflict_dashboard_with_hostile_labels_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names hold what Mermaid reads as syntax (quotes, brackets, backticks, #, &, ;, |, -->): the
    labels stay labels and the picture still parses."""
    from forkctl.chain.sync import SyncPlan
    from forkctl.chain.synctarget import SyncTarget
    from forkctl.manifest import load
    from forkctl.report import sync as views

    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    breaking = upstream_commit(chain, "refactor: helper shouts", {"megatron/core/a.py": HELPER_HELLO})
    bridge_upstream_pins(chain, breaking)
    code, done = sync(chain)
    assert code == 1, done
    (dashboard,) = [item["body"] for item in gh.items("issue")]
    hostile = 'x"] --> Z[";`#&|<b>end'
    target = SyncTarget(
        "a" * 40, "consumer-upstream", "-", consumer_upstream=hostile, consumer_branch=hostile
    )
    plan = SyncPlan(target=target, base="b" * 40, old_head="c" * 40, entries=[], head="d" * 40)
    diagrams = [
        *blocks(dashboard),
        views.sync_mermaid(load(chain.manifest), plan).strip("`\n").removeprefix("mermaid\n"),
    ]
    conflict_svg, hostile_svg = render(diagrams, tmp_path)
    assert "conflict" in conflict_svg
    assert "Z[" in hostile_svg and "end" in hostile_svg  # drawn as text, not read as a node
