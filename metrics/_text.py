"""Answer normalisation and tokenisation by language, shared by exact match and F1.

The rules are MLQA's (``mlqa_evaluation_v1.py``, which extends SQuAD v1.1 to seven languages), with
three extensions that only change text MLQA leaves alone or cannot score: Unicode NFKC first, so that
full-width and half-width forms (full-width Latin, half-width ``ｶﾀｶﾅ``) equal their plain forms; every Han,
kana and hangul character is a token in any language (MLQA splits only ``U+4E00..U+9FA5`` and only for
Chinese); and a trace of unknown language is scored too (MLQA refuses one). docs/metrics.md lists
every rule and every difference from MLQA.
"""

from __future__ import annotations

import functools
import re
import string
import sys
import unicodedata

from ragpulse.metrics.batch import primary_language

__all__ = ["normalize_answer", "tokens", "words"]

# MLQA's article lists, matched as whole words after punctuation removal. Arabic is the exception,
# copied as MLQA runs it: of its two branches, "white space, alef lam, ^" and "alef lam", the first can
# never match (``^`` after a character), so every alef-lam is replaced by a space, inside words too.
_EN = re.compile(r"\b(?:a|an|the)\b")
_ARTICLES: dict[str | None, re.Pattern[str]] = {
    None: _EN,  # unknown language: SQuAD's English rule, which MLQA and ragpulse 1.x derive from
    "und": _EN,  # BCP 47's "undetermined" is unknown too
    "en": _EN,
    "es": re.compile(r"\b(?:un|una|unos|unas|el|la|los|las)\b"),
    "de": re.compile(r"\b(?:ein|eine|einem|einen|einer|eines|der|die|das|den|dem|des)\b"),
    "vi": re.compile(r"\b(?:của|là|cái|chiếc|những)\b"),
    "ar": re.compile("\u0627\u0644"),  # alef lam
}

# Characters that are each one token: scripts written without spaces between words (Han, kana), and
# hangul, which Korean QA benchmarks (KorQuAD 1.0 and 2.0) score character by character.
_HAN = (
    "\u2e80-\u2fdf"  # CJK and Kangxi radicals
    "\u3005-\u3007\u3021-\u3029\u3038-\u303b"  # iteration and closing marks, ideographic zero, Hangzhou numerals
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # extension A, unified, compatibility ideographs
    "\U00020000-\U0003ffff"  # extensions B and later
)
_KANA = "\u3041-\u30ff\u31f0-\u31ff\U0001b000-\U0001b16f"  # hiragana, katakana with ー, small and old kana
_HANGUL = "\u1100-\u11ff\u3131-\u318e\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff"  # jamo and syllables
_SEGMENTED_RUN = re.compile(f"[{_HAN}{_KANA}{_HANGUL}]+")


@functools.cache
def _punctuation() -> dict[int, None]:
    """A ``str.translate`` table deleting MLQA's punctuation: every Unicode category P*, plus ASCII's
    ``string.punctuation`` (which adds the symbols ``$+<=>^`|~``). Built on first use: it scans all code
    points."""
    table = dict.fromkeys(i for i in range(sys.maxunicode + 1) if unicodedata.category(chr(i))[0] == "P")
    table.update(dict.fromkeys(map(ord, string.punctuation)))
    return table


def tokens(text: str, language: str | None = None) -> list[str]:
    """The answer's tokens: NFKC, lower-case, punctuation deleted, every Han, kana and hangul character
    set apart, the language's articles dropped, then split on white space.

    ``language`` is a BCP 47 tag (only its primary subtag counts) or None when unknown; a language
    without an article rule (``zh``, ``ja``, ``ko``, ``hi``, ...) drops nothing.

    >>> tokens("The Eiffel Tower!")
    ['eiffel', 'tower']
    >>> tokens("北京。", "zh-CN"), tokens("\uff21\uff22\uff23\uff11\uff12\uff13"), tokens("“Paris”", "fr")
    (['北', '京'], ['abc123'], ['paris'])
    >>> tokens("Die Mauer", "de"), tokens("Die Mauer", "en")
    (['mauer'], ['die', 'mauer'])
    """
    text = _segmented(text)
    articles = _ARTICLES.get(primary_language(language))
    if articles is not None:  # after segmenting, so that "a" in "a東京" is a word as in "a 東京"
        text = articles.sub(" ", text)
    return text.split()


def words(text: str) -> list[str]:
    """The text's words as :func:`tokens` finds them, articles kept: NFKC, lower-case, punctuation deleted, every
    Han, kana and hangul character one word, the rest split on white space. It needs no language, so a count of
    them does not depend on the language a trace gives or is detected in.

    >>> words("The Eiffel Tower!"), words("東京タワーです。"), words("서울 타워")
    (['the', 'eiffel', 'tower'], ['東', '京', 'タ', 'ワ', 'ー', 'で', 'す'], ['서', '울', '타', '워'])
    """
    return _segmented(text).split()


def _segmented(text: str) -> str:
    """NFKC, lower-case, punctuation deleted, a space around every Han, kana and hangul character."""
    return _SEGMENTED_RUN.sub(_spaced, unicodedata.normalize("NFKC", text).lower().translate(_punctuation()))


def _spaced(run: re.Match[str]) -> str:
    """A run of Han, kana or hangul with a space around every character (one callback per run, not per
    character: several times faster on CJK text)."""
    return f" {' '.join(run.group())} "


def normalize_answer(text: str, language: str | None = None) -> str:
    """The tokens joined by single spaces: what exact match compares.

    >>> normalize_answer("The  Eiffel Tower!")
    'eiffel tower'
    >>> normalize_answer("東京 タワー", "ja") == normalize_answer("東京タワー", "ja")
    True
    """
    return " ".join(tokens(text, language))
