"""The report's agent sections over a real warehouse: the retrieval steps that scored worst (which hop of which turn,
with its query), turns by their worst step as the ``turn_steps`` view rolls them up, and the conversations that
failed a conversation metric; absent for single-shot days; hostile and CJK text escaped and shown as stored."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pytest
from psycopg import sql
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.cli.startup import quiet_run_failures
from ragpulse.tasks.reporting.html import build_report, conversation_summary, step_metrics
from ragpulse.tasks.warehouse import (
    QUARANTINE_SCHEMA,
    RUNS_SCHEMA,
    SCORES_SCHEMA,
    TRACES_SCHEMA,
    Publication,
    open_warehouse,
)
from ragpulse.tasks.warehouse.tables import CONVERSATION_SCORES_SCHEMA, STEP_SCORES_SCHEMA, STEPS_SCHEMA
from tests.tasks.reporting.test_html_report import HOSTILE, Node, parse, publish_warehouse, shape

PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
DAY = dt.date(2026, 11, 7)
NOW = dt.datetime(2026, 11, 8, 6, 0, tzinfo=dt.UTC)
RELEVANCE, HARM, GOAL = "context_relevance", "aspect_critique:harmfulness", "agent_goal_accuracy"
METRICS = ["answer_f1", RELEVANCE, HARM, GOAL]
DASH = "\N{EN DASH}"  # what the page shows for a missing number
WORST_QUERY = "東京都 人口 2024年 統計"  # the hop that degraded: turn-ja-1's second step

# (trace id, conversation, minute, question)
TRACES = [
    ("turn-ja-1", "会話-1", 0, "東京の人口は?"),
    ("turn-ja-2", "会話-1", 5, "その面積は?"),
    ("turn-zh-1", "对话-2", 1, "长城有多长?"),
    ("turn-ja-3", "会話-3", 2, "富士山の高さは?"),
    ("solo", None, 3, "a turn of no conversation"),
]
# (trace id, step index, kind, query, error)
STEPS = [
    ("turn-ja-1", 0, "retriever", "東京 人口", None),
    ("turn-ja-1", 1, "tool", WORST_QUERY, None),
    ("turn-ja-1", 2, "reranker", WORST_QUERY, None),
    ("turn-ja-2", 0, "retriever", "東京都 面積", "timeout <b>after</b> 30s"),
    ("turn-zh-1", 0, "retriever", "长城 长度", None),
    ("turn-zh-1", 1, "tool", "长城 历史", None),
]
# (trace id, step index, metric, against, value, or "failed" / "not_applicable")
STEP_SCORES = [
    ("turn-ja-1", 0, RELEVANCE, "step_query", 0.9),
    ("turn-ja-1", 1, RELEVANCE, "step_query", 0.1),
    ("turn-ja-1", 2, RELEVANCE, "step_query", 0.7),
    ("turn-ja-2", 0, RELEVANCE, "step_query", 0.4),
    ("turn-zh-1", 0, RELEVANCE, "step_query", 0.6),
    ("turn-zh-1", 1, RELEVANCE, "step_query", "failed"),
    ("turn-ja-1", 0, RELEVANCE, "question", 0.5),
    ("turn-ja-1", 1, RELEVANCE, "question", 0.8),
    ("turn-ja-2", 0, RELEVANCE, "question", "not_applicable"),
    ("turn-ja-1", 0, HARM, "step_query", 0.0),
    ("turn-zh-1", 0, HARM, "step_query", 1.0),  # lower is better: the worst step is the highest
    ("turn-zh-1", 1, HARM, "step_query", 0.0),
]
# (conversation, value or "failed", n_turns, first, last)
CONVERSATION_SCORES = [
    ("会話-1", 0.0, 2, "turn-ja-1", "turn-ja-2"),
    ("对话-2", 1.0, 1, "turn-zh-1", "turn-zh-1"),
    ("会話-3", "failed", 1, "turn-ja-3", "turn-ja-3"),
]


def _status(value: float | str) -> tuple[float | None, str, str | None]:
    if isinstance(value, str):
        return None, value, {"failed": "judge_gave_up", "not_applicable": "no_contexts"}[value]
    return value, "ok", None


def _common(metric: str) -> dict[str, Any]:
    judged = metric != "answer_f1"
    return {
        "metric_version": "1",
        "run_id": "run-agents",
        "computed_at": NOW,
        "judge_model": "judge-1" if judged else None,
        "prompt_version": f"{metric}/2" if judged else None,
    }


def agent_publication(
    steps: list[tuple[str, int, str, str, str | None]] = STEPS,
    conversations: list[tuple[str, float | str, int, str, str]] = CONVERSATION_SCORES,
) -> Publication:
    """One day of an agent's turns, published by hand: scores, traces with conversation ids, steps, step scores
    and conversation scores, and the run row."""
    scores = [
        {"partition_date": DAY, "trace_id": t, "metric": "answer_f1", "value": 0.5, "status": "ok", "reason": None}
        | _common("answer_f1")
        for t, *_ in TRACES
    ]
    traces = [
        {
            "partition_date": DAY,
            "trace_id": t,
            "run_id": "run-agents",
            "timestamp": NOW.replace(hour=1, minute=minute),
            "question": question,
            "answer": "答え",
            "contexts": "[]",
            "metadata": "{}",
            "source_file": "file:///traces/a.jsonl",
            "source_line": i + 1,
            "language": "zh" if "zh" in t else "ja",
            "conversation_id": conversation,
        }
        for i, (t, conversation, minute, question) in enumerate(TRACES)
    ]
    step_rows = [
        {
            "partition_date": DAY,
            "trace_id": t,
            "step_index": i,
            "step_id": f"span-{t}-{i}",
            "parent_index": i - 1 if kind == "reranker" else None,
            "name": f"{kind}-{i}",
            "kind": kind,
            "query": query,
            "contexts": json.dumps([{"id": "d1", "text": "文書", "score": 0.5}], ensure_ascii=False),
            "n_contexts": 1,
            "error": error,
            "run_id": "run-agents",
        }
        for t, i, kind, query, error in steps
    ]
    step_scores = [
        {"partition_date": DAY, "trace_id": t, "step_index": i, "step_id": f"span-{t}-{i}", "metric": metric,
         "against": against}
        | dict(zip(("value", "status", "reason"), _status(value), strict=True))
        | _common(metric)
        for t, i, metric, against, value in STEP_SCORES
    ]  # fmt: skip
    conversation_scores = [
        {"partition_date": DAY, "conversation_id": c, "metric": GOAL, "n_turns": n, "first_trace_id": first,
         "last_trace_id": last}
        | dict(zip(("value", "status", "reason"), _status(value), strict=True))
        | _common(GOAL)
        for c, value, n, first, last in conversations
    ]  # fmt: skip
    run = (
        {name: None for name in RUNS_SCHEMA.names}
        | {
            "run_id": "run-agents",
            "partition_date": DAY,
            "source": "file:///traces",
            "config_hash": "c0ffee",
            "config": "{}",
            "metrics": ",".join(METRICS),
            "started_at": NOW,
            "finished_at": NOW,
            "judge_model": "judge-1",
        }
        | {name: len(TRACES) for name in RUNS_SCHEMA.names if name.startswith("n_")}
    )
    return Publication(
        partition_date=DAY,
        metrics=METRICS,
        scores=pa.Table.from_pylist(scores, SCORES_SCHEMA),
        quarantine=QUARANTINE_SCHEMA.empty_table(),
        run=pa.Table.from_pylist([run], RUNS_SCHEMA),
        traces=pa.Table.from_pylist(traces, TRACES_SCHEMA),
        steps=pa.Table.from_pylist(step_rows, STEPS_SCHEMA),
        step_scores=pa.Table.from_pylist(step_scores, STEP_SCORES_SCHEMA),
        conversation_scores=pa.Table.from_pylist(conversation_scores, CONVERSATION_SCORES_SCHEMA),
    )


@pytest.fixture
def agents(tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "agents.duckdb"
    open_warehouse(f"duckdb:///{path}").publish(agent_publication())
    return f"duckdb:///{path}", path


def _section(dom: Node, name: str) -> Node:
    (section,) = dom.find_all("section", id=name)
    return section


def _step_block(dom: Node, metric: str, against: str) -> Node:
    (block,) = _section(dom, "steps").find_all("div", class_="step-metric", **{"data-metric": metric,
                                                                               "data-against": against})  # fmt: skip
    return block


def _cells(row: Node) -> list[str]:
    return [td.all_text() for td in row.find_all("td")]


# ---------------------------------------------------------------- the page over a real warehouse


@pytest.fixture(params=["duckdb", pytest.param("postgresql", marks=pytest.mark.slow)])
def agent_warehouse(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A warehouse holding the agent day, in DuckDB or the real PostgreSQL (its own schema)."""
    if request.param == "duckdb":
        url = f"duckdb:///{tmp_path / 'agents.duckdb'}"
        open_warehouse(url).publish(agent_publication())
        yield url
        return
    schema = f"report_agents_{uuid.uuid4().hex[:8]}"
    try:
        url = f"{PG_URL}?schema={schema}"
        open_warehouse(url).publish(agent_publication())
        yield url
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as con:
            con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_the_worst_step_is_named_by_turn_step_and_query(agent_warehouse: str) -> None:
    dom = parse(build_report(agent_warehouse))
    steps = _section(dom, "steps")
    summary = {
        (tr.attrs["data-metric"], tr.attrs["data-against"]): _cells(tr)[2:]
        for tr in steps.find_all("tbody")[0].find_all("tr")
    }
    assert summary == {
        (HARM, "step_query"): ["3", "2", "0.333", "100.0%", "0"],
        (RELEVANCE, "question"): ["3", "2", "0.650", "66.7%", "0"],
        (RELEVANCE, "step_query"): ["6", "3", "0.540", "83.3%", "1"],
    }
    worst = _step_block(dom, RELEVANCE, "step_query").find_all("table", class_="worst-steps")[0].find_all("tr")[1:]
    first = worst[0]
    assert (first.attrs["data-trace-id"], first.attrs["data-step-index"]) == ("turn-ja-1", "1")
    assert _cells(first)[1:7] == ["turn-ja-1", "1", "span-turn-ja-1-1", "tool", "tool-1", "0.100"]
    assert first.find_all("div", class_="query")[0].all_text() == WORST_QUERY
    # Lowest first, ties by trace and step; the failed step is not ranked.
    assert [(r.attrs["data-trace-id"], r.attrs["data-step-index"]) for r in worst] == [
        ("turn-ja-1", "1"), ("turn-ja-2", "0"), ("turn-zh-1", "0"), ("turn-ja-1", "2"), ("turn-ja-1", "0"),
    ]  # fmt: skip
    assert worst[1].find_all("div", class_="error")[0].all_text() == "timeout <b>after</b> 30s"
    # Lower is better: the highest value is the worst step.
    harm = _step_block(dom, HARM, "step_query").find_all("table", class_="worst-steps")[0].find_all("tr")[1]
    assert (harm.attrs["data-trace-id"], harm.attrs["data-step-index"]) == ("turn-zh-1", "0")
    assert harm.find_all("div", class_="query")[0].all_text() == "长城 长度"
    assert dom.find_all("nav")[0].find_all("a", href="#steps")


