"""``ragpulse serve``: the monitor flow on a schedule, run from this process, under a deployment that serve owns.

A deployment is owned by serve when it carries the ``ragpulse-serve`` tag and no work pool. Serve refuses any other
deployment of the same name: ``Flow.serve`` would replace its work pool, schedule and concurrency limit, and pause
it on exit, which silently stops production monitoring that ``prefect deploy`` registered.
"""

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragpulse.tasks.config import RunConfig
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.core.redaction import carries_secret, redact_url

__all__ = [
    "DEFAULT_SERVE_NAME",
    "SERVED_TAG",
    "check_served_deployment",
    "pause_deployment",
    "serve_monitor",
    "serve_parameters",
]

#: Not ``monitor-daily``: that is the work-pool deployment of deployments/prefect.yaml.
DEFAULT_SERVE_NAME = "monitor-served"
SERVED_TAG = "ragpulse-serve"


def serve_parameters(run_config: RunConfig, timezone: str) -> dict[str, Any]:
    """The served deployment's parameters: every group as JSON, so each scheduled run runs what was configured,
    with relative paths made absolute here (deployment runs refuse relative ones). A warehouse URL with a password
    is refused: a deployment holds its parameters in plain text (and JSON masks the password, so runs would fail)."""
    warehouse = run_config.output.warehouse
    if carries_secret(warehouse):
        raise ConfigError(
            f"a served deployment must not hold the warehouse password ({redact_url(warehouse)}): use --warehouse "
            "secret://<block> (a Prefect Secret block holding the URL) or set PGPASSWORD for the serving process"
        )
    absolute = run_config.with_absolute_paths(Path.cwd())
    groups = {name: getattr(absolute, name).model_dump(mode="json") for name in absolute.groups()}
    return {**groups, "timezone": timezone}


def check_served_deployment(full_name: str) -> None:
    """Raise ConfigError when ``full_name`` exists and is not a deployment that ``ragpulse serve`` created."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            existing = client.read_deployment_by_name(full_name)
        except ObjectNotFound:
            return
    if existing.work_pool_name or SERVED_TAG not in (existing.tags or []):
        owner = f"work pool {existing.work_pool_name!r}" if existing.work_pool_name else f"no {SERVED_TAG!r} tag"
        raise ConfigError(
            f"deployment {full_name} exists and was not created by `ragpulse serve` ({owner}); serving it would "
            "replace its work pool, schedule and concurrency limit and pause it on exit: choose another --name"
        )


def serve_monitor(
    run_config: RunConfig,
    *,
    name: str,
    cron: str,
    timezone: str,
    on_serving: Callable[[str], None] | None = None,
    on_paused: Callable[[str], None] | None = None,
) -> None:
    """Register ``monitor/<name>`` on ``cron`` (in ``timezone``) and run its flow runs here until stopped; then pause
    it, so runs do not pile up as Late with nobody to run them. ``on_serving`` hears of it once serve owns the
    name (a refusal comes first, alone), ``on_paused`` once it is paused."""
    from prefect.schedules import Cron

    from ragpulse.flows.monitor import monitor

    full_name = f"{monitor.name}/{name}"
    parameters = serve_parameters(run_config, timezone)
    check_served_deployment(full_name)
    if on_serving is not None:
        on_serving(full_name)
    # Until Prefect's runner installs its own graceful handler, SIGTERM would end the process at once, skipping
    # the pause below (seen when the signal arrives between registering the deployment and starting the runner).
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        monitor.serve(name=name, schedules=[Cron(cron, timezone=timezone)], parameters=parameters, tags=[SERVED_TAG])
    finally:
        if pause_deployment(full_name) and on_paused is not None:
            on_paused(full_name)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def pause_deployment(full_name: str) -> bool:
    """Pause a served deployment when its process stops, however it stops: Prefect's own pause on shutdown is
    skipped when a signal arrives before its runner has started, and (Prefect 3.9) on SIGTERM. False if absent."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.pause_deployment(client.read_deployment_by_name(full_name).id)
        except ObjectNotFound:
            return False
    return True
