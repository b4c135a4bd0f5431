"""The conformance corpus (tests/conformance.py): agent turns of nine frameworks, written by each framework's own
OpenInference instrumentation and, where the framework emits them, its own OTel GenAI spans, read by staging and
checked turn by turn, field by field, against what each application logged of itself (never the spans): the user's
question and its language, the answer, every retrieval step's query and document ids in rank order, the documents
the generator received, the conversation and the tool calls with their failures. Every framework has a two-turn
session, a Japanese or Chinese turn, a turn without retrieval and a tool error."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conformance import CORPUS, Export, exports, mismatches, pair, turn_key
from tests.tasks.ingest.adapters.conftest import Staged

EXPORTS = {export.name: export for export in exports()}


def read_turn(row: dict[str, Any]) -> dict[str, Any]:
    """A staged row as the fields ``mismatches`` compares."""
    return {
        "question": row["question"],
        "answer": row["answer"],
        "language": row["language"],
        "conversation_id": row["conversation_id"],
        "steps": [
            {"kind": step["kind"], "query": step["query"], "ids": [c["id"] for c in step["contexts"]]}
            for step in row["steps"] or []
        ],
        "contexts": [{"id": c["id"], "text": c["text"]} for c in row["contexts"] or []],
        "tool_calls": row["tool_calls"],
    }


@pytest.fixture(params=sorted(EXPORTS))
def staged_export(request: pytest.FixtureRequest, stager: Callable[..., Staged]) -> tuple[Export, Staged]:
    export = EXPORTS[request.param]
    return export, stager(export.path, export.trace_format, day=export.day)


def test_the_corpus_covers_nine_frameworks_with_every_shape() -> None:
    """Each framework's turns include a two-turn session, a Japanese or Chinese turn, a turn without retrieval and a
    tool error, as its application logged them."""
    frameworks = {export.framework for export in EXPORTS.values()}
    assert len(frameworks) >= 9, frameworks
    for framework in frameworks:
        turns = next(e.turns for e in EXPORTS.values() if e.framework == framework)
        assert any(t["turn"] == 2 and t["conversation_id"] for t in turns), framework
        assert any(t["language"] in ("ja", "zh") for t in turns), framework
        assert any(not t["steps"] for t in turns), framework
        assert any(call["error"] for t in turns for call in t["tool_calls"]), framework
        assert any(len([s for s in t["steps"] if s["kind"] != "reranker"]) >= 2 for t in turns), framework


def test_every_turn_is_read_right(staged_export: tuple[Export, Staged]) -> None:
    export, (staged, rows) = staged_export
    if export.unreadable:  # nothing to read (losses.json): every trace held back with the reason, none made up
        assert not rows and len(staged.quarantined) >= len(export.turns)
        assert all(q.field == "question" and "no question" in q.reason for q in staged.quarantined)
        return
    assert not staged.quarantined, [q.reason for q in staged.quarantined]
    paired = pair(export, {trace_id: row["timestamp"] for trace_id, row in rows.items()})
    assert sorted(map(turn_key, paired.values())) == sorted(map(turn_key, export.turns))
    conversations = [row["conversation_id"] for row in rows.values()]
    wrong = {
        "/".join(map(str, turn_key(turn))): problems
        for trace_id, turn in paired.items()
        if (
            problems := mismatches(
                export,
                turn,
                read_turn(rows[trace_id]),
                own_conversation=conversations.count(rows[trace_id]["conversation_id"]) == 1,
            )
        )
    }
    assert not wrong, json.dumps(wrong, ensure_ascii=False, indent=1)


def test_a_reranked_retrieval_gives_the_reranker_documents_on_every_query() -> None:
    """The shape of Phoenix's LlamaIndex RAG example: a retriever's top 5, a reranker keeping 2, a compact-and-refine
    synthesizer, over documents that share short code fragments ("import os", "pip install kestrel-sdk", a client
    line). Every query's contexts are the 2 documents the reranker kept, whether the rerank is a RERANKER span
    (StructuredLLMRerank) or not logged as one (LLMRerank's model call beside the synthesizer)."""
    export = EXPORTS["llamaindex-openinference"]
    queries = [t for t in export.turns if t["app"] == "query_engine"]
    assert len(queries) >= 19
    fragments = json.loads((CORPUS / "llamaindex" / "documents.json").read_text(encoding="utf-8"))
    assert sum("import os" in text for text in fragments.values()) >= 3  # the shared fragments are there
    _, rows = _stage(export)
    paired = pair(export, {trace_id: row["timestamp"] for trace_id, row in rows.items()})
    kept = {
        turn_key(turn): sorted(c["id"] for c in rows[trace_id]["contexts"])
        for trace_id, turn in paired.items()
        if turn["app"] == "query_engine"
    }
    assert kept == {
        turn_key(t): sorted(next(s for s in t["steps"] if s["kind"] == "reranker")["document_ids"]) for t in queries
    }
    five = [turn_key(t) for t in queries if len(t["steps"][0]["document_ids"]) == 5]
    assert len(five) >= 14 and all(len(kept[key]) == 2 for key in five)  # 5 retrieved, 2 received


def _stage(export: Export) -> Staged:
    import tempfile

    from tests.tasks.ingest.adapters.conftest import stage

    with tempfile.TemporaryDirectory() as tmp:
        return stage(export.path, export.trace_format, Path(tmp), day=export.day)


PHOENIX_EXAMPLE = Path(__file__).resolve().parents[5] / "shared" / "datasets" / "phoenix" / "llama_index_rag_v8.jsonl"
"""Phoenix's own LlamaIndex RAG example export (``px.load_example_traces("llama_index_rag")``: a retriever's 5
documents, a reranker keeping 2, compact-and-refine), published on Arize's asset bucket, which this machine cannot
reach: the test reads it where ``shared/`` holds it and says so when it does not."""


@pytest.mark.skipif(not PHOENIX_EXAMPLE.is_file(), reason=f"Phoenix's example export is not at {PHOENIX_EXAMPLE}")
def test_phoenix_llama_index_example_gives_the_reranker_documents(tmp_path: Path) -> None:
    from tests.tasks.ingest.adapters.conftest import stage

    day = tmp_path / "source" / "dt=2024-01-01"
    day.mkdir(parents=True)
    (day / PHOENIX_EXAMPLE.name).write_bytes(PHOENIX_EXAMPLE.read_bytes())
    _, rows = stage(tmp_path / "source", "openinference", tmp_path, day=dt.date(2024, 1, 1))
    reranked = [row for row in rows.values() if any(s["kind"] == "reranker" for s in row["steps"] or [])]
    assert len(reranked) >= 58
    for row in reranked:
        kept = [c["id"] for c in next(s for s in row["steps"] if s["kind"] == "reranker")["contexts"]]
        assert [c["id"] for c in row["contexts"]] == kept, row["trace_id"]