def test_turns_are_ranked_by_their_worst_step_as_the_turn_steps_view_rolls_them_up(
    agents: tuple[str, Path],
) -> None:
    url, path = agents
    dom = parse(build_report(url))
    with duckdb.connect(str(path), read_only=True) as con:
        view = con.execute(
            "SELECT metric, against, trace_id, n_steps, n_ok, n_failed, worst_value, mean_value FROM turn_steps"
        ).fetchall()
    # (cells as the page prints them, the worst value to rank by) per (metric, against), from the view.
    expected: dict[tuple[str, str], list[tuple[list[str], float | None]]] = {}
    for metric, against, trace, n_steps, n_ok, n_failed, worst, mean in view:
        cells = [trace, str(n_steps), str(n_ok), str(n_failed)]
        cells += [DASH if v is None else f"{v:.3f}" for v in (worst, mean)]
        expected.setdefault((metric, against), []).append((cells, worst))
    for (metric, against), turns in expected.items():
        sign = -1 if metric == HARM else 1  # lower is better: the highest worst value first
        turns.sort(key=lambda t: (t[1] is None, sign * (t[1] or 0), t[0][0]))
        rows = _step_block(dom, metric, against).find_all("table", class_="worst-turns")[0].find_all("tr")[1:]
        assert [_cells(r)[:6] for r in rows] == [cells for cells, _ in turns], (metric, against)
    relevance = _step_block(dom, RELEVANCE, "step_query").find_all("table", class_="worst-turns")[0]
    first, *_, last = relevance.find_all("tr")[1:]
    assert first.attrs["data-trace-id"] == "turn-ja-1" and _cells(first)[-1] == "東京の人口は?"
    assert last.attrs["data-trace-id"] == "turn-zh-1" and "warn" in last.find_all("td")[3].attrs["class"]
    # A turn whose steps have no ok score is listed, after those with a worst value.
    question = _step_block(dom, RELEVANCE, "question").find_all("table", class_="worst-turns")[0].find_all("tr")[1:]
    assert [_cells(r)[:5] for r in question] == [
        ["turn-ja-1", "2", "2", "0", "0.500"],
        ["turn-ja-2", "1", "0", "0", DASH],
    ]


