"""The run summary: quarantine reasons grouped by kind (the record's own details cut, commas kept), and the run's
outcome, which tells a day that scored nothing from one that scored, naming why."""

from __future__ import annotations

import dataclasses
import datetime as dt
import pickle

import numpy as np
import pyarrow as pa
import pytest

from ragpulse.metrics import REGISTRY, Status
from ragpulse.metrics.errors import RagpulseError
from ragpulse.tasks.core.types import PartitionScores, RunInfo
from ragpulse.tasks.reporting.run_summary import NothingScoredError, _reason_kind, summarize
from ragpulse.tasks.reporting.staged_facts import StagedFacts, facts_of

LOOKED_IN = "no question in the langsmith trace (looked in the root run's inputs, or a retriever run's inputs)"


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("expected a non-empty string, got NoneType None", "expected a non-empty string"),
        ("invalid JSON: Expecting value at column 1", "invalid JSON"),
        (
            "duplicate trace_id within the partition, first seen at s3://b/a.jsonl:3",
            "duplicate trace_id within the partition",
        ),
        ("line is not UTF-8: invalid start byte at byte 4", "line is not UTF-8"),
        ("file is corrupt after line 41: EOFError: Compressed file ended", "file is corrupt"),
        # Commas that belong to the reason stay: the old summary cut these at the first comma.
        ("a document needs an id or a text, it has neither", "a document needs an id or a text, it has neither"),
        (LOOKED_IN, LOOKED_IN),
    ],
)
def test_reasons_are_grouped_by_kind(reason: str, kind: str) -> None:
    assert _reason_kind(reason) == kind


# The run's outcome: a day whose traces gave no ok score is ``nothing_scored``, with why and what would apply.

DAY = dt.date(2026, 3, 2)
RANKING, ANSWERS = "document_mrr", "answer_f1"


def _scores(per_metric: dict[str, list[str | None]]) -> PartitionScores:
    """Scores of a day whose traces got, per metric, ``None`` (ok, value 0.5) or a not-ok reason."""
    n = len(next(iter(per_metric.values())))
    values, status, reasons = {}, {}, {}
    for metric, given in per_metric.items():
        ok = np.array([r is None for r in given])
        values[metric] = np.where(ok, 0.5, np.nan)
        status[metric] = np.where(ok, Status.OK, Status.NOT_APPLICABLE).astype(np.int8)
        reasons[metric] = np.array(given, dtype=object)
    return PartitionScores(
        date=DAY, trace_ids=np.array([f"t{i}" for i in range(n)], dtype=object), values=values, status=status,
        reasons=reasons, versions=dict.fromkeys(per_metric, "1.0.0"), quarantined=[], n_records=n, n_files=1,
        n_batches=1,
    )  # fmt: skip


def _run(judge_model: str | None = None, skipped: list[str] | None = None) -> RunInfo:
    judge = {"model": judge_model, "judge_model": judge_model, "skipped": skipped or []}
    return RunInfo("run-1", "file:///t", "h", {"judge": judge}, dt.datetime(2026, 3, 3, tzinfo=dt.UTC))


UNLABELLED = {RANKING: ["no_relevance_labels"] * 3, ANSWERS: ["no_reference"] * 3}
NO_DATA = StagedFacts(n_traces=3, with_contexts=3, with_answers=3, with_labels=0, with_references=0)


def test_no_ok_score_is_nothing_scored_with_why_and_what_would_apply() -> None:
    summary = summarize(_scores(UNLABELLED), _run(skipped=["faithfulness"]), "duckdb:///w.duckdb", 0, staged=NO_DATA)
    assert summary.outcome == "nothing_scored"
    assert summary.gaps == ["no_labels", "no_references", "no_judge"]
    assert summary.would_apply == ["context_relevance", "faithfulness", "answer_relevancy"]
    assert [(m.metric, m.coverage) for m in summary.metrics] == [(RANKING, 0.0), (ANSWERS, 0.0)]
    assert summary.warning == (
        "dt=2026-03-02: nothing scored: 0 ok scores of 6 (2 metric(s) x 3 trace(s)); not ok: "
        "no_relevance_labels (3), no_reference (3); skipped: faithfulness; why: no relevance labels, no reference "
        "answers, no judge configured; would apply: context_relevance, faithfulness, answer_relevancy with a judge "
        "configured (RAGPULSE_JUDGE_MODEL)."
    )
    data = summary.to_dict()
    assert (data["outcome"], data["warning"], data["gaps"]) == ("nothing_scored", summary.warning, summary.gaps)
    assert [m["coverage"] for m in data["metrics"]] == [0.0, 0.0]  # type: ignore[index]
    # Published before with the same content: still a day that scored nothing, not a quiet "unchanged".
    again = summarize(_scores(UNLABELLED), _run(), "duckdb:///w.duckdb", 1, unchanged_since="run-0", staged=NO_DATA)
    assert again.outcome == "nothing_scored"


