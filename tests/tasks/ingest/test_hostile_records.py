"""A corpus of hostile records through real staging: every record, whatever its bytes, ends in exactly one place
(staged, or quarantined naming its line, field and reason), and staging's counts add up."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import math
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from psycopg import sql

from ragpulse.tasks.core.storage import list_partition_files
from ragpulse.tasks.core.types import RunInfo, StagedPartition, StagingCounts
from ragpulse.tasks.ingest import limits
from ragpulse.tasks.ingest.batches import read_staged
from ragpulse.tasks.ingest.counts import CountMismatchError, check_counts
from ragpulse.tasks.ingest.staging import stage_records
from ragpulse.tasks.scoring.assemble import build_partition_scores
from ragpulse.tasks.warehouse import open_warehouse
from ragpulse.tasks.warehouse.publication import build_publication

DAY = dt.date(2024, 3, 11)
PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
DEEP = 10_000
SURROGATE = "\\ud800"  # a lone half of a UTF-16 pair, as a JSON escape: json.loads accepts it
STAGED = None  # expected field of a record that is staged


def good(trace_id: str, **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "trace_id": trace_id,
        "timestamp": "2024-03-11T08:00:00Z",
        "question": f"question of {trace_id}?",
        "answer": "an answer",
        "contexts": [{"id": f"{trace_id}-c0", "text": "a passage", "score": 0.5}],
        "reference": "a reference",
        "reference_answers": ["one", "two"],
        "relevant_context_ids": [f"{trace_id}-c0"],
        "metadata": {"app": "bot"},
        "language": "en",
    }
    record.update(changes)
    return record


def line(record: dict[str, Any], **raw_values: str) -> bytes:
    """``record`` as a JSON line, each ``raw_values`` key's placeholder string replaced by raw JSON text."""
    text = json.dumps(record)
    for key, raw in raw_values.items():
        text = text.replace(json.dumps(f"<{key}>"), raw)
    return text.encode()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def context(score: str) -> dict[str, Any]:
    return {"id": "c0", "text": "t", "score": f"<{score}>"}


