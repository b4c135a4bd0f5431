"""Planning a run: its judge plan, its identity and its configuration hash, computed once so that a backfill
deciding what is already published agrees with the run that published it."""

from __future__ import annotations

import datetime as dt
import difflib
import json
import os
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragpulse.tasks.config import JUDGE_KEY_HINT, SETTINGS, RunConfig
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.fingerprint import digest
from ragpulse.tasks.core.storage import carries_secret, check_source_root, redact_url
from ragpulse.tasks.core.types import RunInfo
from ragpulse.tasks.judge.plan import JudgePlan, judge_settings, load_judge_options, plan_judging

if TYPE_CHECKING:
    from ragpulse.tasks.judge.settings import JudgeSettings

__all__ = ["RunPlan", "check_config", "check_deployment_run", "describe_run", "plan_run"]

# The groups that shape a partition's scores, stamped on its runs row (drift, alerts and the runner do not).
_SCORE_GROUPS = ("source", "scoring", "judge", "quality", "output")


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


def check_config(config: RunConfig, *, alerts: bool = False) -> None:
    """Everything in ``config`` and the run's environment that a run would otherwise find wrong only once it had
    staged and scored a day, checked before any work: the deployment's paths and secrets, the judge settings
    (``RAGPULSE_JUDGE_*`` included) and options file, metric variants, its key or Secret block, the suites, the
    warehouse (``secret://`` block, scheme, schema, reachable and writable), the source's root folder (a mistyped
    bucket or prefix is not a day without traces), the labels that calibrate the judge,
    and with ``alerts`` the webhook's Secret block. The CLI calls it before it starts a flow, each flow first thing
    (a deployment run's parameters come from the API). Raises ConfigError in one line, no password in it."""
    from pydantic import ValidationError

    from ragpulse.tasks.monitoring.delivery import webhook_url
    from ragpulse.tasks.quality.checks import load_suite
    from ragpulse.tasks.warehouse.probe import probe_warehouse

    check_deployment_run(config)
    _unknown_judge_variables()
    try:
        planned = plan_run(config)
    except ValidationError as exc:
        raise _judge_error(exc) from None
    _judge_key(planned.judge)
    for suite in (config.quality.input_suite, config.quality.output_suite):
        if suite:
            load_suite(suite)
    probe_warehouse(config.output.warehouse)
    check_source_root(config.source.url, config.source.storage_options)
    if config.calibration.labels:
        _labels_exist(config.calibration.labels, config.source.storage_options)
    if alerts and config.alerts.webhook_block:
        webhook_url(config.alerts)


def _labels_exist(url: str, storage_options: dict[str, Any]) -> None:
    """The labels setting names a file or folder that is there: a run must not learn after scoring that it is not."""
    from ragpulse.tasks.core.storage import filesystem, redact_url, storage_errors

    fs, path = filesystem(url, storage_options)
    with storage_errors(url):
        if not fs.exists(path):
            raise ConfigError(f"labels {redact_url(url)} do not exist (the calibration setting `labels`)")


_JUDGE_ENV = "RAGPULSE_JUDGE_"


def _judge_fields() -> set[str]:
    from ragpulse.tasks.judge.settings import JudgeSettings

    return set(JudgeSettings.model_fields)


def _unknown_judge_variables() -> None:
    """pydantic-settings ignores a variable it does not know, so ``RAGPULSE_JUDGE_TIMEOUT=-1`` would change nothing,
    silently: refuse it and name the setting meant."""
    known = {_JUDGE_ENV + name.upper() for name in _judge_fields()} | {s.env for s in SETTINGS.values()}
    for name in sorted(os.environ):
        if name.startswith(_JUDGE_ENV) and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f"; did you mean {close[0]}?" if close else " (see docs/judge.md)"
            raise ConfigError(f"unknown judge setting {name}{hint}")


def _judge_error(exc: Any) -> ConfigError:
    """The judge settings' validation errors as one line naming each variable, never the value given."""
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else "settings"
        name = _JUDGE_ENV + field.upper() if field in _judge_fields() else field
        problems.append(f"{name}: {str(error['msg']).removeprefix('Value error, ')}")
    return ConfigError(f"invalid judge settings: {'; '.join(problems)}")


def _judge_key(judge: JudgeSettings) -> None:
    """An enabled judge has a key where it will look: its Secret block exists, or OpenAI's API gets one."""
    from ragpulse.tasks.core.secrets import secret_text

    if not judge.enabled or judge.api_key is not None:
        return
    if judge.api_key_block:
        secret_text(judge.api_key_block, used_for="judge API key, RAGPULSE_JUDGE_API_KEY_BLOCK", holds="an API key")
    elif judge.base_url is None and not os.environ.get("OPENAI_API_KEY"):
        raise ConfigError(f"no API key for the OpenAI API (judge model {judge.model!r}): {JUDGE_KEY_HINT}")
