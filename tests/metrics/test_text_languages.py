"""Normalisation of the languages MLQA does not cover and of the scripts written without spaces (docs/metrics.md,
"Answer normalisation by language"). Every expected value is worked out here from the written rule, the working in
the comment beside it; none is read off the implementation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics._text import normalize_answer, tokens, words
from ragpulse.metrics.exact_match import NORMALIZED, score_normalized
from ragpulse.metrics.f1 import score, token_f1
from ragpulse.metrics.operations import answer_length

Builder = Callable[..., Any]


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        # Thai: a character with the marks after it; pre-posed vowels (เ) and the vowel letter า are their own.
        # ก | ร+ุ(Mn) | ง | เ | ท | พ
        ("กรุงเทพ", "th", ["ก", "รุ", "ง", "เ", "ท", "พ"]),
        # ท+ี(Mn)+่(Mn) | ด+ิ(Mn) | น: a tone mark is never a token of its own; the space inside counts for nothing
        ("ที่ ดิน", "th", ["ที่", "ดิ", "น"]),
        # น+้(Mn)+ำ: sara am (U+0E33) joins its consonant though it is a letter (and though NFKC splits it)
        ("น้ำ", "th", ["น้ำ"]),
        ("ทำ", "th", ["ทำ"]),
        # Thai ฯ (paiyannoi, U+0E2F) is a letter (Lo), not punctuation: a cluster of its own
        ("กรุงเทพฯ", "th", ["ก", "รุ", "ง", "เ", "ท", "พ", "ฯ"]),
        # Lao: ຫ+ຼ(Mn) | ວ | ງ
        ("ຫຼວງ", "lo", ["ຫຼ", "ວ", "ງ"]),
        # Khmer: ភ+្(coeng)+ន(stacked)+ំ(Mn) | ព+េ(Mc) | ញ; ។ (Po) deleted
        ("ភ្នំពេញ។", "km", ["ភ្នំ", "ពេ", "ញ"]),
        # Burmese: မ+ြ(Mc)+ိ(Mn)+ု(Mn)+့(Mn) | ့... ; ။ (Po) deleted
        ("မြို့။", "my", ["မြို့"]),
        # Burmese virama (U+1039) stacks the next consonant: မ+္+ဘ | ာ is a mark after ဘ → one cluster
        ("မ္ဘာ", "my", ["မ္ဘာ"]),
        # the clusters in any language, unknown included, as CJK characters are
        ("กรุง เทพ", None, ["ก", "รุ", "ง", "เ", "ท", "พ"]),
        ("Bangkok กรุงเทพ", "en", ["bangkok", "ก", "รุ", "ง", "เ", "ท", "พ"]),
        # French: the apostrophe between two letters splits, then le/la/les/l/un/une/des go; du stays
        ("L'homme", "fr", ["homme"]),
        ("les enfants du quartier", "fr", ["enfants", "du", "quartier"]),
        ("jusqu\u2019à la mer", "fr", ["jusqu", "à", "mer"]),  # U+2019, and à is not an article
        ("une pomme d'Api", "fr-CA", ["pomme", "d", "api"]),  # the primary subtag decides
        # Italian: il/lo/la/i/gli/le/l/un/uno/una; dell is a contraction, kept
        ("Gli studenti dell'università", "it", ["studenti", "dell", "università"]),
        ("un'isola", "it", ["isola"]),
        # Portuguese: o/a/os/as/um/uma/uns/umas; do and à stay
        ("A casa do povo", "pt", ["casa", "do", "povo"]),
        ("uma caixa d'água", "pt-BR", ["caixa", "d", "água"]),
        # German: ß is ss, then MLQA's articles
        ("Die Straße", "de", ["strasse"]),
        ("ẞ", "de", ["ss"]),  # capital sharp s lower-cases to ß first
        # Russian: yo is ie, upper case too; no articles
        ("Ёжик в тумане", "ru", ["ежик", "в", "тумане"]),
        # the fallback when the language is unknown: English articles, nothing folded, no elision split
        ("L'homme", None, ["lhomme"]),
        ("Straße", None, ["straße"]),
        ("la Seine", None, ["la", "seine"]),
        # a language's rule does not leak into another: English keeps the French article and the ß
        ("la Seine", "en", ["la", "seine"]),
        ("Straße", "en", ["straße"]),
        ("Ёлка", "uk", ["ёлка"]),
    ],
)
def test_tokens_follow_the_written_rule(text: str, language: str | None, expected: list[str]) -> None:
    assert tokens(text, language) == expected


@pytest.mark.parametrize(
    ("answer", "reference", "language", "em", "f1"),
    [
        # partial Thai answer: 6 tokens of the reference's 12, all shared: P = 1, R = 1/2, F1 = 2/3
        ("กรุงเทพ", "กรุงเทพมหานคร", "th", 0.0, 2 / 3),
        # a space inside the phrase does not fail exact match
        ("ที่ดิน", "ที่ ดิน", "th", 1.0, 1.0),
        # Khmer: ភ្នំ ពេ ញ against ទី ក្រុ ង ភ្នំ ពេ ញ: 3 shared, P = 1, R = 1/2, F1 = 2/3
        ("ភ្នំពេញ", "ទីក្រុងភ្នំពេញ", "km", 0.0, 2 / 3),
        # Burmese: ရ န် ကု န် against the same and မြို့: P = 1, R = 4/5, F1 = 8/9
        ("ရန်ကုန်", "ရန်ကုန်မြို့", "my", 0.0, 8 / 9),
        # Lao: ວ ຽ ງ ຈັ ນ against ນ ະ ຄ ອ ນ ຫຼ ວ ງ ວ ຽ ງ ຈັ ນ: 5 shared, P = 1, R = 5/13, F1 = 10/18
        ("ວຽງຈັນ", "ນະຄອນຫຼວງວຽງຈັນ", "lo", 0.0, 10 / 18),
        # French elision: l'homme is homme
        ("l'homme", "homme", "fr", 1.0, 1.0),
        ("l'homme", "l homme", "fr", 1.0, 1.0),
        # Italian: dell anno against anno: P = 1/2, R = 1, F1 = 2/3
        ("dell'anno", "l'anno", "it", 0.0, 2 / 3),
        ("o Brasil", "Brasil", "pt", 1.0, 1.0),
        ("Strasse", "Straße", "de", 1.0, 1.0),
        ("Ёлка", "елка", "ru", 1.0, 1.0),
        # unknown language: l'homme glued, so it matches neither
        ("l'homme", "homme", None, 0.0, 0.0),
    ],
)
def test_scores_follow_the_written_rule(
    answer: str, reference: str, language: str | None, em: float, f1: float
) -> None:
    assert float(normalize_answer(answer, language) == normalize_answer(reference, language)) == em
    assert token_f1(answer, [reference], language) == pytest.approx(f1, rel=1e-12)


def test_the_trace_language_decides_the_rule(make_batch: Builder, make_record: Builder) -> None:
    batch = make_batch(
        {**make_record("fr", answer="l'homme", reference="homme"), "language": "fr"},
        {**make_record("fr_untagged", answer="l'homme", reference="homme")},
        {**make_record("th", answer="กรุงเทพ", reference="กรุงเทพมหานคร"), "language": "th"},
        {**make_record("th_untagged", answer="กรุงเทพ", reference="กรุงเทพมหานคร")},
    )
    # Tagged French drops the elided article; untagged falls back to English and glues it. Thai clusters either way.
    np.testing.assert_allclose(score(batch).values, [1.0, 0.0, 2 / 3, 2 / 3], rtol=1e-12)
    np.testing.assert_array_equal(score_normalized(batch).values, [1.0, 0.0, 0.0, 0.0])
    assert NORMALIZED.version.startswith("3.")


def test_answer_length_counts_clusters_as_words() -> None:
    # ภ า ษ า ไ ท ย: 7 clusters; สวัสดี: ส วั ส ดี → 4
    assert words("ภาษาไทย") == ["ภ", "า", "ษ", "า", "ไ", "ท", "ย"]
    assert answer_length("สวัสดี ภาษาไทย") == 11
