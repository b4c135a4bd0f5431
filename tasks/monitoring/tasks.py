"""The monitoring tasks: drift, threshold rules and alerts.

Drift: after a partition is published, compare it with its baseline and check it against the threshold rules, and
replace its ``drift`` rows (a re-run never duplicates them); the comparisons are in ``comparison.py``, the rules'
rows in ``threshold_rules.py``.

Alerts: notices on a webhook and as Prefect events, grouped into incidents (``incidents.py``), and a markdown
artifact. An alert is notified when it opens, reminded, and resolved (``lifecycle.py``), each notice once per
(partition, alert) and channel: the ``alerts`` table is the ledger, read before sending and appended after, so
re-running a partition sends nothing already sent, and a delivery that failed is tried again by the next run. A
webhook that keeps failing is reported (ledger row, warning, artifact) and never fails the flow: the scores are
already published by then. Events go only to a Prefect server that outlives the command (``PREFECT_API_URL``): in
ephemeral mode they are reported as not emitted and left out of the ledger, so a later run against a server emits
them. Delivery itself is in ``tasks/monitoring/delivery.py``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from ragpulse.metrics.drift import Verdict
from ragpulse.tasks.core.artifacts import artifact_key
from ragpulse.tasks.core.types import DriftReport
from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL, embedding_identity, process_embedder
from ragpulse.tasks.monitoring.budget_alerts import budget_rows, run_had_budget
from ragpulse.tasks.monitoring.comparison import (
    SCORE_COLUMNS,
    STEP_METRIC_PREFIX,
    alerts_of,
    drift_rows,
    metadata_keys,
    segment_values,
)
from ragpulse.tasks.monitoring.config import AlertConfig, DriftConfig
from ragpulse.tasks.monitoring.delivery import (
    EVENTS_NOT_EMITTED,
    WEBHOOK_URL_ENV,
    AlertOutcome,
    drift_markdown,
    emit,
    events_receivable,
    ledger_rows,
    post,
    webhook_payload,
    webhook_url,
)
from ragpulse.tasks.monitoring.incidents import incidents_of
from ragpulse.tasks.monitoring.lifecycle import REMINDER, RESOLVED, channel_notices, last_notices
from ragpulse.tasks.monitoring.questions import question_drift_rows
from ragpulse.tasks.monitoring.threshold_rules import rule_segment_keys, threshold_rows
from ragpulse.tasks.topics.config import TopicsConfig
from ragpulse.tasks.topics.share import TOPIC_SEGMENT, share_rows, topic_segments
from ragpulse.tasks.warehouse import ALERTS_SCHEMA, DRIFT_SCHEMA, SCORES_SCHEMA, Warehouse, open_warehouse

__all__ = ["LANGUAGE_SEGMENT", "detect_drift", "send_alerts"]

_BUDGET_COLUMNS = ["metric", "reason", "judge_model", "prompt_version"]

LANGUAGE_SEGMENT = "language"
"""The ``segment_key`` that segments by the traces' language column rather than by a metadata key."""


