"""The prototypes of ``embedding_refusal`` as the package ships them, and the metric with the real encoder: its
precision and recall on the blind split stay at the figures docs/metrics.md states, Japanese and Chinese included,
and another encoder makes it not applicable rather than wrong."""

from __future__ import annotations

import asyncio
import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragpulse.metrics import Status, TraceBatch
from ragpulse.metrics.judge import JudgeContext, judge_batch
from ragpulse.metrics.refusal import (
    EMBEDDING_SPEC,
    ENCODER_OPTION,
    PROTOTYPES_FOR_OTHER_ENCODER,
    PROTOTYPES_OPTION,
    classify,
)
from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL, MINILM_MODEL, OffLoopEmbedder, embedding_identity
from ragpulse.tasks.embeddings.refusal_prototypes import (
    load_refusal_prototypes,
    prototypes_digest,
    prototypes_metadata,
)
from ragpulse.tasks.judge.plan import build_judge_metrics, judge_context_options, parse_metrics, scorer_prompt_versions

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "refusal"
DEVELOPMENT = {"dev", "test", "blind1", "blind2"}
# The figures docs/metrics.md and bench/README.md state for blind3 (bench/bench_refusal.py --embedding): the encoder
# is deterministic, so these are floors the shipped prototypes and rule meet exactly.
BLIND_FLOOR = {
    "all": (0.905, 0.814),
    "de": (1.0, 0.7),
    "en": (0.818, 0.9),
    "es": (1.0, 0.7),
    "fr": (1.0, 0.8),
    "ja": (0.8, 0.8),
    "ko": (1.0, 0.8),
    "zh": (0.833, 1.0),
}


def _labelled() -> dict[str, dict[str, Any]]:
    rows = {}
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["id"]] = row | {"language": path.stem}
    return rows


def test_the_package_ships_the_development_answers_embedded_with_their_encoder() -> None:
    data = resources.files("ragpulse.tasks.embeddings") / "data"
    raw = (data / "refusal_prototypes.npy").read_bytes()
    metadata = prototypes_metadata()
    assert hashlib.sha256(raw).hexdigest() == metadata["sha256"] and prototypes_digest() == metadata["sha256"][:12]
    prototypes = load_refusal_prototypes()
    assert prototypes.vectors.dtype == np.float16 and prototypes.vectors.shape[1] == 384
    assert np.allclose(np.linalg.norm(prototypes.vectors.astype(np.float64), axis=1), 1.0, atol=2e-3)
    assert prototypes.encoder == embedding_identity(DEFAULT_EMBEDDING_MODEL)
    labelled = _labelled()
    ids = metadata["ids"]
    assert len(ids) == len(set(ids)) == len(prototypes.labels) == len(prototypes.vectors)
    assert {labelled[i]["split"] for i in ids} == DEVELOPMENT, "blind3 measures the prototypes: never one of them"
    assert ids == [i for i, row in labelled.items() if row["split"] in DEVELOPMENT]  # every development answer
    assert prototypes.labels.tolist() == [labelled[i]["label"] for i in ids]
    grid = metadata["provenance"]["development_mean_f1_by_rule"]
    assert grid[metadata["provenance"]["chosen"]] == max(grid.values()), "the rule is the development's best"


def test_a_run_asking_for_embedding_refusal_gets_the_prototypes_and_publishes_their_digest() -> None:
    built = build_judge_metrics(parse_metrics(["embedding_refusal", "embedding_answer_relevance"]), {})
    versions = scorer_prompt_versions(built, {})
    assert versions["embedding_refusal"] == (
        f"embedding_refusal/1+embedder={embedding_identity(DEFAULT_EMBEDDING_MODEL)}+prototypes={prototypes_digest()}"
    )
    assert "+prototypes=" not in versions["embedding_answer_relevance"]
    options = judge_context_options({}, built)
    assert options[PROTOTYPES_OPTION] is load_refusal_prototypes()
    assert options[ENCODER_OPTION] == embedding_identity(DEFAULT_EMBEDDING_MODEL)
    assert PROTOTYPES_OPTION not in judge_context_options({}, built[1:])
    minilm = judge_context_options({"embedding_model": MINILM_MODEL}, built)
    assert minilm[ENCODER_OPTION] == MINILM_MODEL


def _scored(answers: list[str], languages: list[str], options: dict[str, Any]) -> Any:
    batch = TraceBatch.from_records(
        [
            {"trace_id": f"t{i}", "contexts": [], "answer": answer, "language": language}
            for i, (answer, language) in enumerate(zip(answers, languages, strict=True))
        ]
    )
    built = build_judge_metrics(parse_metrics(["embedding_refusal"]), options)
    embedder = OffLoopEmbedder(options.get("embedding_model", DEFAULT_EMBEDDING_MODEL))
    context = JudgeContext(judge=None, embedder=embedder, options=judge_context_options(options, built))  # type: ignore[arg-type]
    return asyncio.run(judge_batch(batch, built, context))[EMBEDDING_SPEC.name]


@pytest.mark.slow
def test_the_blind_split_stays_at_the_stated_precision_and_recall() -> None:
    blind = [row for row in _labelled().values() if row["split"] == "blind3"]
    result = _scored([row["answer"] for row in blind], [row["language"] for row in blind], {})
    assert (result.status == Status.OK).all()
    predicted = result.values == 1.0
    for language, (precision_floor, recall_floor) in BLIND_FLOOR.items():
        keep = np.array([language in ("all", row["language"]) for row in blind])
        labels = np.array([row["label"] == 1 for row in blind])[keep]
        tp = int((predicted[keep] & labels).sum())
        precision, recall = tp / max(int(predicted[keep].sum()), 1), tp / int(labels.sum())
        assert round(precision, 3) >= precision_floor and round(recall, 3) >= recall_floor, language


@pytest.mark.slow
def test_japanese_and_chinese_refusals_written_for_this_test_are_recognised() -> None:
    answers = [
        "申し訳ありませんが、いただいた資料からはその答えが分かりませんでした。",
        "恐れ入りますが、その件については確認できる情報がございません。",
        "年会費は税込みで12,000円です。",
        "很抱歉，我在现有文档中找不到这个问题的答案。",
        "对不起，这个我帮不上忙。",
        "退款会在五个工作日内原路退回。",
    ]
    result = _scored(answers, ["ja", "ja", "ja", "zh", "zh", "zh"], {})
    assert result.values.tolist() == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]


@pytest.mark.slow
def test_another_encoder_is_not_applicable_rather_than_wrong() -> None:
    result = _scored(["I don't know."], ["en"], {"embedding_model": MINILM_MODEL})
    assert result.reasons.tolist() == [PROTOTYPES_FOR_OTHER_ENCODER]


def test_classify_reads_the_shipped_vectors_themselves_as_their_labels_mostly() -> None:
    """A sanity check of the shipped rule without the encoder: the prototypes classified by themselves agree with
    their labels far above chance (the development splits' held-out F1 is in the metadata)."""
    prototypes = load_refusal_prototypes()
    agreement = (classify(prototypes.vectors, prototypes) == (prototypes.labels == 1)).mean()
    assert agreement > 0.85
