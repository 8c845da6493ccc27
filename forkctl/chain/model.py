"""What a check of the pin chain finds: one finding per check of a link, links, and the chain's result.

Plain data, no git: the checks fill it in, the report layer (forkctl/report/chain.py) draws it.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from forkctl.compat import StrEnum
from forkctl.series import Patch

Progress = Callable[[str], None]


class Status(StrEnum):
    OK = "OK"
    MISMATCH = "MISMATCH"
    UNREACHABLE = "UNREACHABLE"


class WantedBase(msgspec.Struct, frozen=True):
    """The upstream commit a consumer already builds on that the manifest base lacks: the base the
    chain now wants. Bumping that consumer to the fork head would take `lacks` upstream commits away
    from it; moving the fork there first (`forkctl port --onto commit`) loses none."""

    commit: str
    lacks: int  # upstream commits of `commit` that the manifest base does not have
    descends: bool  # `commit` descends from the manifest base (else a port there needs --backport)

    @property
    def port_command(self) -> str:
        return f"forkctl port --onto {self.commit}" + ("" if self.descends else " --backport")


# How the one way forward is chosen (chain/wayforward.py): printed once by every verb that names it.
RULE = (
    "the newest upstream commit a consumer pin builds on, when the base of every other pin is its ancestor "
    "(the pins lie on one line of upstream history)"
)


class PinBase(msgspec.Struct, frozen=True):
    """One consumer commit whose pin builds on `base`, an upstream commit the manifest base lacks."""

    consumer: str
    commit: str  # the consumer commit holding the pin
    role: str  # "branch farai/main", "pinned by nemo-rl", ...
    base: str
    lacks: int  # upstream commits of `base` the manifest base lacks (-1: not known)
    descends: bool  # `base` descends from the manifest base

    @property
    def who(self) -> str:
        return f"{self.consumer}@{self.commit[:12]} ({self.role})"


class WayForward(msgspec.Struct, frozen=True):
    """Where the chain wants the fork: `target`, by `RULE` over `pins`; `moves` when that is not the
    manifest base. `diverged` names two pin bases on different lines (then there is no target)."""

    base: str  # the manifest base
    target: str | None
    because: str
    pins: list[PinBase] = msgspec.field(default_factory=list)
    moves: bool = False
    descends: bool = True  # the target descends from the manifest base (else the port is a backport)
    diverged: tuple[str, str] | None = None
    rule: str = RULE

    @property
    def command(self) -> str | None:
        """The one port that moves the fork there; None when nothing moves or nothing can."""
        if self.target is None or not self.moves:
            return None
        return f"forkctl port --onto {self.target}" + ("" if self.descends else " --backport")


class ChainFinding(msgspec.Struct, frozen=True):
    check: str  # pin, url, reachable, fork-base, nested
    status: Status
    kind: str  # a stable machine code: ok, unpatched-upstream, wrong-base, missing-patch, ...
    message: str
    fix: str = ""
    # Where to edit, for a finding about the commit under test's own files (check-pins --under-test):
    # a path relative to that repository's root, and its 1-based line when known.
    file: str | None = None
    line: int | None = None
    # A pin that builds on upstream commits the manifest base lacks: where the chain wants the fork.
    wants: WantedBase | None = None


class PinRecord(msgspec.Struct, frozen=True):
    """A file of the consumer commit that records its pin besides the gitlink (manifest `pin_files`)."""

    path: str
    format: str
    recorded: str | None  # the commit it names; None: missing or malformed
    agrees: bool  # it names the gitlink's commit


class LinkResult(msgspec.Struct):
    """One consumer commit and the gitlink it holds."""

    consumer: str
    index: int  # position in the chain, 0 = nearest consumer
    commit: str
    role: str  # "branch farai/main", "HEAD of /path", "pinned by nemo-rl"
    gitlink: str
    target: str  # what the gitlink should pin: the fork, or the previous consumer
    pinned: str | None = None
    url: str | None = None
    expected: str | None = None  # the fork link's expected SHA
    findings: list[ChainFinding] = msgspec.field(default_factory=list)
    records: list[PinRecord] = msgspec.field(default_factory=list)

    @property
    def status(self) -> Status:
        for status in (Status.UNREACHABLE, Status.MISMATCH):
            if any(f.status == status for f in self.findings):
                return status
        return Status.OK

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def add(self, check: str, status: Status, kind: str, message: str, fix: str = "") -> None:
        self.findings.append(ChainFinding(check, status, kind, message, fix))

    def first_failure(self) -> ChainFinding | None:
        """The most telling failure: about the pin itself first, then URL, reachability, files."""
        failures = [f for f in self.findings if f.status != Status.OK]
        return next((f for f in failures if f.check in ("pin", "nested")), failures[0] if failures else None)


class ChainResult(msgspec.Struct):
    base: str
    expected_head: str
    patches: list[Patch]
    links: list[LinkResult]
    fork_branch_notes: list[ChainFinding] = msgspec.field(default_factory=list)
    way_forward: WayForward | None = None  # where the pins want the fork (chain/wayforward.py)

    @property
    def ok(self) -> bool:
        return all(link.ok for link in self.links) and all(
            f.status == Status.OK for f in self.fork_branch_notes
        )