# (name, JSON line, expected field or STAGED, a word of the expected reason)
CANONICAL: list[tuple[str, bytes, str | None, str]] = [
    ("plain", line(good("h-plain")), STAGED, ""),
    ("deep-question", line(good("h1", question="<x>"), x=nested(DEEP)), "<record>", "nested deeper than 128"),
    ("deep-metadata", line(good("h2", metadata="<x>"), x=f'{{"a": {nested(DEEP)}}}'), "<record>", "nested deeper"),
    ("deep-extra-field", line(good("h3", extra="<x>"), x=nested(DEEP)), "<record>", "nested deeper"),
    ("deep-metadata-text", line(good("h4", metadata=f'{{"a": {nested(DEEP)}}}')), "metadata", "nested deeper"),
    ("deep-labels-text", line(good("h5", relevant_context_ids=nested(DEEP))), "relevant_context_ids", "nested"),
    # The record's object, metadata's object, then nested arrays.
    ("at-depth-limit", line(good("h-128", metadata="<x>"), x=f'{{"a": {nested(limits.MAX_DEPTH - 2)}}}'),
     STAGED, ""),
    ("past-depth-limit", line(good("h6", metadata="<x>"), x=f'{{"a": {nested(limits.MAX_DEPTH - 1)}}}'),
     "<record>", "nested"),
    ("brackets-in-strings", line(good("h-brackets", question="[" * 5000 + "?")), STAGED, ""),
    ("surrogate-trace-id", line(good("<x>"), x=f'"id{SURROGATE}"'), "trace_id", "lone surrogate U+D800"),
    ("surrogate-question", line(good("h7", question="<x>"), x=f'"q{SURROGATE}?"'), "question", "lone surrogate"),
    ("surrogate-answer", line(good("h8", answer="<x>"), x=f'"{SURROGATE}"'), "answer", "lone surrogate"),
    ("surrogate-reference", line(good("h9", reference="<x>"), x=f'"{SURROGATE}"'), "reference", "surrogate"),
    ("surrogate-ref-answer", line(good("h10", reference_answers=["ok", "<x>"]), x=f'"{SURROGATE}"'),
     "reference_answers[1]", "surrogate"),
    ("surrogate-context-id", line(good("h11", contexts=[{"id": "<x>", "text": "t"}]), x=f'"{SURROGATE}"'),
     "contexts[0].id", "surrogate"),
    ("surrogate-context-text", line(good("h12", contexts=[{"id": "c", "text": "<x>"}]), x=f'"a{SURROGATE}"'),
     "contexts[0].text", "surrogate"),
    ("surrogate-label", line(good("h13", relevant_context_ids=["<x>"]), x=f'"{SURROGATE}"'),
     "relevant_context_ids[0]", "surrogate"),
    ("surrogate-grade-key", line(good("h14", relevant_contexts="<x>"), x=f'{{"{SURROGATE}": 1}}'),
     "relevant_contexts[0]", "surrogate"),
    ("surrogate-language", line(good("h15", language="<x>"), x=f'"e{SURROGATE}"'), "language", ""),
    ("surrogate-metadata-value", line(good("h16", metadata={"a": {"b": ["<x>"]}}), x=f'"{SURROGATE}"'),
     "metadata.a.b[0]", "lone surrogate"),
    ("surrogate-metadata-key", line(good("h17", metadata="<x>"), x=f'{{"k{SURROGATE}": 1}}'),
     "metadata.k\\ud800", "key contains a lone surrogate"),
    ("surrogate-top-level-key", line(good("h18", extra=1)).replace(b'"extra"', f'"{SURROGATE}"'.encode()),
     "metadata.\\ud800", "key contains"),
    ("surrogate-unread-context-key", line(good("h-unread", contexts=[{"id": "c", "text": "t", "<x>": 1}]))
     .replace(b'"<x>"', f'"{SURROGATE}"'.encode()), STAGED, ""),  # a key ragpulse neither reads nor stores
    ("surrogate-pair", line(good("h-pair", question="<x>"), x='"duck \\ud83e\\udd86?"'), STAGED, ""),
    ("nul-question", line(good("h19", question="a\u0000b")), "question", "NUL character"),
    ("nul-metadata", line(good("h20", metadata={"a": "\u0000"})), "metadata.a", "NUL character"),
    ("nul-byte-raw", line(good("h21", question="<x>"), x='"a\x00b"'), "<record>", "invalid JSON"),
    ("invalid-utf8", line(good("h22", question="<x>")).replace(b'"<x>"', b'"caf\xff"'), "<record>", "not UTF-8"),
    ("score-1e400", line(good("h23", contexts=[context("x")]), x="1e400"), "contexts[0].score", "finite number"),
    ("score-huge-int", line(good("h24", contexts=[context("x")]), x="1" + "0" * 400), "contexts[0].score", "finite"),
    ("score-NaN", line(good("h25", contexts=[context("x")]), x="NaN"), "contexts[0].score", "finite number"),
    ("score-Infinity", line(good("h26", contexts=[context("x")]), x="Infinity"), "contexts[0].score", "finite"),
    ("score--Infinity", line(good("h27", contexts=[context("x")]), x="-Infinity"), "contexts[0].score", "finite"),
    ("score-minus-zero", line(good("h-zero", contexts=[context("x")]), x="-0"), STAGED, ""),
    ("score-minus-zero-float", line(good("h-zerof", contexts=[context("x")]), x="-0.0"), STAGED, ""),
    ("grade-Infinity", line(good("h28", relevant_contexts="<x>"), x='{"c0": Infinity}'), "relevant_contexts.c0",
     "graded relevance"),
    ("grade-NaN", line(good("h29", relevant_contexts="<x>"), x='{"c0": NaN}'), "relevant_contexts.c0", "graded"),
    ("grade-1e400", line(good("h30", relevant_contexts="<x>"), x='{"c0": 1e400}'), "relevant_contexts.c0", "graded"),
    ("timestamp-NaN", line(good("h31", timestamp="<x>"), x="NaN"), "timestamp", "ISO-8601"),
    ("timestamp-out-of-range", line(good("h32", timestamp="9999-12-31T23:00:00-05:00")), "timestamp", "range"),
    ("question-Infinity", line(good("h33", question="<x>"), x="Infinity"), "question", "non-empty string"),
    ("metadata-NaN", line(good("h-meta-nan", metadata={"latency": "<x>", "n": "<y>"}), x="NaN", y="-Infinity"),
     STAGED, ""),  # metadata is strict JSON: NaN and Infinity are stored as null
    ("int-5000-digits", line(good("h34", metadata={"n": "<x>"}), x="9" * 5000), "<record>", "4,300 digits"),
    ("duplicate-key", line(good("h35")).replace(b'"question":', b'"question": "first", "question":'), "question",
     "duplicate key"),
    ("duplicate-nested-key", line(good("h36", metadata="<x>"), x='{"a": 1, "a": 2}'), "a", "duplicate key"),
    ("array", b"[1, 2, 3]", "<record>", "JSON object"),
    ("string", b'"a trace"', "<record>", "JSON object"),
    ("null", b"null", "<record>", "JSON object"),
    ("number", b"12", "<record>", "JSON object"),
    ("trailing-garbage", line(good("h37")) + b" trailing", "<record>", "Extra data"),
    ("two-records-one-line", line(good("h38")) + line(good("h39")), "<record>", "Extra data"),
    ("crlf", line(good("h-crlf")) + b"\r", STAGED, ""),
    ("trace-id-int", line(good("<x>"), x="17"), "trace_id", "non-empty string"),
    ("trace-id-bool", line(good("<x>"), x="true"), "trace_id", "non-empty string"),
    ("trace-id-null", line(good("<x>"), x="null"), "trace_id", "required"),
    ("trace-id-blank", line(good("   ")), "trace_id", "non-empty string"),
    ("many-contexts", line(good("h-many", contexts=[{"id": f"c{i}", "text": "p", "score": i} for i in range(20_000)])),
     STAGED, ""),
    ("context-null", line(good("h40", contexts=[None])), "contexts[0]", "an object"),
    ("context-empty", line(good("h41", contexts=[{}])), "contexts[0].id", "required"),
]  # fmt: skip


