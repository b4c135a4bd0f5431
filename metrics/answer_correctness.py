"""Answer correctness: factual F1 of the answer's statements against the reference, blended with
semantic similarity (ragas)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragpulse.metrics._prompting import (
    ReplyReader,
    Trace,
    array_schema,
    data_message,
    embed_similarities,
    object_schema,
    system_prompt,
)
from ragpulse.metrics._request import MetricName
from ragpulse.metrics._spec import MetricSpec
from ragpulse.metrics._statements import answer_statements
from ragpulse.metrics.batch import TraceBatch
from ragpulse.metrics.errors import ShapeError
from ragpulse.metrics.judge import JudgeContext, JudgeRequest, Outcome, ask

__all__ = [
    "CLASSIFY_INSTRUCTIONS",
    "DEFAULT_WEIGHTS",
    "PROMPT_VERSION",
    "SPEC",
    "AnswerCorrectness",
    "Classification",
    "answer_correctness",
    "build_classify_request",
    "create",
    "factual_f1",
    "parse_classification",
]

SPEC = MetricSpec(
    name="answer_correctness",
    version="2.0.0",
    summary="Weighted mean of the factual F1 of the answer's statements against the reference (LLM judge) "
    "and the answer's semantic similarity to the reference; weights 0.75 / 0.25 by default.",
)
PROMPT_VERSION = "answer_correctness/3"
"""Covers both steps: the shared statement prompt (``answer_statements/3``) and the classification prompt;
2 names the trace's language in both; 3 sends the inputs, and the statements of step 1 (they derive
from the answer), as one JSON object of data, never as instructions."""
DEFAULT_WEIGHTS = (0.75, 0.25)

CLASSIFY_INSTRUCTIONS = """\
Compare the "answer_statements" with the reference answer ("reference") to the "question". For each \
statement, in order, "in_reference" is true if the reference answer supports it (true positive), \
false if not (false positive); give a one-sentence reason before the verdict. Then list in "missing" \
the facts of the reference answer that no statement covers (false negatives), each as a short \
self-contained statement; an empty list if none.
Reply with JSON only: {"verdicts": [{"statement": string, "reason": string, "in_reference": boolean}, \
...], "missing": [string, ...]}"""

_VERDICT = object_schema(
    {"statement": {"type": "string"}, "reason": {"type": "string"}, "in_reference": {"type": "boolean"}}
)


@dataclass(frozen=True)
class Classification:
    """TP / FP / FN counts: answer statements the reference supports, ones it does not, reference facts missed."""

    true_positives: int
    false_positives: int
    false_negatives: int


def build_classify_request(
    question: str, statements: Sequence[str], reference: str, language: str | None = None
) -> JudgeRequest:
    """One request classifying every answer statement (TP/FP) and listing the reference facts missed (FN);
    reasons and missing facts in ``language``."""
    return JudgeRequest(
        metric=SPEC.name,
        prompt_version=PROMPT_VERSION,
        step="classify",
        messages=(
            (
                "system",
                system_prompt(
                    CLASSIFY_INSTRUCTIONS, language, "the reasons and missing facts", fallback="the reference answer"
                ),
            ),
            (
                "user",
                data_message(question=question, reference=reference, answer_statements=statements),
            ),
        ),
        schema=object_schema(
            {"verdicts": array_schema(_VERDICT, len(statements)), "missing": array_schema({"type": "string"})}
        ),
    )


def parse_classification(raw: str, record_id: str, *, expected: int) -> Classification:
    """The TP/FP/FN counts of a reply holding exactly ``expected`` verdicts.

    >>> parse_classification(
    ...     '{"verdicts": [{"statement": "a", "reason": "r", "in_reference": true}], "missing": ["b", "c"]}',
    ...     "q1", expected=1)
    Classification(true_positives=1, false_positives=0, false_negatives=2)
    """
    reader = ReplyReader(raw, record_id)
    root = reader.root()
    flags = []
    for position, value in enumerate(reader.items(root, "verdicts", length=expected)):
        field = f"verdicts[{position}]"
        verdict = reader.entry(value, field)
        reader.text(verdict, "statement", f"{field}.statement", allow_blank=True)
        reader.text(verdict, "reason", f"{field}.reason", allow_blank=True)
        flags.append(reader.boolean(verdict, "in_reference", f"{field}.in_reference"))
    missing = reader.texts(root, "missing")
    tp = sum(flags)
    return Classification(tp, len(flags) - tp, len(missing))


def factual_f1(counts: Classification) -> float:
    """F1 = TP / (TP + (FP + FN) / 2); 0.0 when there is no true positive.

    >>> factual_f1(Classification(true_positives=2, false_positives=1, false_negatives=1))
    0.6666666666666666
    """
    tp, errors = counts.true_positives, counts.false_positives + counts.false_negatives
    return tp / (tp + 0.5 * errors) if tp else 0.0


def answer_correctness(f1: float, similarity: float, weights: tuple[float, float] = DEFAULT_WEIGHTS) -> float:
    """AC = (w_f · F1 + w_s · SIM) / (w_f + w_s), the weighted average ragas takes.

    >>> answer_correctness(0.5, 1.0)
    0.625
    """
    w_f, w_s = weights
    return (w_f * f1 + w_s * similarity) / (w_f + w_s)


def _weights(value: Any) -> tuple[float, float]:
    expected = "two finite numbers >= 0, not both 0: (factual, semantic)"
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise ShapeError("answer_correctness_weights", expected, repr(value))
    for weight in value:
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) or weight < 0:
            raise ShapeError("answer_correctness_weights", expected, repr(value))
    if value[0] + value[1] <= 0:
        raise ShapeError("answer_correctness_weights", expected, repr(value))
    return float(value[0]), float(value[1])


class AnswerCorrectness:
    """Answer correctness as defined by ragas.

    AC = (w_f · F1 + w_s · SIM) / (w_f + w_s) with F1 = TP / (TP + (FP + FN) / 2), where TP are the
    answer's statements the reference supports, FP those it does not, FN the reference's facts the
    answer misses; SIM is the cosine similarity (clipped at 0) of the embedder's vectors of the
    answer and the reference. Weights: options["answer_correctness_weights"], default (0.75, 0.25).

    Calls: the answer's statements (the identical request faithfulness sends, so a caching client
    answers it once for both), then one classification call given the statements and the reference
    text; ragas makes a third call to split the reference first. With w_f = 0 the judge is not
    called; with w_s = 0 the embedder is not needed. Not applicable without a question, an answer
    or a reference, without an embedder when w_s > 0 (``no_embedder``), or when the answer holds no
    statement (``no_statements``; ragas scores 1.0 there).
    """

    name = SPEC.name
    spec = SPEC
    prompt_version = PROMPT_VERSION
    uses_llm = True

    def __init__(self, weights: Sequence[float] = DEFAULT_WEIGHTS) -> None:
        self.weights = _weights(weights)

    async def score(self, batch: TraceBatch, index: int, context: JudgeContext) -> Outcome:
        trace = Trace.of(batch, index)
        if (reason := trace.missing("question", "answer", "reference")) is not None:
            return Outcome.not_applicable(reason)
        w_f, w_s = self.weights
        if w_s > 0 and context.embedder is None:
            return Outcome.not_applicable("no_embedder")
        f1 = similarity = 0.0
        if w_f > 0:
            statements = await answer_statements(context.judge, trace)
            if not statements:
                return Outcome.not_applicable("no_statements")
            (counts,) = await ask(
                context.judge,
                build_classify_request(trace.question, statements, trace.reference, trace.language),
                lambda raw: parse_classification(raw, trace.trace_id, expected=len(statements)),
            )
            f1 = factual_f1(counts)
        if w_s > 0 and context.embedder is not None:
            similarities = await embed_similarities(context.embedder, trace.answer.strip(), [trace.reference.strip()])
            similarity = float(similarities[0])
        return Outcome.ok(answer_correctness(f1, similarity, self.weights))


def create(request: MetricName, options: Mapping[str, Any]) -> AnswerCorrectness:
    """The registry's factory: reads ``answer_correctness_weights`` (default (0.75, 0.25))."""
    return AnswerCorrectness(options.get("answer_correctness_weights", DEFAULT_WEIGHTS))
