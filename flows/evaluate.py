"""Score one date partition of RAG traces, gate it with data-quality suites and publish the score tables.

No ``from __future__ import annotations`` in flow modules: Prefect builds a flow's parameter model from its
annotations in a fresh process, where postponed names may not resolve.
"""

import datetime as dt
from dataclasses import replace
from typing import cast

from prefect import flow, get_run_logger, unmapped

from ragpulse.flows.runners import build_task_runner
from ragpulse.tasks.config import (
    JudgeConfig,
    OutputConfig,
    QualityConfig,
    RunConfig,
    RunnerConfig,
    ScoringConfig,
    SourceConfig,
)
from ragpulse.tasks.core.types import BatchRef, ConversationScores, ScoredBatch
from ragpulse.tasks.core.workdir import local_docs_dir, lock_directory, result_storage, run_dir, staged_dir
from ragpulse.tasks.ingest.tasks import list_partition, stage_day
from ragpulse.tasks.judge.budget import Allowance, Reservation, current_budget
from ragpulse.tasks.judge.tasks import judge_conversations, judge_score_batch, plan_judge_sample
from ragpulse.tasks.judge.usage import fresh_usage, usage_spend
from ragpulse.tasks.planning.run import check_config, checked_run, describe_run
from ragpulse.tasks.quality.tasks import (
    for_run,
    profile_batch,
    standing_publication,
    validate_scores,
    validate_traces,
)
from ragpulse.tasks.reporting.progress import BatchProgress, notify, notify_published, slice_progress
from ragpulse.tasks.reporting.run_summary import NothingScoredError, RunSummary
from ragpulse.tasks.reporting.tasks import summarize_run
from ragpulse.tasks.scoring.feedback_names import asks_every_name, expand_feedback_metrics, feedback_names
from ragpulse.tasks.scoring.tasks import assemble_scores, count_cached, score_batch, score_cache_policy
from ragpulse.tasks.warehouse.tasks import publish_partition

__all__ = ["evaluate_partition", "score_partition"]


@flow(name="evaluate-partition", flow_run_name="evaluate-partition dt={date}", log_prints=False)
def evaluate_partition(
    date: dt.date,
    source: SourceConfig,
    scoring: ScoringConfig = ScoringConfig(),
    judge: JudgeConfig = JudgeConfig(),
    quality: QualityConfig = QualityConfig(),
    output: OutputConfig = OutputConfig(),
    runner: RunnerConfig = RunnerConfig(),
) -> RunSummary:
    """Read one day of ``source``, score it in cached parallel batches, validate, publish to ``output.warehouse``.

    The day is ``<source.url>/dt=<date>/``, or with ``source.partitioning="event-time"`` the traces whose event
    time falls on ``date`` (UTC) among files modified up to ``source.late_arrival_hours`` around it. Judge metrics
    need ``judge.model`` (or RAGPULSE_JUDGE_MODEL where the run executes); without one they are skipped and the
    run says so. The scoring tasks run on ``runner`` (a thread pool, or Dask). A day whose traces gave no ``ok``
    score of any metric is published, then the run fails with ``NothingScoredError`` (outcome ``nothing_scored``),
    which carries the summary and says why.
    """
    config = RunConfig(source=source, scoring=scoring, judge=judge, quality=quality, output=output, runner=runner)
    with checked_run(config):  # before any task: a deployment run's parameters come from the API
        return score_partition.with_options(task_runner=build_task_runner(runner))(date, config)


