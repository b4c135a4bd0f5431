"""Every framework of the conformance corpus (tests/conformance.py) through the real CLI into DuckDB, the way a user
runs it: one day holding every framework's export of a format, ``ragpulse evaluate`` in a subprocess against the
session's Prefect server, then each turn checked field by field in SQL against what its application logged: the
question and language and answer (``traces``), every retrieval step's query and ids in rank order (``steps``), the
documents the generator received (``traces.contexts``), the conversation, and the tool calls through the
``tool_errors`` and ``retrieval_steps`` scores. Nothing quarantined, each turn published once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conformance import Export, exports, mismatches, pair, turn_key

pytestmark = pytest.mark.slow

METRICS = ("retrieval_steps", "tool_errors")


@dataclass(frozen=True)
class Published:
    trace_format: str
    exports: dict[str, Export]
    """By the file each export was copied to (``traces.source_file`` names it)."""
    warehouse: Path
    summaries: list[dict[str, Any]]
    """One ``evaluate`` a day: the LangGraph corpus was recorded on 2026-11-20, the others on 2026-11-21."""

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        with duckdb.connect(str(self.warehouse), read_only=True) as con:
            return con.execute(query).fetchall()


@pytest.fixture(scope="module", params=["openinference", "otel-genai"])
def published(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> Published:
    """Every framework's export of one format in its day's folder, each day evaluated by ``ragpulse evaluate``."""
    trace_format: str = request.param
    tmp = tmp_path_factory.mktemp(f"conformance-{trace_format}")
    by_file: dict[str, Export] = {}
    for export in exports():
        if export.trace_format != trace_format:
            continue
        day = tmp / "source" / f"dt={export.day}"
        day.mkdir(parents=True, exist_ok=True)
        for index, path in enumerate(sorted(export.path.rglob("*.jsonl"))):
            target = day / f"{export.framework}-{index}.jsonl"
            shutil.copyfile(path, target)
            by_file[target.name] = export
    warehouse = tmp / "w.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGPULSE_"))}
    env.update(PREFECT_API_URL=prefect_api, PREFECT_SERVER_ANALYTICS_ENABLED="false")
    summaries = []
    for day in sorted({export.day for export in by_file.values()}):
        command = [
            sys.executable, "-m", "ragpulse.cli", "evaluate", "--json", "--date", str(day),
            "--source", str(tmp / "source"), "--format", trace_format, "--warehouse", f"duckdb:///{warehouse}",
            "--work-dir", str(tmp / "work"), "--metrics", ",".join(METRICS),
        ]  # fmt: skip
        done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        summaries.append(json.loads(done.stdout))
    return Published(trace_format, by_file, warehouse, summaries)


def _read(published: Published) -> dict[str, dict[str, dict[str, Any]]]:
    """Each published turn as ``mismatches`` reads it, by export name and trace id, from the tables."""
    steps: dict[str, list[dict[str, Any]]] = {}
    for trace_id, kind, query, contexts in published.sql(
        "SELECT trace_id, kind, query, contexts FROM steps ORDER BY trace_id, step_index"
    ):
        ids = [c["id"] for c in json.loads(contexts)]
        steps.setdefault(trace_id, []).append({"kind": kind, "query": query, "ids": ids})
    errors = dict(published.sql("SELECT trace_id, value FROM scores WHERE metric = 'tool_errors'"))
    read: dict[str, dict[str, dict[str, Any]]] = {}
    for trace_id, source_file, timestamp, question, answer, language, conversation, contexts in published.sql(
        "SELECT trace_id, source_file, timestamp, question, answer, language, conversation_id, contexts FROM traces"
    ):
        export = published.exports[Path(source_file).name]
        read.setdefault(export.name, {})[trace_id] = {
            "timestamp": timestamp,
            "question": question,
            "answer": answer,
            "language": language,
            "conversation_id": conversation,
            "steps": steps.get(trace_id, []),
            "contexts": [{"id": c["id"], "text": c["text"]} for c in json.loads(contexts)],
            "tool_errors": errors.get(trace_id),
        }
    return read


def test_every_turn_of_every_framework_is_right_in_the_warehouse(published: Published) -> None:
    exported = {export.name: export for export in published.exports.values() if not export.unreadable}
    assert len(exported) >= (8 if published.trace_format == "openinference" else 3)
    unreadable = {name for name, export in published.exports.items() if export.unreadable}
    held = published.sql("SELECT source_file, field FROM quarantine")
    assert all(Path(source.split("#")[0]).name in unreadable and field == "question" for source, field in held), held
    expected_turns = sum(len(export.turns) for export in exported.values())
    assert sum(summary["n_traces"] for summary in published.summaries) == expected_turns
    assert published.sql("SELECT count(*), count(DISTINCT trace_id) FROM traces") == [(expected_turns,) * 2]
    read = _read(published)
    wrong: dict[str, list[str]] = {}
    for name, export in exported.items():
        turns = read[name]
        paired = pair(export, {trace_id: turn["timestamp"] for trace_id, turn in turns.items()})
        assert sorted(map(turn_key, paired.values())) == sorted(map(turn_key, export.turns)), name
        conversations = [turn["conversation_id"] for turn in turns.values()]
        for trace_id, truth in paired.items():
            turn = turns[trace_id]
            failed = sum(call["error"] for call in truth["tool_calls"])
            problems = mismatches(
                export,
                truth,
                {**turn, "tool_calls": None},
                own_conversation=conversations.count(turn["conversation_id"]) == 1,
            )
            problems = [p for p in problems if not p.startswith("tool_calls")]  # the tables keep their count
            if turn["tool_errors"] != failed and not (turn["tool_errors"] is None and not truth["tool_calls"]):
                problems.append(f"tool_errors: published {turn['tool_errors']}, expected {failed}")
            if problems:
                wrong[f"{name} {turn_key(truth)}"] = problems
    assert not wrong, json.dumps(wrong, ensure_ascii=False, indent=1)


def test_retrieval_steps_count_each_retrieval_once(published: Published) -> None:
    """A retrieval nested in another (a tool around its retriever, a framework's retriever around its inner one) is
    one step: the published count equals the retrievals and reranks each application ran (but reranks the
    instrumentation logs as no reranker, its losses.json says which)."""
    counted = dict(published.sql("SELECT trace_id, value FROM scores WHERE metric = 'retrieval_steps'"))
    read = _read(published)
    for export in {e.name: e for e in published.exports.values() if not e.unreadable}.values():
        paired = pair(export, {t: turn["timestamp"] for t, turn in read[export.name].items()})
        for trace_id, truth in paired.items():
            unlogged = truth["scenario"] in export.unlogged_rerankers
            ran = [s for s in truth["steps"] if not (unlogged and s["kind"] == "reranker")]
            assert counted.get(trace_id, 0) == len(ran), (export.name, turn_key(truth))
