"""The chain as people and machines read it: tables, problems with fixes, a text diagram, a Mermaid
graph for the step summary, JSON; and the bump's new branches. Views only: the checks live in
forkctl/chain/.
"""

from __future__ import annotations

from typing import Any

from forkctl.chain.bump import BumpStep
from forkctl.chain.forward import ForwardVerdict
from forkctl.chain.model import ChainFinding, ChainResult, LinkResult, Status, WantedBase, WayForward
from forkctl.manifest import Manifest
from forkctl.report import Level, Problem, Report, Table

COLUMNS = ["check", "status", "detail", "fix"]

# Mermaid entity codes for what would end a label, open HTML, or close the fenced block around it.
_LABEL_ESCAPES = {'"': "#quot;", "<": "#lt;", ">": "#gt;", "`": "#96;", "#": "#35;", "&": "#38;"}


def _label(text: str) -> str:
    """A name from the manifest or a remote as a Mermaid label: one line, inert."""
    one_line = " ".join(text.splitlines())
    return "".join(_LABEL_ESCAPES.get(ch, ch) for ch in one_line)


def _head_links(result: ChainResult) -> list[LinkResult]:
    """One link per consumer for the picture: the commit checked first (its branch head / given rev)."""
    seen: dict[int, LinkResult] = {}
    for link in result.links:
        if link.index not in seen or not link.role.startswith("pinned by"):
            seen.setdefault(link.index, link)
    return [seen[i] for i in sorted(seen)]


def mermaid(manifest: Manifest, result: ChainResult) -> str:
    """The chain as a mermaid `graph LR` block: upstream base -> fork head -> consumers, edges = pins."""
    lines = ["```mermaid", "graph LR"]
    lines.append(f'  U["{_label(manifest.upstream.repo)}<br/>base {result.base[:12]}"]')
    lines.append(f'  F["{_label(manifest.fork.repo)}<br/>fork head {result.expected_head[:12]}"]')
    lines.append(f'  U -- "+{len(result.patches)} patches" --> F')
    previous = "F"
    for link in _head_links(result):
        node = f"C{link.index}"
        lines.append(f'  {node}["{_label(link.consumer)}<br/>{link.commit[:12]}"]')
        pinned = link.pinned[:12] if link.pinned else "no pin"
        lines.append(f'  {previous} -- "{link.status.value}: pinned {pinned}" --> {node}')
        colour = "#2da44e" if link.ok else "#cf222e"
        lines.append(f"  style {node} stroke:{colour},stroke-width:3px")
        previous = node
    lines.append("```")
    return "\n".join(lines)


def mermaid_unchecked(manifest: Manifest, head: str | None, patches: int) -> str:
    """The chain as the manifest names it, for when the consumers could not be read: pins unknown."""
    lines = ["```mermaid", "graph LR"]
    lines.append(f'  U["{_label(manifest.upstream.repo)}<br/>base {manifest.upstream.base[:12]}"]')
    fork_head = head[:12] if head else "not built"
    lines.append(f'  F["{_label(manifest.fork.repo)}<br/>fork head {fork_head}"]')
    lines.append(f'  U -- "+{patches} patches" --> F')
    previous = "F"
    for index, consumer in enumerate(manifest.consumers):
        lines.append(f'  C{index}["{_label(consumer.name)}<br/>{_label(consumer.branch)}"]')
        lines.append(f'  {previous} -. "pin unknown" .-> C{index}')
        previous = f"C{index}"
    lines.append("```")
    return "\n".join(lines)


def text_diagram(manifest: Manifest, result: ChainResult) -> list[str]:
    """The same chain in plain text, one line per node, the pin status on the arrow."""
    lines = [
        f"{manifest.upstream.repo}@{result.base[:12]}",
        f"  └─(+{len(result.patches)} patches)─> {manifest.fork.repo}@{result.expected_head[:12]} (fork head)",
    ]
    # Each consumer pins the one before it, so each is drawn one level under it (NeMo-RL under the
    # Bridge, not beside it).
    for depth, link in enumerate(_head_links(result)):
        pinned = link.pinned[:12] if link.pinned else "none"
        indent = "    " * (depth + 1) + "  "
        lines.append(
            f"{indent}└─[{link.status.value}: pins {pinned}]─ {link.consumer}@{link.commit[:12]} ({link.role})"
        )
    return lines


def _rows(findings: list[ChainFinding]) -> list[list[str]]:
    return [[f.check, f.status.value, f.message, f.fix] for f in findings]


