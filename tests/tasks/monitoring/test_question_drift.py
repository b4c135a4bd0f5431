"""Input drift (issue 32, 4a): the day's questions against the baseline's, embedded by the multilingual encoder and
compared by the MMD permutation test, through the real drift task on DuckDB with Japanese and Chinese questions."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from prefect.logging import disable_run_logger
from pydantic import ValidationError

from ragpulse.metrics.drift import ALERTING
from ragpulse.tasks.config import DriftConfig
from ragpulse.tasks.demo.corpora import CMRC2018_PATH, JSQUAD_PATH, load_qa_corpus
from ragpulse.tasks.monitoring.comparison import alerts_of
from ragpulse.tasks.monitoring.questions import QUESTION_EXAMPLE_CHARS, QUESTION_METRIC, _excerpt
from ragpulse.tasks.monitoring.tasks import detect_drift
from ragpulse.tasks.warehouse import TRACES_SCHEMA, open_warehouse
from tests.doubles.publications import scores_publication

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
DAYS = [dt.date(2026, 11, 20) + dt.timedelta(days=i) for i in range(7)]
PER_DAY = 60
METRIC = "answer_length"
RAINY_SEASON = "jsquad-a10336"  # the JSQuAD article about 梅雨 (the rainy season)


def _pools() -> tuple[list[str], list[str], list[str]]:
    """Japanese questions of the other JSQuAD articles, Chinese CMRC 2018 questions, and the 梅雨 article's."""
    japanese = load_qa_corpus(JSQUAD_PATH)
    rainy = sorted({r.question for r in japanese if r.passage_id.startswith(RAINY_SEASON)})
    others = sorted({r.question for r in japanese if not r.passage_id.startswith(RAINY_SEASON)})
    chinese = sorted({r.question for r in load_qa_corpus(CMRC2018_PATH)})
    return others, chinese, rainy


def _traces(day: dt.date, questions: list[tuple[str, str]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "partition_date": day,
                "trace_id": f"t{i}",
                "run_id": f"run-{day}",
                "question": question,
                "metadata": "{}",
                "source_file": f"s3://logs/dt={day}/a.jsonl",
                "source_line": i + 1,
                "language": language,
            }
            for i, (question, language) in enumerate(questions)
        ],
        schema=TRACES_SCHEMA,
    )