def _partition(tmp_path: Path) -> Path:
    folder = tmp_path / "traces" / f"dt={DAY}"
    folder.mkdir(parents=True)
    return folder


def _stage(tmp_path: Path, trace_format: str = "ragpulse") -> StagedPartition:
    files = list_partition_files(str(tmp_path / "traces"), DAY, recursive=trace_format != "ragpulse")
    return stage_records(
        DAY, files, staged_url=str(tmp_path / "staged"), batch_size=7, trace_format=trace_format, language="en"
    )


def _staged_rows(staged: StagedPartition) -> list[dict[str, Any]]:
    return [row for ref in staged.batches for row in read_staged(ref).to_pylist()]


def _assert_counts_add_up(staged: StagedPartition) -> None:
    counts = staged.counts
    assert counts is not None
    assert counts.traces_read == counts.staged + counts.traces_quarantined + counts.other_days
    assert counts.quarantined == len(staged.quarantined)
    assert counts.staged == staged.n_valid == len(_staged_rows(staged))


def test_every_hostile_canonical_record_is_staged_or_quarantined_once_naming_line_field_and_reason(
    tmp_path: Path,
) -> None:
    folder = _partition(tmp_path)
    # Blank and whitespace-only lines between records are not records.
    (folder / "hostile.jsonl").write_bytes(b"\n \n".join(record for _, record, _, _ in CANONICAL) + b"\n\n")
    staged = _stage(tmp_path)

    url = str(folder / "hostile.jsonl")
    staged_lines = Counter(row["source_line"] for row in _staged_rows(staged))
    quarantined = Counter(q.line for q in staged.quarantined)
    by_line = {q.line: q for q in staged.quarantined}
    for index, (name, _, field, reason) in enumerate(CANONICAL):
        number = 2 * index + 1  # the blank line between records keeps its number
        assert staged_lines[number] + quarantined[number] == 1, name
        if field is STAGED:
            assert staged_lines[number] == 1, (name, by_line.get(number))
            continue
        entry = by_line.get(number)
        assert entry is not None, name
        assert (entry.source_file, entry.field) == (url, field), name
        assert reason in entry.reason, (name, entry.reason)
        # Every text of the entry is storable: the warehouse writes it as it is.
        for text in (entry.trace_id or "", entry.field, entry.reason, entry.raw):
            assert limits.unstorable(text) is None, name
    counts = staged.counts
    assert counts is not None
    n_staged = sum(1 for _, _, field, _ in CANONICAL if field is STAGED)
    assert (counts.records_read, counts.staged) == (len(CANONICAL), n_staged)
    assert counts.records_read == counts.records_quarantined + counts.traces_read
    _assert_counts_add_up(staged)
    assert counts.spans_quarantined is None and counts.duplicate_spans is None