def _add_link(out: Report, link: LinkResult) -> None:
    """The link's table, and a problem (with its fix) per failing finding."""
    pinned = link.pinned[:12] if link.pinned else "-"
    title = (
        f"{link.consumer}@{link.commit[:12]} ({link.role}) pins {link.target} at {link.gitlink}: "
        f"{pinned} -> {link.status.value}"
    )
    out.tables.append(Table(title=title, columns=list(COLUMNS), rows=_rows(link.findings)))
    for finding in link.findings:
        if finding.status != Status.OK:
            out.fail(
                Problem(
                    f"{link.consumer}@{link.commit[:12]}: {finding.status.value}: {finding.message}",
                    file=finding.file,
                    line=finding.line,
                    hint=finding.fix or None,
                    in_table=True,  # the row above says it, with its fix: text prints it once
                )
            )


def _add_fork_branch(out: Report, manifest: Manifest, notes: list[ChainFinding]) -> None:
    """The fork branch's table; a fork branch behind the reproducible head is a notice, not a failure."""
    title = f"fork branch {manifest.fork.repo} {manifest.fork.branch}"
    out.tables.append(Table(title=title, columns=list(COLUMNS), rows=_rows(notes)))
    for finding in notes:
        if finding.status != Status.OK:
            out.fail(Problem(finding.message, hint=finding.fix or None, in_table=True))
        elif finding.kind == "behind":
            out.problems.append(Problem(finding.message, level=Level.NOTICE, in_table=True))


def way_problem(way: WayForward) -> Problem:
    """The chain's one way forward as a problem: its one port as the fix, or, when the pins lie on two
    lines of upstream history, why there is none."""
    if way.target is None or way.command is None:
        assert way.diverged is not None
        one, other = (sha[:12] for sha in way.diverged)
        return Problem(
            f"no one way forward: {way.because}",
            hint=f"bring the pins onto one line first: move one consumer's pin to an upstream commit that "
            f"contains both {one} and {other}, then run forkctl check-pins again for the one port",
        )
    return Problem(
        f"one way forward: the fork onto {way.target[:12]}, where the chain wants it: {way.because}",
        hint=f"{way.command}, then forkctl bump-bridge",
    )


def _add_way(out: Report, way: WayForward) -> None:
    out.lines.append(f"the chain's one way forward, by one rule: {way.rule}")
    out.fail(way_problem(way))


def way_json(way: WayForward | None) -> dict[str, Any] | None:
    """The one way forward as JSON: the target (None when the pins diverge), the rule, and the pins."""
    if way is None:
        return None
    return {
        "target": way.target,
        "moves": way.moves,
        "command": way.command,
        "rule": way.rule,
        "because": way.because,
        "diverged": list(way.diverged) if way.diverged else None,
        "pins": [
            {
                "consumer": pin.consumer,
                "commit": pin.commit,
                "role": pin.role,
                "base": pin.base,
                "lacks": pin.lacks,
                "descends_from_base": pin.descends,
            }
            for pin in way.pins
        ],
    }


def chain_report(command: str, manifest: Manifest, result: ChainResult) -> Report:
    """The chain result as a Report: one table per link, problems with fixes, JSON, and the diagram."""
    out = Report(command=command)
    for link in result.links:
        _add_link(out, link)
    if result.fork_branch_notes:
        _add_fork_branch(out, manifest, result.fork_branch_notes)
    out.lines += text_diagram(manifest, result)
    if result.way_forward is not None and result.way_forward.moves:
        _add_way(out, result.way_forward)
    verdict = (
        "the chain is consistent" if out.ok else f"{sum(not link.ok for link in result.links)} link(s) fail"
    )
    out.lines.append(f"check-pins: {'OK' if out.ok else 'FAILED'}: {verdict}")
    out.summary_markdown = mermaid(manifest, result)
    out.data = chain_data(result)
    return out


def _finding_json(f: ChainFinding) -> dict[str, Any]:
    data: dict[str, Any] = {
        "check": f.check,
        "status": f.status.value,
        "kind": f.kind,
        "message": f.message,
        "fix": f.fix,
    }
    if f.wants is not None:  # the pin builds on upstream commits the manifest base lacks
        data["wants_base"] = _wants_json(f.wants)
    if f.file is not None:  # only under --under-test: the repository's own .gitmodules
        data["file"] = f.file
        if f.line is not None:
            data["line"] = f.line
    return data


def _wants_json(wants: WantedBase) -> dict[str, Any]:
    return {
        "commit": wants.commit,
        "lacks": wants.lacks,
        "descends_from_base": wants.descends,
        "command": wants.port_command,
    }


