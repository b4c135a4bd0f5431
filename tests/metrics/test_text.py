"""metrics/_text.py: answer normalisation and tokens by language (MLQA rules, NFKC, CJK segmentation)."""

from __future__ import annotations

import random
import re
import string
import unicodedata

import pytest

from ragpulse.metrics._text import normalize_answer, tokens

FULL_WIDTH_ABC123 = "\uff21\uff22\uff23\uff11\uff12\uff13"  # full-width A B C 1 2 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Eiffel Tower!", "eiffel tower"),
        ("An apple, a day.", "apple day"),
        ("theatre another", "theatre another"),  # articles only as whole words
        ("A-B", "ab"),  # punctuation is deleted, not turned into a space
        ("  \t\n ", ""),
        ("THE", ""),
        ("the.cat", "thecat"),
        ("Café — ÜBER", "café über"),  # Unicode punctuation (the em dash, Pd) goes too, as in MLQA
        ("$5 + x = <y> ^ `z` | ~", "5 x y z"),  # ASCII symbols are in string.punctuation
        ("€5 © 20°C", "€5 © 20°c"),  # other symbols (S*) are not punctuation and stay
        ("“Paris”", "paris"),
        ("\u2018quoted\u2019 «guillemets» „low“", "quoted guillemets low"),
    ],
)
def test_language_independent_rules(text: str, expected: str) -> None:
    """With no language: NFKC, lower-case, Unicode punctuation, SQuAD's English articles."""
    assert normalize_answer(text) == expected


def test_nfkc_makes_compatibility_forms_equal() -> None:
    assert normalize_answer(FULL_WIDTH_ABC123) == "abc123"
    assert tokens("ｶﾀｶﾅ", "ja") == tokens("カタカナ", "ja") == ["カ", "タ", "カ", "ナ"]  # half-width katakana
    assert tokens("ﬁnal", "en") == ["final"]  # ligature
    assert tokens("①②", "ja") == ["12"]  # circled digits
    assert tokens("㈱", "ja") == ["株"]  # parenthesised ideograph: NFKC gives "(株)", the parentheses go
    decomposed = unicodedata.normalize("NFD", "của nó")
    assert decomposed != "của nó" and tokens(decomposed, "vi") == ["nó"]  # NFD Vietnamese article still dropped


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        ("The answer is a cat", "en", ["answer", "is", "cat"]),
        ("The answer is a cat", "en-GB", ["answer", "is", "cat"]),
        ("The answer is a cat", None, ["answer", "is", "cat"]),  # unknown: SQuAD's English articles
        ("The answer is a cat", "und", ["answer", "is", "cat"]),  # BCP 47 "undetermined" is unknown
        ("The answer is a cat", "fr", ["the", "answer", "is", "a", "cat"]),  # known, no article list: none
        ("¿Dónde está el museo? Unos días, las casas.", "es", ["dónde", "está", "museo", "días", "casas"]),
        ("¿Dónde está el museo?", "es-MX", ["dónde", "está", "museo"]),
        ("el museo", "en", ["el", "museo"]),
        ("Die Mauer, des Kaisers, einem Mann", "de", ["mauer", "kaisers", "mann"]),
        ("Einer der Besten", "DE", ["besten"]),
        ("Dieser Mann", "de", ["dieser", "mann"]),  # whole words only
        ("Thủ đô của Việt Nam là Hà Nội", "vi", ["thủ", "đô", "việt", "nam", "hà", "nội"]),
        ("chiếc xe những người", "vi", ["xe", "người"]),
        ("भारत की राजधानी नई दिल्ली है।", "hi", ["भारत", "की", "राजधानी", "नई", "दिल्ली", "है"]),  # danda is Po
        ("北京是中国的首都。", "zh", ["北", "京", "是", "中", "国", "的", "首", "都"]),
        ("北京 是 首都", "zh-Hans-CN", ["北", "京", "是", "首", "都"]),
        ("光荣和ω-force", "zh", ["光", "荣", "和", "ωforce"]),  # CMRC 2018 DEV_0_QUERY_0: Latin runs by white space
        ("東京タワーは1958年に完成した。", "ja", [*"東京タワーは", "1958", *"年に完成した"]),
        ("コーヒー", "ja", ["コ", "ー", "ヒ", "ー"]),  # the prolonged sound mark is a token of its own
        ("ビル", "ja", ["ビ", "ル"]),  # ... so building and beer (ビール) stay apart
        ("グスタフ・マーラー", "ja", [*"グスタフマーラー"]),  # the middle dot is punctuation (Po)
        ("〒100-0001 東京都", "ja", ["〒1000001", "東", "京", "都"]),  # 〒 is a symbol (So) and stays
        ("서울특별시에서", "ko", [*"서울특별시에서"]),  # each hangul syllable a token (KorQuAD's character F1)
        ("서울 특별시", "ko-KR", [*"서울특별시"]),  # so Korean spacing does not count
    ],
)
def test_tokens_by_language(text: str, language: str | None, expected: list[str]) -> None:
    assert tokens(text, language) == expected


def test_arabic_alef_lam_is_replaced_everywhere_as_mlqa_does() -> None:
    """MLQA's Arabic rule replaces every alef-lam with a space, the prefix and inside words alike."""
    assert tokens("الكتاب", "ar") == ["كتاب"]  # (al-kitab: the book)
    assert tokens("والقلم", "ar") == ["و", "قلم"]  # (wa-l-qalam: and the pen)
    assert tokens("مال", "ar") == ["م"]  # (mal: money, alef-lam at the end)
    assert tokens("كتاب، قلم؟", "ar") == ["كتاب", "قلم"]  # Arabic comma and question mark are punctuation
    assert tokens("الكتاب", "en") == ["الكتاب"]  # (only for Arabic)


def test_cjk_is_segmented_in_any_language() -> None:
    """Han, kana and hangul are split into characters whatever the tag says, unknown included."""
    for language in (None, "en", "de", "zh", "ja", "ko", "und"):
        assert tokens("北京大学", language) == ["北", "京", "大", "学"]
        assert tokens("すし", language) == ["す", "し"]
        assert tokens("김치", language) == ["김", "치"]
    assert tokens("a東京", "en") == ["東", "京"]  # the article is a word once the Han is set apart
    assert tokens("㐀𠮷", "zh") == ["㐀", "𠮷"]  # extension A and B ideographs too


def test_ascii_text_normalises_as_ragpulse_1_did() -> None:
    """On ASCII text with no language or English, the result is SQuAD v1.1's (ragpulse 1.x's normaliser)."""
    rng = random.Random(15)
    alphabet = "abcdefghij ABC THE the a an .,;!?-'\"()$+<=>"
    squad_punctuation = str.maketrans("", "", string.punctuation)
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        squad = " ".join(re.sub(r"\b(a|an|the)\b", " ", text.lower().translate(squad_punctuation)).split())
        assert normalize_answer(text) == normalize_answer(text, "en") == squad


@pytest.mark.parametrize("language", [None, "en", "es", "de", "vi", "ar", "hi", "zh", "ja", "ko"])
def test_normalising_twice_changes_nothing(language: str | None) -> None:
    rng = random.Random(str(language))
    alphabet = [
        *"aeiou AEIOU .,!?「」。、・ー—“”北京東京カタすし서울ｶ",
        "the ",
        "el ",
        "die ",
        "của ",
        "\u0627\u0644",
        "\uff21",
    ]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        once = normalize_answer(text, language)
        assert normalize_answer(once, language) == once
        assert once.split() == tokens(text, language)
        assert all(token and not any(c.isspace() for c in token) for token in tokens(text, language))
