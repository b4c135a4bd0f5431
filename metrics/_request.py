"""How a metric is named: ``family``, ``family@k`` or ``family:variant``, written and read back.

The registry checks a name against the registered families (:class:`ragpulse.metrics.registry.MetricRequest`);
the judge metrics' factories only need its parts. Both import this module, so the metric modules never import
the registry that imports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["VARIANT_PATTERN", "MetricName", "split_metric_name"]

VARIANT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
"""A named variant (``tone``, ``user-feedback``)."""

# A variant ``*`` stands for every variant a day holds (``user_feedback:*``); the registry says which families take it.
_GRAMMAR = re.compile(r"^(?P<family>[a-z][a-z0-9_]*)(?::(?P<variant>\*|[a-z0-9][a-z0-9_-]*))?(?:@(?P<k>\d+))?$")


@dataclass(frozen=True)
class MetricName:
    """One metric as users write it: a family, its cutoff k (``precision@5``) or variant (``llm_judge:tone``)."""

    family: str
    k: int | None = None
    variant: str | None = None

    @property
    def name(self) -> str:
        name = self.family if self.variant is None else f"{self.family}:{self.variant}"
        return name if self.k is None else f"{name}@{self.k}"


def split_metric_name(text: str) -> MetricName | None:
    """The parts of ``text`` (surrounding spaces ignored, ``@007`` read as 7); None when it is not a metric name.

    Only the grammar: whether the family exists and takes that cutoff or variant is the registry's to check.
    """
    match = _GRAMMAR.match(text.strip())
    if match is None:
        return None
    k = int(match["k"]) if match["k"] is not None else None
    return MetricName(match["family"], k, match["variant"])