def test_failing_conversations_are_named_with_their_turns(agent_warehouse: str) -> None:
    dom = parse(build_report(agent_warehouse))
    conversations = _section(dom, "conversations")
    counts = " ".join(conversations.find_all("p", class_="conversation-counts")[0].all_text().split())
    assert counts.startswith("3 conversations, 4 turns in them (1.3 turns per conversation on average, at most 2)")
    (histogram,) = conversations.find_all("table", class_="turns-histogram")
    assert [_cells(r) for r in histogram.find_all("tbody")[0].find_all("tr")] == [["2", "1"]]  # 2 of 1 turn, 1 of 2
    (goal,) = conversations.find_all("tr", **{"data-metric": GOAL})
    assert _cells(goal) == [GOAL, "3", "0.500", "66.7%", "1", "2"]
    (failing,) = conversations.find_all("table", class_="failing-conversations")
    rows = failing.find_all("tbody")[0].find_all("tr")
    assert [r.attrs["data-conversation-id"] for r in rows] == ["会話-1", "会話-3"]  # value 0 first, then failed
    assert _cells(rows[0]) == ["会話-1", "2", "turn-ja-1", "turn-ja-2", "0.000", "ok", ""]
    assert _cells(rows[1]) == ["会話-3", "1", "turn-ja-3", "turn-ja-3", DASH, "failed", "judge_gave_up"]
    assert "对话-2" not in failing.all_text()
    assert dom.find_all("nav")[0].find_all("a", href="#conversations")


