"""Score-batch reads only the staged columns its metrics need: every result must equal that of the whole batch.

Traces come from the JSQuAD (Japanese) and CMRC 2018 (Chinese) extracts the package ships for its demo
(tasks/demo/corpus, attribution in its ATTRIBUTION.md), with labels by id, by graded id and by text, so that some
batches need context texts and some not."""

from __future__ import annotations

import datetime as dt
import json
from itertools import cycle, islice
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from ragpulse.metrics import DEFAULT_METRICS, MetricRequest, compute
from ragpulse.tasks.core.storage import list_partition_files
from ragpulse.tasks.core.types import StagedPartition
from ragpulse.tasks.demo.corpora import load_qa_corpus
from ragpulse.tasks.ingest.batches import read_scoring_table, read_staged, read_trace_batch
from ragpulse.tasks.ingest.staging import stage_records

DAY = dt.date(2026, 3, 2)
CORPUS = Path(__file__).resolve().parents[3] / "tasks" / "demo" / "corpus"


def _questions(name: str, limit: int) -> list[tuple[str, str, list[str]]]:
    """(question, passage, answers) of a shipped QA extract, answerable questions only."""
    rows = [row for row in load_qa_corpus(CORPUS / name) if row.answers]
    return [(row.question, row.passage, list(row.answers)) for row in rows[:limit]]


def _records() -> list[dict[str, Any]]:
    questions = _questions("jsquad_sample.jsonl.gz", 40) + _questions("cmrc2018_sample.jsonl.gz", 40)
    passages = sorted({passage for _, passage, _ in questions})
    # Batches of 7 with this cycle of label styles: the batches of traces 28-48 have no text labels at all.
    styles = [*islice(cycle(["ids", "graded", "none"]), 28), *["ids"] * 21, *islice(cycle(["text", "ids"]), 31)]
    records = []
    for i, ((question, passage, answers), style) in enumerate(zip(questions, styles, strict=True)):
        ranked = [passages[(i * 7 + j) % len(passages)] for j in range(4)] + [passage]
        contexts = [{"id": f"p{passages.index(text)}", "text": text[:300], "score": 1 - r / 10} for r, text in
                    enumerate(ranked)]  # fmt: skip
        record: dict[str, Any] = {
            "trace_id": f"t{i}",
            "timestamp": "2026-03-02T09:00:00Z",
            "question": question,
            "answer": answers[0] if i % 4 else answers[0] + "です",
            "reference": answers[0],
            "reference_answers": answers[1:],
            "contexts": contexts,
        }
        relevant = f"p{passages.index(passage)}"
        if style == "ids":
            record["relevant_context_ids"] = [relevant, contexts[1]["id"]]
        elif style == "graded":
            record["relevant_context_ids"] = {relevant: 2, contexts[0]["id"]: 1}
        elif style == "text":
            record["relevant_contexts"] = [passage[:300]]
        records.append(record)
    return records


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> StagedPartition:
    root = tmp_path_factory.mktemp("reads")
    folder = root / "traces" / f"dt={DAY}"
    folder.mkdir(parents=True)
    lines = (json.dumps(record, ensure_ascii=False) for record in _records())
    (folder / "traces.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    files = list_partition_files(str(root / "traces"), DAY)
    return stage_records(DAY, files, staged_url=str(root / "staged"), batch_size=7)


ALL = [name for name in DEFAULT_METRICS if not MetricRequest.parse(name).is_judge]
RANKING = [name for name in ALL if MetricRequest.parse(name).definition.needs == "ranking"]
ANSWERS = [name for name in ALL if MetricRequest.parse(name).definition.needs == "answers"]


@pytest.mark.parametrize("names", [ALL, RANKING, ANSWERS, ["document_mrr"], []], ids=["all", "ranking", "answers",
                                                                                   "one", "none"])  # fmt: skip
def test_scores_from_the_columns_read_equal_those_from_the_whole_batch(
    staged: StagedPartition, names: list[str]
) -> None:
    requests = [MetricRequest.parse(name) for name in names]
    assert len(staged.batches) == 12 and staged.n_valid == 80
    kinds = set()
    for ref in staged.batches:
        whole = compute(read_trace_batch(read_staged(ref)), requests)
        table = read_scoring_table(ref, requests)
        kinds.add("contexts" in table.column_names and "text" in table.schema.field("contexts").type.value_type.names)
        read = compute(read_trace_batch(table), requests)
        assert list(read) == list(whole) == names
        for name in names:
            np.testing.assert_array_equal(read[name].values, whole[name].values)
            np.testing.assert_array_equal(read[name].status, whole[name].status)
            assert list(read[name].reasons) == list(whole[name].reasons)
        assert table.column("trace_id").equals(read_staged(ref, columns=["trace_id"]).column(0))
    if names and set(names) & set(RANKING):
        assert kinds == {True, False}  # some batches were read with context texts, some without


def test_a_batch_is_read_without_context_texts_unless_a_trace_is_labelled_by_text(staged: StagedPartition) -> None:
    requests = [MetricRequest.parse(name) for name in RANKING]
    with_texts = [
        "text" in read_scoring_table(ref, requests).schema.field("contexts").type.value_type.names
        for ref in staged.batches
    ]
    labelled_by_text = [read_staged(ref).column("relevant_contexts").null_count < ref.n_rows for ref in staged.batches]
    assert with_texts == labelled_by_text and any(with_texts) and not all(with_texts)
    assert "answer" not in read_scoring_table(staged.batches[0], requests).column_names


def test_a_sliced_table_reads_as_its_own_rows(staged: StagedPartition) -> None:
    """Offsets of a sliced list column index the whole child array: the rows read must be the slice's."""
    table = read_staged(staged.batches[4])
    sliced, copied = table.slice(2, 3), pa.Table.from_pylist(table.slice(2, 3).to_pylist(), schema=table.schema)
    for field in ("trace_ids", "context_ids", "context_texts", "relevant_ids", "relevant_texts", "answers"):
        assert getattr(read_trace_batch(sliced), field) == getattr(read_trace_batch(copied), field)
