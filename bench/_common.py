"""What several benchmarks share: the machine's CPU name for their results, the best of repeated timings, and a
Prefect server to run flows against as deployments do."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

__all__ = ["best", "cpu_model", "free_port", "machine", "prefect_server"]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(load_before: tuple[float, float, float]) -> dict[str, Any]:
    """What a result was measured on, with the load averages before the measurement (``load_before``) and now."""
    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": sys.version.split()[0],
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best (wall seconds, process CPU seconds over all threads) of ``repeat`` calls: the least disturbed run on a
    shared machine."""
    times = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        times.append((time.perf_counter() - wall, time.process_time() - cpu))
    return min(times)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def prefect_server(env: dict[str, str], log: Path) -> Iterator[tuple[str, psutil.Process]]:
    """A Prefect API server on loopback, started and healthy before any clock starts, as a deployment's runs find
    it; yields its URL and its process (whose CPU during a run is recorded apart)."""
    port = free_port()
    prefect = str(Path(sys.executable).with_name("prefect"))
    command = [prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 180
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prefect server did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)
        yield url, psutil.Process(server.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, 15)
        server.wait(30)
