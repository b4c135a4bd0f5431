"""``ragpulse calibrate --labels-from feedback:<name>=<metric>`` end to end on DuckDB: ARES's human context-relevance
labels reach the traces as reviewers' annotations (``feedback`` source ``annotation``, comments in Japanese and
Chinese) on a random quarter of a day's traces, a scripted judge on loopback scores every trace, the day is published
with ``user_feedback:relevance``, and calibrate takes those annotations as its labels: the same estimate a labels
file gives. A tool's own evaluation asked for as labels is refused in one line."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, ScoringConfig, SourceConfig
from tests.doubles.judge_server import JudgeServer
from tests.flows.test_calibrate_flow import DAY, _ares, _says_relevant

LABELLED = 200
COMMENTS = ("質問に合った資料です。", "资料与问题无关。", None)


def test_reviewers_annotations_calibrate_the_judge_and_a_tools_evaluation_is_refused(
    judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, prefect_api: str
) -> None:
    rows = _ares()
    picked = set(random.Random(23).sample(range(len(rows)), LABELLED))
    traces = []
    for i, row in enumerate(rows):
        trace: dict[str, Any] = {
            "trace_id": f"ares-{i}", "timestamp": f"{DAY}T09:00:00Z", "question": row["question"],
            "answer": row["answer"], "contexts": [{"id": row["passage_id"], "text": row["passage"]}],
            "feedback": [{"name": "judge_relevance", "value": 0.5, "label": None, "source": "evaluation",
                          "comment": None}],
        }  # fmt: skip
        if i in picked:
            trace["feedback"].append({"name": "relevance", "value": bool(row["context_relevant"]), "label": None,
                                      "source": "annotation", "comment": COMMENTS[i % 3]})  # fmt: skip
        traces.append(trace)
    partition = tmp_path / "traces" / f"dt={DAY}"
    partition.mkdir(parents=True)
    (partition / "part.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traces))
    truth = {(row["question"].strip(), row["passage"].strip()): bool(row["context_relevant"]) for row in rows}

    def judge(body: dict[str, Any]) -> dict[str, Any]:
        data = json.loads(body["messages"][-1]["content"])
        key = (data["question"], data["contexts"][0])
        return {"relevant_statements": [data["contexts"][0][:80]] if _says_relevant(*key, truth[key]) else []}

    judge_server.responder = judge
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "judge-small")
    monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", "sk-test")
    monkeypatch.setenv("RAGPULSE_JUDGE_CACHE_URL", str(tmp_path / "judge-cache"))
    warehouse = f"duckdb:///{tmp_path / 'w.duckdb'}"
    evaluate_partition(
        date=DAY,
        source=SourceConfig(url=str(tmp_path / "traces")),
        scoring=ScoringConfig(
            metrics=("context_relevance", "user_feedback:relevance", "tool_evaluation:judge_relevance")
        ),
        output=OutputConfig(warehouse=warehouse, work_dir=str(tmp_path / "work")),
    )

    result = CliRunner().invoke(
        app, ["calibrate", "--labels-from", "feedback:relevance=context_relevance", "--date", str(DAY),
              "--warehouse", warehouse, "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["labels"] == LABELLED
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        ((n_labels, n_judged, low, high, reason),) = con.execute(
            "SELECT n_labels, n_judged, ppi_ci_low, ppi_ci_high, reason FROM estimates "
            "WHERE partition_date = ? AND metric = 'context_relevance'",
            [DAY],
        ).fetchall()
        ((kind, n_calibrated, accuracy),) = con.execute(
            "SELECT kind, n_labels, accuracy FROM calibrations WHERE partition_date = ?", [DAY]
        ).fetchall()
    true_mean = sum(bool(row["context_relevant"]) for row in rows) / len(rows)
    assert (n_labels, n_judged, reason) == (LABELLED, len(rows) - LABELLED, None)
    assert low <= true_mean <= high
    keys = [(rows[i]["question"].strip(), rows[i]["passage"].strip()) for i in sorted(picked)]
    agree = sum(truth[key] == _says_relevant(*key, truth[key]) for key in keys)
    assert kind == "binary" and n_calibrated == LABELLED and accuracy == pytest.approx(agree / LABELLED)

    refused = CliRunner().invoke(
        app, ["calibrate", "--labels-from", "feedback:judge_relevance=context_relevance", "--date", str(DAY),
              "--warehouse", warehouse],
    )  # fmt: skip
    assert refused.exit_code != 0
    assert "feedback 'judge_relevance' is a tool's evaluation (tool_evaluation:judge_relevance), not a human label" in (
        " ".join(refused.output.split())
    )
