"""Which language a trace is written in, offline: Unicode script rules, then a bundled statistical model.

Staging fills a trace's ``language`` with :func:`identify_language` when neither the record nor the run names
one. Scripts settle what they can: kana means Japanese, hangul Korean, Han without either Chinese. A character
n-gram model cannot: on short texts it mistakes Japanese for Chinese, and gives Han text to Wu or Cantonese.
Everything else goes to py3langid's Naive Bayes model (shipped inside its wheel, numpy only, no download),
restricted to living languages outside the CJK scripts, and returns None below a probability threshold.
``bench/bench_language.py`` measured the rules, the threshold and the alternatives (lingua, pycld2, langid).
``py3langid`` is imported on first use, so importing ragpulse stays cheap.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from py3langid.langid import LanguageIdentifier

__all__ = ["MAX_CHARS", "MIN_CONFIDENCE", "identify_language", "identify_languages", "normalize_language_tag"]

_KANA = re.compile("[\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
"""Hiragana, katakana and half-width katakana; not U+30FB (・), which Chinese writes too."""
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uffa0-\uffdc]")
_HAN = re.compile("[\u3005-\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")

_CJK_WEIGHT = 2
"""One CJK character counts as this many other letters when deciding which script a mixed text is in:
``Python 3.11のリリース日は？`` is Japanese, ``What does 北京 mean?`` is English."""

MIN_CONFIDENCE = 0.2
"""py3langid's calibrated probability below which a non-CJK text is None (unknown): a name such as
``Ottawa`` or ``Alexander Graham Bell`` names no language, and a wrong tag is worse than none. At 0.2 a short
answer alone gets a wrong tag 6 % of the time instead of 34 %, and a question is unknown 0.5 % of the time
instead of never (bench/bench_language.py)."""

MAX_CHARS = 500
"""Only the first this many characters are read: plenty for the model, and a pasted document as the question
costs no more than a sentence (py3langid walks the text byte by byte in Python)."""

_NOT_LANGUAGES = frozenset({"zxx", "grc", "hbo", "la", "eo", "vo"})
"""Labels no trace is written in: no linguistic content, Ancient Greek and Hebrew, Latin and two constructed
languages, which short names and numbers otherwise land on."""
_CJK_LABELS = frozenset({"ja", "ko", "zh", "wuu", "yue"})
"""Decided by script before the model runs, so the model must not pick them for other scripts either."""
_MACROLANGUAGE = {"arz": "ar", "ary": "ar", "uzs": "uz", "gug": "gn", "sdh": "ku"}
"""Dialect labels of the model mapped to the tag text metrics and judge prompts key on."""

_DEPRECATED = {"iw": "he", "in": "id", "ji": "yi", "jw": "jv", "mo": "ro"}
"""ISO 639 codes withdrawn in favour of these (IANA subtag registry ``Preferred-Value``)."""

_ALNUM = "[a-z0-9]"
_LANGTAG = re.compile(
    rf"""
    (?P<language>[a-z]{{2,3}}(?:-[a-z]{{3}}){{0,3}})  # ISO 639 language, with up to 3 extlangs
    (?:-(?P<script>[a-z]{{4}}))?
    (?:-(?P<region>[a-z]{{2}}|[0-9]{{3}}))?
    (?P<variants>(?:-(?:{_ALNUM}{{5,8}}|[0-9]{_ALNUM}{{3}}))*)
    (?P<extensions>(?:-[0-9a-wy-z](?:-{_ALNUM}{{2,8}})+)*)
    (?P<private>-x(?:-{_ALNUM}{{1,8}})+)?
    """,
    re.VERBOSE,
)
"""RFC 5646 ``langtag``, lower-cased, except that the language subtag must have 2 or 3 letters: the 4-letter
ones are reserved and no 5-to-8-letter one has ever been registered, so ``english`` is a mistake, not a tag."""
_PRIVATE_USE = re.compile(rf"x(?:-{_ALNUM}{{1,8}})+")


def normalize_language_tag(tag: str) -> str:
    """Check that ``tag`` is a well-formed BCP 47 (RFC 5646) language tag and return it in canonical case.

    Language lower case, script title case, region upper case, the rest lower case (``ZH-hant-tw`` ->
    ``zh-Hant-TW``); withdrawn codes get their replacement (``iw`` -> ``he``). Syntax is checked, not the
    subtag registry: ``qaa`` (private use) passes, and so would a code ISO assigns next year. The 26
    grandfathered tags (``i-klingon``) are refused.

    Raises:
        ValueError: ``tag`` is not a string, or not BCP 47 (``zh_CN``, ``english``, ``e``, ``en-``, ``de-1901-1901``).
    """
    if not isinstance(tag, str):
        raise ValueError(f"language tag must be a string such as 'ja' or 'zh-TW', got {type(tag).__name__}")
    canonical = _canonical(tag.strip().lower())
    if canonical is None:
        suggestion = _canonical(tag.strip().lower().replace("_", "-")) if "_" in tag else None
        hint = f" (subtags are separated by '-': {suggestion!r})" if suggestion else ""
        raise ValueError(
            f"{tag!r} is not a BCP 47 language tag{hint}; expected an ISO 639 code such as 'ja', 'zh' or 'en', "
            "optionally followed by script, region and variants, e.g. 'zh-Hant-TW', 'pt-BR', 'de-CH-1901'"
        )
    return canonical


def _canonical(lowered: str) -> str | None:
    """``lowered`` in canonical case, or None when it is not a valid tag."""
    if _PRIVATE_USE.fullmatch(lowered):
        return lowered
    match = _LANGTAG.fullmatch(lowered)
    if match is None:
        return None
    variants = match["variants"].split("-")[1:]
    singletons = re.findall(r"-([0-9a-wy-z])(?=-)", match["extensions"])
    if len(set(variants)) != len(variants) or len(set(singletons)) != len(singletons):
        return None  # RFC 5646 section 2.2.5 and 2.2.6: no repeated variant or extension singleton
    language, _, extlangs = match["language"].partition("-")
    parts = [_DEPRECATED.get(language, language), *filter(None, [extlangs])]
    if match["script"]:
        parts.append(match["script"].title())
    if match["region"]:
        parts.append(match["region"].upper())
    return "-".join(parts) + "".join(match.group("variants", "extensions")) + (match["private"] or "")


def identify_language(text: str) -> str | None:
    """The primary BCP 47 subtag of the language ``text`` is written in (``ja``, ``en``), None when unsure.

    None for text without letters (digits, punctuation, empty) and for Latin, Cyrillic, Arabic, ... text the
    model cannot place with probability :data:`MIN_CONFIDENCE` (single names, codes). Han-only text is
    ``zh``: a kanji-only Japanese answer (``小笠原諸島``) cannot be told apart, which is why staging asks the
    question first (Japanese questions carry kana) and the answer only when the question gives None.
    """
    text = text[:MAX_CHARS]
    if not any(map(str.isalpha, text)):
        return None
    if tag := _cjk_language(text):
        return tag
    label, confidence = _identifier().classify(text)
    if confidence < MIN_CONFIDENCE:
        return None
    language: str = _MACROLANGUAGE.get(label, label)  # py3langid is untyped
    return language


def identify_languages(texts: Sequence[str]) -> list[str | None]:
    """:func:`identify_language` of each text. A repeated text (templated questions, stock answers) runs once per
    process while it is among the last ``_REMEMBERED`` distinct ones: staging calls this once per batch, and the
    same questions come back batch after batch."""
    return [_identified(text[:MAX_CHARS]) for text in texts]


_REMEMBERED = 8192
"""Distinct texts whose language is kept, each cut to MAX_CHARS (all that is read): at most a few MiB."""


@lru_cache(maxsize=_REMEMBERED)
def _identified(text: str) -> str | None:
    return identify_language(text)


def _cjk_language(text: str) -> str | None:
    """``ko``, ``ja`` or ``zh`` when CJK characters outweigh the text's other letters, else None."""
    kana, hangul = len(_KANA.findall(text)), len(_HANGUL.findall(text))
    cjk = kana + hangul + len(_HAN.findall(text))
    if not cjk or _CJK_WEIGHT * cjk < sum(map(str.isalpha, text)) - cjk:
        return None
    if hangul > kana:
        return "ko"
    return "ja" if kana else "zh"


_LOADING = threading.Lock()


def _identifier() -> LanguageIdentifier:
    """The model, loaded once per process: staging slices run in threads, and each first call would load its own
    copy (about 3 CPU-s and 135 MiB each) if they did not wait for the first."""
    with _LOADING:
        return _loaded_identifier()


@cache
def _loaded_identifier() -> LanguageIdentifier:
    """py3langid's bundled model with calibrated probabilities and only the labels it may return, loaded once.

    Built from the restricted columns rather than with ``set_languages``, which keeps the full 27 MB weight
    matrix next to the restricted copy; the copy is made row-major, as scoring gathers rows (30 % faster).
    """
    import numpy as np
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    full = LanguageIdentifier.from_model_file(MODEL_FILE)
    keep = [i for i, label in enumerate(full.nb_classes) if label not in _NOT_LANGUAGES | _CJK_LABELS]
    return LanguageIdentifier(
        np.ascontiguousarray(full.nb_ptc[:, keep]),
        full.nb_pc[keep],
        [full.nb_classes[i] for i in keep],
        full.tk_nextmove,
        full.tk_output,
        norm_probs=True,
        tk_row=full.tk_row,
    )