@task(name="detect-drift", cache_policy=NO_CACHE, persist_result=False)
def detect_drift(
    warehouse_url: str,
    day: dt.date,
    settings: DriftConfig | None = None,
    run_id: str = "",
    topics: TopicsConfig | None = None,
) -> DriftReport:
    """Compare ``day``'s published scores with the previous partitions and replace its rows in ``drift``; with
    ``topics`` enabled, the day's topic shares too (``topic.share``, from ``trace_topics``)."""
    settings = settings or DriftConfig()
    logger = get_run_logger()
    warehouse = open_warehouse(warehouse_url)
    published = warehouse.read("runs", end=day, columns=["partition_date"])["partition_date"].to_pylist()
    window = sorted({d for d in published if d < day})[-settings.baseline_partitions :]
    start = window[0] if window else day
    scores = warehouse.read("scores", start=start, end=day, columns=SCORE_COLUMNS)
    scores = pa.concat_tables([scores, _turns_by_their_steps(warehouse.read("step_scores", start=start, end=day))])
    questions = ["question"] if settings.question_drift else []
    segments = None
    if settings.segment_key == TOPIC_SEGMENT:
        scores = scores.join(
            topic_segments(warehouse, start, day), ["partition_date", "trace_id"], join_type="left outer"
        )
    if settings.segment_key not in (None, TOPIC_SEGMENT):
        traces, segments = _trace_segments(warehouse, start, day, settings.segment_key, questions)
        scores = scores.join(segments, ["partition_date", "trace_id"], join_type="left outer")
    elif questions:
        traces = warehouse.read("traces", start=start, end=day, columns=["partition_date", "trace_id", *questions])

    def on_day_of(table: pa.Table) -> pa.ChunkedArray:
        return pc.equal(table["partition_date"], pa.scalar(day, pa.date32()))

    on_day = on_day_of(scores)
    if not pc.any(on_day).as_py():
        logger.warning("dt=%s: no published scores, so no drift to detect", day)
        return DriftReport(day, DRIFT_SCHEMA.empty_table())
    # The calibrated human means of `ragpulse calibrate`, where the settings compare them instead of raw means.
    estimates = warehouse.read("estimates", start=start, end=day) if settings.estimator == "ppi" else None
    rows = drift_rows(scores, day, window, settings, run_id, estimates)
    if settings.threshold_rules:
        # The drift segment key's segments are read already: a rule by the same key reuses them.
        read = {} if segments is None else {settings.segment_key: segments.filter(on_day_of(segments))}
        day_rows = _threshold_rows(warehouse, scores.filter(on_day), day, settings, run_id, read)
        rows = pa.concat_tables([rows, day_rows])
    if run_had_budget(warehouse.read("runs", start=day, end=day, columns=["config"])["config"].to_pylist()):
        day_scores = warehouse.read("scores", start=day, end=day, columns=_BUDGET_COLUMNS)
        rows = pa.concat_tables([rows, budget_rows(day_scores, day, run_id, budgeted=True)])
    if topics is not None and topics.enabled:
        shares = share_rows(
            warehouse, day, window, settings.thresholds(), min_share_delta=topics.min_share_delta, run_id=run_id
        )
        rows = pa.concat_tables([rows, shares])
    if questions:
        if segments is not None:
            traces = traces.append_column("segment", segments["segment"])
        rows = pa.concat_tables([rows, _question_drift(traces, day, window, settings, run_id)])
    warehouse.publish_drift(day, rows)
    report = DriftReport(day, rows, alerts_of(rows))
    logger.info(
        "dt=%s: drift against %d baseline partition(s): %s; %d alert(s)",
        day, len(window), report.verdict_counts(), len(report.alerts),
    )  # fmt: skip
    return report


def _trace_segments(
    warehouse: Warehouse, start: dt.date, end: dt.date, key: str, columns: Sequence[str] = ()
) -> tuple[pa.Table, pa.Table]:
    """The traces of [start, end] (with ``columns``) and their ``partition_date, trace_id, segment`` by ``key``:
    the ``language`` column, or a metadata key's value; warns when no trace of ``end`` has a value for the key."""
    by_language = key == LANGUAGE_SEGMENT
    column = "language" if by_language else "metadata"
    traces = warehouse.read("traces", start=start, end=end, columns=["partition_date", "trace_id", column, *columns])
    segments = pa.table(
        {
            "partition_date": traces["partition_date"],
            "trace_id": traces["trace_id"],
            "segment": traces[column] if by_language else segment_values(traces[column], key),
        }
    )
    _warn_of_an_unmatched_segment_key(traces, segments, end, key, by_language)
    return traces, segments


