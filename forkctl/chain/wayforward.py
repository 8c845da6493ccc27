"""One way forward: the one upstream commit the consumers' pins ask the fork to move onto.

A pin that builds on upstream commits the manifest base lacks says where the chain wants the fork
(`ChainFinding.wants`). Two pins can say two places (the Bridge's branch on X, the Bridge commit NeMo-RL
pins on Y); a port onto the older one leaves the newer pin behind, and `bump-bridge` then refuses the
bump that would take its commits away. So every verb that names the move (check-pins, describe, sync)
asks this module, by one rule (`RULE`): the newest of the pins' bases, when every other one is its
ancestor. When two of them lie on different lines of upstream history no one port keeps both: that is
a finding that names the two pins, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from forkctl.chain.forkhead import ForkContext
from forkctl.chain.model import LinkResult, PinBase, WayForward
from forkctl.chain.reachable import CommitGraphs
from forkctl.git import clonecache

# (older, newer) -> is `older` an ancestor of `newer`; None when history cannot tell.
Ancestry = Callable[[str, str], "bool | None"]


def pin_bases(links: list[LinkResult]) -> list[PinBase]:
    """The pins of `links` that build on upstream commits the manifest base lacks, in link order."""
    found = []
    for link in sorted(links, key=lambda link: link.index):
        for finding in link.findings:
            if finding.wants is not None:
                wants = finding.wants
                found.append(
                    PinBase(link.consumer, link.commit, link.role, wants.commit, wants.lacks, wants.descends)
                )
    return found


def one_way_forward(base: str, pins: list[PinBase], ancestry: Ancestry) -> WayForward:
    """`RULE` over `pins`: the newest base when they lie on one line (each compared with the newest so
    far: a line is ordered, so one pass decides), else the first two that do not."""
    if not pins:
        because = "the manifest base: no consumer pin builds on upstream commits it lacks"
        return WayForward(base, base, because)
    newest = pins[0]
    for pin in pins[1:]:
        older = pin.base == newest.base or ancestry(pin.base, newest.base)
        if older:
            continue
        newer = ancestry(newest.base, pin.base)
        if newer:
            newest = pin
            continue
        return _diverged(base, pins, newest, pin, unknown=older is None or newer is None)
    return WayForward(base, newest.base, _because(newest, pins), pins, moves=True, descends=newest.descends)


def _because(newest: PinBase, pins: list[PinBase]) -> str:
    many = f"{newest.lacks} upstream commits" if newest.lacks >= 0 else "upstream commits"
    said = f"{newest.consumer} already builds on it ({newest.who}, with {many} the manifest base lacks)"
    older = {pin.base: pin for pin in pins if pin.base != newest.base}
    for pin in older.values():
        said += f"; {pin.who} builds on {pin.base[:12]}, an ancestor of it, so one port keeps both"
    return said


def _diverged(base: str, pins: list[PinBase], one: PinBase, other: PinBase, unknown: bool) -> WayForward:
    why = (
        "history could not tell whether either contains the other"
        if unknown
        else "neither contains the other"
    )
    because = (
        f"the consumers' pins do not lie on one line of upstream history: {one.who} builds on "
        f"{one.base[:12]}, {other.who} builds on {other.base[:12]}, and {why}, so no one port keeps both"
    )
    return WayForward(base, None, because, pins, moves=True, diverged=(one.base, other.base))


def upstream_ancestry(fork: ForkContext, graphs: CommitGraphs) -> Ancestry:
    """Ancestry among upstream commits: in the upstream commit graph when it holds both (commits only),
    else in the upstream repository, upstream's history fetched first (and a commit no branch reaches by
    its SHA)."""

    def ask(older: str, newer: str) -> bool | None:
        # A local clone (--upstream-repo PATH) answers without the network, as the checks do.
        graph = graphs.upstream() if fork.upstream_local is None else None
        if graph is not None and not graph.objects.missing_objects([older, newer]):
            return graph.history.reaches(newer, older)
        upstream_repo = fork.upstream_repo
        if (
            upstream_repo.objects.missing_objects([older, newer])
            or (upstream_repo.git_dir / "shallow").is_file()
        ):
            fork.upstream_tip(graphs.manifest.upstream.branch)
        for sha in upstream_repo.objects.missing_objects([older, newer]):
            clonecache.fetch_sha_why(upstream_repo, fork.upstream_url, sha, depth=None)
        if upstream_repo.objects.missing_objects([older, newer]):
            return None
        return upstream_repo.history.is_ancestor(older, newer)

    return ask


def point_at(links: list[LinkResult], way: WayForward) -> None:
    """Each finding that says where its pin wants the fork now points at the one way forward instead
    of a port of its own: the port is printed once, for the whole chain."""
    if way.diverged is not None:
        fix = "the consumers' pins lie on two lines of upstream history: see the chain's way forward"
    else:
        assert way.target is not None
        fix = (
            f"move the fork onto {way.target[:12]}, the one base every pin's base is an ancestor of "
            "(the port is the chain's way forward), then forkctl bump-bridge"
        )
    for link in links:
        link.findings = [
            msgspec.structs.replace(f, fix=fix) if f.wants is not None else f for f in link.findings
        ]
