"""Every setting reaches the work of every command: evaluate, monitor, backfill and serve, as the Prefect server
records their flow runs and deployment, and (for the input-suite limits that once reached evaluate only) in the
rows a real monitor and backfill publish.

``REACH`` holds a non-default value for every setting; a setting added to RunConfig without one fails the test.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.tasks.config import GROUPS, SETTINGS, RunConfig, load_config

DAY = dt.date(2026, 11, 28)
runner = CliRunner()


def reach_values(tmp_path: Path) -> dict[str, Any]:
    """A valid, non-default value for every setting, with the files they name really there."""
    suites = Path(__file__).resolve().parents[2] / "tasks" / "quality" / "suites"
    (tmp_path / "judge.toml").write_text("[aspects]\n")
    (tmp_path / "traces").mkdir(exist_ok=True)
    (tmp_path / "labels.jsonl").write_text('{"trace_id": "t1", "metric": "document_mrr", "value": 1}\n')
    return {
        "source": str(tmp_path / "traces"),
        "storage_options": {"auto_mkdir": True},
        "trace_format": "openinference",
        "format_options": {"retriever_names": ["retrieve"]},
        "partitioning": "event-time",
        "late_arrival_hours": 12.0,
        "language": "ja",
        "slice_mb": 3.5,
        "metrics": ["document_mrr", "precision@3"],
        "batch_size": 77,
        "sample_rate": 0.5,
        "sample_half_width": 0.04,
        "sample_detect_drop": 0.1,
        "sample_power": 0.9,
        "sample_min_per_segment": 12,
        "rescore": "all",
        "step_against": ["question", "step_query"],
        "judge_model": "reach-judge",
        "judge_base_url": "http://127.0.0.1:9/v1",
        "judge_config": str(tmp_path / "judge.toml"),
        "judge_api_key_block": "reach-judge-key",
        "judge_timeout_seconds": 7.5,
        "judge_max_retries": 2,
        "judge_backoff_base_seconds": 0.25,
        "judge_backoff_max_seconds": 9.0,
        "judge_max_retry_after_seconds": 20.0,
        "judge_max_concurrency": 3,
        "judge_requests_per_minute": 120.0,
        "judge_tokens_per_minute": 50000.0,
        "judge_completion_token_budget": 256,
        "judge_seed": 11,
        "judge_temperature": 0.1,
        "judge_sample_temperature": 0.6,
        "judge_response_format": "json_object",
        "judge_supports_n": False,
        "judge_prices": {"reach-judge": {"prompt_per_million": 1.5, "completion_per_million": 6.0}},
        "judge_run_budget_usd": 40.0,
        "judge_day_budget_usd": 90.0,
        "judge_run_budget_tokens": 9_000_000,
        "judge_day_budget_tokens": 30_000_000,
        "judge_cache_url": str(tmp_path / "judge-cache"),
        "judge_cache_storage_options": {"auto_mkdir": True},
        "judge_rate_limit_name": "reach-rpm",
        "judge_token_rate_limit_name": "reach-ktpm",
        "max_failure_rate": 0.2,
        "input_suite": str(suites / "traces_in.json"),
        "output_suite": str(suites / "scores_out.json"),
        "max_question_chars": 123,
        "max_answer_chars": 456,
        "max_contexts": 7,
        "max_context_chars": 890,
        "warehouse": f"duckdb:///{tmp_path / 'reach.duckdb'}",
        "work_dir": str(tmp_path / "work"),
        "republish": True,
        "task_runner": "dask",
        "max_workers": 1,
        # Nothing listens there: the scoring flow fails fast on connecting, after its parameters are recorded.
        "dask_address": "tcp://127.0.0.1:9",
        "baseline_partitions": 5,
        "min_baseline_partitions": 2,
        "drift_min_samples": 10,
        "min_delta": 0.1,
        "drift_confidence": 0.9,
        "max_failure_rate_increase": 0.1,
        "max_coverage_drop": 0.2,
        "segment_key": "metadata.app",
        "max_segments": 5,
        "lower_is_better": ["document_mrr"],
        "threshold_rules": ["document_mrr mean below 0.8/0.6 per metadata.app min 10"],
        "drift_estimator": "ppi",
        "labels": str(tmp_path / "labels.jsonl"),
        "labels_from": "feedback:relevance=context_relevance",
        "feedback_labels": {"great": 1.0, "meh": 0.5},
        "refusal_phrases": ["Sorry, I can only help with billing.", "恐れ入りますが、その件にはお答えできません。"],
        "feedback_scales": {"rating": [1.0, 10.0]},
        "prices": {"reach-model": {"input_per_million": 0.6, "output_per_million": 0.8}},
        "embedding_sample": "50",
        "question_drift": False,
        "question_sample": 100,
        "question_permutations": 200,
        "question_min_mmd": 0.01,
        "label_window_days": 3,
        "calibration_confidence": 0.9,
        "calibration_min_labels": 5,
        "alert_webhook_block": "reach-webhook",
        "alert_webhook_format": "json",
        "alert_emit_events": False,
        "alert_max_attempts": 2,
        "alert_timeout_seconds": 3.0,
        "alert_backoff_seconds": 0.5,
        "alert_report_url": "https://example.invalid/report",
        "alert_reminder_days": 3,
        "topics_enabled": False,
        "refit_topics": True,
        "topics_refit_after_days": 7,
        "topics_baseline_partitions": 3,
        "topics_min_topics": 3,
        "topics_max_topics": 8,
        "topics_min_topic_size": 5,
        "topics_min_fit_questions": 20,
        "topics_max_fit_questions": 500,
        "topics_max_day_questions": 5000,
        "topics_distance_quantile": 0.9,
        "topics_min_share_delta": 0.05,
        "topics_embedding_model": "all-MiniLM-L6-v2",
        "topics_seed": 7,
    }


def toml_file(values: dict[str, Any], path: Path) -> Path:
    lines = ["[ragpulse]"] + [f"{key} = {json.dumps(value)}" for key, value in values.items() if value is not None]
    path.write_text("\n".join(lines).replace('": ', '" = ') + "\n")
    return path


@pytest.fixture
def reach(tmp_path: Path) -> tuple[dict[str, Any], Path, RunConfig]:
    from prefect.blocks.system import Secret

    values = reach_values(tmp_path)
    # Commands check the Secret blocks a run will read before they start it.
    Secret(value="http://127.0.0.1:9/reach-hook").save(values["alert_webhook_block"], overwrite=True)
    Secret(value="sk-reach-0000").save(values["judge_api_key_block"], overwrite=True)
    config_file = toml_file(values, tmp_path / "ragpulse.toml")
    return values, config_file, load_config(config_file)


def test_every_setting_has_a_non_default_value_and_loads_from_toml(
    reach: tuple[dict[str, Any], Path, RunConfig],
) -> None:
    values, _, config = reach
    assert set(values) == set(SETTINGS), "give every setting a reach value"
    for flat, setting in SETTINGS.items():
        field = setting.info
        loaded = getattr(getattr(config, setting.group), setting.field)
        if isinstance(loaded, dict):  # prices hold models: compare them as the JSON they were given as
            loaded = json.loads(json.dumps(loaded, default=lambda model: model.model_dump()))
        if flat == "threshold_rules":  # rules as the text they were given as
            loaded = tuple(str(rule) for rule in loaded)
        expected = tuple(values[flat]) if isinstance(values[flat], list) else values[flat]
        assert loaded == expected, flat
        if not field.is_required():
            assert loaded != field.get_default(call_default_factory=True), f"{flat}: reach value is the default"


def _runs(flow_name: str, url: str) -> list[Any]:
    """This test's flow runs of ``flow_name`` (found by the unique source URL in their parameters)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])), limit=200)
    # score-partition takes the whole RunConfig as one parameter; the other flows take the groups.
    groups_of = (lambda p: p.get("config", {})) if flow_name == "score-partition" else (lambda p: p)
    return [run for run in runs if groups_of(run.parameters).get("source", {}).get("url") == url]


