"""The refusal metric: its precision and recall per language on the committed labelled set (the figures stated in
docs/metrics.md), how it reads partial answers, quotes and languages, and its reasons."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import DEFAULT_METRICS, Status, TraceBatch, compute, parse_metrics
from ragpulse.metrics.refusal import LANGUAGES, NO_ANSWER, SPEC, UNSUPPORTED_LANGUAGE, is_refusal, score

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "refusal"
DEVELOPMENT = ("dev", "test", "blind1", "blind2")
BLIND = "blind3"

# The floors docs/metrics.md states (section `refusal`): on the splits the lexicon was developed on, every answer;
# on blind3, written after the lexicon froze, precision 1 (no false refusal) and these recalls.
DEVELOPMENT_FLOOR = {language: (1.0, 1.0) for language in LANGUAGES}
BLIND_FLOOR = {"de": 0.1, "en": 0.1, "es": 0.2, "fr": 0.1, "ja": 0.0, "ko": 0.3, "zh": 0.3}


def _labelled(language: str) -> list[dict[str, Any]]:
    with (FIXTURES / f"{language}.jsonl").open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _precision_recall(rows: list[dict[str, Any]], language: str) -> tuple[float, float]:
    """Precision is 1.0 when nothing was called a refusal (no false refusal); recall over the labelled refusals."""
    predicted = [is_refusal(row["answer"], language) for row in rows]
    tp = sum(p and row["label"] == 1 for p, row in zip(predicted, rows, strict=True))
    fp = sum(p and row["label"] == 0 for p, row in zip(predicted, rows, strict=True))
    refusals = sum(row["label"] for row in rows)
    return (tp / (tp + fp) if tp + fp else 1.0), tp / refusals


def test_the_set_covers_every_language_with_both_labels_in_every_split() -> None:
    assert set(LANGUAGES) == {path.stem for path in FIXTURES.glob("*.jsonl")}
    assert set(LANGUAGES) == {"en", "ja", "zh", "de", "es", "fr", "ko"}
    for language in LANGUAGES:
        rows = _labelled(language)
        assert len(rows) >= 130, language
        assert len({row["id"] for row in rows}) == len(rows), language
        for split in (*DEVELOPMENT, BLIND):
            assert {row["label"] for row in rows if row["split"] == split} == {0, 1}, (language, split)


@pytest.mark.parametrize("language", LANGUAGES)
def test_precision_and_recall_stay_at_the_stated_floors(language: str) -> None:
    rows = _labelled(language)
    precision, recall = _precision_recall([row for row in rows if row["split"] in DEVELOPMENT], language)
    assert precision >= DEVELOPMENT_FLOOR[language][0] and recall >= DEVELOPMENT_FLOOR[language][1]
    precision, recall = _precision_recall([row for row in rows if row["split"] == BLIND], language)
    assert precision == 1.0, "a false refusal on the blind split"
    assert recall >= BLIND_FLOOR[language]


@pytest.mark.parametrize(
    ("answer", "language", "expected"),
    [
        ("I don't know.", "en", True),
        ("I don't know the exact date, but the office was open by March 2015.", "en", False),
        ("The documents cover 2021 and 2022, but they do not mention 2023, so I can't tell you.", "en", True),
        ("I couldn't find that in the documentation. Please contact support.", "en", True),
        ("Sorry for the confusion earlier. The correct port is 8443.", "en", False),
        ("You cannot delete a project with active deployments.", "en", False),
        ("The contract does not specify a fee, so either party may terminate at no cost.", "en", False),
        ("Unknown.", "en", True),
        ("Unknown Pleasures was released in 1979.", "en", False),
        ("正確な日付は分かりませんが、2015年3月には営業していました。", "ja", False),
        ("この薬は空腹時には服用できません。", "ja", False),
        ("提供された資料には、その記載がありません。", "ja", True),
        ("很抱歉，我没有找到相关信息。", "zh", True),
        ("文中没有给出总费用，不过列出了许可费每年1200美元。", "zh", False),
        ("文件中沒有提到相關資訊。", "zh", True),
        ("Der bereitgestellte Kontext erwähnt nicht, wann das Büro eröffnet wurde.", "de", True),
        ("Der Benutzername lässt sich nicht ändern, der Anzeigename aber jederzeit.", "de", False),
        ("No encontré nada sobre eso en los extractos del manual de RR. HH.", "es", True),
        ("Je ne sais pas.", "fr", True),
        ("죄송하지만 제공된 문서에서 관련 정보를 찾을 수 없었습니다.", "ko", True),
        ("이 약은 공복에 복용할 수 없습니다.", "ko", False),
    ],
)
def test_how_answers_read(answer: str, language: str, expected: bool) -> None:
    assert is_refusal(answer, language) is expected


def test_quoted_words_are_not_the_answer_s_own_but_a_quoted_answer_is() -> None:
    assert not is_refusal('If you see "I cannot find the file specified", check the path.', "en")
    assert not is_refusal("「ファイルが見つかりません」と表示されたら、パスを確認してください。", "ja")
    assert is_refusal('"I don\u2019t know."', "en")


def test_typographic_forms_read_as_plain_ones() -> None:
    assert is_refusal("Sorry, I can\u2019t help with that.", "en")
    assert is_refusal("ＡＩアシスタントとして、口座情報にはアクセスできません。", "ja")  # full-width Latin letters


def test_language_picks_the_lexicon_and_english_is_always_read() -> None:
    german = "Das weiß ich leider nicht."
    assert is_refusal(german, "de") and is_refusal(german)
    assert not is_refusal(german, "ja")
    assert is_refusal("I'm sorry, I don't know.", "ja")


def test_score_states_why_a_trace_is_not_scored() -> None:
    batch = TraceBatch(
        trace_ids=["a", "b", "c", "d", "e", "f"],
        context_ids=[[]] * 6,
        context_texts=[[]] * 6,
        relevant_ids=[None] * 6,
        relevant_texts=[None] * 6,
        answers=["抱歉，我无法回答。", "巴黎", None, "  ", "Non lo so.", "Je ne sais pas."],
        references=[[]] * 6,
        languages=["zh-TW", "zh", "en", "en", "it", None],
    )
    result = score(batch)
    assert result.values[:2].tolist() == [1.0, 0.0]
    assert result.values[5] == 1.0
    assert result.reasons.tolist() == [None, None, NO_ANSWER, NO_ANSWER, UNSUPPORTED_LANGUAGE, None]
    assert np.isnan(result.values[2:5]).all()
    assert result.status.tolist() == [Status.OK, Status.OK, *[Status.NOT_APPLICABLE] * 3, Status.OK]


def test_the_default_run_scores_it_from_canonical_records(make_record: Callable[..., Any]) -> None:
    records = [
        make_record("q1", answer="I'm afraid I don't have that information."),
        make_record("q2", answer="抱歉，根據提供的資料，我無法回答這個問題。") | {"language": "zh-TW"},
        make_record("q3", answer="東京タワーの高さは333メートルです。") | {"language": "ja"},
    ]
    result = compute(TraceBatch.from_records(records), parse_metrics(DEFAULT_METRICS))["refusal"]
    assert result.values.tolist() == [1.0, 1.0, 0.0]
    assert not SPEC.higher_is_better
