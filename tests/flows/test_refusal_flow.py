"""Both refusal metrics through the evaluate flow without a judge: the lexicon with the application's own fallback
phrases on every trace, the encoder's prototypes on the embedding sample, published side by side in DuckDB with
the prototypes' digest in the prompt version; Japanese and Chinese traces."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ragpulse.flows.evaluate import evaluate_partition
from ragpulse.tasks.config import OutputConfig, ScoringConfig, SourceConfig
from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL, embedding_identity
from ragpulse.tasks.embeddings.refusal_prototypes import prototypes_digest
from ragpulse.tasks.judge.plan import sampled

pytestmark = pytest.mark.slow

DAY = dt.date(2026, 5, 11)
FALLBACK_JA = "恐れ入りますが、本チャットではその件を取り扱っておりません。"
# (answer, language, the lexicon alone, with the fallback phrase): the fallback is a refusal the lexicon misses.
TURNS = [
    (FALLBACK_JA, "ja", 0.0, 1.0),
    ("恐れ入りますが 本チャットではその件を取り扱っておりません", "ja", 0.0, 1.0),
    ("申し訳ありませんが、提供された資料にはその記載がありません。", "ja", 1.0, 1.0),
    ("年会費は税込みで12,000円です。", "ja", 0.0, 0.0),
    ("很抱歉，我无法回答这个问题。", "zh", 1.0, 1.0),
    ("退款会在五个工作日内原路退回。", "zh", 0.0, 0.0),
    ("I don't know.", "en", 1.0, 1.0),
    ("The office opens at 9 am.", "en", 0.0, 0.0),
] * 3


def _rows(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


def _day(root: Path) -> Path:
    partition = root / f"dt={DAY}"
    partition.mkdir(parents=True)
    traces = [
        {
            "trace_id": f"turn-{i:02d}",
            "timestamp": f"{DAY}T10:00:00Z",
            "question": "会費はいくらですか？"
            if language == "ja"
            else "退款多久到账？"
            if language == "zh"
            else "When?",
            "answer": answer,
            "language": language,
            "contexts": [{"id": "d1", "text": "FAQ"}],
        }
        for i, (answer, language, _, _) in enumerate(TURNS)
    ]
    (partition / "part.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traces))
    return root


def _evaluate(tmp_path: Path, name: str, **scoring: Any) -> Path:
    warehouse = tmp_path / f"{name}.duckdb"
    evaluate_partition(
        date=DAY,
        source=SourceConfig(url=str(tmp_path / "traces")),
        scoring=ScoringConfig(metrics=("refusal", "embedding_refusal"), **scoring),
        output=OutputConfig(warehouse=f"duckdb:///{warehouse}", work_dir=str(tmp_path / "work")),
    )
    return warehouse


def test_the_phrases_reach_refusal_and_the_encoder_scores_the_sample(tmp_path: Path) -> None:
    _day(tmp_path / "traces")
    plain = _evaluate(tmp_path, "plain", embedding_sample="all")
    phrased = _evaluate(tmp_path, "phrased", embedding_sample="12", refusal_phrases=(FALLBACK_JA,))

    expected_plain = {f"turn-{i:02d}": plain_value for i, (_, _, plain_value, _) in enumerate(TURNS)}
    expected_phrased = {f"turn-{i:02d}": phrased_value for i, (_, _, _, phrased_value) in enumerate(TURNS)}
    lexicon = "SELECT trace_id, value FROM scores WHERE metric = 'refusal' AND status = 'ok'"
    assert dict(_rows(plain, lexicon)) == expected_plain
    assert dict(_rows(phrased, lexicon)) == expected_phrased, "the phrase cached under the plain run's key"

    encoder = "SELECT trace_id, status, reason, value, prompt_version FROM scores WHERE metric = 'embedding_refusal'"
    every = _rows(plain, encoder)
    assert len(every) == len(TURNS) and all(status == "ok" for _, status, _, _, _ in every)
    assert {version for *_, version in every} == {
        f"embedding_refusal/1+embedder={embedding_identity(DEFAULT_EMBEDDING_MODEL)}+prototypes={prototypes_digest()}"
    }
    # The encoder recalls the fallback the lexicon misses, without the phrase; its answers stay answers.
    by_trace = {trace: value for trace, _, _, value, _ in every}
    for i, (_, _, _, phrased_value) in enumerate(TURNS):
        assert by_trace[f"turn-{i:02d}"] == phrased_value, TURNS[i]

    ids = sorted(expected_plain)
    rate = ScoringConfig(embedding_sample="12").embedding_rate(len(ids))
    chosen = {trace for trace, keep in zip(ids, sampled(ids, rate), strict=True) if keep}
    sample = _rows(phrased, encoder)
    assert 0 < len(chosen) < len(ids)
    assert {trace for trace, _, reason, _, _ in sample if reason != "not_sampled"} == chosen
