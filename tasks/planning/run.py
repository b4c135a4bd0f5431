"""Planning a run: its judge (settings resolved where the run executes, options, the metrics it judges), its
configuration hash and identity, and every check before any work.

Computed once per run. The CLI, a flow and the subflows it calls each check the configuration they receive (a
deployment run's parameters come from the API, so each flow must), but within ``checked_run`` a configuration
already checked is not checked again: the scope lives in a context variable, which Prefect hands on to subflows and
to the threads of its tasks, and ends with the block, so a later run (or test) in the same process checks afresh.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ragpulse.tasks.config import PARTITION_GROUPS, RunConfig, check_variables
from ragpulse.tasks.core.config_base import ConfigGroup
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.fingerprint import digest
from ragpulse.tasks.core.storage import carries_secret, check_source_root, redact_url
from ragpulse.tasks.core.types import RunInfo
from ragpulse.tasks.core.workdir import work_root
from ragpulse.tasks.judge.config import JudgeConfig
from ragpulse.tasks.judge.plan import JudgePlan, load_judge_options, plan_judging

__all__ = ["RunPlan", "check_config", "check_deployment_run", "checked_run", "describe_run", "plan_run", "planned"]

# The groups that shape a partition's scores, stamped on its runs row (drift, alerts and the runner do not).
_SCORE_GROUPS = ("source", "scoring", "judge", "quality", "output")


@dataclass(frozen=True)
class RunPlan:
    """What a run of some configuration will do with the judge, and the configuration its runs rows record."""

    judge: JudgeConfig
    """The judge settings in the run's environment, the call cache defaulting to ``<work_dir>/judge-cache``."""
    options: dict[str, Any]
    judging: JudgePlan
    config_hash: str
    stamped: dict[str, Any]


def plan_run(config: RunConfig) -> RunPlan:
    """The judge and configuration hash of ``config``: the one computation behind a run's configuration hash, so a
    backfill deciding what is already published agrees with the run that published it. The judge model and prompt
    versions are part of the hash: scores of another judge are never taken for the same configuration."""
    judge = config.judge.in_run_environment().with_default_cache(work_root(config.output.work_dir))
    options = load_judge_options(judge.options_file)
    judging = plan_judging(config.scoring.metrics, judge.model, options)
    described = judging.describe()
    stamped = config.model_dump(mode="json", include=set(_SCORE_GROUPS))
    stamped["output"]["warehouse"] = redact_url(config.output.warehouse)
    # The judge plan (model in use, prompt versions, skipped metrics) joins the judge settings it came from.
    stamped["judge"] = {**judge.model_dump(mode="json"), **described}
    config_hash = digest(config.fingerprint(), json.dumps(described, sort_keys=True))[:16]
    return RunPlan(judge, options, judging, config_hash, stamped)


def describe_run(config: RunConfig, plan: RunPlan) -> RunInfo:
    """Identity of this run (the Prefect flow run id when there is one) and everything that shapes its scores."""
    from prefect.runtime import flow_run

    return RunInfo(
        run_id=str(flow_run.id or uuid.uuid4()),
        source=redact_url(config.source.url),
        config_hash=plan.config_hash,
        config=plan.stamped,
        started_at=dt.datetime.now(dt.UTC),
    )


def check_deployment_run(config: RunConfig) -> None:
    """Refuse, before any work, a deployment run whose configuration names local files by relative paths.

    A process worker runs each flow run in a fresh temporary folder (Kubernetes in a fresh pod), so a relative
    ``work_dir`` or DuckDB file would be written there and deleted with it. ``ragpulse serve`` stores absolute
    paths; a ``prefect.yaml`` must too.
    """
    from prefect.runtime import deployment

    if deployment.id is None:
        return
    if carries_secret(config.output.warehouse):  # a masked one too: JSON masked it, so the runs would fail
        raise ConfigError(
            f"deployment {deployment.name!r}: its warehouse URL {redact_url(config.output.warehouse)} carries a "
            "password, which a deployment stores in plain text; use --warehouse secret://<block> (a Prefect Secret "
            "block holding the URL) or set PGPASSWORD where the runs execute"
        )
    relative = config.relative_paths()
    if not relative:
        return
    names = ", ".join(f"{name}={value!r}" for name, value in relative.items())
    raise ConfigError(
        f"deployment {deployment.name!r} has relative path(s) {names}: a worker runs each flow run in a temporary "
        "folder, so they would be lost; use absolute paths or URLs (s3://..., postgresql://...)"
    )


