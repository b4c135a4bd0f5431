"""Recompute the prototypes of ``embedding_refusal`` (``ragpulse.tasks.embeddings`` package data) and choose its rule.

The development answers of ``tests/fixtures/refusal`` (splits ``dev``, ``test``, ``blind1``, ``blind2``; never
``blind3``, which measures the result) are embedded with the default encoder on the query side, as the metric embeds
a trace's answer, and rounded to float16 as shipped. The rule is chosen on them alone: each development split in turn
is classified with the other three as prototypes, for every k-nearest-neighbour vote of the grid and for the nearest
class centroid; the rule with the best mean F1 (refusal class) over the four is written, with the whole grid, into
``refusal_prototypes.json``. ``bench/bench_refusal.py --embedding`` then measures the shipped metric on ``blind3``.

    python bench/make_refusal_prototypes.py      # a few minutes on 2 shared cores; rewrites the package data
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_refusal import DEVELOPMENT, load, scores  # noqa: E402
from ragpulse.metrics.refusal import RefusalPrototypes, classify  # noqa: E402
from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL, embedding_identity, local_embedder  # noqa: E402
from ragpulse.tasks.embeddings.refusal_prototypes import write_refusal_prototypes  # noqa: E402

DATA = ROOT / "tasks" / "embeddings" / "data"
# (k, share); k = 0 is the nearest class centroid.
RULES = [(k, share) for k in (1, 3, 5, 7, 9, 15) for share in (0.5, 0.7, 1.0)] + [(0, 1.0)]


def rule_name(k: int, share: float) -> str:
    return "nearest centroid" if k == 0 else f"k={k} share>={share}"


def main() -> None:
    rows = [row for row in load() if row["split"] in DEVELOPMENT]
    embedder = local_embedder(DEFAULT_EMBEDDING_MODEL)
    start = time.perf_counter()
    vectors = np.asarray(embedder.embed([row["answer"].strip() for row in rows]), dtype=np.float64)
    seconds = time.perf_counter() - start
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float16).astype(np.float64)
    labels = np.array([row["label"] for row in rows], dtype=np.int8)
    split = np.array([row["split"] for row in rows])
    identity = embedding_identity(DEFAULT_EMBEDDING_MODEL)

    def held_out_f1(k: int, share: float) -> float:
        f1s = []
        for held in DEVELOPMENT:
            pool, query = split != held, split == held
            prototypes = RefusalPrototypes(vectors[pool], labels[pool], identity, k=k, share=share, digest="")
            predicted = classify(vectors[query], prototypes)
            f1s.append(scores(predicted.tolist(), labels[query].tolist())["f1"] or 0.0)
        return float(np.mean(f1s))

    grid = {rule_name(k, share): round(held_out_f1(k, share), 3) for k, share in RULES}
    k, share = max(RULES, key=lambda rule: grid[rule_name(*rule)])
    chosen = rule_name(k, share)
    provenance: dict[str, Any] = {
        "answers": "tests/fixtures/refusal/<lang>.jsonl, splits " + ", ".join(DEVELOPMENT) + " (see its README.md)",
        "model": DEFAULT_EMBEDDING_MODEL,
        "side": "query",
        "written": dt.date.today().isoformat(),
        "chosen": chosen,
        "development_mean_f1_by_rule": grid,
        "encode_ms_per_answer": round(seconds / len(rows) * 1000, 1),
    }
    path = write_refusal_prototypes(
        DATA, vectors, labels.tolist(), [row["id"] for row in rows], encoder=identity, k=k, share=share,
        provenance=provenance,
    )  # fmt: skip
    print(f"{path}: {len(rows)} prototypes by {identity}; rule {chosen} (development mean F1 {grid[chosen]})")
    print(grid)


if __name__ == "__main__":
    main()
