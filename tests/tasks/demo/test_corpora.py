"""Tests of the demo corpora: the shipped ARES sample, the JSQuAD and CMRC 2018 extracts, and the one-off
conversions that built them.

Only the corpora shipped in the repo are read: users (and so the demo) have no access to the original files.
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest

from ragpulse.tasks.demo import corpora as sample

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


QA_PASSAGE_ID = {"jsquad": re.compile(r"^jsquad-a\d+p\d+$"), "cmrc2018": re.compile(r"^cmrc2018-DEV_\d+$")}


@pytest.mark.parametrize(
    ("path", "source", "language", "questions"),
    [(sample.JSQUAD_PATH, "jsquad", "ja", 508), (sample.CMRC2018_PATH, "cmrc2018", "zh", 502)],
)
def test_shipped_qa_corpora(path: Path, source: str, language: str, questions: int) -> None:
    assert path in sample.QA_CORPUS_PATHS and path.parent == sample.CORPUS_PATH.parent
    assert path.stat().st_size < 150_000
    rows = sample.load_qa_corpus(path)
    assert len(rows) == questions and len({r.question_id for r in rows}) == questions
    passages = collections.defaultdict(set)
    for row in rows:
        assert (row.source, row.language) == (source, language)
        assert QA_PASSAGE_ID[source].match(row.passage_id)
        assert row.question and row.answers and len(set(row.answers)) == len(row.answers)
        assert all(a == a.strip() and a for a in row.answers)
        assert "[SEP]" not in row.passage and row.context_relevant
        passages[row.passage_id].add(row.passage)
    assert all(len(texts) == 1 for texts in passages.values()), "one text per passage id"
    assert len({next(iter(t)) for t in passages.values()}) == len(passages), "one id per passage text"
    spans = [a in r.passage for r in rows for a in r.answers]
    assert sum(spans) / len(spans) > 0.9  # extractive: the answers are spans of the passage (title included)


def test_build_qa_corpus_converts_squad_v1_and_v2(tmp_path: Path) -> None:
    """JSQuAD-shaped v2 (title prefix, repeated answers, is_impossible) and CMRC-shaped v1 (paragraph ids)."""
    v2 = {
        "data": [
            {
                "title": "梅雨",
                "paragraphs": [
                    {
                        "context": "梅雨 [SEP] 梅雨は雨季の一種である。",
                        "qas": [
                            {
                                "id": "a1p0q0",
                                "question": "梅雨は何の一種か。",
                                "answers": [
                                    {"text": "雨季", "answer_start": 8},
                                    {"text": " 雨季 ", "answer_start": 8},
                                    {"text": "雨季の一種", "answer_start": 8},
                                ],
                                "is_impossible": False,
                            },
                            {"id": "a1p0q1", "question": "梅雨の英語名は？", "answers": [], "is_impossible": True},
                            {"id": "a1p0q2", "question": "壊れた行", "answers": [], "is_impossible": False},
                        ],
                    },
                    {"context": "梅雨 [SEP] 質問のない段落。", "qas": []},
                ],
            }
        ]
    }
    v1 = {
        "version": "v1.0",
        "data": [
            {
                "id": "DEV_7",
                "title": "北京",
                "paragraphs": [
                    {
                        "id": "DEV_7",
                        "context": "北京是中国的首都。",
                        "qas": [{"id": "DEV_7_QUERY_0", "question": "首都是哪里？", "answers": [{"text": "北京"}]}],
                    }
                ],
            }
        ],
    }
    (tmp_path / "v2.json").write_text(json.dumps(v2, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "v1.json").write_text(json.dumps(v1, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "ja.jsonl.gz"
    size = sample.build_qa_corpus(tmp_path / "v2.json", out, source="jsquad", language="ja")
    assert size == out.stat().st_size
    answered, impossible = sample.load_qa_corpus(out)
    assert (answered.passage_id, answered.passage) == ("jsquad-a1p0", "梅雨\n梅雨は雨季の一種である。")
    assert answered.answers == ("雨季", "雨季の一種") and answered.context_relevant
    assert (impossible.question_id, impossible.answers, impossible.context_relevant) == ("a1p0q1", (), False)
    zh = tmp_path / "zh.jsonl.gz"
    sample.build_qa_corpus(tmp_path / "v1.json", zh, source="cmrc2018", language="zh")
    (row,) = sample.load_qa_corpus(zh)
    assert (row.passage_id, row.passage, row.language) == ("cmrc2018-DEV_7", "北京是中国的首都。", "zh")
    assert row.answers == ("北京",)
    again = tmp_path / "again.jsonl.gz"
    sample.build_qa_corpus(tmp_path / "v2.json", again, source="jsquad", language="ja")
    assert again.read_bytes() == out.read_bytes()