def _threshold_rows(
    warehouse: Warehouse,
    scores: pa.Table,
    day: dt.date,
    settings: DriftConfig,
    run_id: str,
    read: Mapping[str | None, pa.Table],
) -> pa.Table:
    """The threshold rules' rows of ``day`` (its score rows ``scores``), each segment key they name read once: from
    ``read`` (the day's segments already read, by key), else from the warehouse."""

    def day_segments(key: str) -> pa.Table:
        if key in read:
            return read[key]
        if key == TOPIC_SEGMENT:
            return topic_segments(warehouse, day, day)
        return _trace_segments(warehouse, day, day, key)[1]

    segments = {key: day_segments(key) for key in rule_segment_keys(settings.threshold_rules)}
    rows = threshold_rows(scores, segments, day, settings.threshold_rules, run_id, settings.max_segments)
    breached = [v for v in rows["verdict"].to_pylist() if v in (Verdict.CRITICAL, Verdict.WARNING)]
    get_run_logger().info(
        "dt=%s: %d threshold rule(s) checked in %d segment(s): %d critical, %d warning", day,
        len(settings.threshold_rules), rows.num_rows, breached.count(Verdict.CRITICAL), breached.count(Verdict.WARNING),
    )  # fmt: skip
    return rows


def _question_drift(
    traces: pa.Table, day: dt.date, window: list[dt.date], settings: DriftConfig, run_id: str
) -> pa.Table:
    """Input drift rows (``questions.QUESTION_METRIC``): the day's questions against the window's, embedded by the
    multilingual encoder the semantic metrics use, one OpenMP thread per core."""
    embedder = process_embedder(DEFAULT_EMBEDDING_MODEL)
    rows = question_drift_rows(
        traces, day, window, settings, run_id, embedder.embed, embedding_identity(DEFAULT_EMBEDDING_MODEL)
    )
    tested = [v for v in rows["verdict"].to_pylist() if v in (Verdict.STABLE, Verdict.SHIFTED)]
    get_run_logger().info(
        "dt=%s: input drift of the questions: %d segment(s) tested, %d shifted", day, len(tested),
        tested.count(Verdict.SHIFTED),
    )  # fmt: skip
    return rows


_STEP_KEYS = ["partition_date", "trace_id", "metric", "metric_version", "judge_model", "prompt_version"]


def _turns_by_their_steps(steps: pa.Table) -> pa.Table:
    """Step scores (against the step's own query) as one score row per turn and metric (STEP_METRIC_PREFIX): the mean
    of its ``ok`` steps, ``failed`` when none is ok and one failed, else ``not_applicable``. One row per turn keeps
    drift's samples independent, as its intervals assume; steps of one turn are not."""
    steps = steps.filter(pc.equal(steps["against"], "step_query"))
    ok, failed = pc.equal(steps["status"], "ok"), pc.equal(steps["status"], "failed")
    counted = steps.select(_STEP_KEYS).append_column("ok_value", pc.if_else(ok, steps["value"], None))
    counted = counted.append_column("n_ok", ok.cast(pa.int64())).append_column("n_failed", failed.cast(pa.int64()))
    turns = counted.group_by(_STEP_KEYS, use_threads=False).aggregate(
        [("ok_value", "mean"), ("n_ok", "sum"), ("n_failed", "sum")]
    )
    any_ok, any_failed = pc.greater(turns["n_ok_sum"], 0), pc.greater(turns["n_failed_sum"], 0)
    status = pc.if_else(any_ok, "ok", pc.if_else(any_failed, "failed", "not_applicable"))
    columns = {
        **{name: turns[name] for name in _STEP_KEYS},
        "metric": pc.binary_join_element_wise(STEP_METRIC_PREFIX, turns["metric"], ""),
        "value": turns["ok_value_mean"],
        "status": status,
    }
    return pa.table({name: columns[name] for name in SCORE_COLUMNS}).cast(
        pa.schema([SCORES_SCHEMA.field(name) for name in SCORE_COLUMNS])
    )


def _warn_of_an_unmatched_segment_key(
    traces: pa.Table, segments: pa.Table, day: dt.date, segment_key: str, by_language: bool
) -> None:
    """A segment key that no trace of the day has (a typo such as ``metadata.ap``) leaves drift with only the
    ``all`` segment: say so, naming the metadata keys the day's traces do have."""
    on_day = pc.equal(segments["partition_date"], pa.scalar(day, pa.date32()))
    if not pc.any(on_day).as_py() or pc.any(pc.is_valid(pc.filter(segments["segment"], on_day))).as_py():
        return
    if by_language:
        found = "no trace has a language"
    else:
        keys = metadata_keys(pc.filter(traces["metadata"], on_day))
        found = f"the day's traces have metadata keys: {', '.join(keys) if keys else 'none'}"
    get_run_logger().warning(
        "dt=%s: no trace has a value for segment key %r, so drift compares only the whole day (%s)",
        day, segment_key, found,
    )  # fmt: skip


