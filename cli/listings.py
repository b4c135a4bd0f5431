"""The commands that describe ragpulse itself: ``metrics`` and ``settings``, as tables or JSON."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from ragpulse.cli.options import JsonOption
from ragpulse.cli.output import out
from ragpulse.tasks.config import SETTINGS

__all__ = ["list_metrics", "list_settings"]


def list_metrics(as_json: JsonOption = False) -> None:
    """List the metrics: their versions, definitions, what they need and which run by default."""
    from ragpulse.metrics import REGISTRY
    from ragpulse.metrics._request import split_metric_name
    from ragpulse.metrics.registry import spec_name
    from ragpulse.tasks.scoring.config import ScoringConfig

    run_defaults = ScoringConfig().metrics  # what a run scores when given no metric list

    rows: list[dict[str, Any]] = []
    for definition in REGISTRY.values():
        spec = definition.spec
        defaults = [name for name in run_defaults if (parts := split_metric_name(name)) and parts.family == spec.name]
        rows.append(
            {"name": spec_name(spec), "family": spec.name, "version": spec.version, "summary": spec.summary,
             "needs": definition.needs, "default": bool(defaults), "defaults": defaults, "lower": spec.lower,
             "upper": spec.upper, "higher_is_better": spec.higher_is_better, "takes_k": spec.takes_k,
             "requires_k": spec.requires_k, "takes_variant": spec.takes_variant}
        )  # fmt: skip
    if as_json:
        out.print_json(json.dumps(rows))
        return
    table = Table(title="metrics (defaults marked *)")
    for column in ("name", "version", "needs", "definition"):
        table.add_column(column)
    for row in rows:
        table.add_row(f"{row['name']}{'*' if row['default'] else ''}", row["version"], row["needs"], row["summary"])
    out.print(table)


def list_settings(as_json: JsonOption = False) -> None:
    """List every setting: its group, option, environment variable, TOML key and default."""

    rows: list[dict[str, Any]] = []
    for setting in SETTINGS.values():
        field = setting.info
        default = None if field.is_required() else field.get_default(call_default_factory=True)
        rows.append(
            {"setting": setting.flat, "group": setting.group, "field": setting.field, "option": setting.option,
             "env": setting.env, "default": default, "description": field.description}
        )  # fmt: skip
    if as_json:
        out.print_json(json.dumps(rows, default=list))
        return
    table = Table(title="settings (option > environment > ragpulse.toml > default)")
    for column in ("setting", "group", "env", "default", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["setting"], row["group"], row["env"], repr(row["default"]), row["description"] or "")
    out.print(table)
