"""deployments/prefect.yaml resolves: every entrypoint is a Prefect flow, every parameter fits its schema, every
schedule parses. Generic on purpose: it checks whatever deployments the file holds, so new ones are covered."""

from __future__ import annotations

import re
import zoneinfo
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect import Flow
from prefect.client.schemas.schedules import CronSchedule, IntervalSchedule, RRuleSchedule
from prefect.flows import load_flow_from_entrypoint
from prefect.utilities.callables import parameter_schema
from prefect.utilities.schema_tools.validation import validate

from ragpulse.tasks.config import GROUPS

ROOT = Path(__file__).resolve().parents[2]
PREFECT_YAML = ROOT / "deployments" / "prefect.yaml"
ENV_EXAMPLE = ROOT / "infra" / ".env.example"
COMPOSE = ROOT / "infra" / "compose.yaml"

# Prefect's own placeholder syntax: {{ $ENV }}, {{ prefect.blocks.* }}, {{ prefect.variables.* }}, step outputs.
PLACEHOLDER = re.compile(r"{{\s*([\w.\-\[\]$]+)\s*}}")


def env_example() -> dict[str, str]:
    """Values of infra/.env.example, commented-out optional lines included (they document the variable)."""
    values: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        match = re.match(r"^#?\s*([A-Z][A-Z0-9_]*)=(.*)$", line.strip())
        if match:
            values.setdefault(match.group(1), match.group(2))
    return values


def load_prefect_yaml() -> dict[str, Any]:
    return yaml.safe_load(PREFECT_YAML.read_text())


DEPLOYMENTS: list[dict[str, Any]] = load_prefect_yaml().get("deployments") or []


def resolve(value: Any, env: dict[str, str]) -> Any:
    """Apply ``{{ $VAR }}`` from the env example as ``prefect deploy`` does from its environment; a value that is
    entirely another placeholder (a block, a variable, a step output) becomes ``TEMPLATED``: known only at deploy."""
    if isinstance(value, dict):
        return {key: resolve(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, env) for item in value]
    if not isinstance(value, str) or not PLACEHOLDER.search(value):
        return value

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("$"):
            assert name[1:] in env, f"{{{{ {name} }}}} in prefect.yaml: {name[1:]} is not in infra/.env.example"
            return env[name[1:]]
        return match.group(0)

    resolved = PLACEHOLDER.sub(substitute, value)
    return TEMPLATED if PLACEHOLDER.fullmatch(resolved.strip()) else resolved


TEMPLATED = object()


def load_entrypoint(entrypoint: str) -> Flow[Any, Any]:
    """The flow as a worker loads it: by module path from the installed package, not from a file of this checkout."""
    module, _, name = entrypoint.partition(":")
    assert name and not module.endswith(".py"), f"entrypoint {entrypoint!r} must be <module path>:<flow function>"
    assert module.startswith("ragpulse."), f"entrypoint {entrypoint!r} is not in the ragpulse package"
    flow = load_flow_from_entrypoint(entrypoint, use_placeholder_flow=False)
    assert isinstance(flow, Flow), f"{entrypoint} is not a Prefect flow (got {type(flow).__name__})"
    return flow


def check_parameters(flow: Flow[Any, Any], parameters: dict[str, Any], where: str) -> None:
    """Validate against the flow's parameter schema as the Prefect server does, then, when every required parameter
    is there, through the flow's own pydantic validation (types coerced exactly as at run time)."""
    schema = parameter_schema(flow).model_dump_for_openapi()
    known = set(schema["properties"])
    unknown = sorted(set(parameters) - known)
    assert not unknown, f"{where}: {unknown} are not parameters of {flow.name} (it takes {sorted(known)})"
    concrete = {key: value for key, value in parameters.items() if value is not TEMPLATED}
    errors = validate(concrete, schema, raise_on_error=False, ignore_required=True)
    assert not errors, f"{where}: invalid parameters for {flow.name}: {[e.message for e in errors]}"
    if set(schema.get("required", [])) <= set(concrete):
        flow.validate_parameters(concrete)


def build_schedule(config: dict[str, Any]) -> CronSchedule | IntervalSchedule | RRuleSchedule:
    """The schedule objects ``prefect deploy`` builds from a ``schedules:`` entry."""
    timezone = config.get("timezone")
    if timezone is not None:
        zoneinfo.ZoneInfo(timezone)  # raises for an unknown IANA name
    options = {"timezone": timezone} if timezone else {}
    if "cron" in config:
        if config.get("day_or") is not None:
            options["day_or"] = config["day_or"]
        return CronSchedule(cron=config["cron"], **options)
    if "interval" in config:
        interval = config["interval"]
        interval = timedelta(seconds=interval) if isinstance(interval, int | float) else interval
        return IntervalSchedule(interval=interval, **options)
    if "rrule" in config:
        return RRuleSchedule(rrule=config["rrule"], **options)
    raise AssertionError(f"schedule {config} has no cron, interval or rrule")


