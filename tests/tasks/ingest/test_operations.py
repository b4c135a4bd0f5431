"""The operational fields (latencies, token usage, span errors) and feedback of the trace format: validated with
reasons naming the field, staged to Parquet, and read back into ``TraceBatch.operations`` / ``.feedback`` the same
way staging and ``TraceBatch.from_records`` read them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragpulse.metrics.batch import Feedback, Operations, SpanError, TraceBatch, Usage
from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.core.types import BatchRef
from ragpulse.tasks.ingest.batches import OPERATIONS_COLUMNS, read_staged, read_trace_batch
from ragpulse.tasks.ingest.records import STAGED_SCHEMA, parse_record, staged_table

OPERATIONS: dict[str, Any] = {
    "latency_ms": 1834,
    "retrieval_latency_ms": 212.5,
    "generation_latency_ms": 1490.0,
    "usage": [
        {"model": "gpt-4o-mini", "input_tokens": 812, "output_tokens": 64.0},
        {"model": None, "input_tokens": None, "output_tokens": 7},
    ],
    "errors": [{"kind": "tool", "name": "exchange_rate", "message": "為替レートを取得できません"}],
    "feedback": [
        {"name": "thumbs", "value": False, "label": None, "source": "user", "comment": "答案不对"},
        {"name": "quality", "value": -0.5, "source": "annotation"},
        {"name": "category", "label": "off-topic", "source": "evaluation"},
    ],
}


def turn(trace_id: str = "t1", **fields: Any) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "timestamp": "2026-11-20T09:00:00Z",
        "question": "東京の人口は？",
        "answer": "約1400万人です。",
        "contexts": [{"id": "d1", "text": "東京都の人口は約1400万人。"}],
        **fields,
    }


def parse(raw: dict[str, Any]) -> dict[str, Any]:
    return parse_record(raw, source_file="f.jsonl", line=1)


def test_operational_fields_are_validated_and_normalised() -> None:
    row = parse(turn(**OPERATIONS))

    assert row["latency_ms"] == 1834.0 and type(row["latency_ms"]) is float
    assert row["usage"] == [
        {"model": "gpt-4o-mini", "input_tokens": 812, "output_tokens": 64},
        {"model": None, "input_tokens": None, "output_tokens": 7},
    ]
    assert type(row["usage"][0]["output_tokens"]) is int  # 64.0 as some exporters write it
    assert row["errors"] == OPERATIONS["errors"]
    assert [(f["value"], f["label"], f["comment"]) for f in row["feedback"]] == [
        (0.0, None, "答案不对"),
        (-0.5, None, None),
        (None, "off-topic", None),
    ]


def test_a_record_without_them_stages_nulls_and_an_empty_error_list_stays_empty() -> None:
    bare, clean = parse(turn()), parse(turn(errors=[], usage=[]))

    assert [bare[name] for name in (*OPERATIONS_COLUMNS, "feedback")] == [None] * 6
    assert clean["errors"] == [] and clean["usage"] == []  # known to have none, not unknown


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"latency_ms": -3}, "latency_ms", "finite number of milliseconds >= 0"),
        ({"retrieval_latency_ms": "12ms"}, "retrieval_latency_ms", "finite number of milliseconds >= 0"),
        ({"generation_latency_ms": True}, "generation_latency_ms", "finite number of milliseconds >= 0"),
        ({"latency_ms": 10**400}, "latency_ms", "finite number"),
        ({"usage": {"input_tokens": 3}}, "usage", "expected a list of model calls"),
        ({"usage": ["gpt"]}, "usage[0]", "expected an object"),
        ({"usage": [{"input_tokens": -1}]}, "usage[0].input_tokens", "whole number of tokens >= 0"),
        ({"usage": [{}, {"output_tokens": 2.5}]}, "usage[1].output_tokens", "whole number of tokens >= 0"),
        ({"usage": [{"input_tokens": "12"}]}, "usage[0].input_tokens", "whole number"),
        ({"usage": [{"model": 4}]}, "usage[0].model", "expected a string or null"),
        ({"errors": "timeout"}, "errors", "expected a list of span errors"),
        ({"errors": [{"name": "search"}]}, "errors[0].kind", "required field missing"),
        ({"errors": [{"kind": "tool", "message": {"code": 500}}]}, "errors[0].message", "a string or null"),
        ({"feedback": [{"value": 1, "source": "user"}]}, "feedback[0].name", "required field missing"),
        ({"feedback": [{"name": "x", "value": 1}]}, "feedback[0].source", "required field missing"),
        (
            {"feedback": [{"name": "x", "source": "user"}, {"name": "y", "source": "human"}]},
            "feedback[1].source",
            "expected one of user, annotation, api, evaluation",
        ),
        ({"feedback": [{"name": "x", "value": "5", "source": "api"}]}, "feedback[0].value", "a boolean or null"),
        ({"feedback": [{"name": "x", "value": float("nan"), "source": "api"}]}, "feedback[0].value", "finite"),
        ({"feedback": [{"name": "x", "label": 3, "source": "api"}]}, "feedback[0].label", "a string or null"),
        ({"feedback": [{"name": "x", "source": "api", "comment": "ok\x00"}]}, "feedback[0].comment", "NUL"),
        ({"errors": [{"kind": "tool", "name": "\ud800"}]}, "errors[0].name", "surrogate"),
    ],
)
def test_bad_operational_fields_name_the_field(changes: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidRecordError) as caught:
        parse(turn(**changes))

    assert caught.value.field == field
    assert reason in str(caught.value)


def _expected_operations() -> Operations:
    return Operations(
        latency_ms=1834.0,
        retrieval_latency_ms=212.5,
        generation_latency_ms=1490.0,
        usage=(Usage("gpt-4o-mini", 812, 64), Usage(None, None, 7)),
        errors=(SpanError("tool", "exchange_rate", "為替レートを取得できません"),),
    )


def test_staged_parquet_reads_back_as_the_records_own_operations_and_feedback(tmp_path: Path) -> None:
    rows = [
        parse(turn("ops", **OPERATIONS)),
        parse(turn("bare")),
        parse(turn("latency only", latency_ms=90.0)),
        parse(turn("no errors", errors=[])),
    ]
    pq.write_table(staged_table(rows), tmp_path / "b.parquet")
    table = read_staged(BatchRef(str(tmp_path / "b.parquet"), "h", len(rows)))

    batch = read_trace_batch(table)

    assert batch.operations == [_expected_operations(), None, Operations(latency_ms=90.0), Operations(errors=())]
    assert batch.feedback is not None
    assert batch.feedback[1:] == [None, None, None]
    assert batch.feedback[0] == [
        Feedback("thumbs", 0.0, None, "user", "答案不对"),
        Feedback("quality", -0.5, None, "annotation", None),
        Feedback("category", None, "off-topic", "evaluation", None),
    ]
    # The canonical dicts themselves give the same batch fields (TraceBatch.from_records).
    direct = TraceBatch.from_records([turn("ops", **OPERATIONS), turn("bare"), turn(errors=[])])
    assert direct.operations == [_expected_operations(), None, Operations(errors=())]
    usage = direct.operations[0].usage if direct.operations[0] is not None else None
    assert usage is not None and type(usage[0].output_tokens) is int  # 64.0 in the record
    assert direct.feedback is not None and direct.feedback[0] == batch.feedback[0]


def test_a_batch_staged_before_the_columns_existed_still_loads(tmp_path: Path) -> None:
    new_columns = {*OPERATIONS_COLUMNS, "feedback"}
    old_schema = pa.schema([field for field in STAGED_SCHEMA if field.name not in new_columns])
    rows = [{k: v for k, v in parse(turn("old")).items() if k not in new_columns}]
    pq.write_table(pa.Table.from_pylist(rows, schema=old_schema), tmp_path / "old.parquet")

    batch = read_trace_batch(read_staged(BatchRef(str(tmp_path / "old.parquet"), "h", 1)))

    assert batch.trace_ids == ["old"]
    assert batch.operations is None and batch.feedback is None


def test_only_the_columns_read_are_filled(tmp_path: Path) -> None:
    pq.write_table(staged_table([parse(turn("ops", **OPERATIONS))]), tmp_path / "b.parquet")
    ref = BatchRef(str(tmp_path / "b.parquet"), "h", 1)

    errors_only = read_trace_batch(read_staged(ref, columns=["trace_id", "errors"]))

    assert errors_only.operations == [Operations(errors=_expected_operations().errors)]
    assert errors_only.feedback is None
