"""The whole calibration path on real human labels: ARES's context-relevance labels (the extract the package ships
in tasks/demo/corpus, with its attribution) become a day of traces, a scripted judge on loopback that agrees with
the labels at set rates (it says "relevant" to 95 % of relevant traces and to 45 % of the others) scores them
through the real client, a labels file holds a random quarter of the human labels, and ``ragpulse calibrate``
publishes the calibration and the estimate, read back in SQL.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import random
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, ScoringConfig, SourceConfig
from tests.doubles.judge_server import JudgeServer

DAY = dt.date(2026, 5, 4)
SENSITIVITY, FALSE_POSITIVE = 0.95, 0.45
LABELLED = 200


def _ares() -> list[dict[str, Any]]:
    corpus = resources.files("ragpulse.tasks.demo") / "corpus" / "ares_sample.jsonl.gz"
    with gzip.open(corpus.open("rb"), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _says_relevant(question: str, passage: str, relevant: bool) -> bool:
    """The scripted judge's verdict: a fixed draw per question and passage, at its rate for the human label."""
    draw = int(hashlib.sha256(f"{question}\n{passage}".encode()).hexdigest()[:8], 16) / 16**8
    return draw < (SENSITIVITY if relevant else FALSE_POSITIVE)


@pytest.fixture
def day_of_ares(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    rows = _ares()
    partition = tmp_path / "traces" / f"dt={DAY}"
    partition.mkdir(parents=True)
    traces = [
        {
            "trace_id": f"ares-{i}",
            "timestamp": f"{DAY}T09:00:00Z",
            "question": row["question"],
            "answer": row["answer"],
            "contexts": [{"id": row["passage_id"], "text": row["passage"]}],
        }
        for i, row in enumerate(rows)
    ]
    (partition / "part.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traces))
    return tmp_path / "traces", rows


def test_labels_file_to_published_interval_on_ares_human_labels(
    day_of_ares: tuple[Path, list[dict[str, Any]]],
    judge_server: JudgeServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    prefect_api: str,
) -> None:
    traces, rows = day_of_ares
    truth = {(row["question"].strip(), row["passage"].strip()): bool(row["context_relevant"]) for row in rows}

    def judge(body: dict[str, Any]) -> dict[str, Any]:
        data = json.loads(body["messages"][-1]["content"])
        key = (data["question"], data["contexts"][0])
        relevant = _says_relevant(*key, truth[key])
        return {"relevant_statements": [data["contexts"][0][:80]] if relevant else []}

    judge_server.responder = judge
    monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "judge-small")
    monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", "sk-test")
    monkeypatch.setenv("RAGPULSE_JUDGE_CACHE_URL", str(tmp_path / "judge-cache"))
    warehouse = tmp_path / "w.duckdb"
    evaluate_partition(
        date=DAY,
        source=SourceConfig(url=str(traces)),
        scoring=ScoringConfig(metrics=("context_relevance",)),
        output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
    )

    picked = random.Random(19).sample(range(len(rows)), LABELLED)
    lines = [
        {"trace_id": f"ares-{i}", "metric": "context_relevance", "partition_date": str(DAY), "labeller": "ares",
         "value": "yes" if rows[i]["context_relevant"] else "no"}
        for i in picked
    ]  # fmt: skip
    lines += [
        {"trace_id": "ares-1", "metric": "context_relevance", "value": ""},  # in the sample, not labelled yet
        {"trace_id": "ares-2", "metric": "context_relevance", "value": "maybe"},
        {"metric": "context_relevance", "value": "yes"},
    ]
    labels = tmp_path / "labels" / "batch-1.jsonl"
    labels.parent.mkdir()
    labels.write_text("".join(json.dumps(line) + "\n" for line in lines) + "{not json\n")

    result = CliRunner().invoke(
        app, ["calibrate", "--labels", str(labels.parent), "--date", str(DAY), "--warehouse", f"duckdb:///{warehouse}",
              "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["labels"] == LABELLED and summary["unlabelled"] == 1
    assert sorted((r["line"], r["field"]) for r in summary["rejected"]) == [
        (LABELLED + 2, "value"),
        (LABELLED + 3, "trace_id"),
        (LABELLED + 4, "<record>"),
    ]

    with duckdb.connect(str(warehouse), read_only=True) as con:
        estimate = con.execute(
            "SELECT judge_model, n_judged, n_labels, raw_mean, raw_ci_low, ppi_mean, ppi_ci_low, ppi_ci_high, "
            "effective_n, reason FROM estimates WHERE partition_date = ? AND metric = 'context_relevance'",
            [DAY],
        ).fetchall()
        calibration = con.execute(
            "SELECT kind, n_labels, accuracy, mean_bias, confusion FROM calibrations WHERE partition_date = ?", [DAY]
        ).fetchall()
    ((model, n_judged, n_labels, raw_mean, raw_low, _, low, high, effective, reason),) = estimate
    true_mean = sum(bool(row["context_relevant"]) for row in rows) / len(rows)
    assert (model, n_judged, n_labels, reason) == ("judge-small", len(rows) - LABELLED, LABELLED, None)
    # The judge's own interval sits above the human mean; the prediction-powered one covers it.
    assert raw_low > true_mean and raw_mean - true_mean > 0.03
    assert low <= true_mean <= high and high - low < 0.15
    assert effective > LABELLED * 0.9
    ((kind, n_calibrated, accuracy, bias, confusion),) = calibration
    keys = [(rows[i]["question"].strip(), rows[i]["passage"].strip()) for i in picked]
    verdicts = [(truth[key], _says_relevant(*key, truth[key])) for key in keys]
    assert kind == "binary" and n_calibrated == LABELLED
    assert accuracy == pytest.approx(sum(h == j for h, j in verdicts) / LABELLED)
    assert bias == pytest.approx(sum(j - h for h, j in verdicts) / LABELLED)
    counts = json.loads(confusion)["counts"]
    assert counts[0][1] == sum(1 for h, j in verdicts if not h and j)  # relevant by the judge, not by people

    # Calibrating again with the same labels replaces the rows: still one of each.
    again = CliRunner().invoke(
        app, ["calibrate", "--labels", str(labels), "--date", str(DAY), "--warehouse", f"duckdb:///{warehouse}"]
    )
    assert again.exit_code == 0, again.output
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM estimates").fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM calibrations").fetchone() == (1,)

    # The report shows both means side by side, for people who read the page rather than the table.
    page = tmp_path / "report.html"
    shown = CliRunner().invoke(app, ["report", "--warehouse", f"duckdb:///{warehouse}", "--out", str(page)])
    assert shown.exit_code == 0, shown.output
    html = page.read_text()
    section = html[html.index('<section id="calibration">') : html.index("</section>", html.index('id="calibration"'))]
    assert "judge-small" in section and f"{raw_mean:.3f}" in section and f"[{low:.3f}, {high:.3f}]" in section
    assert f"accuracy {accuracy:.1%}" in section

    # Monitoring with the labels set: the day is calibrated (a subflow) before its drift check, which compares the
    # calibrated means; with no baseline yet, it says so.
    from ragpulse.flows.monitor import monitor
    from ragpulse.tasks.config import CalibrationConfig, DriftConfig

    result = monitor(
        date=DAY,
        source=SourceConfig(url=str(traces)),
        scoring=ScoringConfig(metrics=("context_relevance",)),
        output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
        calibration=CalibrationConfig(labels=str(labels)),
        drift=DriftConfig(estimator="ppi", question_drift=False),  # the one verdict: context_relevance's
    )
    assert result.verdicts == {"no_baseline": 1}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*), min(ppi_ci_low), max(ppi_ci_high) FROM estimates").fetchone() == (
            1, pytest.approx(low), pytest.approx(high),
        )  # fmt: skip
