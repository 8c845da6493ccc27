"""forkctl bump-bridge: move the chain to the fork head in one step, one gitlink per consumer.

A new branch `<fork.bump_branch_prefix><sha12>` (this fork: `forkctl/bump-megatron-<sha12>`) from each consumer branch head, whose one commit moves the
gitlink (private index: read-tree, update-index --cacheinfo 160000, write-tree, commit-tree; no
submodule checkout, never the user's index or worktree), rewrites the consumer's other records of the
pin (manifest `pin_files`, the Bridge's `.main.commit`) and points `.gitmodules` at the fork when it
still names upstream. Each step must move its consumer forward (the new pin holds every upstream
commit the old one had; `--allow-backwards` to mean otherwise), and the check-pins core runs on the
new branches; it must pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import click

from forkctl import github, mail, report
from forkctl.chain.bump import BumpPlan, BumpStep, apply_step, plan_bump, push_steps
from forkctl.chain.describe import complete, manifest_facts
from forkctl.chain.forkhead import ForkContext, fork_context
from forkctl.chain.publish import published_head
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.files import atomic_write_text, cache_root
from forkctl.gpu import gatecheck
from forkctl.gpu.gate import GateSummary
from forkctl.manifest import Manifest
from forkctl.report import Level, Problem, Report
from forkctl.report import gatemoves as gate_views
from forkctl.report.chain import backwards_json, bump_json, bump_lines, chain_report
from forkctl.report.pullrequest import pr_body
from forkctl.series import Series


def _through_index(manifest, through: str | None) -> int:  # type: ignore[no-untyped-def]
    if through is None:
        return 0
    names = [c.name for c in manifest.consumers]
    if through not in names[1:]:
        raise BadInput(
            f"--through {through!r} is not a consumer after the first",
            hint=f"choose one of: {', '.join(names[1:]) or '(none)'}",
        )
    return names.index(through)


def _local_clones(last: int, bridge_repo: Path | None, through_repo: Path | None) -> dict[int, Path | None]:
    """Which consumer commits in which given clone: the Bridge (0) in --bridge-repo, the --through one
    in --through-repo. (A dict literal {0: ..., last: ...} lost --bridge-repo when last was 0.)"""
    if through_repo is not None and last == 0:
        raise BadInput(
            "--through-repo needs --through", hint="name the consumer it is a clone of with --through"
        )
    return {0: bridge_repo, **({last: through_repo} if last > 0 else {})}


def _check_signoff(signoff: str | None) -> None:
    if signoff is not None and mail.address(signoff) is None:
        raise BadInput(
            f"--signoff (or FORKCTL_SIGNOFF) {signoff!r} is not NAME <EMAIL>",
            hint="name who signs the bump commits off, e.g. --signoff 'Fork Bot <bot@example.com>'",
        )


def _body_file(step: BumpStep) -> Path:
    """Where the body for `step`'s pull request is kept (the cache), so a printed gh command runs as is."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", step.consumer.name).strip("-.") or "consumer"
    return cache_root() / "pull-requests" / f"{name}-{step.commit[:12]}.md"


def _pin(manifest: Manifest, fork: ForkContext, fork_commit: str | None) -> str:
    """What the first consumer pins: the reproducible head, or in merge mode the fork branch's published
    merge of it; `--fork-commit` must name one of them."""
    published = published_head(manifest, fork)  # merge mode: the fork branch's merge of the head
    pins = [sha for sha in (published, fork.head) if sha]
    if fork_commit and not any(sha.startswith(fork_commit.lower()) for sha in pins):
        raise BadInput(
            f"refusing {fork_commit}: it is not the reproducible fork head {fork.head[:12]} = "
            f"{manifest.upstream.repo}@{fork.base[:12]} + {len(fork.patches)} patches"
            + (f" nor its published merge {published[:12]}" if published else "")
            + ", so it fails the fork-link check",
            hint="leave out --fork-commit to pin the reproducible head (forkctl check-pins explains the difference)",
        )
    return next((sha for sha in pins if fork_commit and sha.startswith(fork_commit.lower())), pins[0])