def test_what_is_staged_from_hostile_records_is_what_they_said(tmp_path: Path) -> None:
    folder = _partition(tmp_path)
    (folder / "hostile.jsonl").write_bytes(b"\n".join(record for _, record, _, _ in CANONICAL))
    rows = {row["trace_id"]: row for row in _staged_rows(_stage(tmp_path))}
    assert math.copysign(1.0, rows["h-zero"]["contexts"][0]["score"]) == 1.0  # the integer -0 is 0
    assert math.copysign(1.0, rows["h-zerof"]["contexts"][0]["score"]) == -1.0
    assert json.loads(rows["h-meta-nan"]["metadata"]) == {"latency": None, "n": None}
    assert rows["h-pair"]["question"] == "duck \U0001f986?"
    assert len(rows["h-many"]["contexts"]) == 20_000
    assert rows["h-brackets"]["question"].startswith("[[[")


@pytest.mark.slow
def test_file_level_faults_keep_every_readable_record(tmp_path: Path) -> None:
    """An empty file, a BOM, a 50 MB line, a truncated gzip file: each record still ends in one place."""
    folder = _partition(tmp_path)
    (folder / "a-empty.jsonl").write_bytes(b"")
    (folder / "b-bom.jsonl").write_bytes(b"\xef\xbb\xbf" + line(good("bom-1")) + b"\r\n" + line(good("bom-2")))
    huge = line(good("huge", question="q" * 50_000_000))
    (folder / "c-huge.jsonl").write_bytes(line(good("before-huge")) + b"\n" + huge + b"\n" + line(good("after-huge")))
    body = b"".join(line(good(f"gz-{i}", question=f"{i} " * 40)) + b"\n" for i in range(3000))
    (folder / "d-truncated.jsonl.gz").write_bytes(gzip.compress(body)[:-2000])
    staged = _stage(tmp_path)

    ids = Counter(row["trace_id"] for row in _staged_rows(staged))
    assert max(ids.values()) == 1
    assert {"bom-1", "bom-2", "before-huge", "after-huge"} <= set(ids)
    by_file = {Path(q.source_file).name: q for q in staged.quarantined}
    assert sorted(by_file) == ["c-huge.jsonl", "d-truncated.jsonl.gz"] and len(staged.quarantined) == 2
    assert (by_file["c-huge.jsonl"].line, by_file["c-huge.jsonl"].field) == (2, "<record>")
    assert (
        by_file["c-huge.jsonl"].reason == f"line is {len(huge):,} bytes, over the limit of {limits.MAX_RECORD_BYTES:,}"
    )
    assert len(by_file["c-huge.jsonl"].raw) <= 2000
    truncated = by_file["d-truncated.jsonl.gz"]
    gz_read = sum(1 for trace_id in ids if trace_id.startswith("gz-"))
    assert truncated.line == gz_read + 1 and 0 < gz_read < 3000
    counts = staged.counts
    assert counts is not None
    assert counts.records_read == 2 + 3 + gz_read + 1 and counts.records_quarantined == 2
    _assert_counts_add_up(staged)


