"""Reading human labels as people write them: CSV from a spreadsheet (BOM, quoting, yes/no), JSON lines gzipped in a
bucket (moto's S3 through s3fs), a folder of both, and every kind of bad line rejected with its file, line and
field."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ragpulse.tasks.calibration.labels import read_labels
from ragpulse.tasks.core.exceptions import ConfigError

CSV = (
    "\ufefftrace_id,metric,value,partition_date,labeller,labelled_at\r\n"
    'req-1,faithfulness,yes,2026-11-01,"Sato, K.",2026-11-02T09:00:00+09:00\r\n'
    "req-2,faithfulness,No,2026-11-01,li,\r\n"
    "req-3,answer_relevancy,0.75,,li,2026-11-02T01:00:00\r\n"
    "req-4,faithfulness,,2026-11-01,,\r\n"
    "req-5,faithfulness,1.5,2026-11-01,li,\r\n"
    "req-6,faithfulness,yes,2026-13-01,li,\r\n"
    ",faithfulness,yes,2026-11-01,li,\r\n"
)


def test_a_spreadsheets_csv_is_read_with_its_quoting_yes_no_and_empty_cells(tmp_path: Path) -> None:
    (tmp_path / "labels.csv").write_bytes(CSV.encode("utf-8"))
    labels = read_labels(str(tmp_path / "labels.csv"))
    rows = labels.rows.to_pylist()
    assert [(r["trace_id"], r["metric"], r["value"]) for r in rows] == [
        ("req-1", "faithfulness", 1.0),
        ("req-2", "faithfulness", 0.0),
        ("req-3", "answer_relevancy", 0.75),
    ]
    assert rows[0]["labeller"] == "Sato, K." and rows[0]["labelled_at"] == dt.datetime(2026, 11, 2, 0, tzinfo=dt.UTC)
    assert rows[2]["partition_date"] is None and rows[2]["labelled_at"] == dt.datetime(2026, 11, 2, 1, tzinfo=dt.UTC)
    assert labels.unlabelled == 1
    assert [(bad.line, bad.field) for bad in labels.rejected] == [(6, "value"), (7, "partition_date"), (8, "trace_id")]
    assert "outside [0, 1]" in labels.rejected[0].reason and rows[0]["source_line"] == 2


def test_a_folder_of_gzipped_json_lines_in_a_bucket_is_read_whole(s3: Any) -> None:
    good = [{"trace_id": f"t{i}", "metric": "context_relevance", "value": i % 2, "partition_date": "2026-11-01"}
            for i in range(5)]  # fmt: skip
    s3.fs.pipe_file(
        f"{s3.name}/labels/dt=2026-11-01/a.jsonl.gz",
        gzip.compress("".join(json.dumps(line) + "\n" for line in good).encode()),
    )
    s3.fs.pipe_file(f"{s3.name}/labels/b.jsonl", b'{"trace_id": "t9", "metric": "m", "value": true}\n[1, 2]\n\n')
    s3.fs.pipe_file(f"{s3.name}/labels/README.md", b"not labels")
    labels = read_labels(f"{s3.url}/labels")
    assert labels.files == 2 and labels.rows.num_rows == 6
    assert sorted(labels.rows["trace_id"].to_pylist()) == ["t0", "t1", "t2", "t3", "t4", "t9"]
    ((bad),) = labels.rejected
    assert bad.source_file == f"{s3.url}/labels/b.jsonl" and (bad.line, bad.field) == (2, "<record>")


def test_labels_that_are_not_there_are_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither a file nor a folder"):
        read_labels(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="no labels files"):
        read_labels(str(tmp_path / "empty"))