class _Gate:
    """The gate's verdict on the series whose fork head is pinned (the manifest's: the pin is always
    apply(series, base) or its published merge), whether --no-gate overrides it, and the note the
    override writes into the bump commits and the pull-request bodies."""

    def __init__(
        self, manifest: Manifest, fork: ForkContext, no_gate: bool, allow_pending: tuple[str, ...] = ()
    ) -> None:
        self.series = Series(base=fork.base, patches=fork.patches)
        self.summary: GateSummary = gatecheck.judge(manifest, self.series, allow_pending)
        self.fails = not gatecheck.passes(self.summary)
        self.no_gate = no_gate
        self.note = gatecheck.move_note(self.summary, self.series, no_gate)

    def refuses(self, out: Report, push: bool, dry_run: bool) -> bool:
        """Refuse --push / --open-pr past a failing gate (a dry run says it would); a local run is
        told what a push would meet; an override is said."""
        if not self.fails:
            return False
        if self.no_gate:
            out.problems.append(gate_views.overridden("bump-bridge", self.note, "the bump commits' messages"))
            return False
        if push or dry_run:
            digest = gatecheck.digest_of(self.summary, self.series)
            found = gatecheck.findings(self.summary)
            for problem in gate_views.refusal("bump-bridge", digest, found, self._hint(), dry_run):
                out.fail(problem)
            return True
        out.problems.append(
            Problem(
                f"the gate fails for series {gatecheck.digest_of(self.summary, self.series)[:12]}: "
                "bump-bridge --push would refuse these branches (see forkctl gate); pushing them by hand "
                "publishes them without GPU evidence, and their commits do not say so",
                level=Level.WARNING,
                hint=self._hint(),
            )
        )
        return False

    @staticmethod
    def _hint() -> str:
        return gatecheck.refusal_hint("bump-bridge")

    def json(self) -> dict:
        return gate_views.gate_json(self.summary, self.no_gate and self.fails, self.note)


def _open_pull_requests(
    manifest: Manifest,
    fork: ForkContext,
    plan: BumpPlan,
    out: Report,
    progress: Callable[[str], None],
    gate: _Gate,
) -> tuple[list[dict], list[str]]:
    """Open or update one pull request per pushed branch with gh; without gh, print body and command."""
    facts = manifest_facts(manifest, fork.patches)
    complete(facts, manifest, fork, plan, progress)
    summary = gate.summary
    gh = github.gh_on_path()
    opened: list[dict] = []
    lines: list[str] = []
    for step in (s for s in plan.steps if not s.done):  # a step done on its branch has no branch
        body_file = _body_file(step)
        body_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(body_file, pr_body(manifest, facts, summary, step, override=gate.note))
        title = f"build: pin {step.gitlink} at {step.new[:12]} (forkctl bump)"
        spec = github.PullRequestSpec(step.consumer.fork, step.consumer.branch, step.branch, title, body_file)
        entry: dict = {"repo": spec.repo, "base": spec.base, "head": spec.head, "body_file": str(body_file)}
        if gh is None:
            command = github.create_command(spec)
            lines += [f"--- pull request body for {step.consumer.name} ---", body_file.read_text().rstrip()]
            lines += [f"gh is not on PATH: open the pull request with: {github.shell_line(command)}"]
            opened.append({**entry, "action": "not-opened", "command": command, "url": None})
            continue
        try:
            result = github.open_or_update(spec, gh)
        except github.GhFailed as exc:
            # Nothing was opened: the body and the command stay on screen as the way to do it by hand.
            lines += [f"--- pull request body for {step.consumer.name} ---", body_file.read_text().rstrip()]
            out.fail(
                Problem(
                    f"{step.consumer.name}: {exc.message}",
                    hint=f"check `gh auth status` and your access to {spec.repo}, then retry: "
                    f"{github.shell_line(exc.command)}",
                )
            )
            opened.append({**entry, "action": "failed", "command": exc.command, "url": None})
            continue
        lines.append(f"{step.consumer.name}: pull request {result.action}: {result.url or '(no URL)'}")
        for stranger in result.strangers:
            what = f"{step.consumer.name}'s pull request"
            out.problems.append(Problem(github.stranger_warning(what, stranger), level=Level.WARNING))
        opened.append(
            {
                **entry,
                "action": result.action,
                "command": result.command,
                "url": result.url,
                "number": result.number,
                "strangers": result.strangers,
            }
        )
    if gh is None:
        # --open-pr asked for pull requests and none was opened: CI must not read that as success.
        out.fail(
            Problem(
                "gh is not on PATH: no pull request was opened",
                hint="run the gh commands printed above by hand, or install gh (https://cli.github.com), "
                "log in with gh auth login and rerun",
            )
        )
    return opened, lines