def test_parquet_rows_with_odd_types_and_nested_nulls_end_in_one_place(tmp_path: Path) -> None:
    folder = _partition(tmp_path)
    context = pa.struct([("id", pa.string()), ("text", pa.string()), ("score", pa.float64())])
    rows = [  # (trace id, question, contexts, expected field or STAGED)
        ("p-good", "q?", [{"id": "c", "text": "t", "score": 1.0}], STAGED),
        ("p-null-context", "q?", [None], "contexts[0]"),
        ("p-null-fields", "q?", [{"id": None, "text": None, "score": None}], "contexts[0].id"),
        ("p-nan", "q?", [{"id": "c", "text": "t", "score": math.nan}], "contexts[0].score"),
        ("p-inf", "q?", [{"id": "c", "text": "t", "score": -math.inf}], "contexts[0].score"),
        ("p-no-question", None, None, "question"),
        ("p-nul", "q\x00?", [], "question"),
    ]
    n = len(rows)
    pq.write_table(
        pa.table(
            {
                "trace_id": pa.array([r[0] for r in rows], pa.large_string()),
                "timestamp": pa.array([dt.datetime(2024, 3, 11, 9)] * n, pa.timestamp("ns", tz="UTC")),
                "question": pa.array([r[1] for r in rows], pa.string()),
                "contexts": pa.array([r[2] for r in rows], pa.list_(context)),
                # A map with integer keys, which the metadata JSON writes as text keys.
                "metadata": pa.array([[(1, "a"), (2, None)]] * n, pa.map_(pa.int64(), pa.string())),
                "answer": pa.array([None] * n, pa.binary()),
            }
        ),
        folder / "a-odd.parquet",
    )
    # A timestamp beyond Python's year 9999: that one row cannot be read, its neighbours can.
    far = pa.array([0, 3 * 10**17, 10**15], pa.timestamp("us", tz="UTC"))
    pq.write_table(
        pa.table({"trace_id": ["p-epoch", "p-far", "p-2001"], "timestamp": far, "question": ["q?"] * 3}),
        folder / "b-far.parquet",
    )
    staged = _stage(tmp_path)

    by_id = {row["trace_id"]: row for row in _staged_rows(staged)}
    assert sorted(by_id) == ["p-2001", "p-epoch", "p-good"]
    assert json.loads(by_id["p-good"]["metadata"]) == {"1": "a", "2": None}
    found = {(q.trace_id, q.field) for q in staged.quarantined}
    assert found == {(r[0], r[3]) for r in rows if r[3] is not STAGED} | {(None, "<record>")}
    far_entry = next(q for q in staged.quarantined if q.trace_id is None)
    assert (Path(far_entry.source_file).name, far_entry.line) == ("b-far.parquet", 2)
    assert "cannot read" in far_entry.reason
    counts = staged.counts
    assert counts is not None and (counts.records_read, counts.staged) == (n + 3, 3)
    _assert_counts_add_up(staged)


