"""Planning a run: its judge plan, its identity and its configuration hash, computed once so that a backfill
deciding what is already published agrees with the run that published it."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragpulse.tasks.config import RunConfig
from ragpulse.tasks.core.errors import ConfigError
from ragpulse.tasks.core.fingerprint import digest
from ragpulse.tasks.core.storage import redact_url
from ragpulse.tasks.core.types import RunInfo
from ragpulse.tasks.scoring.judge_plan import JudgePlan, judge_settings, load_judge_options, plan_judging

if TYPE_CHECKING:
    from ragpulse.tasks.judge.settings import JudgeSettings

__all__ = ["RunPlan", "check_deployment_run", "describe_run", "plan_run"]

# The groups that shape a partition's scores, stamped on its runs row (drift, alerts and the runner do not).
_SCORE_GROUPS = ("source", "scoring", "judge", "quality", "output")


def check_deployment_run(config: RunConfig) -> None:
    """Refuse, before any work, a deployment run whose configuration names local files by relative paths.

    A process worker runs each flow run in a fresh temporary folder (Kubernetes in a fresh pod), so a relative
    ``work_dir`` or DuckDB file would be written there and deleted with it. ``ragpulse serve`` stores absolute
    paths; a ``prefect.yaml`` must too.
    """
    from prefect.runtime import deployment

    relative = config.relative_paths()
    if deployment.id is None or not relative:
        return
    names = ", ".join(f"{name}={value!r}" for name, value in relative.items())
    raise ConfigError(
        f"deployment {deployment.name!r} has relative path(s) {names}: a worker runs each flow run in a temporary "
        "folder, so they would be lost; use absolute paths or URLs (s3://..., postgresql://...)"
    )


def describe_run(source: str, config: dict[str, Any], config_hash: str, judge: dict[str, Any] | None = None) -> RunInfo:
    """Identity of this run (the Prefect flow run id when there is one) and everything that shapes its scores.

    The judge model and prompt versions are part of the configuration hash: scores of another judge
    are never taken for the same configuration.
    """
    from prefect.runtime import flow_run

    judge = judge or {}
    return RunInfo(
        run_id=str(flow_run.id or uuid.uuid4()),
        source=redact_url(source),
        config_hash=digest(config_hash, json.dumps(judge, sort_keys=True))[:16] if judge else config_hash,
        # The judge plan (model in use, prompt versions, skipped metrics) joins the judge settings it came from.
        config={**config, "judge": {**config.get("judge", {}), **judge}} if judge else config,
        started_at=dt.datetime.now(dt.UTC),
    )


@dataclass(frozen=True)
class RunPlan:
    """What a run of some settings will do with the judge, and the run's identity and configuration hash."""

    judge: JudgeSettings
    options: dict[str, Any]
    judging: JudgePlan
    run: RunInfo


def plan_run(config: RunConfig) -> RunPlan:
    """The judge and run description of ``config``: the one computation behind a run's configuration hash, so a
    backfill deciding what is already published agrees with the run that published it."""
    judge = judge_settings(config.output.work_dir, model=config.judge.model, base_url=config.judge.base_url)
    options = load_judge_options(config.judge.options_file)
    judging = plan_judging(config.scoring.metrics, judge.model, options)
    stamped = config.model_dump(mode="json", include=set(_SCORE_GROUPS))
    stamped["output"]["warehouse"] = redact_url(config.output.warehouse)
    run = describe_run(config.source.url, stamped, config.fingerprint(), judging.describe())
    return RunPlan(judge, options, judging, run)