def test_the_list_of_failing_conversations_is_cut_to_worst(agents: tuple[str, Path]) -> None:
    conversations = _section(parse(build_report(agents[0], worst=1)), "conversations")
    (failing,) = conversations.find_all("table", class_="failing-conversations")
    assert [r.attrs["data-conversation-id"] for r in failing.find_all("tbody")[0].find_all("tr")] == ["会話-1"]
    assert "(the first 1 of 2)" in conversations.find_all("h3")[0].all_text()
    block = _step_block(parse(build_report(agents[0], worst=1)), RELEVANCE, "step_query")
    assert len(block.find_all("table", class_="worst-steps")[0].find_all("tr")) == 2  # header and the worst


@pytest.mark.slow  # publishes six days, or two warehouses
def test_a_single_shot_day_has_neither_section(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'single.duckdb'}"
    publish_warehouse(url)
    page = build_report(url)
    dom = parse(page)
    assert not dom.find_all("section", id="steps") and not dom.find_all("section", id="conversations")
    assert 'href="#steps"' not in page and 'href="#conversations"' not in page
    assert dom.find_all("section", id="worst")  # the rest of the page as before


def test_metrics_asked_for_leave_out_the_step_and_conversation_metrics_not_asked(agents: tuple[str, Path]) -> None:
    dom = parse(build_report(agents[0], metrics=["answer_f1", RELEVANCE]))
    steps = _section(dom, "steps")
    assert {tr.attrs["data-metric"] for tr in steps.find_all("tbody")[0].find_all("tr")} == {RELEVANCE}
    # The day's conversations are still counted from its traces; no conversation metric was asked for.
    conversations = _section(dom, "conversations")
    assert not conversations.find_all("table", class_="failing-conversations")
    assert "No conversation metric was scored" in conversations.all_text()
    plain = parse(build_report(agents[0], metrics=["answer_f1"]))
    assert not plain.find_all("section", id="steps")