def test_one_ok_score_is_scored_and_failed_scores_score_nothing() -> None:
    partly = {RANKING: ["no_relevance_labels"] * 3, ANSWERS: ["no_reference", None, "no_reference"]}
    summary = summarize(_scores(partly), _run("m"), "duckdb:///w.duckdb", 0, staged=NO_DATA)
    assert (summary.outcome, summary.warning) == ("scored", None)
    assert summary.metrics[1].coverage == pytest.approx(1 / 3)
    # Judge calls that all failed: nothing scored, and the warning gives the reasons though no data is missing.
    failed = summarize(_scores({"faithfulness": ["rate_limited_after_6_retries"] * 2}), _run("m"), "duckdb:///w", 0)
    assert failed.outcome == "nothing_scored" and failed.gaps == []
    assert failed.warning is not None and "not ok: rate_limited_after_6_retries (2)" in failed.warning
    # Every metric requested was skipped (no judge): nothing was computed, so nothing scored.
    none = dataclasses.replace(_scores(UNLABELLED), values={}, status={}, reasons={}, versions={})
    skipped = summarize(none, _run(skipped=["faithfulness"]), "duckdb:///w.duckdb", 0, staged=NO_DATA)
    assert skipped.outcome == "nothing_scored"
    assert (
        skipped.warning is not None and "0 ok scores of 0 (0 metric(s) x 3 trace(s)); skipped: faith" in skipped.warning
    )


def test_traces_without_contexts_are_no_success_though_answers_scored() -> None:
    """A RAG day without a single retrieved context was read wrong (issue 31: no retrieval spans recognised)."""
    answers_only = {RANKING: ["no_relevance_labels"] * 2, ANSWERS: [None, None]}
    facts = StagedFacts(n_traces=2, with_contexts=0, with_answers=2, with_labels=0, with_references=2)
    summary = summarize(_scores(answers_only), _run("m"), "duckdb:///w.duckdb", 0, staged=facts)
    assert (summary.outcome, summary.scored_nothing_usable) == ("no_contexts", True)
    one_with_contexts = StagedFacts(n_traces=2, with_contexts=1, with_answers=2, with_labels=0, with_references=2)
    scored = summarize(_scores(answers_only), _run("m"), "duckdb:///w.duckdb", 0, staged=one_with_contexts)
    assert (scored.outcome, scored.scored_nothing_usable, scored.warning) == ("scored", False, None)
    assert summary.gaps == ["no_labels", "no_contexts"]
    assert summary.would_apply == ["answer_relevancy"]
    assert summary.warning == (
        "dt=2026-03-02: no trace of 2 has contexts: ranking and context metrics cannot score; why: no relevance "
        "labels, no contexts (no retrieval spans recognised); would apply: answer_relevancy if asked for (--metrics)."
    )


def test_without_staged_counts_the_gaps_come_from_reasons_every_score_gives() -> None:
    given = {RANKING: ["no_relevance_labels"] * 2, "faithfulness": ["no_contexts", "no_answer"]}
    summary = summarize(_scores(given), _run("m"), "duckdb:///w.duckdb", 0)
    assert summary.gaps == ["no_labels"]  # one trace lacks an answer: not every trace lacks contexts
    assert summary.would_apply == []


def test_agent_metrics_apply_to_traces_with_steps_once_registered() -> None:
    facts = StagedFacts(3, 0, 3, 0, 0, with_steps=3, with_tool_calls=1)
    summary = summarize(_scores(UNLABELLED), _run(), "duckdb:///w.duckdb", 0, staged=facts)
    registered = [name for name in ("retrieval_steps", "repeated_queries", "tool_errors") if name in REGISTRY]
    assert summary.would_apply == ["answer_relevancy", *registered]
    none = summarize(_scores(UNLABELLED), _run(), "duckdb:///w", 0, staged=StagedFacts(3, 0, 3, 0, 0, 0, None))
    assert none.would_apply == ["answer_relevancy"]


def test_nothing_scored_error_carries_the_summary_through_pickling() -> None:
    summary = summarize(_scores(UNLABELLED), _run(), "duckdb:///w.duckdb", 0, staged=NO_DATA)
    error = pickle.loads(pickle.dumps(NothingScoredError(summary)))
    assert isinstance(error, RagpulseError) and repr(error.summary) == repr(summary)  # NaN means: no ==
    assert str(error) == summary.warning


