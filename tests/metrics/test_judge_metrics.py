"""All judge metrics together: registry entries, calls and prompt characters per trace, determinism,
and a batch where some judge calls fail. The per-module tests hold the exact scores."""

from __future__ import annotations

import asyncio
import doctest
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import (
    DEFAULT_METRICS,
    REGISTRY,
    ShapeError,
    Status,
    TraceBatch,
    _statements,
    answer_correctness,
    answer_relevancy,
    aspect_critique,
    compute,
    context_precision,
    context_recall,
    context_relevance,
    faithfulness,
    parse_metrics,
    semantic_similarity,
)
from ragpulse.metrics.judge import PARSE_ERROR, JudgeCallError, JudgeContext, JudgeMetric, JudgeRequest, judge_batch
from ragpulse.metrics.registry import build_judge_metrics
from tests.doubles.fake_judge import FakeEmbedder, FakeJudge, prompt_chars, reply, traces

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tasks" / "demo" / "corpus" / "ares_sample.jsonl.gz"

JUDGE_FAMILIES = {
    "faithfulness": "faithfulness",
    "answer_relevancy": "answer_relevancy",
    "context_precision": "context_precision",
    "context_precision_without_reference": "context_precision_without_reference",
    "context_recall": "context_recall",
    "context_relevance": "context_relevance",
    "answer_correctness": "answer_correctness",
    "aspect_critique": "aspect_critique:harmfulness",
    "llm_judge": "llm_judge:grounded",
    "answer_semantic_similarity": "answer_semantic_similarity",
}
OPTIONS: dict[str, Any] = {
    "llm_judges": {
        "grounded": {
            "instructions": "Score 1 if the answer is grounded, else 0.",
            "inputs": ["answer", "contexts"],
            "outputs": ["score"],
        }
    }
}
RAGAS_CHARS_PER_TRACE = 29_000
"""ragas 0.4.3 evaluate() with the same four metrics, measured in issue 5."""
FOUR = ["faithfulness", "answer_relevancy", "context_precision", "context_recall"]

QUESTION = 'What was the role played by Raphaël Coleman in the film "Nanny McPhee"?'
ANSWER = (
    'Raphaël Coleman played Eric Brown in "Nanny McPhee", a 2005 British-American comedy fantasy film '
    "directed by Kirk Jones and starring Emma Thompson as Nanny McPhee."
)
REFERENCE = 'Raphaël Coleman played Eric Brown in "Nanny McPhee".'
STATEMENTS = [
    'Raphaël Coleman played Eric Brown in "Nanny McPhee".',
    '"Nanny McPhee" is a 2005 British-American comedy fantasy film.',
    '"Nanny McPhee" was directed by Kirk Jones.',
    'Emma Thompson stars as Nanny McPhee in "Nanny McPhee".',
]