def _push_lines(steps: list[BumpStep], pushed: bool, open_pr: bool) -> list[str]:
    """What became of each branch, or how to push it: git for a branch in the user's own clone, a rerun
    with --push for one in forkctl's cache (a hint never points inside the cache). A step already done
    on its consumer branch has no branch."""
    with_branch = [step for step in steps if not step.done]
    if not with_branch:
        return []
    if pushed:
        lines = [
            f"{step.consumer.name}: {step.branch} {step.pushed} at {step.push_url}" for step in with_branch
        ]
        if not open_pr:
            lines.append(
                "the branches are at the consumers' URLs: open pull requests from them (or --open-pr)"
            )
        return lines
    lines = [
        f"to push: git --git-dir {step.repo.git_dir} push {step.push_url} {step.branch}"
        for step in with_branch
        if not step.in_cache
    ]
    return [*lines, "(or rerun with --push)" if lines else "to push: rerun with --push"]


def _refused_backwards(out: Report, plan: BumpPlan, allowed: bool, described: list[str]) -> bool:
    """Refuse (True, the report says why and how forward) a plan with a step that goes back, unless
    `allowed`: then each such step is a notice. What could not be judged is a notice either way."""
    for line in plan.forward.unjudged:
        out.problems.append(Problem(line, level=Level.NOTICE))
    if not plan.forward.backwards:
        return False
    if allowed:
        for step in plan.forward.backwards:
            out.problems.append(
                Problem(f"{step.message} (going back: --allow-backwards)", level=Level.NOTICE)
            )
        return False
    for step in plan.forward.backwards:
        out.fail(Problem(step.message, hint=f"{step.fix} (or pass --allow-backwards to go back)"))
    out.lines = [*described, "the bump would go back: no branch was created", *out.lines]
    out.data["steps"] = bump_json(plan.steps, created=False, pushed=False)
    return True


