"""What several benchmarks share: the machine's CPU name for their results, and the best of repeated timings."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["best", "cpu_model"]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best (wall seconds, process CPU seconds over all threads) of ``repeat`` calls: the least disturbed run on a
    shared machine."""
    times = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        times.append((time.perf_counter() - wall, time.process_time() - cpu))
    return min(times)
