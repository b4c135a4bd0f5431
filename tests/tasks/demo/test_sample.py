"""Tests of the demo corpus: the shipped ARES sample and the one-off selection that built it.

Only the corpus shipped in the repo is read: users (and so the demo) have no access to the ARES files.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path

from ragpulse.tasks.demo import sample

PASSAGE_ID = re.compile(r"^(nq|hotpotqa)-\d+$")


def test_shipped_corpus_is_compact_and_balanced() -> None:
    assert sample.CORPUS_PATH.is_file()
    assert sample.CORPUS_PATH.parent.parent == Path(sample.__file__).parent  # shipped inside the repo
    assert sample.CORPUS_PATH.stat().st_size < 600_000
    rows = sample.load_demo_corpus()
    assert collections.Counter(r.source for r in rows) == {"nq": 400, "hotpotqa": 400}
    for row in rows:
        assert PASSAGE_ID.match(row.passage_id) and row.passage_id.startswith(row.source + "-")
        assert row.passage and row.question
        assert (row.answer is None) == (not row.context_relevant)
        assert row.answer_faithful == row.answer_relevant
    texts = collections.defaultdict(set)
    for row in rows:
        texts[row.passage].add(row.passage_id)
    assert all(len(ids) == 1 for ids in texts.values()), "one id per passage text"


def test_build_demo_corpus_selection(tmp_path: Path) -> None:
    """The one-off selection on a tiny ARES-shaped TSV: correct answers, their twins, truly off-topic rows."""
    header = [
        "document_index",
        "document",
        "synthetic_query",
        "__index_level_0__",
        "Context_Relevance_Label",
        "generated_answer",
        "Answer_Faithfulness_Label",
        "Answer_Relevance_Label",
    ]
    rows = []
    for i in range(6):
        passage, question = f"Passage {i} says the answer is {i}.", f"What does passage {i} say?"
        rows.append([str(i), passage, question, "", "Yes", str(i), "Yes", "Yes"])
        rows.append([str(i), passage, question, "", "Yes", "wrong", "No", "No"])
    rows.append(["7", "Unrelated text.", "What does passage 0 say?", "", "No", "", "", ""])  # answerable elsewhere
    rows.append(["8", "Other unrelated text.", "Who won in 1900?", "", "No", "", "", ""])
    rows.append(["9", "x" * 2000, "Too long?", "", "No", "", "", ""])
    for name in ("nq.tsv", "hp.tsv"):
        (tmp_path / name).write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    out = tmp_path / "corpus.jsonl.gz"
    size = sample.build_demo_corpus(tmp_path / "nq.tsv", tmp_path / "hp.tsv", out, per_source=5)
    assert size == out.stat().st_size
    corpus = sample.load_demo_corpus(out)
    assert len(corpus) == 10
    nq = [r for r in corpus if r.source == "nq"]
    good = {r.question for r in nq if r.answer_faithful}
    bad = [r for r in nq if r.context_relevant and not r.answer_faithful]
    off_topic = [r for r in nq if not r.context_relevant]
    assert len(good) == 3 and len(bad) == 1 and bad[0].question in good
    assert [(r.passage_id, r.question, r.answer) for r in off_topic] == [("nq-8", "Who won in 1900?", None)]
    again = tmp_path / "again.jsonl.gz"
    sample.build_demo_corpus(tmp_path / "nq.tsv", tmp_path / "hp.tsv", again, per_source=5)
    assert again.read_bytes() == out.read_bytes()