def _publish(url: str, day: dt.date, questions: list[tuple[str, str]]) -> None:
    """A day of one ok score per trace (drift needs the day's scores) and its traces with their questions."""
    publication = scores_publication(day, f"run-{day}", len(questions), now=NOW)
    scores = publication.scores.to_table()
    scores = scores.set_column(scores.schema.get_field_index("metric"), "metric", pa.array([METRIC] * len(questions)))
    open_warehouse(url).publish(
        dataclasses.replace(publication, metrics=[METRIC], scores=scores, traces=_traces(day, questions))
    )


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Five baseline days and a sixth of the same mix (half Japanese, half Chinese, disjoint samples), then a seventh
    day whose Japanese half asks about a topic the baseline never saw (the rainy season)."""
    url = f"duckdb:///{tmp_path_factory.mktemp('questions') / 'w.duckdb'}"
    others, chinese, rainy = _pools()
    rng = np.random.default_rng(32)
    japanese_order, chinese_order = rng.permutation(len(others)), rng.permutation(len(chinese))
    half = PER_DAY // 2
    for index, day in enumerate(DAYS):
        taken = slice(index * half, (index + 1) * half)
        ja = [others[i] for i in japanese_order[taken]] if day != DAYS[-1] else rainy[:half]
        zh = [chinese[i] for i in chinese_order[taken]]
        _publish(url, day, [(q, "ja") for q in ja] + [(q, "zh") for q in zh])
    return url


def _question_rows(url: str, day: dt.date, settings: DriftConfig) -> dict[str, dict[str, object]]:
    with disable_run_logger():
        report = detect_drift.fn(url, day, settings, run_id="d")
    return {row["segment"]: row for row in report.rows.to_pylist() if row["metric"] == QUESTION_METRIC}


@pytest.mark.slow
def test_a_new_topic_in_japanese_is_found_and_a_day_of_the_same_mix_is_not(warehouse: str) -> None:
    settings = DriftConfig(segment_key="language")
    same = _question_rows(warehouse, DAYS[-2], settings)
    assert {segment: row["verdict"] for segment, row in same.items()} == {
        "all": "stable",
        "language=ja": "stable",
        "language=zh": "stable",
    }
    assert all(row["p_value"] >= 0.05 for row in same.values())
    assert same["all"]["baseline_n"] == 5 * PER_DAY and same["all"]["current_n"] == PER_DAY
    assert same["all"]["baseline_partitions"] == 5 and same["all"]["baseline_start"] == DAYS[0]
    assert "questions unchanged: MMD^2" in str(same["all"]["detail"])

    shifted = _question_rows(warehouse, DAYS[-1], settings)
    assert {segment: row["verdict"] for segment, row in shifted.items()} == {
        "all": "shifted",
        "language=ja": "shifted",
        "language=zh": "stable",
    }
    japanese = shifted["language=ja"]
    assert japanese["p_value"] < 0.05 and japanese["delta"] > same["language=ja"]["delta"]  # type: ignore[operator]
    assert japanese["current_n"] == PER_DAY // 2 and japanese["baseline_n"] == 6 * PER_DAY // 2
    # The quoted questions are the new topic's (every one of them mentions the rainy season or its fronts).
    detail = str(japanese["detail"])
    quoted = detail.split("most characteristic of the day: ", 1)[1].split('"; "')
    assert len(quoted) == 3
    _, _, rainy = _pools()
    assert all(any(q.strip('"').rstrip("…") in r for r in rainy) for q in quoted)
    alerts = alerts_of(pa.Table.from_pylist(list(shifted.values())))
    assert {(a.metric, a.segment) for a in alerts} == {(QUESTION_METRIC, "all"), (QUESTION_METRIC, "language=ja")}
    assert "shifted" in {v.value for v in ALERTING}

    # Published like score drift rows: replaced, not duplicated, by a second run; read back the same.
    stored = [r for r in open_warehouse(warehouse).read("drift", start=DAYS[-1], end=DAYS[-1]).to_pylist()]
    by_segment = {r["segment"]: r for r in stored if r["metric"] == QUESTION_METRIC}
    assert by_segment.keys() == shifted.keys()
    assert {s: (r["verdict"], r["delta"], r["p_value"]) for s, r in by_segment.items()} == {
        s: (r["verdict"], r["delta"], r["p_value"]) for s, r in shifted.items()
    }


@pytest.mark.slow
def test_too_little_history_or_too_few_questions_is_insufficient_not_stable(warehouse: str) -> None:
    rows = _question_rows(warehouse, DAYS[2], DriftConfig())
    assert rows["all"]["verdict"] == "insufficient_data"
    assert rows["all"]["detail"] == "2 baseline partition(s) with questions, 3 needed"
    assert rows["all"]["p_value"] is None and rows["all"]["delta"] is None

    rows = _question_rows(warehouse, DAYS[-1], DriftConfig(min_samples=PER_DAY + 1))
    assert rows["all"]["verdict"] == "insufficient_data"
    assert "questions not compared" in str(rows["all"]["detail"]) and rows["all"]["p_value"] is None

    first = _question_rows(warehouse, DAYS[0], DriftConfig())
    assert first["all"]["verdict"] == "no_baseline"

    assert _question_rows(warehouse, DAYS[-1], DriftConfig(question_drift=False)) == {}


@pytest.mark.slow
def test_the_sample_is_deterministic_and_capped(warehouse: str) -> None:
    settings = DriftConfig(question_sample=40)
    first, second = (_question_rows(warehouse, DAYS[-1], settings)["all"] for _ in range(2))
    assert (first["baseline_n"], first["current_n"]) == (40, 40)
    assert "40 of 360 baseline and 40 of 60 current questions sampled" in str(first["detail"])
    assert (first["delta"], first["p_value"], first["detail"]) == (second["delta"], second["p_value"], second["detail"])


def test_a_quoted_question_is_one_line_cut_and_masked() -> None:
    question = "接続できません\n postgresql://app:hunter2@db.internal/prod で " + "あ" * 200
    quoted = _excerpt(question)
    assert "hunter2" not in quoted and "***" in quoted and "\n" not in quoted
    assert len(quoted) == QUESTION_EXAMPLE_CHARS and quoted.endswith("…")
    assert _excerpt("梅雨はいつ？") == "梅雨はいつ？"


@pytest.mark.parametrize(
    ("setting", "value"),
    [("question_sample", 5), ("question_sample", 5000), ("question_permutations", 50), ("question_min_mmd", -0.1)],
)
def test_question_settings_out_of_range_are_refused(setting: str, value: float) -> None:
    with pytest.raises(ValidationError, match=setting):
        DriftConfig(**{setting: value})


def test_question_settings_have_flat_names() -> None:
    names = defaultdict(list)
    for field in DriftConfig.model_fields:
        names[DriftConfig.flat_name(field)].append(field)
    assert names["question_sample"] == ["question_sample"]
    assert DriftConfig.env_name("question_drift") == "RAGPULSE_QUESTION_DRIFT"
    assert DriftConfig().question_drift is True
