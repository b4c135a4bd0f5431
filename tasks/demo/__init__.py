"""The demo: realistic traces generated from a shipped sample of public RAG evaluation data."""

from ragpulse.tasks.demo.corpora import (
    CMRC2018_PATH,
    CORPUS_PATH,
    JSQUAD_PATH,
    QA_CORPUS_PATHS,
    CorpusRow,
    QaRow,
    build_demo_corpus,
    build_qa_corpus,
    deterministic_gzip,
    load_demo_corpus,
    load_qa_corpus,
)
from ragpulse.tasks.demo.generate import (
    APPS,
    DRIFT_APP,
    GZIP_FILE,
    JSONL_FILE,
    MALFORMED_KINDS,
    PARQUET_FILE,
    DemoSettings,
    generate_demo_traces,
)

__all__ = [
    "APPS",
    "CMRC2018_PATH",
    "CORPUS_PATH",
    "DRIFT_APP",
    "GZIP_FILE",
    "JSONL_FILE",
    "JSQUAD_PATH",
    "MALFORMED_KINDS",
    "PARQUET_FILE",
    "QA_CORPUS_PATHS",
    "CorpusRow",
    "DemoSettings",
    "QaRow",
    "build_demo_corpus",
    "build_qa_corpus",
    "deterministic_gzip",
    "generate_demo_traces",
    "load_demo_corpus",
    "load_qa_corpus",
]