@dataclass(frozen=True)
class _Checked:
    """A configuration checked in this context: its groups as JSON, whether alerts were checked, and its plan."""

    groups: dict[str, str]
    alerts: bool
    plan: RunPlan

    def covers(self, config: RunConfig, alerts: bool) -> bool:
        """Whether checking ``config`` again would check nothing new: the partition's groups are the same, and the
        labels and (when asked) the alert settings were checked too."""
        same = all(self.groups[name] == _json(config, name) for name in PARTITION_GROUPS)
        labels = config.calibration.labels is None or self.groups["calibration"] == _json(config, "calibration")
        alerting = not alerts or (self.alerts and self.groups["alerts"] == _json(config, "alerts"))
        return same and labels and alerting


_checked: ContextVar[_Checked | None] = ContextVar("ragpulse_checked_config", default=None)


def _json(config: RunConfig, group: str) -> str:
    model: ConfigGroup = getattr(config, group)
    return model.model_dump_json()


def planned(config: RunConfig) -> RunPlan:
    """The plan of ``config``: the checked run's, inside ``checked_run`` of a configuration that covers it, else
    planned now (without the checks: a backfill's planning only needs the configuration hash)."""
    known = _checked.get()
    if known is not None and known.covers(config, alerts=False):
        return known.plan
    return plan_run(config)


def check_config(config: RunConfig, *, alerts: bool = False) -> RunPlan:
    """Everything in ``config`` and the run's environment that a run would otherwise find wrong only once it had
    staged and scored a day, checked before any work, and the run's plan: the deployment's paths and secrets,
    misspelt ``RAGPULSE_*`` variables, the embedding store's size, the judge settings (those the run's environment
    fills in included), options file, metric variants, its key or Secret block, the suites, the warehouse
    (``secret://`` block, scheme, schema, reachable and writable), the source's root folder (a mistyped bucket or
    prefix is not a day without traces), the labels that calibrate the judge, and with ``alerts`` the webhook's Secret
    block. The CLI calls it before it starts a flow, each flow first thing; inside ``checked_run`` a configuration it
    already covers is not checked again.
    Raises ConfigError in one line, no password in it."""
    known = _checked.get()
    if known is not None and known.covers(config, alerts):
        return known.plan
    from ragpulse.tasks.embeddings.store import store_settings
    from ragpulse.tasks.judge.preflight import check_judge
    from ragpulse.tasks.monitoring.delivery import webhook_url
    from ragpulse.tasks.quality.checks import load_suite
    from ragpulse.tasks.warehouse.probe import probe_warehouse

    check_deployment_run(config)
    check_variables()
    store_settings()  # the embedding store's, read by the first encode of a process
    plan = plan_run(config)
    check_judge(plan.judge)
    for suite in (config.quality.input_suite, config.quality.output_suite):
        if suite:
            load_suite(suite)
    probe_warehouse(config.output.warehouse)
    check_source_root(config.source.url, config.source.storage_options)
    if config.calibration.labels:
        _labels_exist(config.calibration.labels, config.source.storage_options)
    if alerts and config.alerts.webhook_block:
        webhook_url(config.alerts)
    return plan


@contextmanager
def checked_run(config: RunConfig, *, alerts: bool = False) -> Iterator[RunPlan]:
    """Check and plan ``config`` (``check_config``), and within the block let every check of a configuration it
    covers (a subflow's, a task's) return this plan without checking again. The judge calls made within the block
    share the run's judge budget (``tasks/judge/budget.py``), a backfill's partitions included."""
    from ragpulse.tasks.judge.budget import spending

    plan = check_config(config, alerts=alerts)
    groups = {name: _json(config, name) for name in type(config).model_fields}
    token = _checked.set(_Checked(groups, alerts, plan))
    try:
        with spending(plan.judge, config.output.warehouse):
            yield plan
    finally:
        _checked.reset(token)


def _labels_exist(url: str, storage_options: dict[str, Any]) -> None:
    """The labels setting names a file or folder that is there: a run must not learn after scoring that it is not."""
    from ragpulse.tasks.core.storage import filesystem, storage_errors

    fs, path = filesystem(url, storage_options)
    with storage_errors(url):
        if not fs.exists(path):
            raise ConfigError(f"labels {redact_url(url)} do not exist (the calibration setting `labels`)")
