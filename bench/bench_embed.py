"""Load time and encoding throughput of tasks/embeddings/models.py with the bundled all-MiniLM-L6-v2, on this CPU.

Texts are the first ``--n`` questions, answers and passages of ``tasks/demo/corpus/ares_sample.jsonl.gz`` (real
RAG traffic: about 13, 4 and 110 words). Times, in one process: importing torch and sentence-transformers, the
first model load, then for each text kind and torch thread count the best of ``--repeat`` passes (wall and process
CPU time) of ``SentenceTransformerEmbedder(batch_size=64, cache_size=0).embed(texts)``, an LRU-hit pass, and the
cross-encoder path on (answer, passage) pairs with one thread (MiniLM with an untrained head: timing only, its
scores mean nothing). Writes JSON (default ``bench/results/embed.json``).

    python bench/bench_embed.py                 # 400 texts of each kind
    python bench/bench_embed.py --n 800 --threads 1 2 --repeat 3
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench._common import best, cpu_model  # noqa: E402
from ragpulse.tasks.embeddings.models import CrossEncoderScorer, SentenceTransformerEmbedder  # noqa: E402


def _row(what: str, threads: int, n: int, seconds: tuple[float, float], **extra: Any) -> dict[str, Any]:
    wall, cpu = seconds
    row = {"what": what, "threads": threads, "n": n, **extra, "wall_s": round(wall, 4), "cpu_s": round(cpu, 4)}
    row |= {"per_wall_s": round(n / wall, 1), "per_cpu_s": round(n / cpu, 1) if cpu else None}
    print(row)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=None, help="torch thread counts (default: 1 and all)")
    parser.add_argument("--n", type=int, default=400, help="texts of each kind (at most 800)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "embed.json")
    args = parser.parse_args()

    with gzip.open(ROOT / "tasks" / "demo" / "corpus" / "ares_sample.jsonl.gz", "rt") as handle:
        rows = [json.loads(line) for line in handle]
    rows = rows[: args.n]
    texts = {kind: [row[kind] or "" for row in rows] for kind in ("question", "answer", "passage")}

    start = time.perf_counter()
    import sentence_transformers  # noqa: F401
    import torch

    import_s = time.perf_counter() - start
    embedder = SentenceTransformerEmbedder(batch_size=64, cache_size=0)
    start = time.perf_counter()
    embedder.embed(["warm up"])
    load_s = time.perf_counter() - start

    default_threads = torch.get_num_threads()
    thread_counts = args.threads or sorted({1, default_threads})
    results: list[dict[str, Any]] = []
    for threads in thread_counts:
        torch.set_num_threads(threads)
        for kind, batch in texts.items():
            seconds = best(lambda batch=batch: embedder.embed(batch), args.repeat)
            words = round(sum(len(t.split()) for t in batch) / len(batch), 1)
            results.append(_row(f"embed {kind}s", threads, len(batch), seconds, mean_words=words))
    torch.set_num_threads(default_threads)

    cached = SentenceTransformerEmbedder(batch_size=64)
    cached.embed(texts["question"])
    seconds = best(lambda: cached.embed(texts["question"]), args.repeat)
    results.append(_row("embed questions, all LRU hits", default_threads, len(rows), seconds))

    torch.manual_seed(0)
    scorer = CrossEncoderScorer("all-MiniLM-L6-v2", batch_size=32, allow_untrained_head=True)
    pairs = list(zip(texts["answer"], texts["passage"], strict=True))
    scorer.score(pairs[:2])
    torch.set_num_threads(1)
    seconds = best(lambda: scorer.score(pairs), args.repeat)
    results.append(_row("cross-encoder (answer, passage) pairs", 1, len(pairs), seconds))
    torch.set_num_threads(default_threads)

    report = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "sentence_transformers": importlib.metadata.version("sentence-transformers"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "import_torch_and_sentence_transformers_s": round(import_s, 2),
        "first_model_load_s": round(load_s, 2),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "results"}, indent=2))


if __name__ == "__main__":
    main()