def test_a_nul_anywhere_in_a_parquet_row_is_found_as_in_its_json_line(tmp_path: Path) -> None:
    """Parquet rows are checked for NULs by batch, in Arrow: the same rows must end where their JSON lines do."""
    folder = _partition(tmp_path)
    context = pa.struct([("id", pa.string()), ("text", pa.string()), ("score", pa.float64())])
    rows = [  # (trace id, question, context text, metadata value, expected field or STAGED)
        ("n-good", "富士山は?", "絵文字 \U0001f5fb は保存できる", "ok", STAGED),
        ("n-context", "q?", "a\x00b", "ok", "contexts[0].text"),
        ("n-metadata", "q?", "t", "x\x00", "metadata.app"),
        ("n-good-2", "问题?", "上下文", "ok", STAGED),
    ]
    n = len(rows)
    columns = {
        "trace_id": [r[0] for r in rows],
        "timestamp": pa.array([dt.datetime(2024, 3, 11, 9)] * n, pa.timestamp("us", tz="UTC")),
        "question": pa.array([r[1] for r in rows]).dictionary_encode(),
        "contexts": pa.array([[{"id": "c", "text": r[2], "score": 1.0}] for r in rows], pa.list_(context)),
        "metadata": pa.array([[("app", r[3])] for r in rows], pa.map_(pa.string(), pa.string())),
    }
    pq.write_table(pa.table(columns), folder / "a-values.parquet")
    # A column named with a NUL becomes a metadata key that no warehouse can store.
    clean = pa.table(columns).filter(pa.array([r[4] is STAGED for r in rows]))
    named = clean.append_column("odd\x00name", pa.array(["v"] * clean.num_rows))
    pq.write_table(named.set_column(0, "trace_id", pa.array(["m-1", "m-2"])), folder / "b-names.parquet")
    staged = _stage(tmp_path)

    assert sorted(row["trace_id"] for row in _staged_rows(staged)) == ["n-good", "n-good-2"]
    found = {(Path(q.source_file).name, q.trace_id, q.field) for q in staged.quarantined}
    assert found == {("a-values.parquet", r[0], r[4]) for r in rows if r[4] is not STAGED} | {
        ("b-names.parquet", trace_id, "metadata.odd\\x00name") for trace_id in ("m-1", "m-2")
    }
    for entry in staged.quarantined:  # the raw excerpt is still the row as JSON text
        assert json.loads(entry.raw)["trace_id"] == entry.trace_id
    _assert_counts_add_up(staged)


def _span(trace_id: Any, span_id: str, **attributes: Any) -> dict[str, Any]:
    root = span_id.endswith("root")
    return {
        "name": "rag" if root else "search",
        "span_kind": "CHAIN" if root else "RETRIEVER",
        "parent_id": None if root else f"{trace_id}-root",
        "start_time": "2024-03-11T08:00:00+00:00",
        "context.span_id": span_id,
        "context.trace_id": trace_id,
        **{f"attributes.{key}": value for key, value in attributes.items()},
    }


def _trace(trace_id: str, question: str = "q?", text: str = "a passage", score: Any = 0.5) -> list[dict[str, Any]]:
    documents = [{"document.id": "d1", "document.content": text, "document.score": score}]
    return [
        _span(trace_id, f"{trace_id}-root", **{"input.value": question, "output.value": "an answer"}),
        _span(trace_id, f"{trace_id}-ret", **{"retrieval.documents": documents}),
    ]


def _lines(spans: list[dict[str, Any]], **raw_values: str) -> list[bytes]:
    return [line(span, **raw_values) for span in spans]


def test_hostile_openinference_records_end_in_one_place_and_span_counts_add_up(tmp_path: Path) -> None:
    folder = _partition(tmp_path)
    records = [
        *_lines(_trace("o-good")),
        *_lines(_trace("o-deep", question="<x>"), x=nested(DEEP)),  # 2 records quarantined whole
        *_lines(_trace("o-deep-text", question=nested(DEEP))),  # JSON text past the limit stays text: staged
        *_lines(_trace("o-surrogate", question="<x>"), x=f'"q{SURROGATE}?"'),  # trace quarantined: question
        *_lines(_trace("o-nul", text="a\u0000b")),  # trace quarantined: contexts[0].text
        *_lines(_trace("o-inf", score="<x>"), x="Infinity"),  # trace quarantined: the document's score
        *_lines(_trace("o-huge-score", score="<x>"), x="1e400"),
        _lines(_trace("o-good"))[1],  # the retriever again: a duplicate span
        line(_span("o-dup", "o-dup-root")).replace(b'"name":', b'"name": "x", "name":'),  # duplicate key
        line(_span("<x>", "o-int-root"), x="42"),  # integer trace id
        b"[]",
        b'"a span"',
        b"{not json",
        line(_span("o-big", "o-big-root", **{"input.value": "q" * (limits.MAX_RECORD_BYTES + 1)})),
    ]
    (folder / "spans.jsonl").write_bytes(b"\n".join(records) + b"\n")
    staged = _stage(tmp_path, "openinference")

    rows = {row["trace_id"]: row for row in _staged_rows(staged)}
    assert sorted(rows) == ["o-deep-text", "o-good"]
    assert rows["o-deep-text"]["question"] == nested(DEEP)  # JSON text too deep to decode is kept as text
    traces = Counter((q.trace_id, q.field) for q in staged.quarantined if q.trace_id is not None)
    assert traces == {
        ("o-deep", "question"): 1,  # its root span's line was quarantined whole: what is left holds no question
        ("o-surrogate", "question"): 1,
        ("o-nul", "contexts[0].text"): 1,
        ("o-inf", "contexts[0].score"): 1,
        ("o-huge-score", "contexts[0].score"): 1,
    }
    whole = {q.line: q.field for q in staged.quarantined if q.trace_id is None}
    assert len(whole) == sum(1 for q in staged.quarantined if q.trace_id is None)
    assert whole == {
        3: "<record>", 16: "name", 17: "context.trace_id", 18: "<record>", 19: "<record>", 20: "<record>",
        21: "<record>",
    }  # fmt: skip
    counts = staged.counts
    assert counts is not None
    assert (counts.records_read, counts.records_quarantined, counts.spans_quarantined) == (len(records), 7, 0)
    assert (counts.traces_read, counts.staged, counts.traces_quarantined) == (7, 2, 5)
    assert counts.duplicate_spans == 1
    _assert_counts_add_up(staged)