def _realistic_trace() -> dict[str, Any]:
    """The ARES passage answering QUESTION at rank 2 among five passages of 550-650 characters."""
    with gzip.open(CORPUS, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    gold = next(r for r in rows if r["passage_id"] == "hotpotqa-1237")
    others = list(
        dict.fromkeys(
            r["passage"]
            for r in rows
            if r["source"] == "hotpotqa" and r["passage_id"] != "hotpotqa-1237" and 550 <= len(r["passage"]) <= 650
        )
    )
    contexts = [others[0], gold["passage"], *others[1:4]]
    return {"question": QUESTION, "answer": ANSWER, "reference": REFERENCE, "contexts": contexts}


def _script(n_contexts: int) -> dict[tuple[str, str], list[str | BaseException]]:
    return {
        ("answer_statements", "statements"): [reply(statements=STATEMENTS)],
        ("faithfulness", "verdicts"): [
            reply(verdicts=[{"statement": s, "reason": "In context 2.", "supported": True} for s in STATEMENTS])
        ],
        ("answer_relevancy", "questions"): [reply(question=QUESTION, noncommittal=0)] * 3,
        ("context_precision", "verdicts"): [
            reply(verdicts=[{"reason": "r", "useful": int(k == 1)} for k in range(n_contexts)])
        ],
        ("context_recall", "claims"): [reply(claims=[{"claim": REFERENCE, "reason": "Context 2.", "attributed": 1}])],
    }


def _score(batch: TraceBatch, names: list[str], judge: FakeJudge) -> dict[str, Any]:
    metrics = build_judge_metrics(parse_metrics(names), OPTIONS)
    embedder = FakeEmbedder({QUESTION: [1.0, 0.0]})
    return asyncio.run(judge_batch(batch, metrics, JudgeContext(judge, embedder)))


def test_every_judge_family_is_registered_but_not_a_default() -> None:
    for family, example in JUDGE_FAMILIES.items():
        definition = REGISTRY[family]
        assert definition.needs == ("embeddings" if family == "answer_semantic_similarity" else "judge"), family
        assert family not in {name.split("@")[0] for name in DEFAULT_METRICS}
        (metric,) = build_judge_metrics(parse_metrics([example]), OPTIONS)
        assert all(hasattr(metric, attribute) for attribute in JudgeMetric.__annotations__)
        assert metric.name == example
        assert metric.spec.name == family
        # 2.0.0: the LLM prompts name the trace's language (issue 15); the embedding metric is versioned apart.
        assert metric.spec.version == ("2.0.0" if metric.uses_llm else semantic_similarity.SPEC.version)
        assert metric.prompt_version and isinstance(metric.uses_llm, bool)
        assert metric.uses_llm == (family != "answer_semantic_similarity")
    assert REGISTRY["aspect_critique"].spec.takes_variant and REGISTRY["llm_judge"].spec.takes_variant


def test_compute_refuses_judge_metrics() -> None:
    with pytest.raises(ShapeError, match=r"use ragpulse\.metrics\.judge\.judge_batch"):
        compute(traces({"question": "q"}), parse_metrics(["faithfulness"]))


def test_four_ragas_metrics_take_five_calls_and_under_half_ragas_prompt_characters() -> None:
    record = _realistic_trace()
    assert [len(c) for c in record["contexts"]] == pytest.approx([600] * 5, abs=55)
    judge = FakeJudge(_script(len(record["contexts"])))
    results = _score(traces(record), FOUR, judge)
    assert {name: result.values.tolist() for name, result in results.items()} == {
        "faithfulness": [1.0],
        "answer_relevancy": [1.0],
        "context_precision": [0.5],
        "context_recall": [1.0],
    }
    assert len(judge.requests) == 5
    assert judge.unused() == {}
    per_request = {f"{r.metric}/{r.step}": prompt_chars([r]) for r in judge.requests}
    total = prompt_chars(judge.requests)
    context_chars = sum(len(c) for c in record["contexts"])
    print(f"\nprompt characters per trace: {per_request}; total {total} (contexts {context_chars} chars each call)")
    assert total <= RAGAS_CHARS_PER_TRACE // 2, per_request
    for request in judge.requests:  # every context at most once per call
        text = "".join(content for _, content in request.messages)
        assert all(text.count(context.strip()) <= 1 for context in record["contexts"])


def test_same_inputs_give_identical_requests() -> None:
    record = _realistic_trace()
    every = [*FOUR, "context_precision_without_reference", "context_relevance", "answer_correctness"]
    every += ["aspect_critique:coherence", "llm_judge:grounded"]

    def requests() -> list[JudgeRequest]:
        def responder(request: JudgeRequest) -> list[str | BaseException]:
            return [JudgeCallError("unscripted")] * request.n

        judge = FakeJudge(_script(5), responder=responder, cache=True)
        _score(traces(record), every, judge)
        return judge.requests

    first, second = requests(), requests()
    assert first == second
    assert [json.dumps(r.cache_material(), sort_keys=True) for r in first] == [
        json.dumps(r.cache_material(), sort_keys=True) for r in second
    ]


def test_failures_stay_with_their_trace() -> None:
    contexts = ["Rome is the capital of Italy.", "Paris is the capital of France."]
    batch = traces(
        {"question": "Capital of Italy?", "answer": "Rome.", "reference": "Rome.", "contexts": contexts},
        {"question": "Capital of France?", "answer": "Paris.", "reference": "Paris.", "contexts": contexts},
        {"question": "Capital of Spain?", "answer": "Madrid.", "reference": "Madrid.", "contexts": contexts},
        {"question": "Capital of Peru?", "answer": None, "reference": "Lima.", "contexts": contexts},
    )

    def responder(request: JudgeRequest) -> list[str | BaseException]:
        text = request.messages[1][1]
        inputs = json.loads(text)
        if "France?" in text and request.metric == "context_recall":
            return [JudgeCallError("timeout_after_3_retries")]
        if "Spain?" in text and request.metric == "context_recall":
            return ["not json", "still not json"]
        if request.step == "statements":
            answer = inputs["answer"]
            return [reply(statements=[f"The capital is {answer}"])]
        if request.metric == "faithfulness":
            return [reply(verdicts=[{"statement": "s", "reason": "r", "supported": "capital is Rome" in text}])]
        return [reply(claims=[{"claim": "c", "reason": "r", "attributed": 1}])]

    results = _score(batch, ["faithfulness", "context_recall"], FakeJudge(responder=responder))
    recall, faithful = results["context_recall"], results["faithfulness"]
    assert recall.status.tolist() == [Status.OK, Status.FAILED, Status.FAILED, Status.OK]
    assert recall.reasons.tolist() == [None, "timeout_after_3_retries", PARSE_ERROR, None]
    np.testing.assert_array_equal(recall.values, [1.0, np.nan, np.nan, 1.0])
    assert faithful.values[:3].tolist() == [1.0, 0.0, 0.0]
    assert faithful.reasons.tolist() == [None, None, None, "no_answer"]


def _docs_section() -> str:
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    start = text.index("## LLM-judge and semantic metrics")
    return text[start : text.index("\n## ", start + 1)]


def test_docs_quote_the_prompts_verbatim() -> None:
    section = _docs_section()
    prompts = [
        _statements.STATEMENTS_INSTRUCTIONS,
        faithfulness.VERDICTS_INSTRUCTIONS,
        answer_relevancy.INSTRUCTIONS,
        context_precision.INSTRUCTIONS_TEMPLATE.format(target="reference answer", key="reference"),
        context_recall.INSTRUCTIONS,
        context_relevance.INSTRUCTIONS,
        answer_correctness.CLASSIFY_INSTRUCTIONS,
        aspect_critique.INSTRUCTIONS_TEMPLATE.format(name="{name}", definition="{definition}"),
    ]
    for prompt in prompts:
        assert f"```text\n{prompt}\n```" in section, prompt[:60]
    for aspect in aspect_critique.BUILTIN_ASPECTS.values():
        assert f"| `{aspect.name}` | {aspect.definition} |" in section


def test_docs_example_runs() -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(_docs_section(), {}, "docs/metrics.md#llm-judge", str(ROOT / "docs" / "metrics.md"), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
    assert test.examples