def test_staged_facts_count_each_scored_trace_once() -> None:
    rows = [
        {"trace_id": "a", "contexts": [{"id": "d1"}], "answer": "東京です。", "reference": None,
         "reference_answers": None, "relevant_context_ids": None, "relevant_contexts": None, "steps": [],
         "tool_calls": None},
        # A repeated id: its first row is the one counted.
        {"trace_id": "a", "contexts": [], "answer": None, "reference": "x", "reference_answers": None,
         "relevant_context_ids": [], "relevant_contexts": None, "steps": None, "tool_calls": []},
        {"trace_id": "b", "contexts": [], "answer": "", "reference": None, "reference_answers": ["北京"],
         "relevant_context_ids": None, "relevant_contexts": [], "steps": None, "tool_calls": [{"name": "search"}]},
        # Not scored (excluded by the input suite): not counted.
        {"trace_id": "c", "contexts": [{"id": "d2"}], "answer": "a", "reference": "r", "reference_answers": None,
         "relevant_context_ids": [{"key": "d2", "gain": 1.0}], "relevant_contexts": None, "steps": None,
         "tool_calls": None},
    ]  # fmt: skip
    facts = facts_of(pa.Table.from_pylist(rows), ["a", "b"], ["steps", "tool_calls"])
    assert facts == StagedFacts(
        n_traces=2, with_contexts=1, with_answers=1, with_labels=1, with_references=1, with_steps=1, with_tool_calls=1
    )
    assert facts_of(pa.Table.from_pylist(rows), ["a"]).with_steps is None


def test_step_and_conversation_metrics_are_summarised_per_unit_beside_the_turn_metrics() -> None:
    """Issue 31: a step metric is summarised over steps per ``against``, a conversation metric over conversations;
    the run overview gives each unit its table, and a day without them shows the turn table only, as before."""
    from ragpulse.metrics import MetricResult
    from ragpulse.tasks.core.types import ConversationScores, StepScores
    from ragpulse.tasks.reporting.tasks import run_markdown

    def result(values: list[float | None]) -> MetricResult:
        ok = np.array([v is not None for v in values])
        return MetricResult(
            np.array([np.nan if v is None else v for v in values]),
            np.where(ok, Status.OK, Status.FAILED).astype(np.int8),
            np.array([None if v is not None else "judge_gave_up" for v in values], dtype=object),
        )

    steps = tuple(
        StepScores(
            trace_ids=np.array(["t0", "t0", "t1"], dtype=object),
            step_index=np.array([0, 1, 0]),
            step_ids=np.array(["s0", "s1", "s2"], dtype=object),
            against=against,
            results={"context_relevance": result(values)},
            versions={"context_relevance": "2"},
        )
        for against, values in (("step_query", [0.2, 0.8, None]), ("question", [1.0, 0.0, 1.0]))
    )
    conversations = ConversationScores(
        conversation_ids=np.array(["会話-1", "对话-2"], dtype=object),
        n_turns=np.array([2, 1]),
        first_trace_ids=np.array(["t0", "t1"], dtype=object),
        last_trace_ids=np.array(["t1", "t1"], dtype=object),
        results={"agent_goal_accuracy": result([0.0, 1.0])},
        versions={"agent_goal_accuracy": "1"},
    )
    plain = _scores({ANSWERS: [None, None]})
    agent = dataclasses.replace(plain, steps=steps, conversations=conversations)
    summary = summarize(agent, _run("m"), "duckdb:///w.duckdb", 0)
    assert [(m.metric, m.against, m.n, m.n_ok, m.mean) for m in summary.step_metrics] == [
        ("context_relevance", "step_query", 3, 2, pytest.approx(0.5)),
        ("context_relevance", "question", 3, 3, pytest.approx(2 / 3)),
    ]
    assert summary.step_metrics[0].not_ok_reasons == {"judge_gave_up": 1}
    (goal,) = summary.conversation_metrics
    assert (goal.metric, goal.against, goal.n, goal.n_ok, goal.mean) == ("agent_goal_accuracy", None, 2, 2, 0.5)
    assert [m.metric for m in summary.metrics] == [ANSWERS] and summary.outcome == "scored"

    markdown = run_markdown(summary, pa.table({"suite": pa.array([], pa.string())}))
    assert "| context\\_relevance | step\\_query | 2 / 3 | 67% | 0.500 | judge\\_gave\\_up (1) |" in markdown
    assert "| context\\_relevance | question | 3 / 3 | 100% | 0.667 |  |" in markdown
    assert (
        "## Conversation metrics (per conversation)" in markdown and "| agent\\_goal\\_accuracy | 2 / 2 |" in markdown
    )
    alone = run_markdown(
        summarize(plain, _run("m"), "duckdb:///w.duckdb", 0), pa.table({"suite": pa.array([], pa.string())})
    )
    assert (
        "## Metrics\n\n| metric | ok | coverage | mean | not ok |\n|---|---|---|---|---|\n| answer\\_f1 | 2 / 2 |"
        in alone
    )
    assert "Retrieval step" not in alone and "Conversation metrics" not in alone
