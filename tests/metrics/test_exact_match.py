"""metrics/exact_match.py: answer_exact_match and answer_exact_match_normalized."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import Status
from ragpulse.metrics._text import normalize_answer
from ragpulse.metrics.exact_match import (
    EXACT,
    NORMALIZED,
    answer_inapplicable,
    exact_match,
    score_exact,
    score_normalized,
)

Builder = Callable[..., Any]


@pytest.mark.parametrize(
    ("answer", "references", "exact", "normalized"),
    [
        ("Paris", ["Paris"], 1.0, 1.0),
        ("Paris", ["paris"], 0.0, 1.0),
        ("Paris ", ["Paris"], 0.0, 1.0),
        ("The Paris!", ["paris"], 0.0, 1.0),
        ("Paris", ["London", "Paris"], 1.0, 1.0),
        ("Paris", ["London", "Rome"], 0.0, 0.0),
        ("", [""], 1.0, 1.0),
        ("the", ["a"], 0.0, 1.0),
        ("Paris France", ["Paris"], 0.0, 0.0),
    ],
)
def test_exact_match(answer: str, references: list[str], exact: float, normalized: float) -> None:
    assert exact_match(answer, references) == exact
    assert exact_match(answer, references, normalize_answer) == normalized


def test_scores_over_reference_and_reference_answers(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        make_record("first", answer="Paris", reference="Paris", reference_answers=["City of Light"]),
        make_record("alternative", answer="city of light", reference="Paris", reference_answers=["City of Light"]),
        make_record("only_alternatives", answer="Paris", reference_answers=["London", "Paris"]),
        make_record("wrong", answer="Rome", reference="Paris"),
        make_record("no_answer", reference="Paris"),
        make_record("no_reference", answer="Paris"),
        make_record("neither"),
    )
    exact, normalized = score_exact(batch), score_normalized(batch)
    np.testing.assert_array_equal(exact.values, [1.0, 0.0, 1.0, 0.0, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(normalized.values, [1.0, 1.0, 1.0, 0.0, np.nan, np.nan, np.nan])
    assert list(exact.status) == [Status.OK] * 4 + [Status.NOT_APPLICABLE] * 3
    assert list(exact.reasons) == [None] * 4 + ["no_answer", "no_reference", "no_answer"]
    assert list(answer_inapplicable(batch)) == list(exact.reasons)


def test_empty_answer_is_an_answer(make_batch: Builder) -> None:
    result = score_exact(make_batch(answer="", reference="Paris"))
    assert result.values.tolist() == [0.0]
    assert result.status.tolist() == [Status.OK]


@pytest.mark.parametrize(
    ("answer", "references", "language", "exact", "normalized"),
    [
        ("北京", ["北京。"], "zh", 0.0, 1.0),
        ("北京", ["北京。"], None, 0.0, 1.0),  # no language tag: CJK is segmented all the same
        ("\uff21\uff22\uff23\uff11\uff12\uff13", ["abc123"], None, 0.0, 1.0),  # full-width A B C 1 2 3
        ("“Paris”", ["Paris"], "en", 0.0, 1.0),
        ("東京 タワー", ["東京タワー"], "ja", 0.0, 1.0),
        ("ビール", ["ビル"], "ja", 0.0, 0.0),  # the prolonged sound mark counts
        ("서울 특별시", ["서울특별시"], "ko", 0.0, 1.0),
        ("서울", ["서울에서"], "ko", 0.0, 0.0),
        ("La casa", ["casa"], "es", 0.0, 1.0),
        ("La casa", ["casa"], "en", 0.0, 0.0),
        ("Das Haus", ["haus"], "de-AT", 0.0, 1.0),
        ("Thủ đô của Việt Nam", ["thủ đô Việt Nam"], "vi", 0.0, 1.0),
        ("الكتاب", ["كتاب"], "ar", 0.0, 1.0),
        ("नई दिल्ली।", ["नई दिल्ली"], "hi", 0.0, 1.0),
        ("The Eiffel Tower", ["Eiffel Tower"], "fr", 0.0, 0.0),  # French has no article rule
        ("The Eiffel Tower", ["Eiffel Tower"], None, 0.0, 1.0),  # unknown language: SQuAD's English rule
        # JSQuAD (JGLUE, CC BY-SA 4.0) a10336p11q2 and CMRC 2018 (CC BY-SA 4.0) DEV_14_QUERY_0, DEV_48_QUERY_3:
        ("勢力が弱くなり、次第に北上していく。", ["勢力が弱くなり、次第に北上していく"], "ja", 0.0, 1.0),
        ("因是一个内陆国家", ["因是一个内陆国家。"], "zh", 0.0, 1.0),
        ("“违规跨省传输信号”", ["违规跨省传输信号"], "zh", 0.0, 1.0),
        ("出梅（しゅつばい）", ["出梅"], "ja", 0.0, 0.0),  # JSQuAD a10336p1q1: a reading in brackets is more text
    ],
)
def test_exact_match_by_language(
    answer: str, references: list[str], language: str | None, exact: float, normalized: float
) -> None:
    assert exact_match(answer, references) == exact
    assert exact_match(answer, references, functools.partial(normalize_answer, language=language)) == normalized


def test_scores_each_trace_in_its_language(make_batch: Builder, make_record: Builder) -> None:
    records = [
        make_record("en", answer="The house", reference="house"),
        make_record("es", answer="La casa", reference="casa"),
        make_record("es_as_en", answer="La casa", reference="casa"),
        make_record("zh", answer="北京", reference="北京。"),
    ]
    batch = dataclasses.replace(make_batch(*records), languages=["en", "es-ES", "en", None])
    np.testing.assert_array_equal(score_normalized(batch).values, [1.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(score_exact(batch).values, [0.0, 0.0, 0.0, 0.0])
    without_languages = make_batch(*records)
    assert without_languages.languages is not None  # from_records reads each record's (absent) language
    unknown = dataclasses.replace(without_languages, languages=None)
    np.testing.assert_array_equal(score_normalized(unknown).values, [1.0, 0.0, 0.0, 1.0])


def test_language_field_of_the_record_is_used(make_batch: Builder, make_record: Builder) -> None:
    record = {**make_record("de", answer="Die Mauer", reference="Mauer"), "language": "de"}
    assert score_normalized(make_batch(record)).values.tolist() == [1.0]
    assert score_normalized(make_batch({**record, "language": "en"})).values.tolist() == [0.0]


def test_specs() -> None:
    assert (EXACT.name, NORMALIZED.name) == ("answer_exact_match", "answer_exact_match_normalized")
    # 2.0.0: MLQA rules by language; 3.0.0: Thai, Lao, Khmer, Burmese clusters, fr/it/pt articles, ß, ё
    assert (EXACT.version, NORMALIZED.version) == ("1.0.0", "3.0.0")
    assert not EXACT.takes_k and not NORMALIZED.takes_k
