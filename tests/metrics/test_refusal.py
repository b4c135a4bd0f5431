"""The refusal metric: its precision and recall per language on the committed labelled set (the figures stated in
docs/metrics.md), how it reads partial answers, quotes and languages, and its reasons."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import DEFAULT_METRICS, MetricRequest, ShapeError, Status, TraceBatch, compute, parse_metrics
from ragpulse.metrics.judge import JudgeContext, judge_batch
from ragpulse.metrics.refusal import (
    EMBEDDING_PROMPT_VERSION,
    EMBEDDING_SPEC,
    ENCODER_OPTION,
    LANGUAGES,
    NO_ANSWER,
    NO_EMBEDDER,
    NO_PROTOTYPES,
    PROTOTYPES_FOR_OTHER_ENCODER,
    PROTOTYPES_OPTION,
    SPEC,
    UNSUPPORTED_LANGUAGE,
    RefusalPrototypes,
    classify,
    create_embedding,
    is_refusal,
    phrase_form,
    phrase_matcher,
    score,
)
from tests.doubles.fake_judge import FakeEmbedder

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


# The application's own fallback sentences ([scoring] refusal_phrases).

FALLBACKS = (
    "Let me connect you with a human agent for this one.",
    "恐れ入りますが、本チャットではその件を取り扱っておりません。",
)


@pytest.mark.parametrize(
    ("answer", "language", "expected"),
    [
        # The lexicon misses both (neither declines in words it knows); the phrases catch them.
        ("Sorry! LET ME connect you with a human agent \u2014 for this one.", "en", True),
        ("恐れ入りますが 本チャットではその件を取り扱っておりません", "ja", True),
        ("お問い合わせありがとうございます。恐れ入りますが、本チャットではその件を取り扱っておりません。", "ja", True),
        # Part of a phrase is no match; an answer without a phrase keeps the lexicon's reading.
        ("We connect you with a human agent for this one if the reset fails.", "en", False),
        ("I don't know.", "en", True),
        ("返品は30日以内であれば可能です。", "ja", False),
    ],
)
def test_the_applications_phrases_are_refusals_wherever_they_appear(answer: str, language: str, expected: bool) -> None:
    batch = TraceBatch.from_records([{"trace_id": "t", "contexts": [], "answer": answer, "language": language}])
    assert score(batch, phrases=FALLBACKS).values.tolist() == [float(expected)]


def test_the_phrases_catch_what_the_lexicon_misses_and_change_nothing_else() -> None:
    missed = "恐れ入りますが、本チャットではその件を取り扱っておりません。"
    assert not is_refusal(missed, "ja"), "the example must be one the lexicon misses"
    answers = [missed, "抱歉，我无法回答。", "东京塔高333米。", "Non lo so."]
    batch = TraceBatch.from_records(
        [
            {"trace_id": f"t{i}", "contexts": [], "answer": a, "language": lang}
            for i, (a, lang) in enumerate(zip(answers, ["ja", "zh", "zh", "it"], strict=True))
        ]
    )
    plain, with_phrases = score(batch), score(batch, phrases=FALLBACKS)
    assert plain.values[:3].tolist() == [0.0, 1.0, 0.0]
    assert with_phrases.values[:3].tolist() == [1.0, 1.0, 0.0]
    assert with_phrases.reasons[3] == UNSUPPORTED_LANGUAGE  # no phrase matched: still a language without a lexicon
    italian = score(batch, phrases=["Non lo so"])
    assert italian.values[3] == 1.0, "the application's own sentence is a refusal in any language"
    result = compute(batch, parse_metrics(["refusal"]), refusal_phrases=FALLBACKS)["refusal"]
    assert result.values[:3].tolist() == with_phrases.values[:3].tolist()


def test_phrase_form_ignores_punctuation_width_and_case_but_not_words() -> None:
    full_width = "\uff33\uff2f\uff32\uff32\uff39\uff0c  I can\u2019t!"  # SORRY, in full-width letters
    assert phrase_form(full_width) == phrase_form("sorry i can't") == "sorry i can t"
    assert phrase_form("抱歉，我无法回答。") == "抱歉 我无法回答"
    assert phrase_form("...!?") == ""
    assert not phrase_matcher(["no help"])("Piano helpers are listed on page 3.")  # spaced script: word edges
    holds = phrase_matcher(["无法回答"])
    assert holds("很抱歉，我无法回答这个问题。")  # unspaced script: a phrase may sit inside a run of characters
    assert not phrase_matcher([])("I don't know.")


# embedding_refusal: the encoder's vote among labelled prototypes (the model itself in tests/tasks/embeddings).

PROTOTYPES = RefusalPrototypes(
    vectors=np.array([[1.0, 0.0, 0.0], [0.8, 0.2, 0.0], [0.0, 1.0, 0.0], [0.0, 0.9, 0.3], [0.1, 0.8, 0.1]]),
    labels=np.array([1, 1, 0, 0, 0], dtype=np.int8),
    encoder="toy-encoder@1",
    k=3,
    share=0.6,
    digest="toy",
)


def test_classify_votes_among_the_nearest_prototypes_or_by_class_centroid() -> None:
    answers = np.array([[0.9, 0.1, 0.0], [0.0, 1.0, 0.1], [0.6, 0.5, 0.0]])
    # Neighbours: rows 0,1 + one answer (2/3 >= 0.6); rows 2,3,4 (0/3); rows 1,0,4 or 2: two refusals of three.
    assert classify(answers, PROTOTYPES).tolist() == [True, False, True]
    assert classify(answers, replace(PROTOTYPES, share=1.0)).tolist() == [False, False, False]
    assert classify(answers, replace(PROTOTYPES, k=1)).tolist() == [True, False, True]
    centroid = replace(PROTOTYPES, k=0)
    assert classify(answers, centroid).tolist() == [True, False, True]
    assert classify(answers * 7.5, centroid).tolist() == classify(answers, centroid).tolist()  # cosines: any norm
    with pytest.raises(ShapeError, match="width 3"):
        classify(np.ones((1, 2)), PROTOTYPES)


def test_prototypes_refuse_a_rule_or_labels_they_cannot_hold() -> None:
    with pytest.raises(ShapeError, match="labels 0 and 1"):
        replace(PROTOTYPES, labels=np.zeros(5, dtype=np.int8))
    with pytest.raises(ShapeError, match="0 <= k"):
        replace(PROTOTYPES, k=6)
    with pytest.raises(ShapeError, match="one label per row"):
        replace(PROTOTYPES, labels=np.array([1, 0], dtype=np.int8))


def _judged(answers: list[str | None], languages: list[str | None], context: JudgeContext) -> Any:
    batch = TraceBatch.from_records(
        [
            {"trace_id": f"t{i}", "contexts": [], "answer": a, "language": lang}
            for i, (a, lang) in enumerate(zip(answers, languages, strict=True))
        ]
    )
    return asyncio.run(judge_batch(batch, [create_embedding(MetricRequest.parse(EMBEDDING_SPEC.name), {})], context))[
        EMBEDDING_SPEC.name
    ]


def test_embedding_refusal_scores_by_the_prototypes_of_the_runs_own_encoder() -> None:
    embedder = FakeEmbedder({"我不知道。": [1.0, 0.05, 0.0], "巴黎。": [0.0, 1.0, 0.0]})
    options = {PROTOTYPES_OPTION: PROTOTYPES, ENCODER_OPTION: "toy-encoder@1"}
    result = _judged(["我不知道。", " 巴黎。 ", None, "Ja.", "我不知道。"], ["zh", "zh", "zh", "sv", None],
                     JudgeContext(judge=None, embedder=embedder, options=options))  # type: ignore[arg-type]  # fmt: skip
    assert result.values[[0, 1, 4]].tolist() == [1.0, 0.0, 1.0]
    assert result.reasons.tolist() == [None, None, NO_ANSWER, UNSUPPORTED_LANGUAGE, None]
    assert {text for call in embedder.calls for text in call} == {"我不知道。", "巴黎。"}  # stripped as embedded


@pytest.mark.parametrize(
    ("embedder", "options", "reason"),
    [
        (None, {PROTOTYPES_OPTION: PROTOTYPES, ENCODER_OPTION: "toy-encoder@1"}, NO_EMBEDDER),
        (FakeEmbedder({}), {ENCODER_OPTION: "toy-encoder@1"}, NO_PROTOTYPES),
        (
            FakeEmbedder({}),
            {PROTOTYPES_OPTION: PROTOTYPES, ENCODER_OPTION: "other-encoder@2"},
            PROTOTYPES_FOR_OTHER_ENCODER,
        ),
        (FakeEmbedder({}), {PROTOTYPES_OPTION: PROTOTYPES}, PROTOTYPES_FOR_OTHER_ENCODER),
    ],
)
def test_embedding_refusal_is_not_applicable_rather_than_wrong(
    embedder: FakeEmbedder | None, options: dict[str, Any], reason: str
) -> None:
    context = JudgeContext(judge=None, embedder=embedder, options=options)  # type: ignore[arg-type]
    result = _judged(["我不知道。"], ["zh"], context)
    assert result.reasons.tolist() == [reason] and result.status.tolist() == [Status.NOT_APPLICABLE]


def test_embedding_refusal_is_registered_as_an_embedding_metric_without_a_judge() -> None:
    request = MetricRequest.parse("embedding_refusal")
    assert request.is_judge and request.definition.needs == "embeddings"
    metric = create_embedding(request, {})
    assert not metric.uses_llm and metric.prompt_version == EMBEDDING_PROMPT_VERSION
    assert not EMBEDDING_SPEC.higher_is_better and "embedding_refusal" not in DEFAULT_METRICS
