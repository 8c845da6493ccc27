"""The evidence a validate job wrote into its private folder, checked before it is recorded here: the
series it names (digest, base, every patch's bytes), the suite it ran (the files here now), the tree it
tested, and the environment tag the options ask for. A mismatch is the job's failure, never evidence."""

from __future__ import annotations

import msgspec

from forkctl.errors import BadInput
from forkctl.gpu.evidence import (
    Run,
    SuiteRecord,
    environment_tag,
    evidence_path,
    load_evidence,
    patch_records,
)
from forkctl.manifest import Manifest
from forkctl.series import Series
from forkctl.slurm.script import JobFiles


class Expected(msgspec.Struct, frozen=True):
    """What this run must show: the series, the suite as it is here, the tag's suffix, the tree's source."""

    suite: SuiteRecord
    env_suffix: str | None
    from_source: bool  # validate --source: the fork head built from the base archive


def returned_run(manifest: Manifest, series: Series, files: JobFiles, expected: Expected) -> Run | str:
    """The job's one run, or what is wrong with what it wrote."""
    path = evidence_path(files.evidence, series.digest)
    if not path.is_file():
        return f"the job wrote no evidence for series {series.digest[:12]} ({path.name})"
    try:
        evidence = load_evidence(path)
    except BadInput as exc:
        return str(exc)
    if (evidence.series_digest, evidence.base) != (series.digest, series.base):
        return f"the job validated series {evidence.series_digest[:12]}, not {series.digest[:12]}"
    if evidence.patches != patch_records(manifest, series):
        return "the job read other patch files than the series here"
    if len(evidence.runs) != 1:
        return f"the job recorded {len(evidence.runs)} runs, not one"
    run = evidence.runs[0]
    return _run_problem(run, series, expected) or run


def _run_problem(run: Run, series: Series, expected: Expected) -> str | None:
    if run.gpu_tests != expected.suite:
        return (
            f"the job ran the suite {run.gpu_tests.root} with digest {run.gpu_tests.digest[:12]}, "
            f"but here it is {expected.suite.digest[:12]}: the node's checkout differs"
        )
    tag = environment_tag(run.environment.compute_capability, expected.env_suffix)
    if run.environment.tag != tag:
        return f"the job recorded the environment {run.environment.tag}, not {tag}"
    tested = run.tested
    if tested is None:
        return "the job's run names no tested tree"
    base = tested.base_commit or ""
    if expected.from_source and (tested.source != "upstream-base" or not base.startswith(series.base)):
        return f"the job tested {tested.source} (base {tested.base_commit}), not the fork head on {series.base[:12]}"
    return None
