"""The embedding signals: sentence splitting (ja, zh, en, de), the cosine kernels by hand, and the metrics over a
batch with a scripted embedder (which texts go to which side, not-applicable reasons)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from ragpulse.metrics import REGISTRY, TraceBatch, parse_metrics
from ragpulse.metrics.embedding_signals import (
    ANSWER_RELEVANCE,
    ANSWER_SUPPORT,
    CONTEXT_RELEVANCE,
    CONTEXT_RELEVANCE_MEAN,
    FAMILIES,
    EmbeddingSignal,
    answer_support,
    context_relevance,
    cosine_matrix,
    embedded_texts,
    split_sentences,
)
from ragpulse.metrics.errors import ShapeError
from ragpulse.metrics.judge import JudgeContext, judge_batch
from ragpulse.metrics.registry import build_judge_metrics

# --- sentence splitting -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        (
            "富士山は日本一高い山です。標高は3776メートルです！登ったことがありますか？",
            "ja",
            ["富士山は日本一高い山です。", "標高は3776メートルです！", "登ったことがありますか？"],
        ),
        ("答えは「東京」です。そうですね。", "ja", ["答えは「東京」です。", "そうですね。"]),
        (
            "长城位于中国北方。它全长两万多公里！你去过吗？",
            "zh",
            ["长城位于中国北方。", "它全长两万多公里！", "你去过吗？"],
        ),
        ("他说：“今天很好。”我们走吧。", "zh", ["他说：“今天很好。”", "我们走吧。"]),
        ("版本号是3.5。Python is popular. 就这样。", "zh", ["版本号是3.5。", "Python is popular.", "就这样。"]),
        (
            "Dr. Smith met J. K. Rowling in the U.S. in 1998. It cost 3.5 million, e.g. a lot. Really? Yes!",
            "en",
            ["Dr. Smith met J. K. Rowling in the U.S. in 1998.", "It cost 3.5 million, e.g. a lot.", "Really?", "Yes!"],
        ),
        ('He said "Stop." Then he left.', "en", ['He said "Stop."', "Then he left."]),
        ("It holds approx. ten people. Not more.", "en", ["It holds approx. ten people.", "Not more."]),
        (
            "Am 3. Oktober 1990 wurde Deutschland vereint. Das ist z.B. ein Feiertag, bzw. ein Gedenktag. Ja.",
            "de",
            ["Am 3. Oktober 1990 wurde Deutschland vereint.", "Das ist z.B. ein Feiertag, bzw. ein Gedenktag.", "Ja."],
        ),
        ("Er kam 1990. Danach blieb er.", "de", ["Er kam 1990.", "Danach blieb er."]),
        ("- first point\n- second point", "en", ["- first point", "- second point"]),
        ("   ", "en", []),
        ("no full stop at all", None, ["no full stop at all"]),
    ],
)
def test_sentences_split_in_every_script(text: str, language: str | None, expected: list[str]) -> None:
    assert split_sentences(text, language) == expected


def test_a_two_digit_number_ends_an_english_sentence_but_is_an_ordinal_in_german() -> None:
    assert split_sentences("They won on day 12. Then they rested.", "en") == [
        "They won on day 12.",
        "Then they rested.",
    ]
    assert split_sentences("Am 12. Mai kam er.", "de") == ["Am 12. Mai kam er."]


# --- kernels ----------------------------------------------------------------------------------------------------


def test_context_relevance_is_the_best_and_the_mean_cosine() -> None:
    question = np.array([1.0, 0.0, 0.0])
    contexts = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 2.0], [-1.0, 0.0, 0.0]])
    best, mean = context_relevance(question, contexts)
    assert best == pytest.approx(1 / math.sqrt(2))
    assert mean == pytest.approx((1 / math.sqrt(2) + 0.0 - 1.0) / 3)


def test_answer_support_averages_each_sentences_best_context() -> None:
    sentences = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    contexts = np.array([[1.0, 0.0], [-1.0, 0.0]])
    # best cosines: 1.0, 0.0 (both contexts orthogonal), 1/sqrt(2)
    assert answer_support(sentences, contexts) == pytest.approx((1.0 + 0.0 + 1 / math.sqrt(2)) / 3)


def test_kernels_refuse_shapes_that_are_bugs() -> None:
    with pytest.raises(ShapeError):
        cosine_matrix(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ShapeError):
        context_relevance(np.ones(3), np.ones((0, 3)))
    assert cosine_matrix(np.zeros((1, 2)), np.ones((1, 2)))[0, 0] == 0.0


# --- metrics over a batch ---------------------------------------------------------------------------------------


class ScriptedEmbedder:
    """Vectors from a table; records which texts were asked on which side. Passages get a marker dimension flipped
    so that embedding a passage on the query side (or the reverse) changes the scores."""

    def __init__(self, vectors: dict[str, Sequence[float]]) -> None:
        self.vectors = vectors
        self.queries: list[str] = []
        self.passages: list[str] = []

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float64]:
        self.queries += texts
        return np.array([[*self.vectors[t], 0.0] for t in texts])

    async def embed_passages(self, texts: Sequence[str]) -> NDArray[np.float64]:
        self.passages += texts
        return np.array([[*self.vectors[t], 0.0] for t in texts])


VECTORS = {
    "東京の人口は？": [1.0, 0.0, 0.0],
    "東京の人口は約1400万人です。": [1.0, 0.0, 0.0],
    "大阪は食べ物で有名です。": [0.0, 1.0, 0.0],
    "約1400万人です。": [1.0, 1.0, 0.0],
    "大阪も大きいです。": [0.0, 0.0, 1.0],
    "约1400万人。": [1.0, 0.0, 0.0],
    "东京有多少人？": [0.6, 0.8, 0.0],
    "約1400万人です。大阪も大きいです。": [1.0, 0.0, 0.0],  # the whole answer, for answer relevance
}


def batch() -> TraceBatch:
    return TraceBatch(
        trace_ids=["ja", "zh", "no-question", "no-contexts", "no-text", "blank-contexts", "no-answer"],
        context_ids=[[None, None], [None], [None], [], ["d1"], [None], [None]],
        context_texts=[
            ["東京の人口は約1400万人です。", " 大阪は食べ物で有名です。 "],
            ["東京の人口は約1400万人です。"],
            ["東京の人口は約1400万人です。"],
            [],
            [None],
            ["  "],
            ["東京の人口は約1400万人です。"],
        ],
        relevant_ids=[None] * 7,
        relevant_texts=[None] * 7,
        answers=[
            "約1400万人です。大阪も大きいです。",
            "约1400万人。",
            "約1400万人です。",
            "約1400万人です。",
            "約1400万人です。",
            "約1400万人です。",
            None,
        ],
        references=[[] for _ in range(7)],
        questions=[
            "東京の人口は？",
            "东京有多少人？",
            None,
            "東京の人口は？",
            "東京の人口は？",
            "東京の人口は？",
            "東京の人口は？",
        ],
        languages=["ja", "zh", "ja", "ja", "ja", "ja", "ja"],
    )


def scores(embedder: ScriptedEmbedder | None) -> dict[str, tuple[list[float], list[str | None]]]:
    metrics = build_judge_metrics(parse_metrics(sorted(FAMILIES)), {})
    results = asyncio.run(judge_batch(batch(), metrics, JudgeContext(judge=None, embedder=embedder)))  # type: ignore[arg-type]
    return {name: (r.values.tolist(), r.reasons.tolist()) for name, r in results.items()}


def test_signals_of_japanese_and_chinese_traces_by_hand() -> None:
    embedder = ScriptedEmbedder(VECTORS)
    result = scores(embedder)
    relevance, _ = result[CONTEXT_RELEVANCE.name]
    mean, _ = result[CONTEXT_RELEVANCE_MEAN.name]
    support, _ = result[ANSWER_SUPPORT.name]
    answer, _ = result[ANSWER_RELEVANCE.name]
    assert relevance[:2] == pytest.approx([1.0, 0.6])
    assert mean[:2] == pytest.approx([0.5, 0.6])
    # ja: two sentences, best cosines 1/sqrt(2) (to either context) and 0.0; zh: one sentence, cosine 1.0
    assert support[:2] == pytest.approx([(1 / math.sqrt(2) + 0.0) / 2, 1.0])
    assert answer[:2] == pytest.approx([1.0, 0.6])  # the whole answer against the question
    assert {"約1400万人です。", "大阪も大きいです。"} <= set(embedder.queries)  # the sentences, query side
    assert "大阪は食べ物で有名です。" in embedder.passages  # stripped, passage side
    assert not set(embedder.passages) & {"東京の人口は？", "东京有多少人？"}


def test_a_trace_without_what_a_signal_compares_is_not_applicable_with_the_reason() -> None:
    result = scores(ScriptedEmbedder(VECTORS))
    reasons = {name: reasons[2:] for name, (_, reasons) in result.items()}
    assert reasons[CONTEXT_RELEVANCE.name] == ["no_question", "no_contexts", "no_context_text", "no_contexts", None]
    assert reasons[ANSWER_SUPPORT.name] == [None, "no_contexts", "no_context_text", "no_contexts", "no_answer"]
    assert reasons[ANSWER_RELEVANCE.name] == ["no_question", None, None, None, "no_answer"]
    values, _ = result[ANSWER_RELEVANCE.name]
    assert values[3] == pytest.approx(1 / math.sqrt(2)) and math.isnan(values[6])


def test_without_an_embedder_every_signal_says_so() -> None:
    result = scores(None)
    for name in FAMILIES:
        values, reasons = result[name]
        assert reasons[0] == "no_embedder" and math.isnan(values[0])


def test_the_texts_to_prefetch_are_those_the_signals_embed() -> None:
    embedder = ScriptedEmbedder(VECTORS)
    scores(embedder)
    queries, passages = embedded_texts(batch(), FAMILIES)
    assert set(embedder.queries) == set(queries)
    assert set(embedder.passages) == set(passages)
    assert embedded_texts(batch(), frozenset({"answer_f1"})) == ([], [])


def test_the_signals_are_registered_as_embedding_metrics_on_the_cosine_scale() -> None:
    for name in FAMILIES:
        definition = REGISTRY[name]
        assert definition.needs == "embeddings"
        assert (definition.spec.lower, definition.spec.upper) == (-1.0, 1.0)
    (metric,) = build_judge_metrics(parse_metrics([ANSWER_SUPPORT.name]), {})
    assert isinstance(metric, EmbeddingSignal) and not metric.uses_llm
    assert metric.prompt_version == "embedding_signals/1"


def test_only_the_first_five_contexts_in_rank_order_are_compared() -> None:
    # The question's own passage ranked sixth: the signals read the top five, as the generator mostly does.
    others = [f"大阪の話{i}。" for i in range(5)]
    embedder = ScriptedEmbedder(
        {"東京の人口は？": [1.0, 0.0], "東京は大きい。": [1.0, 0.0]} | {text: (0.0, 1.0) for text in others}
    )
    one = TraceBatch(
        trace_ids=["t"],
        context_ids=[[None] * 6],
        context_texts=[[*others, "東京の人口は約1400万人です。"]],
        relevant_ids=[None],
        relevant_texts=[None],
        answers=["東京は大きい。"],
        references=[[]],
        questions=["東京の人口は？"],
        languages=["ja"],
    )
    metrics = build_judge_metrics(parse_metrics([CONTEXT_RELEVANCE.name]), {})
    result = asyncio.run(judge_batch(one, metrics, JudgeContext(judge=None, embedder=embedder)))  # type: ignore[arg-type]
    assert result[CONTEXT_RELEVANCE.name].values.tolist() == [0.0]
    assert embedder.passages == others
    assert embedded_texts(one, frozenset({CONTEXT_RELEVANCE.name}))[1] == others
