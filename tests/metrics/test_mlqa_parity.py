"""answer_exact_match_normalized and answer_f1 against MLQA's published evaluation rules.

``mlqa_*`` below is a reference written from the rules of MLQA's official script
(facebookresearch/MLQA ``mlqa_evaluation_v1.py``): no NFKC, Chinese split only on U+4E00..U+9FA5,
seven languages and no other. On text where none of ragpulse's extensions applies, ragpulse must agree
with it exactly, in every MLQA language; where an extension applies, the difference must be the one
docs/metrics.md documents, and the documented table is checked row by row here.
"""

from __future__ import annotations

import random
import re
import string
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from ragpulse.metrics._text import normalize_answer
from ragpulse.metrics.exact_match import exact_match
from ragpulse.metrics.f1 import token_f1

MLQA_LANGUAGES = ("en", "es", "hi", "vi", "de", "ar", "zh")
MLQA_PUNCTUATION = {chr(i) for i in range(sys.maxunicode) if unicodedata.category(chr(i)).startswith("P")} | set(
    string.punctuation
)
MLQA_ARTICLES = {
    "en": r"\b(a|an|the)\b",
    "es": r"\b(un|una|unos|unas|el|la|los|las)\b",
    "vi": r"\b(của|là|cái|chiếc|những)\b",
    "de": r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b",
    "ar": "\\s\u0627\u0644^|\u0627\u0644",  # MLQA's pattern as written: white space, alef lam, caret | alef lam
}


def mlqa_normalize(text: str, language: str) -> str:
    """Lower-case, drop punctuation, drop articles, then white-space or mixed (Chinese) segmentation."""
    if language not in MLQA_LANGUAGES:
        raise ValueError(f"Unknown Language {language}")
    text = "".join(c for c in text.lower() if c not in MLQA_PUNCTUATION)
    if language in MLQA_ARTICLES:
        text = re.sub(MLQA_ARTICLES[language], " ", text)
    if language != "zh":
        return " ".join(text.split())
    pieces: list[str] = []
    run = ""
    for char in text:
        if "\u4e00" <= char <= "\u9fa5" or char in MLQA_PUNCTUATION:
            pieces += [*run.split(), char]
            run = ""
        else:
            run += char
    return " ".join([*pieces, *run.split()])


def mlqa_f1(prediction: str, truth: str, language: str) -> float:
    predicted, expected = mlqa_normalize(prediction, language).split(), mlqa_normalize(truth, language).split()
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


# Plain text per MLQA language: letters, digits, ASCII and Unicode punctuation (full-width too), articles;
# NFKC-stable once punctuation is deleted (NFKC turns full-width punctuation into other punctuation).
WORDS = {
    "en": ["The", "the", "a", "An", "an", "cat", "Paris", "théâtre", "another", "Eiffel", "tower", "1889", "x-ray"],
    "es": ["El", "el", "la", "Los", "las", "un", "una", "unos", "unas", "museo", "Prado", "año", "¿Dónde", "está?"],
    "de": ["Der", "die", "das", "den", "dem", "des", "ein", "eine", "einem", "einen", "einer", "eines", "Brücke"],
    "vi": ["của", "là", "cái", "chiếc", "những", "Thủ", "đô", "Việt", "Nam", "Hà", "Nội", "người"],
    "ar": ["الكتاب", "والقلم", "مال", "كتاب", "قال", "مصر", "القاهرة", "عاصمة", "، ", "؟", "٢٠٢٤"],
    "hi": ["भारत", "की", "राजधानी", "नई", "दिल्ली", "है", "।", "गंगा", "नदी"],
    "zh": ["北京", "是", "中国", "的", "首都", "光荣和ω-force", "McClelland", "2008年", "（JR东日本）", "Pewabic 陶瓷"],
}
MARKS = [*" .,;:!?'\"()-–—…“”‘’«»「」『』【】《》、。・/$+<=>^`|~%&*#@（）！？，：；", "  ", "\t"]  # noqa: RUF001