@click.command("bump-bridge", short_help=verbs.summary("bump-bridge"))
@click.option(
    "--fork-commit",
    metavar="SHA",
    help="The fork commit to pin (default: the reproducible head apply(series, base), or with "
    "fork.publish: merge the fork branch's published merge of it); any other commit is refused "
    "because it fails the fork-link check.",
)
@options.through(
    "Also bump every consumer up to this one (e.g. nemo-rl) to the new commit of the one before it."
)
@click.option(
    "--bridge-repo",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A local clone of the first consumer (Bridge) to commit in; default: the cache of its URL.",
)
@click.option(
    "--through-repo",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A local clone of the --through consumer to commit in; default: the cache of its URL.",
)
@options.upstream_repo("Where the base commit is (see check-pins).")
@click.option(
    "--allow-backwards",
    is_flag=True,
    help="Bump even where the new pin lacks commits the consumer's pin has now (a consumer already on "
    "a newer upstream commit than the manifest base, or a NeMo-RL pin the Bridge branch does not "
    "contain). Without it such a bump is refused (exit 1) with the way forward: forkctl port --onto "
    "the consumer's base.",
)
@click.option(
    "--signoff",
    metavar="'NAME <EMAIL>'",
    envvar="FORKCTL_SIGNOFF",
    help="Who submits the bump (the consumers ask for the DCO): each bump commit is authored by NAME "
    "<EMAIL> and ends with its Signed-off-by. Default: $FORKCTL_SIGNOFF (a bot in CI), else the "
    "manifest's fork.bump_signoff, else none (forkctl's own identity, unsigned).",
)
@options.no_gate()
@options.allow_pending()
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the plan (and the check it would pass); change no ref. Refused (exit 1) like --push "
    "where the gate fails and --no-gate is not given.",
)
@click.option(
    "--push",
    is_flag=True,
    help="Push the new branches to the consumers' URLs (never forced, never "
    "to the consumer or default branch). Without it everything stays local.",
)
@click.option(
    "--open-pr",
    is_flag=True,
    help="After pushing (implies --push), open a pull request per new branch against the consumer's "
    "branch in its fork (or update the open one for that branch) with gh; the body is forkctl describe's. "
    "Without gh on PATH, or when gh fails, print the body and the gh command to run, and exit 1.",
)
@output_options()
@forkctl_command
def command(
    ctx: Context,
    fork_commit: str | None,
    through: str | None,
    bridge_repo: Path | None,
    through_repo: Path | None,
    upstream_repo: str | None,
    allow_backwards: bool,
    signoff: str | None,
    no_gate: bool,
    allow_pending: tuple[str, ...],
    dry_run: bool,
    push: bool,
    open_pr: bool,
) -> Report:
    """Pin the fork head in the Bridge (and, with --through, in NeMo-RL) on new forkctl/bump-* branches.

    \b
    Each commit also rewrites the consumer's pin files (manifest pin_files, e.g. the Bridge's
    .main.commit) to the new pin; one the consumer's tree lacks is refused (exit 2).
    --open-pr implies --push. Bump commits are reproducible (author and committer "forkctl bump", or
    the --signoff identity, which also signs them off; dated the later of the parent's and the new pin's
    committer dates), so a rerun on any machine or cache makes the same commits, finds pushed branches
    "already there" and updates the pull requests.
    A consumer branch that already pins its new commit (the bump merged by merge commit, squash or
    rebase, its branch deleted or not) is done: no commit, no branch, and the next consumer pins that
    branch commit. An existing bump branch built on the consumer branch moves forward by one commit;
    one made from an older consumer branch is refused (exit 2).
    The gate: --push, --open-pr and --dry-run are refused where the gate fails for the series whose
    fork head is pinned (no GPU evidence: forkctl gate), with its findings and the forkctl validate
    that records the evidence, unless --no-gate, which is written into every bump commit's message and
    pull-request body ("Published without GPU evidence"). A local run only warns.
    Exit 0 done, 1 a step would go back (see --allow-backwards), the bumped chain fails
    check-pins, the gate fails (see --no-gate), or --open-pr opened nothing (gh missing or refused: the
    body and the gh command to run are printed), 2 bad input.
    """
    if dry_run and (push or open_pr):
        flag = "--open-pr" if open_pr else "--push"
        raise BadInput(f"--dry-run and {flag} contradict each other", hint="drop one of them")
    push = push or open_pr
    _check_signoff(signoff)
    manifest = ctx.manifest()
    if not manifest.consumers:
        raise BadInput("the manifest lists no consumers", hint="add consumers: to manifest.yaml")
    last = _through_index(manifest, through)
    with report.phases("bump-bridge") as progress:
        fork = fork_context(manifest, upstream_repo, progress)
        pin = _pin(manifest, fork, fork_commit)
        clones = _local_clones(last, bridge_repo, through_repo)
        gate = _Gate(manifest, fork, no_gate, allow_pending)
        plan = plan_bump(manifest, fork, last, clones, progress, pin=pin, signoff=signoff, note=gate.note)
        steps = plan.steps
        out = chain_report("bump-bridge", manifest, plan.check)
        described = bump_lines(steps)
        out.data["backwards"], out.data["gate"] = backwards_json(plan.forward), gate.json()
        if _refused_backwards(out, plan, allow_backwards, described):
            return out
        if gate.refuses(out, push, dry_run):
            out.lines = [*described, "the gate fails: no branch was created", *out.lines]
            out.data["steps"] = bump_json(steps, created=False, pushed=False)
            return out
        if not out.ok:
            out.lines = [
                *described,
                "the bumped chain does not pass check-pins: no branch was created",
                *out.lines,
            ]
            out.data["steps"] = bump_json(steps, created=False, pushed=False)
            return out
        if dry_run:
            out.lines = ["dry run: no ref was changed; the plan:", *described, *out.lines]
            out.data["steps"] = bump_json(steps, created=False, pushed=False)
            return out
        for step in steps:
            apply_step(step)
        opened: list[dict] = []
        pr_lines: list[str] = []
        if push:
            push_steps(steps, progress)
            if open_pr:
                opened, pr_lines = _open_pull_requests(manifest, fork, plan, out, progress, gate)
        made = any(not step.done and step.commit != step.existing for step in steps)
        header = "created:" if made else "nothing to create: every step is there already"
        out.lines = [header, *described, *out.lines, *_push_lines(steps, push, open_pr), *pr_lines]
        out.data["steps"] = bump_json(steps, created=True, pushed=push)
        with_branch = [entry for entry in out.data["steps"] if not entry["done"]]
        for entry, pull_request in zip(with_branch, opened, strict=False):
            entry["pull_request"] = pull_request
        return out
