"""The demo: realistic traces generated from a shipped sample of public RAG evaluation data."""

from ragpulse.tasks.demo.generate import (
    APPS,
    DRIFT_APP,
    GZIP_FILE,
    JSONL_FILE,
    MALFORMED_KINDS,
    PARQUET_FILE,
    generate_demo_traces,
)
from ragpulse.tasks.demo.sample import CORPUS_PATH, CorpusRow, build_demo_corpus, deterministic_gzip, load_demo_corpus

__all__ = [
    "APPS",
    "CORPUS_PATH",
    "DRIFT_APP",
    "GZIP_FILE",
    "JSONL_FILE",
    "MALFORMED_KINDS",
    "PARQUET_FILE",
    "CorpusRow",
    "build_demo_corpus",
    "deterministic_gzip",
    "generate_demo_traces",
    "load_demo_corpus",
]