@flow(name="score-partition", flow_run_name="score-partition dt={date}", log_prints=False)
def score_partition(date: dt.date, config: RunConfig) -> RunSummary:
    """The pipeline of ``evaluate_partition`` on whatever task runner the caller gave it with ``with_options``."""
    source, scoring, output, quality = config.source, config.scoring, config.output, config.quality
    planned = check_config(config)  # the caller's plan: checked once per run
    plan, run = planned.judging, describe_run(config, planned)
    work_options = source.storage_options  # the work dir is reached with the source's options
    storage = result_storage(output.work_dir, work_options)
    outputs = run_dir(output.work_dir, date, run.run_id)
    docs = local_docs_dir(output.work_dir, date, run.run_id)

    files = list_partition(source, date)
    staged = stage_day(
        date, files, source, staged_url=staged_dir(output.work_dir, work_options), batch_size=scoring.batch_size,
        result_storage=storage, on_slice=slice_progress(date),
    )  # fmt: skip
    if asks_every_name(plan.plain):  # user_feedback:*, tool_evaluation:* (the defaults): the day's feedback names
        plan = replace(plan, plain=expand_feedback_metrics(plan.plain, feedback_names(staged.batches, work_options)))
    profiles = profile_batch.with_options(result_storage=storage).map(
        staged.batches, storage_options=unmapped(work_options)
    )
    traces_checked = validate_traces.with_options(result_storage=storage).submit(
        staged, run, quality, docs, work_options, profiles
    )
    scored = score_batch.with_options(
        cache_policy=score_cache_policy(lock_directory(output.work_dir)), result_storage=storage
    ).map(
        staged.batches, metric_names=unmapped(plan.plain), work_storage_options=unmapped(work_options),
        step_against=unmapped(list(scoring.step_against)), prices=unmapped(scoring.prices),
        feedback_reading=unmapped({"labels": scoring.feedback_labels, "scales": scoring.feedback_scales}),
        refusal_phrases=unmapped(list(scoring.refusal_phrases)),
    )  # fmt: skip
    # sample_rate = auto: how many of each language's traces the judge scores, from the baseline's spread.
    auto = scoring.auto_sample and plan.judged
    sample = plan_judge_sample(staged, scoring, plan.judged, output.warehouse, work_options) if auto else None
    to_judge = plan.batches(staged)
    allotted = _allot_budget(to_judge, bool(plan.conversations), staged.n_valid, config.runner)
    judging = judge_score_batch.with_options(result_storage=storage)
    if scoring.rescore == "all":  # skip the batch cache here and the call cache in the task
        judging = judging.with_options(refresh_cache=True)
    judged = judging.map(
        to_judge, metric_names=unmapped(plan.judged), judge=unmapped(planned.judge),
        options=unmapped(planned.options), scoring=unmapped(scoring), work_storage_options=unmapped(work_options),
        day_traces=unmapped(staged.n_valid), sample=unmapped(sample),
        allowance=allotted[1][: len(to_judge)] if allotted else unmapped(None),
    )  # fmt: skip
    batches = BatchProgress(date, scored, judged, also=traces_checked)
    batches.until(traces_checked)  # the traces' suite: the conversations' judge waits for what it excludes
    excluded = traces_checked.result().excluded
    # Once per day, beside the batches: a conversation's turns may lie in several of them.
    conversations = (
        judge_conversations.submit(
            staged,
            plan.conversations,
            planned.judge,
            planned.options,
            scoring,
            excluded,
            work_options,
            sample,
            allotted[1][-1] if allotted else None,
        )
        if plan.conversations
        else None
    )
    batches.finish()
    n_cached = count_cached(scored, judged)
    notify("publishing", date)
    # Prefect hands the task the futures' results; passing the futures keeps the upstream edges in the run's graph.
    scored_batches, judged_batches = cast(list[ScoredBatch], scored), cast(list[ScoredBatch], judged)
    scores = assemble_scores(
        staged, scored_batches, judged_batches, excluded, f"{outputs}/quarantine.jsonl", work_options,
        cast(ConversationScores | None, conversations),
    )  # fmt: skip
    usage = fresh_usage([*judged, *([conversations] if conversations is not None else [])])
    if allotted and (budget := current_budget()) is not None:
        budget.charge(allotted[0], usage_spend(usage))
    key, standing = standing_publication(output.warehouse, scores, run, plan.names, quality)
    if standing is not None and not output.republish:
        get_run_logger().info("dt=%s is unchanged since run %s published it: nothing to publish", date, standing)
        notify("published", date, {})
        checked = for_run(traces_checked.result(), run).results
        summary = summarize_run(
            scores, run, output.warehouse, n_cached, checked, docs, usage, unchanged_since=standing,
            storage_options=work_options,
        )  # fmt: skip
        return _verdict(summary)
    publication = validate_scores(
        output.warehouse, scores, run, plan.names, n_cached, traces_checked.result(), quality, docs, usage,
        work_options, key,
    )  # fmt: skip
    publish_partition(output.warehouse, publication)
    notify_published(date, publication)
    summary = summarize_run(
        scores, run, output.warehouse, n_cached, publication.validations, docs, usage, storage_options=work_options
    )
    return _verdict(summary)


def _allot_budget(
    batches: list[BatchRef], conversations: bool, n_traces: int, runner: RunnerConfig
) -> tuple[Reservation, list[Allowance]] | None:
    """On a Dask runner, whose judge tasks cannot reach the run's budget, the allowance of each judge batch and of the
    conversations' task (last), in proportion to their traces; None on threads, where they share the budget."""
    budget = current_budget()
    if budget is None or runner.kind != "dask" or not (batches or conversations):
        return None
    weights = [float(b.n_rows) for b in batches] + ([float(n_traces)] if conversations else [])
    return budget.allot(weights, share=1 / budget.partitions_at_once)


def _verdict(summary: RunSummary) -> RunSummary:
    """The summary of a day that scored something; a day that scored nothing fails the flow run, after its rows
    were published (they stay: the day's not-applicable scores and runs row are the record of why)."""
    if summary.scored_nothing_usable:
        raise NothingScoredError(summary)
    return summary


if __name__ == "__main__":
    import sys

    print(evaluate_partition(date=dt.date.fromisoformat(sys.argv[2]), source=SourceConfig(url=sys.argv[1])).to_dict())
