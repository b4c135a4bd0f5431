"""Refusal / non-answer: 1 when the answer declines or says it cannot answer, 0 when it attempts an answer.

No labels, no judge, no model: a per-language phrase lexicon (``metrics/_refusal_lexicon.py``) and one structural
rule, measured on a labelled set of 526 answers in seven languages (``tests/fixtures/refusal``,
``bench/bench_refusal.py``; per-language precision and recall in docs/metrics.md).

How an answer is read:

1. NFKC, case-folded, typographic apostrophes made ``'``; quoted spans removed, since a quoted error message or a
   quoted question ("I can't log in, what should I do?") is someone else's words. An answer that is one quoted span
   is unwrapped instead.
2. Split into sentences (``.!?;`` and line breaks, ``。``) and clauses (commas, ``、``, dashes, Korean ``-지만``); a
   comma before a subordinate question word (``, whether``, ``, wann``, ``, si``) does not split, since it completes
   "it does not say, when ...".
3. Each clause is a *refusal* (the lexicon's ``refusal``, ``whole`` or sourced absence patterns), *courtesy*
   (apologies, thanks, referrals: skipped) or *content*.
4. **The answer is a refusal when its last clause that is not courtesy is a refusal.** "I don't know the exact date,
   but the office was open by March 2015" ends in content: a partial answer, 0. "The documents cover 2021 and 2022,
   but not 2023, so I can't tell you" ends in a refusal: 1. "I couldn't find it. Please contact support." is 1.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator

import numpy as np

from ragpulse.metrics._refusal_lexicon import LEXICONS, Lexicon
from ragpulse.metrics._spec import MetricResult, MetricSpec
from ragpulse.metrics.batch import TraceBatch

__all__ = ["LANGUAGES", "NO_ANSWER", "SPEC", "UNSUPPORTED_LANGUAGE", "is_refusal", "score"]

SPEC = MetricSpec(
    name="refusal",
    version="1.0.0",
    summary='1 if the answer declines or says it cannot answer ("I don\'t know", "the documents do not say"), '
    "0 if it attempts an answer; by a per-language phrase lexicon.",
    higher_is_better=False,
)

NO_ANSWER = "no_answer"
UNSUPPORTED_LANGUAGE = "unsupported_language"

LANGUAGES: tuple[str, ...] = tuple(sorted(LEXICONS))
"""Primary language subtags with a lexicon. A trace in another known language is ``unsupported_language``; one of
unknown language is read with every lexicon."""

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00b4": "'", "`": "'"})
_QUOTED = re.compile(
    r'"[^"\n]{0,300}"|\u201c[^\u201d\n]{0,300}\u201d|\u201e[^\u201c\u201d\n]{0,300}[\u201c\u201d]'
    r"|«[^»\n]{0,300}»|「[^」\n]{0,300}」|『[^』\n]{0,300}』"
)
_SENTENCE_END = re.compile(r"[.…]+(?=\s|$)|[!?]+|[。\n]+")
# A comma followed by a subordinate question word, complementiser or purpose clause, maybe after a preposition,
# continues the clause ("erwähnt nicht, wann ..."; "kann nicht sagen, mit welcher Version ..."; "liegen nicht
# genügend Informationen vor, um ... zu beantworten").
_SUBORDINATE = (
    "whether|who|whom|whose|when|where|how|what|why|which|if|"
    "wer|wen|wem|wessen|was|wann|wo|wie|warum|weshalb|welche[rsnm]?|ob|dass|woher|wohin|um|"
    "si|qui|quand|où|comment|pourquoi|quel(?:le)?s?|combien|pour|"
    "quién(?:es)?|cuándo|dónde|cómo|qué|cuál(?:es)?|cuánto|para"
)
# Contrast and consequence words start a new clause even before a question word (", but what I found ...").
_CONTRAST = "but|yet|so|and|aber|doch|jedoch|und|daher|pero|sino|y|así|mais|et|donc"
_CLAUSE_END = re.compile(
    rf",(?!\s*(?:(?!(?:{_CONTRAST})\b)\w+\s+)?(?:{_SUBORDINATE})\b)\s*|;\s*|、|\s[\u2014\u2013-]\s|(?<=지만)\s+"
)
_LABEL = re.compile(r"^(?:answer|response|antwort|respuesta|réponse|回答|答案|答|답변|답)\s*:\s*")
_EDGES = re.compile(r"^[\W_]+|[\W_]+$")
_SPACES = re.compile(r"[^\S\n]+")
_LAST_WORD = re.compile(r"\w+$")


def is_refusal(answer: str, language: str | None = None) -> bool:
    """Whether ``answer`` is a refusal or non-answer, read with the lexicon of ``language`` (a primary subtag) and
    English's, or with every lexicon when ``language`` is None.

    >>> is_refusal("I'm sorry, but the provided documents do not mention the refund policy.", "en")
    True
    >>> is_refusal("The documents do not give the total, but the licence costs $1,200 a year.", "en")
    False
    >>> is_refusal("申し訳ありませんが、その情報は見つかりませんでした。", "ja"), is_refusal("抱歉，我无法回答。")
    (True, True)
    >>> is_refusal('The error "I cannot find the file" means the path is wrong.', "en")
    False
    """
    lexicons = list(LEXICONS.values()) if language is None else _lexicons_for(language)
    last_is_refusal = False
    for sentence in _sentences(_unquoted(_normalized(answer))):
        said = ""
        for clause in _CLAUSE_END.split(sentence):
            core = _EDGES.sub("", _LABEL.sub("", _EDGES.sub("", clause)))
            if not core:
                continue
            said = f"{said} {core}"
            kind = _clause_kind(core, said, lexicons)
            if kind != "courtesy":
                last_is_refusal = kind == "refusal"
    return last_is_refusal


def score(batch: TraceBatch, k: int | None = None) -> MetricResult:
    """``refusal`` per trace: ``no_answer`` without a non-blank answer, ``unsupported_language`` for a known
    language without a lexicon (:data:`LANGUAGES`)."""
    values = np.full(len(batch), np.nan)
    reasons = np.full(len(batch), None, dtype=object)
    for i, answer in enumerate(batch.answers):
        language = batch.language_of(i)
        if answer is None or not answer.strip():
            reasons[i] = NO_ANSWER
        elif language is not None and language not in LEXICONS:
            reasons[i] = UNSUPPORTED_LANGUAGE
        else:
            values[i] = float(is_refusal(answer, language))
    return MetricResult.from_values(values, reasons)


def _lexicons_for(language: str) -> list[Lexicon]:
    """The language's lexicon, then English's: assistants often fall back to English when they decline."""
    return [LEXICONS[name] for name in dict.fromkeys((language, "en")) if name in LEXICONS]


def _normalized(text: str) -> str:
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).translate(_APOSTROPHES))


def _unquoted(text: str) -> str:
    stripped = text.strip()
    if _QUOTED.fullmatch(stripped):
        return stripped[1:-1]
    return _QUOTED.sub(" ", text)


def _sentences(text: str) -> Iterator[str]:
    """Sentences of NFKC text, case-folded; a full stop after one or two capitals is an abbreviation or an initial
    (``RR. HH.``, ``EE. UU.``, ``J. K. Rowling``), not a sentence end."""
    start = 0
    for end in _SENTENCE_END.finditer(text):
        if text[end.start()] == "." and _is_initials(text, end.start()):
            continue
        yield text[start : end.start()].casefold()
        start = end.end()
    yield text[start:].casefold()


def _is_initials(text: str, stop: int) -> bool:
    word = _LAST_WORD.search(text, 0, stop)
    return word is not None and len(word[0]) <= 2 and word[0].isalpha() and word[0].isupper()


def _clause_kind(clause: str, said: str, lexicons: Iterable[Lexicon]) -> str:
    """``refusal``, ``courtesy`` or ``content``; ``said`` is the sentence up to and including the clause, where a
    sourced absence looks for the source it speaks of."""
    lexicons = list(lexicons)
    for lexicon in lexicons:
        if (
            lexicon.refusal.search(clause)
            or lexicon.whole.fullmatch(clause)
            or (lexicon.sourced.search(clause) and lexicon.sources.search(said))
        ):
            return "refusal"
    if any(lexicon.courtesy.search(clause) for lexicon in lexicons):
        return "courtesy"
    return "content"
