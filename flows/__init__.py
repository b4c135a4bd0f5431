"""Prefect flows: they compose tasks and hold no metric logic.

``from ragpulse.flows import evaluate_partition, SourceConfig, OutputConfig`` is the library entry point. Names
load on first use (PEP 562), so that the command line in ``ragpulse.cli`` starts without importing Prefect.
"""

import importlib
from typing import Any

__all__ = [
    "AlertConfig",
    "CalibrationConfig",
    "DriftConfig",
    "JudgeConfig",
    "OutputConfig",
    "QualityConfig",
    "RunConfig",
    "RunnerConfig",
    "ScoringConfig",
    "SourceConfig",
    "backfill",
    "calibrate",
    "evaluate_partition",
    "load_config",
    "monitor",
]

_HOMES = {
    "backfill": "ragpulse.flows.backfill",
    "calibrate": "ragpulse.flows.calibrate",
    "evaluate_partition": "ragpulse.flows.evaluate",
    "monitor": "ragpulse.flows.monitor",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(_HOMES.get(name, "ragpulse.tasks.config"))
    return getattr(module, name)