def _groups_of(parameters: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in parameters.items() if name in GROUPS}


def _assert_reached(parameters: dict[str, Any], config: RunConfig, where: str) -> None:
    """The groups a flow run received rebuild exactly the loaded configuration, group by group."""
    received = _groups_of(parameters)
    assert received, f"{where}: no configuration groups in {sorted(parameters)}"
    for name, value in received.items():
        assert GROUPS[name].model_validate(value) == getattr(config, name), f"{where}: group {name} differs"


@pytest.fixture
def fast_failing_dask() -> Any:
    import dask
    import distributed  # noqa: F401 - loads its config defaults first; set() would otherwise drop them on exit

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        yield


@pytest.mark.slow
def test_settings_reach_evaluate_monitor_and_backfill(
    reach: tuple[dict[str, Any], Path, RunConfig], fast_failing_dask: None
) -> None:
    values, config_file, config = reach
    url = values["source"]
    evaluate = runner.invoke(app, ["evaluate", "--date", str(DAY), "--config", str(config_file)])
    monitor = runner.invoke(app, ["monitor", "--date", str(DAY), "--config", str(config_file)])
    backfill = runner.invoke(app, ["backfill", "--start", str(DAY), "--end", str(DAY), "--config", str(config_file)])
    # The source holds no traces: each command says "nothing to do" once its pipeline looks for the day
    # (event-time partitioning makes the backfill try every day of its range, and count it as missing).
    assert (evaluate.exit_code, monitor.exit_code, backfill.exit_code) == (3, 3, 3), backfill.output[-800:]

    (monitor_run,) = _runs("monitor", url)
    _assert_reached(monitor_run.parameters, config, "monitor")
    assert set(_groups_of(monitor_run.parameters)) == set(GROUPS)
    (backfill_run,) = _runs("backfill", url)
    _assert_reached(backfill_run.parameters, config, "backfill")
    assert set(_groups_of(backfill_run.parameters)) == set(GROUPS)
    # evaluate's own run and those monitor and backfill started; each handed its groups to the scoring pipeline.
    partition_runs = _runs("evaluate-partition", url)
    assert len(partition_runs) == 3
    for run in partition_runs:
        _assert_reached(run.parameters, config, "evaluate-partition")
    pipelines = _runs("score-partition", url)
    assert len(pipelines) == 3
    for run in pipelines:
        received = RunConfig.model_validate(run.parameters["config"])
        for name in ("source", "scoring", "judge", "quality", "output", "runner"):
            assert getattr(received, name) == getattr(config, name), f"score-partition: group {name} differs"


