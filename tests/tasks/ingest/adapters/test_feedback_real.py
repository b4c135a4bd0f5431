"""Feedback, annotations and evaluations written by each tool's SDK (tests/fixtures/feedback) read with the agent
turns they are about (tests/fixtures/agents): each turn's canonical ``feedback``, the source mapping of
docs/traces.md, and the orphan record (a turn no export holds) quarantined, never attached or dropped."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ragpulse.metrics.errors import InvalidRecordError
from ragpulse.tasks.ingest.adapters import AdapterOptions
from ragpulse.tasks.ingest.adapters.openinference import spans
from tests.tasks.ingest.adapters.conftest import copy_with_mtime, quarantined, stage

FIXTURES = Path(__file__).parents[3] / "fixtures"
AGENTS, FEEDBACK = FIXTURES / "agents", FIXTURES / "feedback"
DAY = dt.date(2026, 11, 20)
WINDOW = dt.datetime(2026, 11, 20, 9, 30, tzinfo=dt.UTC).timestamp()
_spec = importlib.util.spec_from_file_location("feedback_plan", FEEDBACK / "generate.py")
assert _spec and _spec.loader
plan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plan)
TURNS = {t["question"]: (t["scenario"], t["turn"]) for t in json.loads((AGENTS / "expected.json").read_text())}

# Who said it (generate.py's writers) -> the canonical source, per tool (docs/traces.md, "Feedback").
SOURCES = {
    "langfuse": {"app": "api", "reviewer": "annotation", "judge": "evaluation", "code": "evaluation"},
    "langsmith": {"app": "api", "reviewer": "api", "judge": "evaluation", "code": "evaluation"},
    "openinference": {"app": "annotation", "reviewer": "annotation", "judge": "evaluation", "code": "evaluation"},
    "otel-genai": {"app": "annotation", "reviewer": "annotation", "judge": "evaluation", "code": "evaluation"},
}


def _partition(trace_format: str, tmp_path: Path) -> tuple[Path, str]:
    """The agent export with the tool's feedback beside it, laid out as the tool exports it."""
    if trace_format == "langfuse":
        project = AGENTS / "langfuse/bucket/langfuse-exports" / plan.LANGFUSE_PROJECT
        root = copy_with_mtime(project, tmp_path / "bucket" / plan.LANGFUSE_PROJECT, WINDOW)
        (scores,) = (root / "scores").glob("*.jsonl")  # the run's scores file, which the manifest lists
        shutil.copyfile(FEEDBACK / "langfuse/scores.jsonl", scores)
        return root, "event-time"
    day = tmp_path / "traces" / "dt=2026-11-20"
    day.mkdir(parents=True)
    source, feedback = {
        "langsmith": ("langsmith/dt=2026-11-20/agent-runs.jsonl", "langsmith/feedback.jsonl"),
        "openinference": ("openinference/dt=2026-11-20/agents.jsonl", "phoenix/span_annotations.jsonl"),
        "otel-genai": ("otel-genai/dt=2026-11-20/agents-otlp.jsonl", "otel-genai/evaluations-otlp.jsonl"),
    }[trace_format]
    shutil.copyfile(AGENTS / source, day / Path(source).name)
    shutil.copyfile(FEEDBACK / feedback, day / Path(feedback).name)
    return day.parent, "dt"


def _expected(trace_format: str) -> dict[tuple[str, int], list[dict[str, Any]]]:
    expected: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for scenario, turn, name, kind, value, who, comment in plan.PLAN:
        if (scenario, turn) == plan.ORPHAN:
            continue
        label = value if kind == "category" else None
        number = None if kind == "category" else float(value)
        if trace_format == "openinference" and kind == "thumbs":
            label = "thumbs_up" if value == 1 else "thumbs_down"
        source = SOURCES[trace_format][who]
        entry = {"name": name, "value": number, "label": label, "source": source, "comment": comment}
        expected.setdefault((scenario, turn), []).append(entry)
    return expected


@pytest.mark.parametrize("trace_format", list(SOURCES))
def test_each_turn_carries_what_was_said_about_it(trace_format: str, tmp_path: Path) -> None:
    source, partitioning = _partition(trace_format, tmp_path)
    staged, rows = stage(source, trace_format, tmp_path, day=DAY, partitioning=partitioning)
    assert len(rows) == 12
    said = {TURNS[row["question"]]: row["feedback"] for row in rows.values() if row["feedback"]}
    expected = _expected(trace_format)
    key = lambda entry: (entry["name"], entry["source"])  # noqa: E731
    assert {turn: sorted(entries, key=key) for turn, entries in said.items()} == {
        turn: sorted(entries, key=key) for turn, entries in expected.items()
    }
    # Japanese and Chinese comments arrive as written.
    assert {"分かりやすい回答でした。", "答案没有提到成立年份。", "与知识库一致。"} <= {
        entry["comment"] for entries in said.values() for entry in entries
    }
    # The orphan: one record on a turn the export does not hold, quarantined with the reason.
    orphans = [q for q in staged.quarantined if q.field in ("feedback", "span_id")]
    assert len(orphans) == 1 and "not in the partition" in orphans[0].reason
    assert quarantined(staged) == {(orphans[0].trace_id, orphans[0].field)}


def test_evaluations_are_never_a_persons(tmp_path: Path) -> None:
    """A tool's own evaluator (Langfuse EVAL, LangSmith model, Phoenix LLM/CODE, OTel without a human mark)."""
    for trace_format in SOURCES:
        source, partitioning = _partition(trace_format, tmp_path / trace_format)
        _, rows = stage(source, trace_format, tmp_path / trace_format, day=DAY, partitioning=partitioning)
        by_name = {(e["name"], e["source"]) for row in rows.values() for e in row["feedback"] or ()}
        assert ("helpfulness", "evaluation") in by_name and ("format_check", "evaluation") in by_name
        assert not {name for name, source in by_name if source != "evaluation"} & {"helpfulness", "format_check"}


def test_a_document_annotation_is_not_taken_for_the_turns_feedback() -> None:
    record = {"span_id": "2cbe73f7f9a95760", "name": "relevance", "annotator_kind": "LLM", "document_position": 0,
              "result": {"label": "relevant", "score": 1.0}}  # fmt: skip
    with pytest.raises(InvalidRecordError, match="document annotation"):
        list(spans(record, AdapterOptions()))