def test_there_are_deployments() -> None:
    assert DEPLOYMENTS, "deployments/prefect.yaml defines no deployments"
    names = [deployment["name"] for deployment in DEPLOYMENTS]
    assert len(names) == len(set(names)), f"duplicate deployment names: {names}"


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d.get("name", "?"))
def test_entrypoint_parameters_and_schedules(deployment: dict[str, Any]) -> None:
    env = env_example()
    flow = load_entrypoint(deployment["entrypoint"])
    where = f"deployment {deployment['name']!r}"
    check_parameters(flow, resolve(deployment.get("parameters") or {}, env), where)
    schedules = deployment.get("schedules") or []
    if deployment.get("schedule"):
        schedules = [*schedules, deployment["schedule"]]
    for index, config in enumerate(schedules):
        config = resolve(config, env)
        build_schedule(config)
        merged = {**resolve(deployment.get("parameters") or {}, env), **(config.get("parameters") or {})}
        check_parameters(flow, merged, f"{where}, schedule {index}")


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d.get("name", "?"))
def test_deployments_use_the_pool_the_stacks_create(deployment: dict[str, Any]) -> None:
    """The compose deploy job and the Kubernetes bootstrap create exactly this pool; any other would never run."""
    compose = yaml.safe_load(COMPOSE.read_text())
    environment = compose["services"]["deploy"]["environment"]
    pools = {item.split("=", 1)[1] for item in environment if item.startswith("RAGPULSE_WORK_POOL=")}
    assert deployment.get("work_pool", {}).get("name") in pools, f"{deployment['name']}: work pool not in {pools}"


def test_deployments_have_no_pull_step() -> None:
    """Runs import the flows from the installed package: a pull step that changes directory breaks every worker
    that lacks that directory (a host worker has no /opt/ragpulse), and a missing ``pull`` key lets
    ``prefect deploy`` add one for the folder it happened to run in."""
    assert load_prefect_yaml()["pull"] == []


def test_templated_values_are_recognised() -> None:
    env = {"RAGPULSE_SOURCE": "s3://bucket/traces"}
    assert resolve("{{ $RAGPULSE_SOURCE }}", env) == "s3://bucket/traces"
    assert resolve("{{ $RAGPULSE_SOURCE }}/dt", env) == "s3://bucket/traces/dt"
    assert resolve("{{ prefect.blocks.secret.warehouse-url }}", env) is TEMPLATED
    assert resolve({"a": ["{{ prefect.variables.x }}", 1]}, env) == {"a": [TEMPLATED, 1]}
    with pytest.raises(AssertionError, match="NOT_DECLARED"):
        resolve("{{ $NOT_DECLARED }}", env)


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d.get("name", "?"))
def test_deployments_fill_every_configuration_group_explicitly(deployment: dict[str, Any]) -> None:
    """A run's parameter override replaces whole groups (Prefect merges shallowly), and a setting left to the flow's
    default is invisible in prefect.yaml: so every group the flow takes is there, with every field written out,
    and the values are exactly what the flow receives."""
    flow = load_entrypoint(deployment["entrypoint"])
    parameters = resolve(deployment.get("parameters") or {}, env_example())
    taken = [name for name in parameter_schema(flow).model_dump_for_openapi()["properties"] if name in GROUPS]
    assert taken, f"{flow.name} takes no configuration groups"
    for name in taken:
        assert name in parameters, f"deployment {deployment['name']!r} leaves group {name!r} to the flow's default"
        # The judge's settings left out come from the worker's RAGPULSE_JUDGE_* (docs/judge.md), not the defaults.
        from_worker = (
            set(GROUPS[name].model_fields) - {"model", "base_url", "options_file"} if name == "judge" else set()
        )
        missing = sorted(set(GROUPS[name].model_fields) - set(parameters[name]) - from_worker)
        assert not missing, f"deployment {deployment['name']!r}, group {name!r}: {missing} not written out"
    # Run-time parameters without a deployment value (evaluate-partition's date) get one, to validate the rest.
    run_time = {name: "2026-01-01" for name in parameter_schema(flow).required if name not in parameters}
    validated = flow.validate_parameters({**parameters, **run_time})
    for name in taken:
        assert validated[name] == GROUPS[name].model_validate(parameters[name]), name
