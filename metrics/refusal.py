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

Before the lexicon, the application's own fallback sentences (``[scoring] refusal_phrases``): an answer holding one
of them, both read by :func:`phrase_form`, is a refusal. Most RAG applications decline with one sentence their system
prompt prescribes; naming it catches what no general lexicon can know.

``embedding_refusal`` is the same question answered by the run's encoder instead of phrases: the answer's embedding
against labelled prototypes (the development answers of ``tests/fixtures/refusal``, embedded once and shipped with
the encoder's identity), by the vote of its nearest neighbours (:func:`classify`). It recalls paraphrases the lexicon
misses, at a lower precision, and runs on the embedding signals' sample (docs/metrics.md).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ragpulse.metrics._prompting import Trace
from ragpulse.metrics._refusal_lexicon import LEXICONS, Lexicon
from ragpulse.metrics._request import MetricName
from ragpulse.metrics._sentences import split_sentences
from ragpulse.metrics._spec import MetricResult, MetricSpec
from ragpulse.metrics._vectors import unit_rows
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.errors import ShapeError
from ragpulse.metrics.judge import JudgeContext, Outcome

__all__ = [
    "EMBEDDING_PROMPT_VERSION",
    "EMBEDDING_SPEC",
    "ENCODER_OPTION",
    "LANGUAGES",
    "NO_ANSWER",
    "NO_EMBEDDER",
    "NO_PROTOTYPES",
    "PROTOTYPES_FOR_OTHER_ENCODER",
    "PROTOTYPES_OPTION",
    "SPEC",
    "UNSUPPORTED_LANGUAGE",
    "EmbeddingRefusal",
    "RefusalPrototypes",
    "classify",
    "create_embedding",
    "is_refusal",
    "phrase_form",
    "phrase_matcher",
    "score",
]

SPEC = MetricSpec(
    name="refusal",
    version="1.0.0",
    summary='1 if the answer declines or says it cannot answer ("I don\'t know", "the documents do not say"), '
    "0 if it attempts an answer; by a per-language phrase lexicon.",
    higher_is_better=False,
)

EMBEDDING_SPEC = MetricSpec(
    name="embedding_refusal",
    version="1.0.0",
    summary="1 if the answer's embedding votes with refusals among its nearest labelled prototype answers, 0 if "
    "with answers; the run's encoder, on the embedding signals' sample.",
    higher_is_better=False,
)
EMBEDDING_PROMPT_VERSION = "embedding_refusal/1"
"""No prompt: versions the computation (query side, the vote); the embedder and the prototypes are appended."""

NO_ANSWER = "no_answer"
UNSUPPORTED_LANGUAGE = "unsupported_language"
NO_EMBEDDER = "no_embedder"
NO_PROTOTYPES = "no_prototypes"
PROTOTYPES_FOR_OTHER_ENCODER = "prototypes_for_other_encoder"

PROTOTYPES_OPTION = "refusal_prototypes"
"""The judge context option holding the :class:`RefusalPrototypes` (tasks/embeddings/refusal_prototypes.py loads
them)."""
ENCODER_OPTION = "embedder_identity"
"""The judge context option naming the run's encoder as ``embedding_identity`` does; prototypes computed with another
encoder lie in another space, so the metric is then not applicable rather than wrong."""

LANGUAGES: tuple[str, ...] = tuple(sorted(LEXICONS))
"""Primary language subtags with a lexicon. A trace in another known language is ``unsupported_language``; one of
unknown language is read with every lexicon."""

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00b4": "'", "`": "'"})
_QUOTED = re.compile(
    r'"[^"\n]{0,300}"|\u201c[^\u201d\n]{0,300}\u201d|\u201e[^\u201c\u201d\n]{0,300}[\u201c\u201d]'
    r"|«[^»\n]{0,300}»|「[^」\n]{0,300}」|『[^』\n]{0,300}』"
)
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
    for sentence in split_sentences(_unquoted(_normalized(answer)), language):
        said = ""
        for clause in _CLAUSE_END.split(sentence.casefold()):
            core = _EDGES.sub("", _LABEL.sub("", _EDGES.sub("", clause)))
            if not core:
                continue
            said = f"{said} {core}"
            kind = _clause_kind(core, said, lexicons)
            if kind != "courtesy":
                last_is_refusal = kind == "refusal"
    return last_is_refusal


def score(batch: TraceBatch, k: int | None = None, *, phrases: Sequence[str] = ()) -> MetricResult:
    """``refusal`` per trace: 1 when the answer holds one of the application's own fallback ``phrases``
    (:func:`phrase_matcher`) or the lexicon reads it as a refusal; ``no_answer`` without a non-blank answer,
    ``unsupported_language`` for a known language without a lexicon (:data:`LANGUAGES`), unless a phrase matched:
    the application's own sentence is a refusal in any language."""
    matches = phrase_matcher(phrases)
    values = np.full(len(batch), np.nan)
    reasons = np.full(len(batch), None, dtype=object)
    for i, answer in enumerate(batch.answers):
        language = batch.language_of(i)
        if answer is None or not answer.strip():
            reasons[i] = NO_ANSWER
        elif matches(answer):
            values[i] = 1.0
        elif language is not None and language not in LEXICONS:
            reasons[i] = UNSUPPORTED_LANGUAGE
        else:
            values[i] = float(is_refusal(answer, language))
    return MetricResult.from_values(values, reasons)


_WORD = re.compile(r"\w+")
# Scripts written without spaces between words: a phrase edge there is no word edge.
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def phrase_form(text: str) -> str:
    """``text`` as fallback phrases are compared: normalised as the lexicon reads answers (NFKC, typographic
    apostrophes, case-folded), then its words alone, one space apart, so punctuation and spacing never decide.

    >>> phrase_form("Sorry — I can\u2019t  help with THAT.")
    'sorry i can t help with that'
    >>> phrase_form("申し訳ありませんが、お答えできません。")
    '申し訳ありませんが お答えできません'
    """
    return " ".join(_WORD.findall(_normalized(text).casefold()))


def phrase_matcher(phrases: Sequence[str]) -> Callable[[str], bool]:
    """A test of whether an answer holds one of ``phrases`` (both in :func:`phrase_form`); where a phrase begins or
    ends with a letter of a spaced script, that end must be a word edge ("no help" is not in "piano helper").

    >>> holds = phrase_matcher(["I'm sorry, I can't help with that", "その質問にはお答えできません"])
    >>> holds("I\u2019m SORRY - I can't help with that. Try our forum.")
    True
    >>> holds("申し訳ございません。その質問にはお答えできません。")
    True
    >>> holds("I can't help with that bug, but restarting fixes it.")
    False
    """
    alternatives = []
    for phrase in dict.fromkeys(phrase_form(p) for p in phrases):
        if not phrase:
            continue
        head = "" if _UNSPACED.match(phrase[0]) else r"(?<!\w)"
        tail = "" if _UNSPACED.match(phrase[-1]) else r"(?!\w)"
        alternatives.append(head + re.escape(phrase) + tail)
    if not alternatives:
        return lambda answer: False
    pattern = re.compile("|".join(alternatives))
    return lambda answer: pattern.search(phrase_form(answer)) is not None


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


@dataclass(frozen=True)
class RefusalPrototypes:
    """Labelled answers as embeddings, and the rule that classifies a new answer by them.

    ``vectors`` are unit rows (one per labelled answer, ``labels`` 1 refusal, 0 answer), embedded by ``encoder``
    (``embedding_identity``: model and engine version). ``k`` > 0 is a k-nearest-neighbour vote: a refusal when at
    least a share ``share`` of the ``k`` most similar prototypes (cosine) are refusals; ``k`` = 0 is the nearest
    class centroid. ``digest`` names the prototypes' content (published with the scores' prompt version)."""

    vectors: NDArray[np.floating[Any]]
    labels: NDArray[np.int8]
    encoder: str
    k: int
    share: float
    digest: str

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or len(self.vectors) != len(self.labels):
            got = f"{self.vectors.shape} and {len(self.labels)} labels"
            raise ShapeError("prototypes", "one label per row of a 2-d array", got)
        if set(np.unique(self.labels).tolist()) != {0, 1}:
            raise ShapeError("prototypes", "labels 0 and 1, both present", sorted(set(self.labels.tolist())))
        if self.k < 0 or self.k > len(self.labels) or not 0.0 < self.share <= 1.0:
            raise ShapeError("prototypes", "0 <= k <= prototypes and 0 < share <= 1", f"k={self.k} share={self.share}")

    @functools.cached_property
    def unit_vectors(self) -> NDArray[np.float64]:
        return unit_rows(np.asarray(self.vectors, dtype=np.float64))

    @functools.cached_property
    def centroids(self) -> NDArray[np.float64]:
        """The unit mean of each class's rows: answers (row 0), refusals (row 1)."""
        return unit_rows(np.stack([self.unit_vectors[self.labels == label].mean(axis=0) for label in (0, 1)]))


def classify(answer_vectors: NDArray[np.floating[Any]], prototypes: RefusalPrototypes) -> NDArray[np.bool_]:
    """Whether each answer row is a refusal by the prototypes' rule (cosines: rows need not be unit length).

    >>> protos = RefusalPrototypes(np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]]), np.array([1, 1, 0], np.int8),
    ...                            "toy", k=1, share=1.0, digest="toy")
    >>> classify(np.array([[2.0, 0.5], [0.1, 1.0]]), protos).tolist()
    [True, False]
    >>> from dataclasses import replace
    >>> classify(np.array([[1.0, 1.1]]), replace(protos, k=0)).tolist()  # nearest centroid: (0.95, 0.05) vs (0, 1)
    [False]
    """
    rows = unit_rows(np.atleast_2d(np.asarray(answer_vectors, dtype=np.float64)))
    vectors = prototypes.unit_vectors
    if rows.shape[1] != vectors.shape[1]:
        raise ShapeError("answer_vectors", f"rows of width {vectors.shape[1]}", f"width {rows.shape[1]}")
    if prototypes.k == 0:
        cosines = rows @ prototypes.centroids.T
        return np.asarray(cosines[:, 1] > cosines[:, 0])
    similarity = rows @ vectors.T
    nearest = np.argpartition(-similarity, prototypes.k - 1, axis=1)[:, : prototypes.k]
    labels = np.asarray(prototypes.labels, dtype=np.int64)
    return np.asarray(labels[nearest].mean(axis=1) >= prototypes.share - 1e-9)


class EmbeddingRefusal:
    """``embedding_refusal`` of one trace with the run's embedder (``JudgeContext.embedder``, the answer on the query
    side as ``embedding_answer_relevance`` embeds it, so the two share one encode) and the prototypes in
    ``context.options`` (:data:`PROTOTYPES_OPTION`, :data:`ENCODER_OPTION`); uses no LLM.

    Not applicable without an answer (``no_answer``), in a known language the prototypes do not hold
    (``unsupported_language``), without an embedder or prototypes (``no_embedder``, ``no_prototypes``), and when the
    run's encoder is not the one the prototypes were embedded with (``prototypes_for_other_encoder``)."""

    uses_llm = False

    def __init__(self) -> None:
        self.spec = EMBEDDING_SPEC
        self.name = EMBEDDING_SPEC.name
        self.prompt_version = EMBEDDING_PROMPT_VERSION

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
        trace = Trace.of(batch, index)
        if (reason := trace.missing("answer")) is not None:
            return Outcome.not_applicable(reason)
        language = batch.language_of(index)
        if language is not None and language not in LEXICONS:
            return Outcome.not_applicable(UNSUPPORTED_LANGUAGE)
        prototypes = context.options.get(PROTOTYPES_OPTION)
        if context.embedder is None:
            return Outcome.not_applicable(NO_EMBEDDER)
        if not isinstance(prototypes, RefusalPrototypes):
            return Outcome.not_applicable(NO_PROTOTYPES)
        if context.options.get(ENCODER_OPTION) != prototypes.encoder:
            return Outcome.not_applicable(PROTOTYPES_FOR_OTHER_ENCODER)
        rows = await context.embedder.embed([trace.answer.strip()])
        return Outcome.ok(float(classify(rows, prototypes)[0]))


def create_embedding(request: MetricName, options: Mapping[str, Any]) -> EmbeddingRefusal:
    """The registry's factory for ``embedding_refusal``."""
    return EmbeddingRefusal()
