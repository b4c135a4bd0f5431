"""Threshold rules as settings (text, TOML tables, environment, checked before any work) and as ``drift`` rows per
segment, segments in Japanese and Chinese included."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from ragpulse.tasks.config import load_config
from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.monitoring.comparison import SCORE_COLUMNS
from ragpulse.tasks.monitoring.config import DriftConfig, ThresholdRule
from ragpulse.tasks.monitoring.threshold_rules import rule_segment_keys, threshold_rows
from ragpulse.tasks.warehouse import DRIFT_SCHEMA, SCORES_SCHEMA

DAY = dt.date(2026, 5, 4)


def test_text_form_with_every_part() -> None:
    rule = ThresholdRule.parse("faithfulness mean below 0.8/0.6 per language min 50")
    assert rule == ThresholdRule(
        metric="faithfulness", statistic="mean", direction="below", warning=0.8, critical=0.6, segment="language",
        min_samples=50,
    )  # fmt: skip
    assert ThresholdRule.parse(str(rule)) == rule


def test_defaults_and_directions_from_the_metric() -> None:
    rules = DriftConfig(
        threshold_rules="answer_f1 0.5; latency_ms p95 -/5000; hit_rate@5 failure_rate 0.05; recall@5 coverage 0.9"
    ).threshold_rules
    assert [str(rule) for rule in rules] == [
        "answer_f1 mean below 0.5/- per all min 30",  # higher is better
        "latency_ms p95 above -/5000 per all min 30",  # lower is better
        "hit_rate@5 failure_rate above 0.05/- per all min 30",
        "recall@5 coverage below 0.9/- per all min 30",
    ]
    custom = DriftConfig(threshold_rules="llm_judge:toxicity 0.2", lower_is_better="llm_judge:toxicity")
    assert custom.threshold_rules[0].direction == "above"


def test_toml_tables_and_texts_and_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "ragpulse.toml"
    file.write_text(
        '[ragpulse]\nsource = "x"\n\n[ragpulse.drift]\nthreshold_rules = [\n'
        '  "faithfulness mean below 0.8/0.6",\n'
        '  { metric = "latency_ms", statistic = "p95", critical = 5000.0, segment = "metadata.app=サポート" },\n]\n'
    )
    rules = load_config(file).drift.threshold_rules
    assert [str(rule) for rule in rules] == [
        "faithfulness mean below 0.8/0.6 per all min 30",
        "latency_ms p95 above -/5000 per metadata.app=サポート min 30",
    ]
    monkeypatch.setenv("RAGPULSE_THRESHOLD_RULES", "answer_f1 mean 0.5/0.3 per language; error mean 0.01")
    from_env = load_config(file).drift.threshold_rules
    assert [rule.metric for rule in from_env] == ["answer_f1", "error"]


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ("faithfulnes 0.5", "threshold_rules: Value error, threshold rule on 'faithfulnes': unknown metric"),
        ("latency_ms p95 above 5000/2000", "the critical level must lie above the warning level"),
        ("answer_f1 mean below 0.5/0.7", "the critical level must lie below the warning level"),
        ("answer_f1 p100 0.5", "statistic 'p100' is not mean, failure_rate, coverage or a percentile"),
        ("answer_f1 mean", "sets no level"),
        ("answer_f1 mean -/-", "sets neither a warning nor a critical level"),
        ("answer_f1 0.5 per", "unexpected 'per'"),
        ("answer_f1 0.5 min many", "min_samples: Input should be a valid integer"),
        ("answer_f1 zero", "level 'zero' is not a number"),
    ],
)
def test_a_bad_rule_stops_the_command_in_one_line_naming_the_setting(rules: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(source="x", threshold_rules=rules)
    text = str(raised.value)
    assert "\n" not in text and text.startswith("invalid ragpulse settings: threshold_rules") and message in text


def _scores(rows: list[tuple[str, str, float | None, str]]) -> pa.Table:
    """Score rows of DAY: (trace_id, metric, value, status)."""
    return pa.Table.from_pylist(
        [
            {
                "partition_date": DAY,
                "trace_id": trace,
                "metric": metric,
                "value": value,
                "status": status,
                "metric_version": "1.0.0",
                "judge_model": None,
                "prompt_version": None,
            }
            for trace, metric, value, status in rows
        ],
        schema=pa.schema([SCORES_SCHEMA.field(name) for name in SCORE_COLUMNS]),
    )


def _segments(of: dict[str, str | None]) -> pa.Table:
    return pa.table(
        {
            "partition_date": pa.array([DAY] * len(of), pa.date32()),
            "trace_id": list(of),
            "segment": pa.array(list(of.values()), pa.string()),
        }
    )


def test_rows_per_segment_with_japanese_and_chinese_segments() -> None:
    # 40 Japanese traces hit 25 % of the time, 40 Chinese 75 %, 10 English; one Japanese trace failed to score.
    languages = {f"ja-{i}": "ja" for i in range(40)} | {f"zh-{i}": "zh" for i in range(40)}
    languages |= {f"en-{i}": "en" for i in range(10)}
    rows = []
    for trace, language in languages.items():
        i = int(trace.split("-")[1])
        hit = (i % 4 == 0) if language == "ja" else (i % 4 != 0)
        rows.append((trace, "hit_rate@5", float(hit), "ok"))
    rows[1] = ("ja-1", "hit_rate@5", None, "failed")
    rules = DriftConfig(
        threshold_rules="hit_rate@5 mean 0.6/0.4 per language; hit_rate@5 failure_rate 0.01/0.05 per language=ja; "
        "hit_rate@5 mean 0.5 min 20"
    ).threshold_rules
    assert rule_segment_keys(rules) == ["language"]
    table = threshold_rows(_scores(rows), {"language": _segments(languages)}, DAY, rules, "run-1", max_segments=20)
    assert table.schema == DRIFT_SCHEMA
    found = {(r["rule"].split()[1], r["segment"]): r for r in table.to_pylist()}
    ja, zh, en = (found["mean", f"language={code}"] for code in ("ja", "zh", "en"))
    # ja: hits at i = 0, 4, ..., 36 (10 of 40); i = 1 failed, not a hit: 10 of 39 ok scores
    assert ja["verdict"] == "critical" and ja["observed"] == pytest.approx(10 / 39) and ja["current_n"] == 39
    assert zh["verdict"] == "within" and zh["observed"] == pytest.approx(0.75)
    # en: hits but at i = 0, 4, 8: 7 of 10, too few ok scores for the rule's 30
    assert en["verdict"] == "insufficient_data" and en["observed"] == pytest.approx(0.7)
    failure = found["failure_rate", "language=ja"]
    assert failure["verdict"] == "warning" and failure["observed"] == pytest.approx(1 / 40)
    whole = found["mean", "all"]
    assert whole["verdict"] == "within" and whole["observed"] == pytest.approx((10 + 30 + 7) / 89)
    assert whole["warning_level"] == 0.5 and whole["critical_level"] is None
    assert {r["baseline_n"] for r in table.to_pylist()} == {0}
    assert ja["rule"] == "hit_rate@5 mean below 0.6/0.4 per language min 30"


def test_a_rule_whose_metric_or_segment_has_no_score_says_so() -> None:
    rules = DriftConfig(
        threshold_rules="answer_f1 0.5; hit_rate@5 0.5 per metadata.app; hit_rate@5 0.5 per language=ko"
    ).threshold_rules
    scores = _scores([(f"t{i}", "hit_rate@5", 1.0, "ok") for i in range(40)])
    segments = {
        "metadata.app": _segments(dict.fromkeys((f"t{i}" for i in range(40)), None)),
        "language": _segments({f"t{i}": "en" for i in range(40)}),
    }
    table = threshold_rows(scores, segments, DAY, rules, "run-1", max_segments=20)
    rows = {r["segment"]: r for r in table.to_pylist()}
    assert (
        rows["all"]["verdict"] == "insufficient_data" and "no answer_f1 score on dt=2026-05-04" in rows["all"]["detail"]
    )
    assert rows["metadata.app=*"]["verdict"] == "insufficient_data"
    assert rows["language=ko"]["verdict"] == "insufficient_data" and rows["language=ko"]["current_n"] == 0
