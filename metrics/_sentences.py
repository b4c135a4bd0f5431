"""Sentence splitting for the embedding signals: Chinese and Japanese by their full stops, Latin-script text by
``.!?`` with care for abbreviations, initials, decimals and German ordinals. Pure, rule-based, no model.

A CJK sentence ends at 。！？ (and the fullwidth full stop), or at ``!``/``?``/``.`` followed by CJK text, with
any closing quotes or brackets kept on the sentence they close. A Latin sentence ends at ``.``, ``!`` or ``?``
(runs such as ``?!`` or ``...`` included, closing quotes kept) followed by white space, except after a known
abbreviation, a single letter (an initial: ``J. K. Rowling``), or when the next word starts in lower case (an
abbreviation the list does not know: ``approx. ten``). In German, a number of one or two digits with a full stop is
an ordinal (``am 3. Oktober``), not a sentence end. Line breaks always end a sentence (lists, headings).
"""

from __future__ import annotations

import re

__all__ = ["split_sentences"]

_CLOSERS = "\"'\u201d\u2019」』）)]】\u3015》"  # closing quotes and brackets
_CLOSER_CLASS = "[" + re.escape(_CLOSERS) + "]"
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\uff66-\uff9f"
# A CJK full stop, with its closing quotes; or Latin punctuation directly followed by CJK text.
_CJK_END = re.compile(rf"[。！？\uff0e｡]+{_CLOSER_CLASS}*|[.!?]+{_CLOSER_CLASS}*(?=[{_CJK}])")
# Latin punctuation followed by white space (or the end): a candidate end, checked against the word before.
_LATIN_END = re.compile(rf"[.!?…]+{_CLOSER_CLASS}*(?=\s|$)")
_WORD_BEFORE = re.compile(r"(\S+)$")
_ABBREVIATIONS = frozenset(
    # Lower-cased, without the final full stop. English, German, French, Spanish titles and common Latin forms.
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "cf",
        "al",
        "approx",
        "ca",
        "no",
        "nos",
        "vol",
        "fig",
        "figs",
        "p",
        "pp",
        "ed",
        "eds",
        "inc",
        "ltd",
        "co",
        "corp",
        "dept",
        "est",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "u.s",
        "u.k",
        "a.m",
        "p.m",
        "z.b",
        "d.h",
        "bzw",
        "usw",
        "u.a",
        "o.ä",
        "ggf",
        "evtl",
        "inkl",
        "nr",
        "str",
        "hr",
        "fr",
        "dipl",
        "s.o",
        "s.u",
        "vgl",
        "m",
        "mme",
        "mlle",
        "env",
        "av",
        "sra",
        "sres",
        "dra",
        "pág",
        "núm",
    ]
)
_GERMAN_ORDINAL = re.compile(r"^\d{1,2}\.$")


def split_sentences(text: str, language: str | None = None) -> list[str]:
    """The sentences of ``text``, stripped, blank ones dropped; ``language`` (BCP 47) enables German ordinals.

    >>> split_sentences("東京は日本の首都です。人口は約1400万人です！")
    ['東京は日本の首都です。', '人口は約1400万人です！']
    >>> split_sentences("Dr. Smith met J. K. Rowling in the U.S. in 1998. It was raining.")
    ['Dr. Smith met J. K. Rowling in the U.S. in 1998.', 'It was raining.']
    >>> split_sentences("Lo regula el manual de RR. HH. de la empresa. No dice más.", "es")
    ['Lo regula el manual de RR. HH. de la empresa.', 'No dice más.']
    >>> split_sentences("Am 3. Oktober 1990 wurde Deutschland vereint. Das war z.B. ein Feiertag.", "de")
    ['Am 3. Oktober 1990 wurde Deutschland vereint.', 'Das war z.B. ein Feiertag.']
    """
    german = (language or "").lower().startswith("de")
    sentences: list[str] = []
    for line in text.splitlines():
        for piece in _split_at(line, _CJK_END):
            sentences.extend(_split_latin(piece, german=german))
    return [s for s in (s.strip() for s in sentences) if s]


def _split_at(text: str, pattern: re.Pattern[str]) -> list[str]:
    pieces, start = [], 0
    for match in pattern.finditer(text):
        pieces.append(text[start : match.end()])
        start = match.end()
    pieces.append(text[start:])
    return pieces


def _split_latin(text: str, *, german: bool) -> list[str]:
    pieces, start = [], 0
    for match in _LATIN_END.finditer(text):
        if match.group().startswith(".") and not _ends_sentence(text, match, german=german):
            continue
        pieces.append(text[start : match.end()])
        start = match.end()
    pieces.append(text[start:])
    return pieces


def _is_spanish_plural_initials(word: str) -> bool:
    """A doubled capital, Spanish's plural abbreviation (``EE. UU.``, ``RR. HH.``, ``CC. OO.``)."""
    return len(word) == 2 and word[0] == word[1] and word.isalpha() and word.isupper()


def _ends_sentence(text: str, match: re.Match[str], *, german: bool) -> bool:
    """Whether the full stop of ``match`` ends a sentence, judged by the word it ends and the word after it."""
    before = _WORD_BEFORE.search(text, 0, match.start() + 1)
    word = before.group(1) if before else ""
    core = word.rstrip(".").lstrip(_CLOSERS + "(").lower()
    if core in _ABBREVIATIONS or (len(core) == 1 and core.isalpha()) or _is_spanish_plural_initials(word.rstrip(".")):
        return False
    if german and _GERMAN_ORDINAL.match(word):
        return False
    following = text[match.end() :].lstrip()
    return not (following[:1].isalpha() and following[:1].islower())