@pytest.mark.slow
def test_settings_reach_the_served_deployment(prefect_api: str, reach: tuple[dict[str, Any], Path, RunConfig]) -> None:
    from prefect.client.orchestration import get_client

    _, config_file, config = reach
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "PREFECT_LOGGING_LEVEL": "WARNING"}
    name = "reach-every-setting"
    command = [sys.executable, "-m", "ragpulse.cli", "serve", "--config", str(config_file), "--name", name]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        with get_client(sync_client=True) as client:
            while True:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "serve registered no deployment in 90 s"
                try:
                    deployment = client.read_deployment_by_name(f"monitor/{name}")
                    break
                except Exception:  # not registered yet
                    time.sleep(1)
        assert set(_groups_of(deployment.parameters)) == set(GROUPS)
        _assert_reached(deployment.parameters, config, "served deployment")
    finally:
        process.terminate()
        process.wait(timeout=60)


def _write_day(root: Path, day: dt.date, n: int = 6) -> None:
    """Canonical traces; every odd one has three contexts, the rest one."""
    folder = root / f"dt={day}"
    folder.mkdir(parents=True)
    lines = []
    for i in range(n):
        contexts = [{"id": f"d{i}-{j}", "text": f"passage {j} of {i}", "score": 1.0 - j / 10} for j in range(3)]
        trace = {
            "trace_id": f"t{i}",
            "timestamp": f"{day}T10:00:0{i}Z",
            "question": f"question {i}?",
            "answer": f"answer {i}",
            "contexts": contexts if i % 2 else contexts[:1],
            "relevant_context_ids": {f"d{i}-0": 1},
            "metadata": {"app": "a"},
        }
        lines.append(json.dumps(trace))
    (folder / "part.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["monitor", "backfill"])
def test_trace_limits_reach_monitor_and_backfill_runs(tmp_path: Path, command: str) -> None:
    """``max_contexts`` from ragpulse.toml once reached evaluate only: here it quarantines the same traces in
    monitor and backfill runs, as read back from the published quarantine and score tables."""
    _write_day(tmp_path / "traces", DAY)
    warehouse = tmp_path / "w.duckdb"
    config_file = tmp_path / "ragpulse.toml"
    config_file.write_text(
        f'source = "{tmp_path / "traces"}"\nwarehouse = "duckdb:///{warehouse}"\nwork_dir = "{tmp_path / "work"}"\n'
        'metrics = ["document_mrr"]\n\n[quality]\nmax_contexts = 2\n'
    )
    days = ["--date", str(DAY)] if command == "monitor" else ["--start", str(DAY), "--end", str(DAY)]
    result = runner.invoke(app, [command, *days, "--config", str(config_file)])
    assert result.exit_code == 0, result.output
    with duckdb.connect(str(warehouse), read_only=True) as con:
        quarantined = con.sql("SELECT trace_id, field FROM quarantine ORDER BY trace_id").fetchall()
        scored = con.sql("SELECT trace_id FROM scores WHERE metric = 'document_mrr' ORDER BY trace_id").fetchall()
    assert [trace for trace, _ in quarantined] == ["t1", "t3", "t5"]
    assert {field for _, field in quarantined} == {"n_contexts"}
    assert [trace for (trace,) in scored] == ["t0", "t2", "t4"]
