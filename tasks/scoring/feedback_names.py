"""Which feedback metrics a day publishes when the run asks for ``user_feedback:*`` / ``tool_evaluation:*`` (the
defaults do): one ``user_feedback:<name>`` per name people or the application gave on some trace of the day, one
``tool_evaluation:<name>`` per name a tool's evaluator gave, read from the staged ``feedback`` column (a few bytes
per trace) before scoring. Names that cannot be metric names (upper case, spaces, non-ASCII) are named in a warning
and left out: ask for them after renaming in the tool, or under the canonical format's own names."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.metrics._request import VARIANT_PATTERN
from ragpulse.metrics.feedback import EVERY_NAME, HUMAN_SOURCES, TOOL_EVALUATION, USER_FEEDBACK
from ragpulse.tasks.core.types import BatchRef
from ragpulse.tasks.ingest.batches import read_staged

__all__ = ["asks_every_name", "expand_feedback_metrics", "feedback_names"]

_log = logging.getLogger(__name__)
_WILDCARDS = {f"{USER_FEEDBACK.name}:{EVERY_NAME}", f"{TOOL_EVALUATION.name}:{EVERY_NAME}"}


def asks_every_name(metric_names: Sequence[str]) -> bool:
    return bool(_WILDCARDS.intersection(metric_names))


def feedback_names(batches: Sequence[BatchRef], storage_options: Mapping[str, Any] | None) -> dict[str, set[str]]:
    """Every feedback name in the staged batches, with the sources that gave it."""
    found: dict[str, set[str]] = {}
    for batch in batches:
        table = read_staged(batch, storage_options, columns=["feedback"])
        for entries in table.column("feedback").to_pylist():
            for entry in entries or ():
                found.setdefault(entry["name"], set()).add(entry["source"])
    return found


def expand_feedback_metrics(metric_names: Sequence[str], found: Mapping[str, set[str]]) -> list[str]:
    """``metric_names`` with each wildcard replaced by the day's names of its family (in name order, after the
    metrics named explicitly, never twice)."""
    usable = {name for name in found if VARIANT_PATTERN.match(name)}
    if unusable := sorted(set(found) - usable):
        _log.warning("feedback names that cannot be metric names, not published: %s", ", ".join(unusable))
    expanded = [name for name in metric_names if name not in _WILDCARDS]
    for family, wanted in ((USER_FEEDBACK.name, HUMAN_SOURCES), (TOOL_EVALUATION.name, frozenset({"evaluation"}))):
        if f"{family}:{EVERY_NAME}" in metric_names:
            expanded += [f"{family}:{name}" for name in sorted(usable) if found[name] & wanted]
    return list(dict.fromkeys(expanded))
