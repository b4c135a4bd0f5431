"""The Arrow schemas of the fourteen published tables: the columns a ``Publication`` carries and ``Warehouse.read``
returns, whichever backend stores them. How they are stored (keys, constraints, migrations) is ``_schema``'s."""

from __future__ import annotations

import pyarrow as pa

from ragpulse.tasks.core.types import TRACE_ROWS_SCHEMA

__all__ = [
    "ALERTS_SCHEMA",
    "CALIBRATIONS_SCHEMA",
    "CONVERSATION_SCORES_SCHEMA",
    "DRIFT_SCHEMA",
    "ESTIMATES_SCHEMA",
    "QUARANTINE_SCHEMA",
    "RUNS_SCHEMA",
    "SCORES_SCHEMA",
    "STEPS_SCHEMA",
    "STEP_SCORES_SCHEMA",
    "THRESHOLD_COLUMNS",
    "TOPICS_SCHEMA",
    "TRACES_SCHEMA",
    "TRACE_TOPICS_SCHEMA",
    "VALIDATIONS_SCHEMA",
]

SCORES_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("trace_id", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("metric_version", pa.string()),
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
        ("judge_model", pa.string()),
        ("prompt_version", pa.string()),
    ]
)

QUARANTINE_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("run_id", pa.string()),
        ("source_file", pa.string()),
        ("line", pa.int64()),
        ("trace_id", pa.string()),
        ("field", pa.string()),
        ("reason", pa.string()),
        ("raw", pa.string()),
        ("quarantined_at", pa.timestamp("us", tz="UTC")),
    ]
)

RUNS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("partition_date", pa.date32()),
        ("source", pa.string()),
        ("config_hash", pa.string()),
        ("config", pa.string()),
        ("metrics", pa.string()),
        ("n_files", pa.int64()),
        ("n_records", pa.int64()),
        ("n_traces", pa.int64()),
        ("n_quarantined", pa.int64()),
        ("n_batches", pa.int64()),
        ("n_batches_cached", pa.int64()),
        ("n_scores", pa.int64()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("finished_at", pa.timestamp("us", tz="UTC")),
        ("judge_model", pa.string()),
        ("judge_usage", pa.string()),
        ("estimated_cost_usd", pa.float64()),
        # v6: where the records went (tasks.core.types.StagingCounts); n_records is the lines and rows read.
        ("n_records_quarantined", pa.int64()),
        ("n_traces_read", pa.int64()),
        ("n_traces_quarantined", pa.int64()),
        ("n_staged", pa.int64()),
        ("n_other_days", pa.int64()),
        ("n_spans_quarantined", pa.int64()),
        ("n_duplicate_spans", pa.int64()),
        # v7: a digest of everything the run published but its own identity (tasks.warehouse.publication), so that
        # a re-run of an unchanged day can see that its rows stand and publish nothing.
        ("content_key", pa.string()),
    ]
)

VALIDATIONS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("partition_date", pa.date32()),
        ("suite", pa.string()),
        ("expectation", pa.string()),
        ("column_name", pa.string()),
        ("success", pa.bool_()),
        ("element_count", pa.int64()),
        ("unexpected_count", pa.int64()),
        ("details", pa.string()),
        ("validated_at", pa.timestamp("us", tz="UTC")),
    ]
)

# One row per published trace, cut to excerpts (the full trace stays at source_file:source_line): for drill-down
# from a score to its trace, and for segmenting scores by metadata. The run's trace rows (TRACE_ROWS_SCHEMA) with
# their partition date and run id.
TRACES_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        TRACE_ROWS_SCHEMA.field("trace_id"),
        ("run_id", pa.string()),
        *TRACE_ROWS_SCHEMA.remove(TRACE_ROWS_SCHEMA.get_field_index("trace_id")),
    ]
)

# One row per retrieval step of a published trace (docs/traces.md, "Retrieval steps, turns and conversations"), cut
# to excerpts as traces are: step_index is the step's position in the trace's steps, parent_index the step whose
# documents it reorders (a reranker's retrieval), contexts the step's own ranked documents as JSON text.
STEPS_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("trace_id", pa.string()),
        ("step_index", pa.int64()),
        ("step_id", pa.string()),
        ("parent_index", pa.int64()),
        ("name", pa.string()),
        ("kind", pa.string()),
        ("query", pa.string()),
        ("contexts", pa.string()),  # JSON list of {"id", "text", "score"}, as traces.contexts
        ("n_contexts", pa.int64()),
        ("error", pa.string()),
        ("run_id", pa.string()),
    ]
)

# One row per (retrieval step, metric, against): a step-level metric on one step, scored against the step's own
# query (against = step_query) or its turn's question (against = question).
STEP_SCORES_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("trace_id", pa.string()),
        ("step_index", pa.int64()),
        ("step_id", pa.string()),
        ("metric", pa.string()),
        ("against", pa.string()),
        ("value", pa.float64()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("metric_version", pa.string()),
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
        ("judge_model", pa.string()),
        ("prompt_version", pa.string()),
    ]
)

# One row per (conversation of the partition, metric): a conversation-level metric over the day's turns of one
# conversation id, with how many turns it saw and the first and last of them.
CONVERSATION_SCORES_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("conversation_id", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("n_turns", pa.int64()),
        ("first_trace_id", pa.string()),
        ("last_trace_id", pa.string()),
        ("metric_version", pa.string()),
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
        ("judge_model", pa.string()),
        ("prompt_version", pa.string()),
    ]
)

