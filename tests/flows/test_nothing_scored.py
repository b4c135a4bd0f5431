"""No silent zero: a day of agent traces as tracing tools export them (questions, answers and retrieved documents, no
relevance labels, no reference answers) scored by the metrics that need labels, without a judge, gives no ok score.
The command line publishes it all the same, then says so: outcome ``nothing_scored``, a warning naming why and what
would apply, exit 4, and the flow run failed in Prefect. The default set, with its label-free metrics, scores the
same day."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import duckdb
from prefect.client.orchestration import get_client

from ragpulse.metrics import DEFAULT_METRICS, MetricRequest

DAY = dt.date(2026, 4, 7)
LABELLED_DAY = DAY - dt.timedelta(days=1)
TRACES = 30
LABELLED = [
    m for m in DEFAULT_METRICS if MetricRequest.parse(m).definition.needs == "ranking" or m.startswith("answer_")
]
LABELLED.remove("answer_length")
"""The defaults that need relevance labels or reference answers."""
QUESTIONS = [
    ("東京タワーの高さは?", "東京タワーの高さは333メートルです。", "東京タワーは高さ333メートルの電波塔である。"),
    ("长城有多长?", "长城全长约两万一千公里。", "明长城全长约8851.8公里,历代长城总长约21196公里。"),
    ("What powers the Tokyo Skytree?", "It runs on grid power.", "Tokyo Skytree is a broadcasting tower."),
]


def _write_day(root: Path, day: dt.date, *, labelled: bool) -> None:
    """``TRACES`` traces of ``day``; with ``labelled``, each with its relevant document and its reference answer."""
    folder = root / f"dt={day}"
    folder.mkdir(parents=True)
    lines = []
    for i in range(TRACES):
        question, answer, document = QUESTIONS[i % len(QUESTIONS)]
        trace = {
            "trace_id": f"{day}-{i}",
            "timestamp": f"{day}T10:{i:02d}:00Z",
            "question": question,
            "answer": answer,
            "contexts": [{"id": f"doc-{i % 3}", "text": document}],
        }
        if labelled:
            trace |= {"relevant_context_ids": [f"doc-{i % 3}"], "reference": answer}
        lines.append(json.dumps(trace, ensure_ascii=False))
    (folder / "part-0.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _cli(args: list[str], cwd: Path, api_url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_API_URL=api_url, PREFECT_SERVER_ANALYTICS_ENABLED="false")
    return subprocess.run(
        [sys.executable, "-m", "ragpulse.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _common(tmp_path: Path) -> list[str]:
    return [
        "--source", str(tmp_path / "traces"), "--warehouse", f"duckdb:///{tmp_path}/w.duckdb",
        "--work-dir", str(tmp_path / "work"),
    ]  # fmt: skip


def _query(tmp_path: Path, sql: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_a_day_without_labels_or_judge_is_published_then_exits_4(tmp_path: Path, prefect_api: str) -> None:
    _write_day(tmp_path / "traces", DAY, labelled=False)
    metrics = ["--metrics", ",".join(LABELLED)]
    done = _cli(["evaluate", "--json", "--date", str(DAY), *metrics, *_common(tmp_path)], tmp_path, prefect_api)

    assert done.returncode == 4, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["outcome"] == "nothing_scored"
    assert summary["gaps"] == ["no_labels", "no_references", "no_judge"]
    assert summary["would_apply"] == ["context_relevance", "faithfulness", "answer_relevancy"]
    assert summary["staged"]["with_contexts"] == TRACES and summary["staged"]["with_labels"] == 0
    assert {m["metric"]: m["coverage"] for m in summary["metrics"]} == dict.fromkeys(LABELLED, 0.0)
    n_scores = TRACES * len(LABELLED)
    warning = " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr
    assert (
        f"warning: dt={DAY}: nothing scored: 0 ok scores of {n_scores} ({len(LABELLED)} metric(s) x "
        f"{TRACES} trace(s)); not ok: no_relevance_labels ("
    ) in warning
    assert (
        "why: no relevance labels, no reference answers, no judge configured; would apply: context_relevance, "
        "faithfulness, answer_relevancy with a judge configured (RAGPULSE_JUDGE_MODEL)."
    ) in warning

    # Published all the same, in one transaction: every score row (none ok), the traces and the run's row.
    day = f"partition_date = DATE '{DAY}'"
    assert _query(tmp_path, f"SELECT status, count(*) FROM scores WHERE {day} GROUP BY 1") == [
        ("not_applicable", n_scores)
    ]
    assert _query(tmp_path, f"SELECT count(*) FROM traces WHERE {day}") == [(TRACES,)]
    assert _query(tmp_path, f"SELECT run_id, n_traces FROM runs WHERE {day}") == [(summary["run_id"], TRACES)]

    # The flow run is not a success in Prefect: it failed, saying why.
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(uuid.UUID(summary["run_id"]))  # a day's run id is its flow run's
    assert run.state is not None and run.state.is_failed()
    assert "nothing scored" in (run.state.message or "")


def test_the_default_metrics_score_the_same_day_without_labels_or_judge(tmp_path: Path, prefect_api: str) -> None:
    _write_day(tmp_path / "traces", DAY, labelled=False)
    done = _cli(["evaluate", "--json", "--date", str(DAY), *_common(tmp_path)], tmp_path, prefect_api)

    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["outcome"] == "scored"
    rows = _query(
        tmp_path,
        "SELECT metric, status, reason, count(*) FROM scores WHERE metric IN ('answer_length', 'empty_retrieval', "
        "'latency_ms', 'retrieval_steps') GROUP BY ALL ORDER BY 1",
    )
    assert rows == [
        ("answer_length", "ok", None, TRACES),
        ("empty_retrieval", "ok", None, TRACES),
        ("latency_ms", "not_applicable", "no_latency", TRACES),  # the format's latency_ms was not logged
        ("retrieval_steps", "not_applicable", "no_steps", TRACES),
    ]
    # Japanese and Chinese answers have their characters' length, the English its words'.
    lengths = dict(_query(tmp_path, "SELECT trace_id, value FROM scores WHERE metric = 'answer_length'"))
    assert [lengths[f"{DAY}-{i}"] for i in range(3)] == [16.0, 11.0, 5.0]


def test_a_backfill_names_each_day_that_scored_nothing(tmp_path: Path, prefect_api: str) -> None:
    _write_day(tmp_path / "traces", LABELLED_DAY, labelled=True)
    _write_day(tmp_path / "traces", DAY, labelled=False)
    args = ["backfill", "--json", "--start", str(LABELLED_DAY), "--end", str(DAY), *_common(tmp_path)]
    done = _cli([*args, "--metrics", "document_mrr,answer_f1"], tmp_path, prefect_api)

    assert done.returncode == 4, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["completed"] == [str(LABELLED_DAY), str(DAY)] and result["failed"] == {}
    assert result["outcomes"] == {str(LABELLED_DAY): "scored", str(DAY): "nothing_scored"}
    assert list(result["nothing_scored"]) == [str(DAY)]
    assert result["nothing_scored"][str(DAY)].startswith(f"dt={DAY}: nothing scored: 0 ok scores of {2 * TRACES}")
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and f"dt={DAY}: nothing scored" in warnings[0]
    assert _query(tmp_path, "SELECT partition_date, count(*) FILTER (WHERE status = 'ok') FROM scores GROUP BY 1 "
                  "ORDER BY 1") == [(LABELLED_DAY, 2 * TRACES), (DAY, 0)]  # fmt: skip
