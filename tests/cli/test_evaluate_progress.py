"""``ragpulse evaluate`` on a terminal shows the day's progress stage by stage (slices staged, batches scored, rows
published, with counts), and nothing of it with ``--json`` or when its output goes to a pipe."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from rich.progress import Progress

from ragpulse.cli.output import EvaluateBar
from ragpulse.tasks.demo.generate import generate_demo_traces

ROOT = Path(__file__).parents[3]
DAY = dt.date(2026, 5, 4)
#: The stage lines' descriptions (cli/output.py, EvaluateBar).
STAGES = ("slices staged", "batches scored", "rows published")
_ESCAPES = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>78])")


@pytest.fixture
def command(prefect_api: str, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """``ragpulse evaluate`` of a small day against the session's Prefect server, and its environment: no
    setting of the test's own terminal or shell decides whether it sees one."""
    generate_demo_traces(tmp_path / "traces", start=DAY, days=1, traces_per_day=40, malformed_per_day=2)
    args = [sys.executable, "-m", "ragpulse.cli", "evaluate", "--date", str(DAY), "--source", str(tmp_path / "traces")]
    args += ["--warehouse", f"duckdb:///{tmp_path}/w.duckdb", "--work-dir", str(tmp_path / "work")]
    args += ["--metrics", "document_mrr,answer_f1", "--batch-size", "10"]
    unset = ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES")
    env = {name: value for name, value in os.environ.items() if name not in unset}
    env |= {
        "PREFECT_API_URL": prefect_api,
        "PREFECT_HOME": str(tmp_path / ".prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "TERM": "xterm-256color",
    }
    return args, env


def _on_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run with stdout and stderr on a pseudo-terminal 200 columns wide; the exit code and all it showed, without
    the terminal's control sequences."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env={**env, "COLUMNS": "200", "LINES": "50"},
        cwd=ROOT,
    )  # fmt: skip
    os.close(slave)
    shown = bytearray()
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 1.0)[0]:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the command exited and closed the terminal
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    code = process.wait(timeout=30)
    return code, _ESCAPES.sub("", shown.decode(errors="replace")).replace("\r", "\n")


def _line(shown: str, stage: str) -> str:
    """The last line the terminal showed for ``stage``: its final state."""
    lines = [line for line in shown.splitlines() if stage in line]
    assert lines, f"no {stage!r} line in:\n{shown}"
    return " ".join(lines[-1].split())


def test_the_terminal_shows_each_stage_with_counts_and_json_or_a_pipe_nothing(
    command: tuple[list[str], dict[str, str]],
) -> None:
    args, env = command
    code, shown = _on_terminal(args, env)
    assert code == 0, shown
    slices = _line(shown, "slices staged")
    assert re.search(r"slices staged \S* (\d+)/\1 \d+:\d\d:\d\d 40 traces$", slices), slices
    batches = re.search(r"batches scored \S* (\d+)/\1 \d+:\d\d:\d\d$", _line(shown, "batches scored"))
    assert batches is not None and int(batches[1]) >= 4, shown  # 40 traces in batches of 10
    published = _line(shown, "rows published")
    assert re.search(r"rows published \S* 122/122 \d+:\d\d:\d\d scores 80, traces 40, quarantine 2$", published)
    assert "runs" in shown and "mean score per metric" in shown  # the summary tables follow

    code, shown = _on_terminal([*args, "--json"], env)  # a terminal, but the output is for a program
    assert code == 0, shown
    assert not any(stage in shown for stage in STAGES), shown
    assert '"partition_date": "2026-05-04"' in shown

    # Pipes, as `| jq` or a scheduler gives them (without --json: test_only_a_terminal_is_shown_progress).
    piped = subprocess.run([*args, "--json"], env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    assert piped.returncode == 0, piped.stderr
    assert not any(stage in piped.stdout + piped.stderr for stage in STAGES), piped.stderr
    assert json.loads(piped.stdout)["n_traces"] == 40


@pytest.mark.parametrize(
    ("stdout", "stderr", "shown", "listens"),
    [(True, True, True, True), (True, True, False, False), (False, True, True, False), (True, False, True, False)],
    ids=["terminal", "json", "stdout-piped", "stderr-piped"],
)
def test_only_a_terminal_is_shown_progress(
    monkeypatch: pytest.MonkeyPatch, stdout: bool, stderr: bool, shown: bool, listens: bool
) -> None:
    """The evaluate flow gets a listener only when both streams are a terminal and ``--json`` was not given."""
    from ragpulse.cli import runs
    from ragpulse.tasks.reporting import progress

    monkeypatch.setattr(runs, "out", Console(file=io.StringIO(), force_terminal=stdout))
    monkeypatch.setattr(runs, "console", Console(file=io.StringIO(), force_terminal=stderr))
    with runs._evaluate_progress(shown=shown):
        assert len(progress._listeners) == listens
    assert progress._listeners == []


def _shown(display: Progress) -> dict[str, tuple[float, float | None, str, bool]]:
    return {str(t.description): (t.completed, t.total, t.fields["note"], t.finished) for t in display.tasks}


def test_the_bar_shows_a_line_per_stage_as_it_starts() -> None:
    display = Progress(console=Console(file=io.StringIO(), width=200))
    bar = EvaluateBar(display)
    bar.staging(DAY, 0, 3, 0)
    bar.staging(DAY, 2, 3, 250)
    assert _shown(display) == {"slices staged": (2, 3, "250 traces", False)}
    bar.staging(DAY, 3, 3, 400)
    bar.scoring(DAY, 0, 8, 0)
    bar.scoring(DAY, 8, 8, 5)
    bar.publishing(DAY)
    assert _shown(display)["rows published"] == (0, None, "assembling and validating the scores", False)
    bar.published(DAY, {"scores": 4000, "traces": 400, "quarantine": 3})
    assert _shown(display) == {
        "slices staged": (3, 3, "400 traces", True),
        "batches scored": (8, 8, "5 from the cache", True),
        "rows published": (4403, 4403, "scores 4000, traces 400, quarantine 3", True),
    }
    bar.published(DAY, {})  # a day unchanged since it was published
    assert _shown(display)["rows published"] == (0, 0, "none: unchanged since published", True)