def _link_json(link: LinkResult) -> dict[str, Any]:
    return {
        "consumer": link.consumer,
        "commit": link.commit,
        "role": link.role,
        "gitlink": link.gitlink,
        "target": link.target,
        "pinned": link.pinned,
        "url": link.url,
        "expected": link.expected,
        "status": link.status.value,
        "findings": [_finding_json(f) for f in link.findings],
        # The consumer's other records of this pin (manifest pin_files) as read at the commit.
        "records": [
            {"path": r.path, "format": r.format, "recorded": r.recorded, "agrees": r.agrees}
            for r in link.records
        ],
    }


def chain_data(result: ChainResult) -> dict[str, Any]:
    """The JSON payload of a chain check."""
    return {
        "base": result.base,
        "expected_fork_head": result.expected_head,
        "patches": [{"file": p.path.name, "subject": p.subject} for p in result.patches],
        "links": [_link_json(link) for link in result.links],
        "fork_branch": [
            {"check": f.check, "status": f.status.value, "kind": f.kind, "message": f.message}
            for f in result.fork_branch_notes
        ],
        "way_forward": way_json(result.way_forward),
    }


# --- the bump ---------------------------------------------------------------------------------------


def bump_lines(steps: list[BumpStep]) -> list[str]:
    """One line per consumer: the step already done on its branch (a merged bump), the bump branch
    already there, or the commit on its branch: parent, and the gitlink (and URL) it moves."""
    described = []
    for step in steps:
        name = step.consumer.name
        if step.done:
            described.append(
                f"{name}: already done: {step.consumer.branch} {step.commit[:12]} pins {step.gitlink} at "
                f"{step.new[:12]} (no new commit, no branch)"
            )
            continue
        if step.commit == step.existing:
            described.append(
                f"{name}: already there: {step.branch} {step.commit[:12]} pins {step.gitlink} at "
                f"{step.new[:12]} (built on {step.consumer.branch} {step.branch_head[:12]})"
            )
            continue
        url_note = (
            f"; .gitmodules url {step.url_changed[0]} -> {step.url_changed[1]}" if step.url_changed else ""
        )
        on = f"{step.branch} {step.parent[:12]}, on {step.consumer.branch} {step.branch_head[:12]}"
        if not step.builds_on_existing:
            on = f"{step.consumer.branch} {step.parent[:12]}"
        replaced = f" (the branch pinned {step.replaces[:12]})" if step.replaces else ""
        url_note += "".join(f"; {r.path} {(r.old or 'not a SHA')[:12]} -> {r.new[:12]}" for r in step.records)
        described.append(
            f"{name}: {step.branch} = {step.commit[:12]} on {on}: {step.gitlink} "
            f"{(step.old or '-')[:12]} -> {step.new[:12]}{replaced}{url_note}"
        )
    return described


def bump_json(steps: list[BumpStep], created: bool, pushed: bool) -> list[dict]:
    return [
        {
            "consumer": step.consumer.name,
            "repo": str(step.repo.git_dir),
            "branch": step.branch,
            "parent": step.parent,
            "branch_head": step.branch_head,  # the consumer branch head the step started from
            "done": step.done,  # the consumer branch already pins `new`: no commit, no branch
            "replaces": step.replaces,  # the existing bump branch's pin this commit replaces
            "commit": step.commit,
            "gitlink": step.gitlink,
            "old": step.old,
            "new": step.new,
            "gitmodules_url": list(step.url_changed) if step.url_changed else None,
            "records": records_json(step),
            "created": created and not step.done,
            "pushed": pushed and not step.done,
            "push": step.pushed,  # "pushed" or "already there" once pushed, else None
            "date": step.date,  # the commit's author and committer date (chain/bump.py says the rule)
        }
        for step in steps
    ]


def records_json(step: BumpStep) -> list[dict]:
    """The pin files the step's commit rewrites with its gitlink (old: None when it held no SHA)."""
    return [{"path": r.path, "format": r.format, "old": r.old, "new": r.new} for r in step.records]


def backwards_json(verdict: ForwardVerdict) -> list[dict]:
    """The steps that would take commits away from their consumer (bump-bridge refuses them)."""
    return [
        {
            "consumer": b.consumer,
            "old": b.old,
            "new": b.new,
            "message": b.message,
            "fix": b.fix,
            "wants_base": _wants_json(b.wants) if b.wants else None,
        }
        for b in verdict.backwards
    ]