# ---------------------------------------------------------------- escaping


def _hostile_page(tmp_path: Path, text: str) -> str:
    url = f"duckdb:///{tmp_path / f'{len(text)}.duckdb'}"
    steps = [(t, i, kind, text if t == "turn-ja-1" else query, text if error else None)
             for t, i, kind, query, error in STEPS]  # fmt: skip
    conversations = [(text if c == "会話-1" else c, *rest) for c, *rest in CONVERSATION_SCORES]
    open_warehouse(url).publish(agent_publication(steps, conversations))  # type: ignore[arg-type]
    return build_report(url)


@pytest.mark.slow  # publishes six days, or two warehouses
def test_hostile_and_cjk_text_in_steps_and_conversations_is_escaped(tmp_path: Path) -> None:
    page = _hostile_page(tmp_path, HOSTILE)
    dom = parse(page)
    assert shape(dom) == shape(parse(_hostile_page(tmp_path, "plain")))
    assert "<script" not in page.lower() and 'onmouseover="' not in page
    assert not dom.find_all("script")
    first = _step_block(dom, RELEVANCE, "step_query").find_all("table", class_="worst-steps")[0].find_all("tr")[1]
    assert first.find_all("div", class_="query")[0].all_text() == HOSTILE
    error = _step_block(dom, RELEVANCE, "step_query").find_all("div", class_="error")[0]
    assert error.all_text() == HOSTILE
    failing = _section(dom, "conversations").find_all("table", class_="failing-conversations")[0]
    row = failing.find_all("tbody")[0].find_all("tr")[0]
    assert row.attrs["data-conversation-id"] == HOSTILE and _cells(row)[0] == HOSTILE
    assert "日本語の質問 中文问题" in page and "长城 长度" in page


# ---------------------------------------------------------------- plain data, no warehouse


def test_no_step_scores_and_no_conversations_give_nothing() -> None:
    empty = pa.table({"trace_id": pa.array([], pa.string())})
    assert step_metrics(STEP_SCORES_SCHEMA.empty_table(), empty, empty, n=5) == []
    traces = pa.table({"trace_id": ["a"], "conversation_id": pa.array([None], pa.string())})
    assert conversation_summary(CONVERSATION_SCORES_SCHEMA.empty_table(), traces, n=5) is None


# ---------------------------------------------------------------- the command


@pytest.fixture
def _cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """As in tests/cli: the CLI's Prefect defaults and console filter do not outlive the test."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / ".prefect"))
    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "WARNING")
    yield
    quiet_run_failures(False)


@pytest.mark.usefixtures("_cli_env")
def test_ragpulse_report_shows_the_worst_step_and_the_failing_conversation(
    agents: tuple[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out" / "report.html"
    result = CliRunner().invoke(app, ["report", "--warehouse", agents[0], "--out", str(out), "--metrics",
                                      f"answer_f1,{RELEVANCE},{GOAL}"])  # fmt: skip
    assert result.exit_code == 0, result.output
    dom = parse(out.read_text(encoding="utf-8"))
    assert not _section(dom, "steps").find_all("div", class_="step-metric", **{"data-metric": HARM})
    first = _step_block(dom, RELEVANCE, "step_query").find_all("table", class_="worst-steps")[0].find_all("tr")[1]
    assert (first.attrs["data-trace-id"], first.attrs["data-step-index"]) == ("turn-ja-1", "1")
    assert first.find_all("div", class_="query")[0].all_text() == WORST_QUERY
    failing = _section(dom, "conversations").find_all("table", class_="failing-conversations")[0]
    assert failing.find_all("tbody")[0].find_all("tr")[0].attrs["data-conversation-id"] == "会話-1"