def plain_text(rng: random.Random, language: str) -> str:
    parts = [rng.choice(WORDS[language] if rng.random() < 0.7 else MARKS) for _ in range(rng.randint(0, 8))]
    return "".join(part + ("" if rng.random() < 0.3 else " ") for part in parts)  # some parts run together


@pytest.mark.parametrize("language", MLQA_LANGUAGES)
def test_agrees_with_mlqa_on_plain_text(language: str) -> None:
    rng = random.Random(language)
    disagreements: list[tuple[str, str]] = []
    compared = 0
    for _ in range(2000):
        answer, reference = plain_text(rng, language), plain_text(rng, language)
        assert unicodedata.is_normalized("NFKC", "".join(c for c in answer + reference if c not in MLQA_PUNCTUATION))
        both_empty = not mlqa_normalize(answer, language) and not mlqa_normalize(reference, language)
        ours = (
            normalize_answer(answer, language),
            exact_match(answer, [reference], lambda text: normalize_answer(text, language)),
            token_f1(answer, [reference], language),
        )
        theirs = (
            mlqa_normalize(answer, language),
            float(mlqa_normalize(answer, language) == mlqa_normalize(reference, language)),
            1.0 if both_empty else mlqa_f1(answer, reference, language),  # the one rule we keep from SQuAD v2.0
        )
        compared += ours[2] > 0
        if ours[:2] != theirs[:2] or ours[2] != pytest.approx(theirs[2], rel=1e-12):
            disagreements.append((answer, reference))
    assert not disagreements, disagreements[:5]
    assert compared > 200  # the samples overlap often enough to test F1, not only zeros


def test_both_empty_f1_is_the_squad_v2_rule() -> None:
    """The one scoring difference outside normalisation: both empty after normalisation is 1.0, not 0."""
    assert mlqa_f1("the", "a", "en") == 0.0
    assert token_f1("the", ["a"], "en") == 1.0
    assert exact_match("the", ["a"], lambda text: normalize_answer(text, "en")) == 1.0  # MLQA's EM agrees


def test_decomposed_text_differs_only_by_nfkc() -> None:
    """NFD text (same look, other code points) normalises as its NFC form here; MLQA keeps it apart."""
    for language, text in [("vi", "của người Việt"), ("es", "el año"), ("de", "die Brücke über")]:
        decomposed = unicodedata.normalize("NFD", text)
        assert decomposed != text
        assert (
            normalize_answer(decomposed, language) == normalize_answer(text, language) == mlqa_normalize(text, language)
        )
        assert mlqa_normalize(decomposed, language) != mlqa_normalize(text, language)


DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
TABLE = re.compile(r"<!-- mlqa-differences -->\n(.*?)<!-- /mlqa-differences -->", re.DOTALL)
ROW = re.compile(r"^\| `([^`]*)` \| (`[^`]*`|none) \| `([^`]*)` \| (`[^`]*`|error) \|", re.MULTILINE)


def documented_differences() -> list[tuple[str, str | None, str, str | None]]:
    """(input, language or None, ragpulse's normalised text, MLQA's or None for an error) per table row."""
    found = TABLE.search(DOCS.read_text(encoding="utf-8"))
    assert found, "docs/metrics.md lost its table of differences from MLQA"
    return [
        (
            text,
            None if language == "none" else language.strip("`"),
            ours,
            None if theirs == "error" else theirs.strip("`"),
        )
        for text, language, ours, theirs in ROW.findall(found.group(1))
    ]


def test_the_documented_table_lists_every_extension() -> None:
    rows = documented_differences()
    assert len(rows) >= 8
    languages = {language for _, language, _, _ in rows}
    assert {None, "en", "zh", "ja", "ko"} <= languages


@pytest.mark.parametrize(("text", "language", "ours", "theirs"), documented_differences())
def test_documented_differences_from_mlqa(text: str, language: str | None, ours: str, theirs: str | None) -> None:
    assert normalize_answer(text, language) == ours
    if theirs is None:
        with pytest.raises(ValueError, match="Unknown Language"):
            mlqa_normalize(text, language or "")
    else:
        assert mlqa_normalize(text, language or "") == theirs != ours
