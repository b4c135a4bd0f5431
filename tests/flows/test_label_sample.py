"""``ragpulse label-sample`` on a scored day of the demo's English, Japanese and Chinese traces: a stratified draw in
proportion to the languages, a CSV a spreadsheet opens with its Japanese and Chinese intact, JSON lines in a bucket,
and the file read back by ``ragpulse calibrate``'s reader once labelled."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.calibration.label_sample import SAMPLE_COLUMNS, allocate
from ragpulse.tasks.calibration.labels import read_labels
from ragpulse.tasks.config import OutputConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.demo.generate import generate_demo_traces

DAY = dt.date(2026, 6, 1)
METRICS = ("answer_f1", "document_mrr")


@pytest.fixture(scope="module")
def scored_day(tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> Path:
    root = tmp_path_factory.mktemp("label-sample")
    generate_demo_traces(root / "traces", start=DAY, days=1, traces_per_day=240, seed=3, malformed_per_day=0)
    evaluate_partition(
        date=DAY,
        source=SourceConfig(url=str(root / "traces")),
        scoring=ScoringConfig(metrics=METRICS),
        output=OutputConfig(warehouse=f"duckdb:///{root}/w.duckdb", work_dir=str(root / "work")),
    )
    return root


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, ["label-sample", *args])
    assert result.exit_code == 0, result.output
    return result


def test_a_stratified_csv_keeps_the_languages_in_proportion_and_their_text_intact(scored_day: Path) -> None:
    warehouse = f"duckdb:///{scored_day}/w.duckdb"
    out = scored_day / "todo.csv"
    result = _invoke("--date", str(DAY), "--metrics", "answer_f1", "--n", "60", "--stratify", "language",
                     "--out", str(out), "--warehouse", warehouse, "--json")  # fmt: skip
    summary = json.loads(result.stdout)
    with duckdb.connect(f"{scored_day}/w.duckdb", read_only=True) as con:
        counted = dict(
            con.execute(
                "SELECT t.language, count(*) FROM traces t JOIN scores s USING (partition_date, trace_id) "
                "WHERE s.metric = 'answer_f1' AND s.status = 'ok' GROUP BY ALL"
            ).fetchall()
        )
        excerpts = dict(con.execute("SELECT trace_id, question FROM traces").fetchall())
    eligible = {language or "(none)": n for language, n in counted.items()}  # a trace without a language
    assert {"ja", "zh", "en"} <= eligible.keys() and summary["eligible"] == eligible
    assert summary["drawn"] == allocate(eligible, 60) and sum(summary["drawn"].values()) == 60

    data = out.read_bytes()
    assert data.startswith("\ufeff".encode())  # so that a spreadsheet reads it as UTF-8
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert tuple(rows[0]) == SAMPLE_COLUMNS and len(rows) == summary["rows"] == 60
    assert Counter(row["stratum"] for row in rows) == Counter({k: v for k, v in summary["drawn"].items() if v})
    assert all(row["question"] == excerpts[row["trace_id"]] and row["value"] == "" for row in rows)
    japanese = next(row for row in rows if row["language"] == "ja")
    assert any("\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff" for ch in japanese["question"])

    # Labelled in a spreadsheet: half filled in, saved; calibrate's reader takes the file as it is.
    for i, row in enumerate(rows):
        row["value"] = ("yes" if i % 3 else "no") if i % 2 == 0 else ""
        row["labeller"] = "佐藤" if i % 2 == 0 else ""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=SAMPLE_COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    out.write_bytes(("\ufeff" + buffer.getvalue()).encode())
    labels = read_labels(str(out))
    assert labels.rows.num_rows == 30 and labels.unlabelled == 30 and not labels.rejected
    assert set(labels.rows["labeller"].to_pylist()) == {"佐藤"}
    assert set(labels.rows["partition_date"].to_pylist()) == {DAY}


def test_the_same_seed_draws_the_same_sample_and_jsonl_goes_to_a_bucket(scored_day: Path, s3: Any) -> None:
    warehouse = f"duckdb:///{scored_day}/w.duckdb"
    common = ["--date", str(DAY), "--metrics", ",".join(METRICS), "--n", "25", "--stratify", "metadata.app",
              "--warehouse", warehouse]  # fmt: skip
    _invoke(*common, "--out", f"{s3.url}/todo/a.jsonl")
    _invoke(*common, "--out", f"{s3.url}/todo/b.jsonl")
    _invoke(*common, "--seed", "1", "--out", f"{s3.url}/todo/c.jsonl")
    a, b, c = (
        [json.loads(line) for line in s3.fs.cat_file(f"{s3.name}/todo/{name}.jsonl").decode().splitlines()]
        for name in "abc"
    )
    assert a == b and {r["trace_id"] for r in a} != {r["trace_id"] for r in c}
    assert {r["metric"] for r in a} == set(METRICS) and len({r["trace_id"] for r in a}) == 25
    assert all(r["stratum"] for r in a) and all(isinstance(r["source_line"], int) for r in a)


def test_bad_requests_exit_2_in_one_line(scored_day: Path) -> None:
    warehouse = f"duckdb:///{scored_day}/w.duckdb"
    runner = CliRunner()
    wrong_kind = runner.invoke(app, ["label-sample", "--date", str(DAY), "--metrics", "answer_f1", "--out",
                                     str(scored_day / "x.xlsx"), "--warehouse", warehouse])  # fmt: skip
    assert wrong_kind.exit_code == 2 and "write the sample as .csv or .jsonl" in wrong_kind.stderr
    unscored = runner.invoke(app, ["label-sample", "--date", str(DAY), "--metrics", "faithfulness", "--out",
                                   str(scored_day / "x.csv"), "--warehouse", warehouse])  # fmt: skip
    assert unscored.exit_code == 2 and "no ok scores of faithfulness" in unscored.stderr
    misspelt = runner.invoke(app, ["label-sample", "--date", str(DAY), "--metrics", "answer_f1", "--stratify",
                                   "metadata.ap", "--out", str(scored_day / "y.csv"),
                                   "--warehouse", warehouse])  # fmt: skip
    assert misspelt.exit_code == 2 and len(misspelt.stderr.splitlines()) == 1, misspelt.stderr
    assert "--stratify 'metadata.ap': no trace of" in misspelt.stderr and "metadata.app" in misspelt.stderr
    assert not (scored_day / "y.csv").exists()


@pytest.mark.parametrize(
    ("sizes", "n", "expected"),
    [
        ({"en": 100, "ja": 50, "zh": 50}, 20, {"en": 10, "ja": 5, "zh": 5}),
        ({"a": 1, "b": 1, "c": 1}, 2, {"a": 1, "b": 1, "c": 0}),
        ({"a": 3, "b": 1}, 10, {"a": 3, "b": 1}),
        ({"a": 7, "b": 2, "c": 1}, 5, {"a": 4, "b": 1, "c": 0}),
    ],
)
def test_allocation_is_proportional_by_largest_remainders(sizes: dict[str, int], n: int, expected: dict) -> None:
    assert allocate(sizes, n) == expected