@pytest.mark.parametrize("depth", [limits.MAX_DEPTH, limits.MAX_DEPTH + 1])
def test_depth_is_counted_outside_strings_only(depth: int) -> None:
    text = json.dumps({"s": "[" * 500, "v": json.loads(nested(depth - 1))})
    assert limits.too_deep(text) is (depth > limits.MAX_DEPTH)


def test_counts_that_do_not_add_up_stop_the_day_with_an_internal_error() -> None:
    lost_one = StagingCounts(records_read=3, traces_read=3, staged=2)
    with pytest.raises(CountMismatchError, match=r"nothing was published: traces read = .*: 3 != 2$"):
        check_counts(DAY, lost_one, 0, records_parsed=3)
    check_counts(DAY, StagingCounts(records_read=3, traces_read=3, staged=2, other_days=1), 0, records_parsed=3)


@pytest.mark.slow
@pytest.mark.parametrize("warehouse", ["duckdb", "postgresql"])
def test_the_quarantine_of_the_hostile_corpus_publishes_to_duckdb_and_postgresql(
    tmp_path: Path, warehouse: str
) -> None:
    """NULs and surrogates in raw lines, fields and reasons are escaped: every backend stores every entry."""
    folder = _partition(tmp_path)
    (folder / "hostile.jsonl").write_bytes(b"\n".join(record for _, record, _, _ in CANONICAL))
    staged = _stage(tmp_path)
    schema = f"t16_c_{uuid.uuid4().hex[:8]}"
    url = f"duckdb:///{tmp_path}/w.duckdb" if warehouse == "duckdb" else f"{PG_URL}?schema={schema}"
    scores = build_partition_scores(staged, [], [], [])
    run = RunInfo("r1", str(tmp_path), "cfg", {}, dt.datetime.now(dt.UTC))
    try:
        open_warehouse(url).publish(build_publication(scores, run, [], n_batches_cached=0))
        stored = open_warehouse(url).read("quarantine", columns=["line", "trace_id", "field", "reason", "raw"])
        (runs,) = open_warehouse(url).read("runs").to_pylist()
    finally:
        if warehouse == "postgresql":
            with psycopg.connect(PG_DSN, autocommit=True) as con:
                con.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    expected = sorted((q.line, q.trace_id, q.field, q.reason, q.raw) for q in staged.quarantined)
    assert sorted(tuple(row.values()) for row in stored.to_pylist()) == expected
    assert (runs["n_records"], runs["n_quarantined"], runs["n_staged"]) == (
        len(CANONICAL),
        len(staged.quarantined),
        staged.n_valid,
    )