_LEDGER_COLUMNS = ["alert_key", "partition_date", "metric", "segment", "rule", "channel", "status", "state"]


@task(name="send-alerts", cache_policy=NO_CACHE, persist_result=False)
def send_alerts(
    warehouse_url: str, report: DriftReport, settings: AlertConfig | None = None, run_id: str = ""
) -> AlertOutcome:
    """Send each channel the partition's notices it has not had (``lifecycle``: alerts that open, reminders of those
    still open, alerts that resolve), record every outcome, write the artifact."""
    settings = settings or AlertConfig()
    logger = get_run_logger()
    warehouse = open_warehouse(warehouse_url)
    day = report.partition_date
    ledger = warehouse.read("alerts", end=day, columns=_LEDGER_COLUMNS).to_pylist()
    delivered = {(row["alert_key"], row["channel"]) for row in ledger if row["status"] == "sent"}
    last = last_notices(ledger, before=day)
    url = webhook_url(settings)
    channels = [name for name, on in (("webhook", url is not None), ("event", settings.emit_events)) if on]
    rows = report.rows.to_pylist()
    notices = {c: channel_notices(c, report.alerts, rows, last, settings.reminder_days) for c in channels}
    pending = {c: [a for a in notices[c].pending if (a.key, c) not in delivered] for c in channels}
    told = {a.key: a for c in channels for a in notices[c].pending}
    already = {key for key in told if all((key, c) in delivered for c in channels)}
    still_open = {a.key for c in channels for a in notices[c].still_open} - set(told)
    ledger_rows_out: list[dict[str, Any]] = []
    sent: set[str] = set()
    failed: set[str] = set()
    skipped: set[str] = set()
    delivering = channels
    if "event" in channels and not events_receivable():
        # Neither emitted nor recorded: the ledger then leaves them to the next run that has a server.
        skipped = {a.key for a in pending["event"]}
        delivering = [channel for channel in channels if channel != "event"]
        if skipped:
            logger.warning("dt=%s: %d alert event(s) not emitted: %s", day, len(skipped), EVENTS_NOT_EMITTED)
    for channel in delivering:
        if not pending[channel]:
            continue
        if channel == "webhook":
            assert url is not None
            attempts, error = post(url, webhook_payload(pending[channel], settings), settings)
            if error:
                logger.warning("dt=%s: webhook failed after %d attempt(s): %s", day, attempts, error)
            ledger_rows_out += ledger_rows(pending[channel], channel, attempts, error, run_id)
            (failed if error else sent).update(a.key for a in pending[channel])
        else:  # one event per incident; each of its alerts gets a ledger row
            for incident in incidents_of(pending[channel]):
                ok = emit(incident)
                ledger_rows_out += ledger_rows(
                    incident.alerts, channel, 1, None if ok else "events are not enabled", run_id
                )
                (sent if ok else failed).update(alert.key for alert in incident.alerts)
    if ledger_rows_out:
        warehouse.record_alerts(pa.Table.from_pylist(ledger_rows_out, schema=ALERTS_SCHEMA))
    if not channels and report.alerts:
        logger.warning(
            "dt=%s: %d alert(s) but no channel: set %s or a webhook block, or enable events",
            day, len(report.alerts), WEBHOOK_URL_ENV,
        )  # fmt: skip
    by_state = {state: sorted(k for k in sent - failed if told[k].state == state) for state in (REMINDER, RESOLVED)}
    outcome = AlertOutcome(
        sorted(sent - failed), sorted(already), sorted(failed), sorted(skipped), reminded=by_state[REMINDER],
        resolved=by_state[RESOLVED], still_open=sorted(still_open),
    )  # fmt: skip
    create_markdown_artifact(
        key=artifact_key("drift", day, warehouse_url),
        markdown=drift_markdown(report, outcome, settings.report_url),
        description=f"Drift verdicts and alerts for dt={day}",
    )
    return outcome
