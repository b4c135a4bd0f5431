"""How a ``ragpulse`` process is tuned around its command: Prefect's environment defaults, which of Prefect's logs
reach the terminal, the garbage collector deferred while a flow command loads its libraries, and the warm-up that
overlaps the start of Prefect's ephemeral API server with those imports.

None of it changes what a command does, only how long it takes and what the terminal shows; the commands call it
(``collector.defer()`` first, ``warm_up`` just before the flow) and keep their own logic.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ragpulse.cli.output import console

if TYPE_CHECKING:
    from ragpulse.tasks.config import RunConfig

__all__ = [
    "Program",
    "announce_api",
    "collector",
    "demo_prefect_home",
    "prefect_environment",
    "quiet_run_failures",
    "terminal_logs",
    "warm_up",
]

_PREFECT_DEFAULTS = {
    # The ephemeral API server took 20-50 s to start on small machines; Prefect's default is 20 s.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}


class _Collector:
    """Python's cyclic garbage collector in a process that the ``ragpulse`` program owns. A flow command imports
    Prefect, its server module, pandas and Great Expectations, about half a million long-lived objects, and the
    collector's full passes scanned them all eight times before the flow began (3.5 s of a one-day demo evaluate on
    a loaded machine) and again while the interpreter tore them down after the last ``atexit`` handler (2-3 s).
    Deferred, they are scanned once: collection is off while a flow command imports and warms up, then one full
    collection and ``gc.freeze()`` (later passes skip what was examined, as for objects that live until exit
    anyway), and the same at exit for what the run allocated. Whatever is garbage at those two points is collected
    and finalized as before; objects still alive at exit are freed by reference counting as before, but cycles
    among them are no longer scanned for (CPython never promised their finalizers at exit). Only ``Program``
    calls, the console script and ``python -m``, own the process: typer's CliRunner and other in-process callers
    keep the collector as it was."""

    def __init__(self) -> None:
        self.owned = False
        self.deferred = False

    def own(self) -> None:
        if not self.owned:
            self.owned = True
            atexit.register(self.settle)  # registered before Prefect is imported, so it runs after its handlers

    def defer(self) -> None:
        if self.owned and gc.isenabled():
            gc.disable()
            self.deferred = True

    def settle(self) -> None:
        if self.owned:
            gc.collect()
            gc.freeze()
        self.resume()

    def resume(self) -> None:
        if self.deferred:
            self.deferred = False
            gc.enable()


collector = _Collector()


class Program(typer.Typer):
    """The typer app, which ``ragpulse`` and ``python -m ragpulse.cli`` call as the whole process."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        collector.own()
        try:
            return super().__call__(*args, **kwargs)
        finally:
            collector.resume()  # a caller that catches SystemExit and goes on gets the collector back


def prefect_environment(verbose: bool) -> None:
    """Prefect's settings for a command-line process, under whatever the environment already sets."""
    for name, value in _PREFECT_DEFAULTS.items():
        os.environ.setdefault(name, value)
    if not verbose:
        # Quiet in the terminal only: the flow and task runs' INFO logs still go to the Prefect server, whose UI
        # otherwise says the run "didn't generate logs". (PREFECT_LOGGING_LEVEL would silence both.)
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")


def demo_prefect_home(directory: Path) -> None:
    """Without a Prefect server, the demo's ephemeral API keeps its database in the demo folder: one there cannot
    collide with a database another Prefect version migrated (seen: alembic "No such revision")."""
    if not os.environ.get("PREFECT_API_URL"):
        os.environ.setdefault("PREFECT_HOME", str((directory / ".prefect").resolve()))


def announce_api() -> None:
    """Say why a command without a Prefect server waits: the temporary API server it starts."""
    if not os.environ.get("PREFECT_API_URL"):
        console.print(
            "[dim]No PREFECT_API_URL set: starting Prefect's temporary local API server for this command "
            "(20-50 s on a small machine; it keeps no history). Point PREFECT_API_URL at a Prefect server "
            "for schedules and run history.[/dim]"
        )


class _RunFailures(logging.Filter):
    """Drops Prefect's ERROR records of failed flow and task runs (with their tracebacks): the command reports
    the failure itself, in one line."""

    _LOGGERS = frozenset({"prefect.flow_runs", "prefect.task_runs"})

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR or record.name not in self._LOGGERS


_RUN_FAILURES = _RunFailures()


def quiet_run_failures(quiet: bool) -> None:
    """Keep (or, with ``quiet`` False, let back) Prefect's reports of failed runs off the terminal. Only the
    console handler is filtered: the API handler still sends every record to the server."""
    import prefect.main  # noqa: F401  (configures logging on import: the console handler exists from then on)
    from prefect.logging.handlers import PrefectConsoleHandler

    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler):
            if quiet:
                handler.addFilter(_RUN_FAILURES)
            else:
                handler.removeFilter(_RUN_FAILURES)


def terminal_logs(ctx: typer.Context) -> None:
    """Unless --verbose, Prefect's own report of a failed run stays off the terminal, since the command prints
    the failure in one line; the server still receives every log."""
    quiet_run_failures(not ctx.find_root().params["verbose"])


def warm_up(run_config: RunConfig, flow_module: str) -> None:
    """Overlap the fixed costs that a flow run in this process would otherwise pay one after the other: the start
    of Prefect's ephemeral API server (a subprocess that boots for seconds while this process waits), the import of
    the flow's module, the Great Expectations import (about 2 CPU-s, paid by the input suite's task) and the
    collection ``collector`` deferred to this point. The server is started as Prefect's client starts it, as the
    process-wide instance that the flow then finds running (and that stops at exit as before), and the rest runs
    while the subprocess boots. With an API URL there is no server to overlap, and with Dask the suites run in the
    workers' processes."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        importlib.import_module(flow_module)
        collector.settle()
        return
    # Imported here, not in the thread: the two threads below then import nothing in common.
    from prefect.server.api.server import SubprocessASGIServer

    failed: list[Exception] = []

    def start() -> None:
        try:
            SubprocessASGIServer().start()
        except Exception as exc:  # raised below, where the flow's own start would have raised it
            failed.append(exc)

    starter = threading.Thread(target=start, name="ragpulse-api-start")
    starter.start()
    try:
        importlib.import_module(flow_module)
        if run_config.runner.kind == "thread":
            # An import error is left for the suite's task to raise, as it did before.
            with contextlib.suppress(Exception):
                import great_expectations  # noqa: F401
        collector.settle()
    finally:
        starter.join()
    if failed:
        raise failed[0]
