"""metrics/f1.py: answer_f1, token F1 of answers normalised by language (SQuAD v1.1, MLQA)."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import Status
from ragpulse.metrics._text import normalize_answer, tokens
from ragpulse.metrics.exact_match import exact_match
from ragpulse.metrics.f1 import SPEC, score, token_f1

Builder = Callable[..., Any]


@pytest.mark.parametrize(
    ("answer", "references", "expected"),
    [
        ("the cat sat", ["a cat sat down"], 0.8),  # P = 2/2, R = 2/3
        ("cat cat dog", ["cat dog dog"], 2 / 3),  # tokens count with multiplicity: common = 1 cat + 1 dog
        ("cat", ["dog", "cat dog"], 2 / 3),  # maximum over references
        ("Cat!", ["the cat"], 1.0),  # after normalisation
        ("cat", ["dog"], 0.0),
        ("the", ["a"], 1.0),  # both empty after normalisation
        ("the", ["cat"], 0.0),  # one empty
        ("cat", ["an"], 0.0),
        ("new york city", ["york city hall", "new york"], 0.8),  # 2/3 against the first, 0.8 against the second
    ],
)
def test_token_f1(answer: str, references: list[str], expected: float) -> None:
    assert token_f1(answer, references) == pytest.approx(expected, rel=1e-15)


def test_score(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        make_record("q1", answer="the cat sat", reference="dog", reference_answers=["a cat sat down"]),
        make_record("q2", answer="cat", reference="cat"),
        make_record("q3", reference="cat"),
        make_record("q4", answer="cat"),
    )
    result = score(batch)
    np.testing.assert_allclose(result.values, [0.8, 1.0, np.nan, np.nan], rtol=1e-15)
    assert list(result.status) == [Status.OK, Status.OK, Status.NOT_APPLICABLE, Status.NOT_APPLICABLE]
    assert list(result.reasons) == [None, None, "no_answer", "no_reference"]


@pytest.mark.parametrize(
    ("answer", "references", "language", "expected"),
    [
        ("北京", ["北京。"], "zh", 1.0),
        ("北京", ["北京。"], None, 1.0),  # untagged Chinese: still character tokens, not one token each
        ("北京", ["北京市"], None, 0.8),  # a one-character difference is partial credit, not 0
        ("\uff21\uff22\uff23\uff11\uff12\uff13", ["abc123"], "en", 1.0),  # full-width A B C 1 2 3
        ("“Paris”", ["Paris"], None, 1.0),
        ("東京タワー", ["東京"], "ja", 4 / 7),  # P = 2/5, R = 1
        ("コーヒー", ["コーヒー豆"], "ja", 8 / 9),  # ー twice: P = 4/4, R = 4/5
        ("서울에서", ["서울"], "ko", 2 / 3),  # particle attached: P = 2/4, R = 1
        ("서울", ["서울에서"], "ko-KR", 2 / 3),
        ("el museo del Prado", ["Museo del Prado"], "es", 1.0),
        ("el museo del Prado", ["Museo del Prado"], "en", 6 / 7),  # "el" is no English article: P = 3/4, R = 1
        ("die Berliner Mauer", ["Mauer"], "de", 2 / 3),
        ("những thành phố lớn", ["thành phố"], "vi", 0.8),
        ("والقلم", ["القلم"], "ar", 2 / 3),  # MLQA's rule splits off the conjunction: [و, قلم] against [قلم]
        ("नई दिल्ली शहर", ["नई दिल्ली।"], "hi", 0.8),
        ("Tokyo 東京", ["東京"], "en", 0.8),  # Latin by white space, Han by character, in any language
        # Real answer pairs: JSQuAD (JGLUE, CC BY-SA 4.0) and CMRC 2018 (CC BY-SA 4.0), annotators' answers
        ("出梅（しゅつばい）", ["出梅"], "ja", 4 / 9),  # a10336p1q1: P = 2/7, R = 1
        ("世界52カ国", ["52カ国"], "ja", 0.75),  # a111367p41q0: 52 is one token, P = 3/5, R = 1
        ("およそ2,000年間", ["2,000年"], "ja", 0.5),  # a111367p2q1: "2,000" -> "2000", P = 2/6, R = 1
        ("グスタフ・マーラ", ["グスタフ・マーラー"], "ja", 14 / 15),  # a10743p9q1: P = 1, R = 7/8
        ("因是一个内陆国家", ["因是一个内陆国家。"], "zh", 1.0),  # DEV_14_QUERY_0: trailing 。
        ("哈尔滨", ["哈尔滨人"], "zh", 6 / 7),  # DEV_135_QUERY_0: P = 1, R = 3/4
        ("光荣和ω-force", ["光荣和ω-force"], "zh", 1.0),  # DEV_0_QUERY_0
        ("“克罗地亚足球的未来”", ["克罗地亚足球的未来"], "zh", 1.0),  # DEV_138_QUERY_2
    ],
)
def test_token_f1_by_language(answer: str, references: list[str], language: str | None, expected: float) -> None:
    assert token_f1(answer, references, language) == pytest.approx(expected, rel=1e-12)


def test_scores_each_trace_in_its_language(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        {**make_record("zh", answer="北京", reference="北京市"), "language": "zh-CN"},
        {**make_record("de", answer="die Mauer", reference="Mauer"), "language": "de"},
        {**make_record("de_untagged", answer="die Mauer", reference="Mauer")},
    )
    np.testing.assert_allclose(score(batch).values, [0.8, 1.0, 2 / 3], rtol=1e-12)
    np.testing.assert_allclose(score(dataclasses.replace(batch, languages=None)).values, [0.8, 2 / 3, 2 / 3])


DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
EXAMPLES = re.compile(
    r"<!-- answer-normalisation-examples -->\n(.*?)<!-- /answer-normalisation-examples -->", re.DOTALL
)
EXAMPLE = re.compile(
    r"^\| (`[^`]*`|none) \| `([^`]*)` \| `([^`]*)` \| `([^`]*)` / `([^`]*)` \| ([01]) \| ([0-9.]+) \|$", re.M
)


def test_the_documented_examples_hold() -> None:
    """Every row of docs/metrics.md's table of normalisation examples, in every language it shows."""
    found = EXAMPLES.search(DOCS.read_text(encoding="utf-8"))
    assert found, "docs/metrics.md lost its table of answer normalisation examples"
    rows = EXAMPLE.findall(found.group(1))
    assert {row[0].strip("`") for row in rows} >= {"en", "es", "de", "vi", "ar", "hi", "zh", "ja", "ko", "none"}
    for tag, answer, reference, answer_tokens, reference_tokens, em, f1 in rows:
        language = None if tag == "none" else tag.strip("`")
        assert (" ".join(tokens(answer, language)), " ".join(tokens(reference, language))) == (
            answer_tokens,
            reference_tokens,
        )
        assert exact_match(answer, [reference], functools.partial(normalize_answer, language=language)) == float(em)
        assert round(token_f1(answer, [reference], language), 3) == float(f1)


def test_spec() -> None:
    # 2.0.0: MLQA rules by language; 3.0.0: Thai, Lao, Khmer, Burmese clusters, fr/it/pt articles, ß, ё
    assert (SPEC.name, SPEC.version) == ("answer_f1", "3.0.0")
