"""Answer normalisation and tokenisation by language, shared by exact match and F1.

The rules are MLQA's (``mlqa_evaluation_v1.py``, which extends SQuAD v1.1 to seven languages), with
extensions that only change text MLQA leaves alone or cannot score: Unicode NFKC first, so that
full-width and half-width forms (full-width Latin, half-width ``ｶﾀｶﾅ``) equal their plain forms; every Han,
kana and hangul character is a token in any language (MLQA splits only ``U+4E00..U+9FA5`` and only for
Chinese), and so is every character cluster of Thai, Lao, Khmer and Burmese, scripts written without spaces
between words; French, Italian and Portuguese articles, with elided forms split off first; German ``ß`` as
``ss`` and Russian ``ё`` as ie (U+0435); and a trace of unknown language is scored too (MLQA refuses one).
docs/metrics.md lists every rule and every difference from MLQA.
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
    # By analogy with MLQA's Spanish: the definite and indefinite articles, singular and plural; the elided "l'"
    # and "un'" are split off before (``_ELISION``). Contractions with a preposition stay words, as MLQA keeps
    # Spanish "del" and "al": French du, au, aux; Italian del, della, nel, ...; Portuguese do, da, no, na, ao, à.
    "fr": re.compile(r"\b(?:le|la|les|l|un|une|des)\b"),
    "it": re.compile(r"\b(?:il|lo|la|i|gli|le|l|un|uno|una)\b"),
    "pt": re.compile(r"\b(?:o|a|os|as|um|uma|uns|umas)\b"),
}

# Elision: in these languages an apostrophe between two letters ends a word (l'homme, dell'anno, d'água), so the
# elided word stays a word of its own once the apostrophe is deleted with the punctuation, not glued to the next.
_ELIDING = frozenset({"fr", "it", "pt"})
_ELISION = re.compile(r"(?<=[^\W\d_])['\u2019\u02bc](?=[^\W\d_])")

# Letters written two ways in a language, folded to one: German ß is ss (Swiss orthography, the 1996 reform's
# dass for daß, SS in capitals); Russian ё (U+0451) is commonly printed as ie (U+0435).
_FOLDS: dict[str, dict[int, str]] = {"de": {ord("ß"): "ss"}, "ru": {ord("\u0451"): "\u0435"}}

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

# Thai, Lao, Burmese (with its extensions A and B) and Khmer (with its symbols): written without spaces between
# words, split into character clusters, each a token (``_clusters``).
_CLUSTERED_RUN = re.compile("[\u0e00-\u0eff\u1000-\u109f\ua9e0-\ua9ff\uaa60-\uaa7f\u1780-\u17ff\u19e0-\u19ff]+")
# Join the cluster before them although they are letters: Thai sara am and Lao am, spacing vowels that follow
# their consonant (Grapheme_Cluster_Break=SpacingMark).
_SPACING_VOWELS = frozenset("\u0e33\u0eb3")
# Join the next character to the cluster: Burmese virama and Khmer coeng, which stack the following consonant
# under the one before.
_STACKERS = frozenset("\u1039\u17d2")


@functools.cache
def _punctuation() -> dict[int, None]:
    """A ``str.translate`` table deleting MLQA's punctuation: every Unicode category P*, plus ASCII's
    ``string.punctuation`` (which adds the symbols ``$+<=>^`|~``). Built on first use: it scans all code
    points."""
    table = dict.fromkeys(i for i in range(sys.maxunicode + 1) if unicodedata.category(chr(i))[0] == "P")
    table.update(dict.fromkeys(map(ord, string.punctuation)))
    return table


def tokens(text: str, language: str | None = None) -> list[str]:
    """The answer's tokens: NFKC, lower-case, the language's letters folded and elided words split off,
    punctuation deleted, every Han, kana and hangul character and every Thai, Lao, Khmer and Burmese character
    cluster set apart, the language's articles dropped, then split on white space.

    ``language`` is a BCP 47 tag (only its primary subtag counts) or None when unknown; a language
    without an article rule (``zh``, ``ja``, ``ko``, ``hi``, ``th``, ...) drops nothing.

    >>> tokens("The Eiffel Tower!")
    ['eiffel', 'tower']
    >>> tokens("北京。", "zh-CN"), tokens("\uff21\uff22\uff23\uff11\uff12\uff13"), tokens("“Paris”", "fr")
    (['北', '京'], ['abc123'], ['paris'])
    >>> tokens("Die Mauer", "de"), tokens("Die Mauer", "en")
    (['mauer'], ['die', 'mauer'])
    >>> tokens("l'homme", "fr"), tokens("กรุงเทพ", "th")
    (['homme'], ['ก', 'รุ', 'ง', 'เ', 'ท', 'พ'])
    """
    primary = primary_language(language)
    text = _segmented(text, primary)
    articles = _ARTICLES.get(primary)
    if articles is not None:  # after segmenting, so that "a" in "a東京" is a word as in "a 東京"
        text = articles.sub(" ", text)
    return text.split()


def words(text: str) -> list[str]:
    """The text's words as :func:`tokens` finds them in no language, articles kept: NFKC, lower-case,
    punctuation deleted, every Han, kana and hangul character and every Thai, Lao, Khmer and Burmese character
    cluster one word, the rest split on white space. It needs no language, so a count of them does not depend on
    the language a trace gives or is detected in.

    >>> words("The Eiffel Tower!"), words("東京タワーです。"), words("서울 타워")
    (['the', 'eiffel', 'tower'], ['東', '京', 'タ', 'ワ', 'ー', 'で', 'す'], ['서', '울', '타', '워'])
    """
    return _segmented(text, None).split()


def _segmented(text: str, language: str | None) -> str:
    """NFKC, lower-case, ``language``'s letters folded and elided words split off, punctuation deleted, a space
    around every Han, kana and hangul character and every Thai, Lao, Khmer and Burmese cluster."""
    text = unicodedata.normalize("NFKC", text).lower()
    if language in _FOLDS:
        text = text.translate(_FOLDS[language])
    if language in _ELIDING:
        text = _ELISION.sub(" ", text)
    text = _SEGMENTED_RUN.sub(_spaced, text.translate(_punctuation()))
    return _CLUSTERED_RUN.sub(_clustered, text)


def _spaced(run: re.Match[str]) -> str:
    """A run of Han, kana or hangul with a space around every character (one callback per run, not per
    character: several times faster on CJK text)."""
    return f" {' '.join(run.group())} "


def _clustered(run: re.Match[str]) -> str:
    """A run of Thai, Lao, Khmer or Burmese with a space around every character cluster. NFKC has decomposed the
    vowel am into nikhahit and aa; it is put back together, so that it stays in its consonant's cluster."""
    text = run.group().replace("\u0e4d\u0e32", "\u0e33").replace("\u0ecd\u0eb2", "\u0eb3")
    return f" {' '.join(_clusters(text))} "


def _clusters(run: str) -> list[str]:
    """Character clusters: a character with the combining marks (general category M) after it, the spacing vowels
    am, and a consonant stacked under it by a virama or coeng. The rule reads only these characters' general
    categories, which do not change between Unicode versions, and no dictionary, so a token is the same in every
    install.

    >>> _clusters("ภาษาไทย"), _clusters("ຂ້ອຍ"), _clusters("ខ្មែរ"), _clusters("မြန်မာ")
    (['ภ', 'า', 'ษ', 'า', 'ไ', 'ท', 'ย'], ['ຂ້', 'ອ', 'ຍ'], ['ខ្មែ', 'រ'], ['မြ', 'န်', 'မာ'])
    """
    clusters: list[str] = []
    for char in run:
        joins = clusters and (
            unicodedata.category(char)[0] == "M" or char in _SPACING_VOWELS or clusters[-1][-1] in _STACKERS
        )
        if joins:
            clusters[-1] += char
        else:
            clusters.append(char)
    return clusters


def normalize_answer(text: str, language: str | None = None) -> str:
    """The tokens joined by single spaces: what exact match compares.

    >>> normalize_answer("The  Eiffel Tower!")
    'eiffel tower'
    >>> normalize_answer("東京 タワー", "ja") == normalize_answer("東京タワー", "ja")
    True
    """
    return " ".join(tokens(text, language))