# One row per (partition, metric, segment): the partition's scores against a baseline window of earlier ones.
DRIFT_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("metric", pa.string()),
        ("segment", pa.string()),  # "all" or "<key>=<value>", e.g. "metadata.app=support-bot"
        ("judge_model", pa.string()),
        ("prompt_version", pa.string()),
        ("baseline_start", pa.date32()),
        ("baseline_end", pa.date32()),
        ("baseline_partitions", pa.int64()),
        ("baseline_n", pa.int64()),
        ("current_n", pa.int64()),
        ("baseline_mean", pa.float64()),
        ("current_mean", pa.float64()),
        ("delta", pa.float64()),
        ("ci_low", pa.float64()),
        ("ci_high", pa.float64()),
        ("p_value", pa.float64()),
        ("baseline_failure_rate", pa.float64()),
        ("current_failure_rate", pa.float64()),
        ("baseline_coverage", pa.float64()),
        ("current_coverage", pa.float64()),
        ("verdict", pa.string()),
        ("detail", pa.string()),
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
        # A threshold rule's row (metrics.thresholds): the rule as written, the statistic it observed, its levels.
        # NULL in a comparison with the baseline.
        ("rule", pa.string()),
        ("observed", pa.float64()),
        ("warning_level", pa.float64()),
        ("critical_level", pa.float64()),
    ]
)
THRESHOLD_COLUMNS = ("rule", "observed", "warning_level", "critical_level")

# Append-only ledger, one row per delivery outcome: what was alerted where, so an alert is not sent twice.
ALERTS_SCHEMA = pa.schema(
    [
        ("alert_key", pa.string()),
        ("partition_date", pa.date32()),
        ("metric", pa.string()),
        ("segment", pa.string()),
        ("verdict", pa.string()),
        ("channel", pa.string()),
        ("status", pa.string()),
        ("attempts", pa.int64()),
        ("error", pa.string()),
        ("sent_at", pa.timestamp("us", tz="UTC")),
        ("run_id", pa.string()),
        ("rule", pa.string()),  # the threshold rule of a threshold alert; NULL for a drift alert
        # What the notice said of the alert (docs/monitoring.md, "Alert lifecycle"): opened, reminder or resolved;
        # NULL in rows written before schema v12, all of them openings.
        ("state", pa.string()),
    ]
)


# One row per (partition, metric, judge model, prompt version): how the judge agreed with the human labels that
# the partition's estimates use (docs/calibration.md). Fields that do not apply to the labels' kind are NULL.
CALIBRATIONS_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("metric", pa.string()),
        ("judge_model", pa.string()),
        ("prompt_version", pa.string()),
        ("labels_key", pa.string()),  # a digest of the labels used: a change of labels is a new calibration
        ("labels_start", pa.date32()),
        ("labels_end", pa.date32()),
        ("n_labels", pa.int64()),
        ("kind", pa.string()),  # binary or graded
        ("accuracy", pa.float64()),
        ("cohen_kappa", pa.float64()),
        ("mae", pa.float64()),
        ("spearman", pa.float64()),
        ("mean_bias", pa.float64()),
        ("confusion", pa.string()),  # JSON: {"levels": [...], "counts": [[...], ...]}, rows human, columns judge
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
    ]
)

# One row per (partition, metric, judge model, prompt version): the judge's raw mean beside the prediction-powered
# estimate of the mean human score, with its interval; NULL estimate and a reason where it could not be made.
ESTIMATES_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("metric", pa.string()),
        ("judge_model", pa.string()),
        ("prompt_version", pa.string()),
        ("n_judged", pa.int64()),
        ("n_labels", pa.int64()),
        ("raw_mean", pa.float64()),
        ("raw_ci_low", pa.float64()),
        ("raw_ci_high", pa.float64()),
        ("ppi_mean", pa.float64()),
        ("ppi_ci_low", pa.float64()),
        ("ppi_ci_high", pa.float64()),
        ("std_error", pa.float64()),
        ("effective_n", pa.float64()),
        ("tuning", pa.float64()),
        ("confidence", pa.float64()),
        ("labels_key", pa.string()),
        ("reason", pa.string()),
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
    ]
)

# One row per topic of a fit of the topic model (docs/topics.md): partition_date is the day the fit was made for,
# and the model of a day is the newest fit made on or before it. terms is a JSON list of the characteristic terms
# (the name is the first three), centroid a JSON list of floats (a unit vector of the embedding model), threshold
# the cosine distance beyond which a question is not the topic's, size its members at fit, created_date the
# partition of the fit that first found it (ids are kept across refits); language_means (JSON, the same in every row
# of a fit) the baseline's mean embedding per language that questions are centred by before assignment.
TOPICS_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("topic_id", pa.int64()),
        ("name", pa.string()),
        ("terms", pa.string()),
        ("size", pa.int64()),
        ("threshold", pa.float64()),
        ("centroid", pa.string()),
        ("created_date", pa.date32()),
        ("baseline_start", pa.date32()),
        ("baseline_end", pa.date32()),
        ("model_version", pa.string()),
        ("embedding_model", pa.string()),
        ("language_means", pa.string()),
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
    ]
)

# One row per published trace of a partition with a question: its topic (NULL when it is farther than every
# topic's threshold), the cosine distance to the nearest topic, and for an unassigned question its cluster among
# the day's unassigned ones (a new-topic candidate), with the fit date of the model it was assigned by.
TRACE_TOPICS_SCHEMA = pa.schema(
    [
        ("partition_date", pa.date32()),
        ("trace_id", pa.string()),
        ("topic_id", pa.int64()),
        ("distance", pa.float64()),
        ("candidate", pa.int64()),
        ("model_date", pa.date32()),
        ("run_id", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
    ]
)
