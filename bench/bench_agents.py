"""Agents (issue 31): judge calls per turn of a multi-hop agent, and staging throughput of agent traces.

**judge**: the product's judge task (``tasks/judge/tasks.py`` ``judge_score_batch``, which judges the retrieval steps
through ``tasks/judge/step_judge.py``) on staged batches of generated agent turns with distinct texts, against the
scripted OpenAI-compatible server of tests/doubles/judge_server.py over loopback HTTP (no call cache). Metrics
context_relevance, context_precision_without_reference, faithfulness and answer_relevancy; every request the server
received is attributed to its metric, and to a step or the turn, and compared with the naive count (one request per
step per metric, plus the turn's). Three kinds of turn, each its own batch of ``--judge-n``:

* three-hop: three retrieval steps, each with its own query and 2-3 documents, some documents repeated across steps;
* one-step: a single step whose query and documents are the turn's (must cost nothing extra);
* follow-up: a three-hop turn with two earlier messages of its conversation (must cost what a three-hop turn does).

**staging**: ``stage_records`` (tasks/ingest/staging.py) on one day of each input, in child processes, one input per
process, the inputs alternating (A B C D, then D C B A, ...), each timed around the call only (imports and the
language model loaded before the clock); peak RSS is the child's ``ru_maxrss``:

* ``corpus-openinference``: every framework's OpenInference export of the conformance corpus
  (tests/fixtures/conformance: LlamaIndex, Haystack, the OpenAI Agents SDK, CrewAI, smolagents, PydanticAI, Strands,
  Agno, AutoGen, Google ADK; not DSPy, see ``CORPUS_EXPORTS``) replicated to ``--turns`` turns;
* A ``agent-openinference``: the real OpenInference export tests/fixtures/agents/openinference (LangGraph agents:
  multi-hop, parallel tools, corrective RAG, web search, chit-chat, threads in English, Japanese and Chinese, a tool
  error) replicated to ``--turns`` turns;
* B ``flat-openinference``: the real single-retrieval LangChain RAG export
  tests/fixtures/adapters/openinference/real/langchain_rag replicated to the same number of traces;
* C ``flat-canonical``: B's staged traces written as canonical JSONL (today's flat format), replicated the same way;
* D ``agent-canonical``: A's staged turns written as canonical JSONL with their agent fields (steps, history, tool
  calls, conversation id), replicated the same way.

Each copy gets new trace and span ids, its own conversation ids, timestamps spread over the day, and its own text:
every word of the natural-language strings (questions, queries, documents, prompts, answers) is renamed by a
permutation of the export's vocabulary drawn per copy, and every Han character by a permutation of the export's Han
characters (within Japanese-only, Chinese-only and shared ones); the same renaming applies at every level of nested
JSON, so a document's text stays a substring of the prompt that quotes it. Before any timing, one copy of each input
is staged beside the original and must give the same shape (steps, contexts, history, tool calls, language) with
renamed texts, and the distinct texts of a 50-copy day are counted.

Usage::

    python bench/bench_agents.py                                  # both parts -> bench/results/agents.json
    python bench/bench_agents.py --part judge --judge-n 200
    python bench/bench_agents.py --part staging --turns 20000 --repeat 2 --data /tmp/agents-days
    python bench/bench_agents.py --part staging --baseline f50c885^    # this checkout beside another revision
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

RESULTS = REPO / "bench" / "results"
JUDGE_METRICS = ("context_relevance", "context_precision_without_reference", "faithfulness", "answer_relevancy")
STEP_METRICS = ("context_relevance", "context_precision_without_reference")  # those of STEP_FAMILIES here
KINDS = ("three_hop", "one_step", "follow_up")

AGENT_DAY = "2026-11-20"
FLAT_DAY = "2026-03-02"
AGENT_EXPORT = REPO / "tests/fixtures/agents/openinference" / f"dt={AGENT_DAY}" / "agents.jsonl"
FLAT_EXPORT = (
    REPO / "tests/fixtures/adapters/openinference/real/langchain_rag" / f"dt={FLAT_DAY}" / "langchain_rag.jsonl"
)
CORPUS_DAY = "2026-11-21"
CORPUS_EXPORTS = sorted(
    path
    for path in (REPO / "tests/fixtures/conformance").glob(f"*/openinference/dt={CORPUS_DAY}/*.jsonl")
    if path.parts[-4] != "dspy"
)
"""Every framework's OpenInference export of the conformance corpus (issue 44) but DSPy's, whose renamed copies stage
differently: its prompts quote documents inside reprs with escaped newlines, which the word renaming does not keep
in step with the documents."""
INPUTS = ("corpus-openinference", "agent-openinference", "flat-openinference", "flat-canonical", "agent-canonical")

# ========================================================================================= judge calls per turn

_SYLLABLES = ("ka", "ri", "no", "ve", "sta", "lo", "mar", "tin", "bel", "do", "ra", "sen", "fal", "kor", "vi", "ne",
              "lun", "tar", "mo", "gri", "pel", "zu", "han", "dor")  # fmt: skip
_KANA = "アイカキクサシスタチナニハヒマミラリルレロン"
_YEARS = range(1890, 2024)


def _name(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(parts)).capitalize()


def _kana(rng: random.Random) -> str:
    return "".join(rng.choice(_KANA) for _ in range(rng.randint(3, 5)))


def _turn(i: int, kind: str, rng: random.Random) -> dict[str, Any]:
    """One agent turn as a canonical record: a product, its maker and the maker's founding and chief, all named
    afresh for this turn (distinct texts); Japanese every third turn."""
    japanese = i % 3 == 2
    product, company = (_kana(rng), _kana(rng) + "工業") if japanese else (_name(rng, 2), _name(rng, 3) + " Robotics")
    founder, chief = (_kana(rng), _kana(rng)) if japanese else (_name(rng, 2), _name(rng, 2))
    year, city = rng.choice(_YEARS), (_kana(rng) if japanese else _name(rng, 2))
    payload = rng.randint(5, 90)
    if japanese:
        question = f"{product}を作っている会社は何年に創業し、今の社長は誰ですか？"
        answer = f"{product}を作る{company}は{year}年に創業し、現在の社長は{chief}です。"
        docs = {
            "maker": f"{product}は{company}が製造する倉庫ロボットで、可搬重量は{payload}キロです。",
            "rival": f"{_kana(rng)}は{city}の別の会社が作る搬送ロボットです。",
            "founded": f"{company}は{year}年に{founder}が{city}で創業した。",
            "history": f"{company}は創業当初、{_kana(rng)}向けの部品を作っていた。",
            "chief": f"{chief}は{year + rng.randint(20, 40)}年から{company}の社長を務めている。",
        }
        queries = [f"{product} 製造元", f"{company} 創業", f"{company} 社長"]
        follow = (f"{product}の可搬重量は？", f"{product}の可搬重量は{payload}キロです。")
    else:
        question = f"In which year was the company that makes the {product} founded, and who leads it today?"
        answer = f"{company}, the maker of the {product}, was founded in {year}; {chief} has led it since then."
        docs = {
            "maker": f"The {product} is a warehouse robot built by {company}; it carries up to {payload} kg.",
            "rival": f"The {_name(rng, 2)} sorter is made by a competitor based in {city}.",
            "founded": f"{company} was founded in {year} by the engineer {founder} in {city}.",
            "history": f"In its first years {company} built parts for {_name(rng, 2)} conveyors.",
            "chief": f"{chief} has been chief executive of {company} since {year + rng.randint(20, 40)}.",
        }
        queries = [f"{product} manufacturer", f"{company} founded", f"{company} chief executive"]
        follow = (f"What payload does the {product} carry?", f"The {product} carries up to {payload} kg.")
    doc = {key: {"id": f"t{i}-{key}", "text": text} for key, text in docs.items()}
    contexts = [doc["maker"], doc["founded"], doc["chief"]]
    steps = [
        [doc["maker"], doc["rival"]],
        [doc["founded"], doc["history"], doc["maker"]],  # the maker again: found by two steps
        [doc["chief"], doc["founded"]],  # and the founding
    ]
    record: dict[str, Any] = {
        "trace_id": f"{kind}-{i:05d}",
        "timestamp": f"{AGENT_DAY}T{9 + i % 10:02d}:{i % 60:02d}:00Z",
        "question": question,
        "answer": answer,
        "contexts": contexts,
        "language": "ja" if japanese else "en",
        "conversation_id": f"conv-{kind}-{i:05d}",
        "steps": [
            {"id": f"t{i}-s{n}", "kind": "tool", "name": "search_kb", "query": q, "contexts": d}
            for n, (q, d) in enumerate(zip(queries, steps, strict=True))
        ],
        "tool_calls": [{"name": "search_kb", "arguments": {"query": q}, "step": n} for n, q in enumerate(queries)],
        "history": [],
    }
    if kind == "one_step":
        record["steps"] = [{"id": f"t{i}-s0", "kind": "retriever", "name": "kb", "query": question,
                            "contexts": contexts}]  # fmt: skip
        record["tool_calls"] = None
    elif kind == "follow_up":
        record["history"] = [{"role": "user", "content": follow[0]}, {"role": "assistant", "content": follow[1]}]
    return record


def judge_reply(body: dict[str, Any]) -> dict[str, Any] | list[str]:
    """Scripted verdicts by JSON-schema name; context relevance keeps the contexts that name the company."""
    from bench.bench_judge import respond

    json_schema = (body.get("response_format") or {}).get("json_schema") or {}
    name = str(json_schema.get("name", ""))
    if name.startswith("context_relevance"):
        data = json.loads(body["messages"][-1]["content"])
        if name.endswith("_by_step"):
            return {"steps": [{"relevant_statements": step["contexts"][:1]} for step in data["steps"]]}
        return {"relevant_statements": data["contexts"][:1]}
    return respond(body)


def _metric_of(schema_name: str) -> str:
    if schema_name.startswith("answer_statements"):
        return "faithfulness"  # its first step, the statements of the answer
    return max((m for m in JUDGE_METRICS if schema_name.startswith(m)), key=len)


def _judge_kind(kind: str, n: int, server: Any, root: Path) -> dict[str, Any]:
    """Stage ``n`` turns of ``kind``, judge them with ``judge_score_batch`` and count the server's requests."""
    from prefect.logging import disable_run_logger

    from ragpulse.tasks.ingest.staging import select_source_files, stage_records
    from ragpulse.tasks.judge.config import JudgeConfig
    from ragpulse.tasks.judge.tasks import judge_score_batch
    from ragpulse.tasks.scoring.config import ScoringConfig

    rng = random.Random(f"judge-{kind}")
    records = [_turn(i, kind, rng) for i in range(n)]
    day = dt.date.fromisoformat(AGENT_DAY)
    folder = root / kind / f"dt={day}"
    folder.mkdir(parents=True)
    (folder / "turns.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    files = select_source_files(str(root / kind), day, trace_format="ragpulse")
    staged = stage_records(day, files, staged_url=str(root / f"{kind}-staged"), batch_size=n)
    (batch,) = staged.batches
    judge = JudgeConfig(model="judge-bench", base_url=server.base_url, cache_url=None)  # default retries
    scoring = ScoringConfig(metrics=JUDGE_METRICS)
    server.reset()
    server.responder = judge_reply
    wall = time.perf_counter()
    with disable_run_logger():
        scored = asyncio.run(judge_score_batch.fn(batch, list(JUDGE_METRICS), judge, {}, scoring))
    wall = time.perf_counter() - wall

    step_queries = {step["query"] for r in records for step in r["steps"]}
    questions = {r["question"] for r in records}
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    with_history: Counter[str] = Counter()
    chars: Counter[str] = Counter()
    for request in server.chat_requests():
        schema = request.body["response_format"]["json_schema"]["name"]
        metric = _metric_of(schema.removesuffix("_repair"))
        data = json.loads(request.body["messages"][-1]["content"])
        with_history[metric] += "previous_turns" in data
        chars[metric] += sum(len(str(m.get("content") or "")) for m in request.body["messages"])
        if schema.endswith("_by_step"):
            unit = "steps_together"
        elif metric in STEP_METRICS and data.get("question") in step_queries - questions:
            unit = "step"
        else:
            unit = "turn"
        counts[metric][unit] += 1
    steps_per_turn = len(records[0]["steps"])
    table: dict[str, Any] = {}
    for metric in JUDGE_METRICS:
        got = counts[metric]
        turn_calls = got["turn"] / n
        naive = turn_calls + (steps_per_turn if metric in STEP_METRICS else 0)
        measured = sum(got.values()) / n
        table[metric] = {
            "per_turn": measured,
            "turn_requests_per_turn": turn_calls,
            "step_requests_per_turn": got["step"] / n,
            "steps_together_requests_per_turn": got["steps_together"] / n,
            "per_step": (got["step"] + got["steps_together"]) / (n * steps_per_turn) if metric in STEP_METRICS else 0,
            "naive_per_turn": naive,
            "saved_per_turn": naive - measured,
            "with_previous_turns_per_turn": with_history[metric] / n,
            "prompt_chars_per_turn": round(chars[metric] / n),
        }
    total = sum(row["per_turn"] for row in table.values())
    naive_total = sum(row["naive_per_turn"] for row in table.values())
    step_scores = scored.steps[0] if scored.steps else None
    step_ok = {
        m: int((r.status == 0).sum()) for m, r in (step_scores.results.items() if step_scores is not None else ())
    }
    return {
        "turns": n,
        "steps_per_turn": steps_per_turn,
        "per_metric": table,
        "total_per_turn": total,
        "naive_total_per_turn": naive_total,
        "requests": sum(sum(c.values()) for c in counts.values()),
        "requests_with_previous_turns": sum(with_history.values()),
        "turn_scores_ok": {m: int((r.status == 0).sum()) for m, r in scored.results.items()},
        "step_rows": len(step_scores.trace_ids) if step_scores is not None else 0,
        "step_scores_ok": step_ok,
        "not_ok_reasons": dict(
            Counter(
                f"{m}: {reason}"
                for results in (scored.results, step_scores.results if step_scores else {})
                for m, r in results.items()
                for reason in r.reasons[r.status != 0]
            )
        ),
        "usage_http_calls": {m: u["http_calls"] for m, u in scored.usage.items()},
        "wall_s": wall,
    }


def judge_part(n: int) -> dict[str, Any]:
    from tests.doubles.judge_server import JudgeServer

    os.environ["RAGPULSE_JUDGE_API_KEY"] = "sk-bench-agents"
    server = JudgeServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-agents-judge-") as tmp:
            result = {kind: _judge_kind(kind, n, server, Path(tmp)) for kind in KINDS}
    finally:
        server.stop()
    for kind, row in result.items():
        print(f"{kind}: {row['total_per_turn']:.2f} requests a turn (naive {row['naive_total_per_turn']:.2f})",
              {m: round(r["per_turn"], 2) for m, r in row["per_metric"].items()}, flush=True)  # fmt: skip
    return result


# ========================================================================================= replicated days

_WORD = re.compile(r"(?:(?<=\\[nrtbf])|(?<![A-Za-z0-9_\\]))[A-Za-z]{3,}(?![A-Za-z0-9_])")
_ESCAPE = re.compile(r"(\\+)u([0-9a-fA-F]{4})")
_HEX_ID = re.compile(r"(?<![0-9A-Za-z])(?:[0-9a-f]{32}|[0-9a-f]{16})(?![0-9A-Za-z])")
_CLOCK = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d):(\d\d):(\d\d)")
_JSON_WORDS = {"true", "false", "null", "nan", "infinity"}
_CODE_NAME = re.compile(r"\b[A-Za-z_][A-Za-z0-9_.]*(?=[=(]|: <)|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b|<[A-Z][A-Za-z.]*:")
"""Names in code inside a text: a field or call (``role=``, ``TextContent(``), a CamelCase class, an enum
(``<ChatRole.USER: 'user'>``)."""


def _is_han(char: str) -> bool:
    return "\u4e00" <= char <= "\u9fff"


def _has_kana(text: str) -> bool:
    return any("\u3040" <= c <= "\u30ff" for c in text)


def _is_text(value: str) -> bool:
    return any(c.isspace() or ord(c) > 127 for c in value)


def _walk(value: Any, on_key: Callable[[str], None], on_leaf: Callable[[str], None]) -> None:
    """Every key and string leaf of ``value``, nested JSON text included."""
    if isinstance(value, dict):
        for key, item in value.items():
            on_key(key)
            _walk(item, on_key, on_leaf)
    elif isinstance(value, list):
        for item in value:
            _walk(item, on_key, on_leaf)
    elif isinstance(value, str):
        if value.strip()[:1] in ("[", "{"):
            try:
                _walk(json.loads(value), on_key, on_leaf)
                return
            except ValueError:
                pass
        on_leaf(value)


class Replicator:
    """Copies of a JSONL export, each with new ids, its own conversation ids, a clock shift and renamed text.

    The renaming works on the raw lines: letters are never escaped in JSON, so a word reads the same at every level
    of nested JSON text; Han characters are renamed both as themselves and as ``\\uXXXX`` escapes. Words of keys and
    of strings that are not text (ids, names, URLs, enum values) are never renamed, so the structure stays."""

    def __init__(self, lines: list[str], conversation_ids: set[str]) -> None:
        self.lines = lines
        keep: set[str] = set(_JSON_WORDS)
        vocabulary: set[str] = set()
        han: dict[str, set[str]] = {"ja": set(), "zh": set()}

        def on_key(key: str) -> None:
            keep.update(w.lower() for w in re.findall(r"[A-Za-z]+", key))

        def on_leaf(leaf: str) -> None:
            words = {w.lower() for w in re.findall(r"[A-Za-z]+", leaf)}
            if not _is_text(leaf):
                keep.update(words)
                return
            # Code inside text (a framework object's repr, a prompt's field markers): its names stay.
            keep.update(w.lower() for name in _CODE_NAME.findall(leaf) for w in re.findall(r"[A-Za-z]+", name))
            vocabulary.update(w for w in words if len(w) >= 3)
            han["ja" if _has_kana(leaf) else "zh"].update(c for c in leaf if _is_han(c))

        for line in lines:
            _walk(json.loads(line), on_key, on_leaf)
        self.words = sorted(vocabulary - keep)
        shared = han["ja"] & han["zh"]
        self.han_pools = [sorted(han["ja"] - shared), sorted(han["zh"] - shared), sorted(shared)]
        self.conversation_ids = sorted(conversation_ids)
        self.ids = sorted({m for line in lines for m in _HEX_ID.findall(line)})
        # The day the spans were logged on (a folder's dt= may say another: that is the day it is staged for).
        self.day = Counter(m.group(1) for line in lines for m in _CLOCK.finditer(line)).most_common(1)[0][0]
        clocks = [m.group(0) for line in lines for m in _CLOCK.finditer(line) if m.group(1) == self.day]
        first, last = min(clocks), max(clocks)
        self.span = (dt.datetime.fromisoformat(first), dt.datetime.fromisoformat(last))

    def copy(self, index: int, copies: int) -> Iterator[str]:
        rng = random.Random(index)
        shuffled = self.words[:]
        rng.shuffle(shuffled)
        words = dict(zip(self.words, shuffled, strict=True))
        chars: dict[str, str] = {}
        for pool in self.han_pools:
            moved = pool[:]
            rng.shuffle(moved)
            chars.update(zip(pool, moved, strict=True))
        han = re.compile("[" + "".join(chars) + "]") if chars else None
        ids = {old: f"{rng.getrandbits(len(old) * 4):0{len(old)}x}" for old in self.ids}
        conversations = {c: f"{c}-{index:05d}" for c in self.conversation_ids}
        conversation = (
            re.compile("|".join(re.escape(c) for c in sorted(conversations, key=len, reverse=True)))
            if conversations
            else None
        )
        # Spread the copies over the day, every copy inside it.
        midnight = dt.datetime.fromisoformat(f"{self.day}T00:00:00").replace(tzinfo=self.span[0].tzinfo)
        room = (midnight + dt.timedelta(days=1) - (self.span[1] - self.span[0]) - midnight).total_seconds() - 2
        shift = dt.timedelta(seconds=int(room * index / max(copies, 1))) + midnight - self.span[0]

        def word(match: re.Match[str]) -> str:
            found = match.group(0)
            new = words.get(found.lower())
            if new is None:
                return found
            if found.isupper():
                return new.upper()
            return new.capitalize() if found[0].isupper() else new

        def escape(match: re.Match[str]) -> str:
            slashes, code = match.groups()
            new = chars.get(chr(int(code, 16))) if len(slashes) % 2 else None
            return f"{slashes}u{ord(new):04x}" if new is not None else match.group(0)

        def clock(match: re.Match[str]) -> str:
            if match.group(1) != self.day:
                return match.group(0)
            moved = dt.datetime.fromisoformat(match.group(0)) + shift
            return moved.strftime("%Y-%m-%dT%H:%M:%S")

        for line in self.lines:
            line = _WORD.sub(word, line)
            line = _ESCAPE.sub(escape, line)
            if han is not None:
                line = han.sub(lambda m: chars[m.group(0)], line)
            line = _HEX_ID.sub(lambda m: ids.get(m.group(0), m.group(0)), line)
            if conversation is not None:
                line = conversation.sub(lambda m: conversations[m.group(0)], line)
            yield _CLOCK.sub(clock, line)


def _stage_rows(source: Path, day: str, trace_format: str) -> list[dict[str, Any]]:
    """Staged rows of a one-day source folder, in order."""
    import pyarrow.parquet as pq

    from ragpulse.tasks.ingest.staging import select_source_files, stage_records

    date = dt.date.fromisoformat(day)
    with tempfile.TemporaryDirectory() as staged_dir:
        files = select_source_files(str(source), date, trace_format=trace_format)
        staged = stage_records(date, files, staged_url=staged_dir, batch_size=100_000, trace_format=trace_format)
        if staged.quarantined:
            raise SystemExit(f"{source}: quarantined {[(q.trace_id, q.field, q.reason) for q in staged.quarantined]}")
        rows: list[dict[str, Any]] = []
        for ref in staged.batches:
            rows += pq.read_table(ref.url).to_pylist()
    return rows


def _canonical(row: dict[str, Any], agent: bool) -> dict[str, Any]:
    """A staged row as the canonical JSONL record it stands for (flat: the fields of a single-shot trace)."""
    record: dict[str, Any] = {
        "trace_id": row["trace_id"],
        "timestamp": row["timestamp"].isoformat(),
        "question": row["question"],
        "answer": row["answer"],
        "contexts": [{k: v for k, v in c.items() if v is not None} for c in row["contexts"] or []],
        "metadata": json.loads(row["metadata"]) if row["metadata"] else None,
    }
    if not agent:
        return record

    def arguments(text: str | None) -> Any:
        return json.loads(text) if text is not None else None

    steps = row["steps"]
    record["steps"] = None if steps is None else [
        {**{k: v for k, v in s.items() if k != "contexts"},
         "contexts": [{k: v for k, v in c.items() if v is not None} for c in s["contexts"]]}
        for s in steps
    ]  # fmt: skip
    record["conversation_id"] = row["conversation_id"]
    record["history"] = row["history"]
    calls = row["tool_calls"]
    record["tool_calls"] = None if calls is None else [{**c, "arguments": arguments(c["arguments"])} for c in calls]
    refs = row["reference_tool_calls"]
    record["reference_tool_calls"] = (
        None if refs is None else [{**c, "arguments": arguments(c["arguments"])} for c in refs]
    )
    return record


def _shape(row: dict[str, Any]) -> tuple[Any, ...]:
    """What replication must keep of a staged row: the counts of everything and how the contexts were chosen (the
    language identified from word salad may differ: counted apart)."""
    return (
        len(row["contexts"] or []),
        None if row["steps"] is None else [(s["kind"], s["parent"], len(s["contexts"])) for s in row["steps"]],
        None if row["history"] is None else len(row["history"]),
        None if row["tool_calls"] is None else [(c["name"], c["step"], c["error"] is None) for c in row["tool_calls"]],
        row["conversation_id"] is None,
        json.loads(row["metadata"]).get("source", {}).get("contexts_from") if row["metadata"] else None,
    )


def _texts(row: dict[str, Any]) -> list[str]:
    out = [row["question"], row["answer"], *(c["text"] for c in row["contexts"] or [])]
    for step in row["steps"] or []:
        out += [step["query"] or "", *(c["text"] for c in step["contexts"])]
    return out


def _write_day(folder: Path, replicator: Replicator, copies: int, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / name).open("w", encoding="utf-8") as out:
        for index in range(copies):
            out.writelines(line + "\n" for line in replicator.copy(index, copies))


def build_days(data: Path, turns: int) -> dict[str, dict[str, Any]]:
    """The four inputs of ``turns`` traces each under ``data`` (reused when present), checked first."""
    templates = data / "templates"
    checks: dict[str, Any] = {}
    corpus = [line for path in CORPUS_EXPORTS for line in path.read_text(encoding="utf-8").splitlines()]
    sources = {
        "corpus-openinference": (corpus, "openinference", CORPUS_DAY),
        "agent-openinference": (AGENT_EXPORT.read_text().splitlines(), "openinference", AGENT_DAY),
        "flat-openinference": (FLAT_EXPORT.read_text().splitlines(), "openinference", FLAT_DAY),
    }
    originals: dict[str, list[dict[str, Any]]] = {}
    for name, (lines, trace_format, day) in list(sources.items()):
        folder = templates / name / f"dt={day}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "original.jsonl").write_text("\n".join(lines) + "\n")
        originals[name] = _stage_rows(templates / name, day, trace_format)
    # The canonical inputs: the staged traces of the exports, as records.
    sources["flat-canonical"] = (
        [json.dumps(_canonical(r, agent=False), ensure_ascii=False) for r in originals["flat-openinference"]],
        "ragpulse", FLAT_DAY,
    )  # fmt: skip
    sources["agent-canonical"] = (
        [json.dumps(_canonical(r, agent=True), ensure_ascii=False) for r in originals["agent-openinference"]],
        "ragpulse", AGENT_DAY,
    )  # fmt: skip
    for name in ("flat-canonical", "agent-canonical"):
        lines, trace_format, day = sources[name]
        folder = templates / name / f"dt={day}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "original.jsonl").write_text("\n".join(lines) + "\n")
        originals[name] = _stage_rows(templates / name, day, trace_format)
    inputs: dict[str, dict[str, Any]] = {}
    for name, (lines, trace_format, day) in sources.items():
        conversations = {r["conversation_id"] for r in originals[name] if r["conversation_id"]}
        replicator = Replicator(lines, conversations)
        per_copy = len(originals[name])
        copies = -(-turns // per_copy)
        # The check: one renamed copy stages to the same shapes with other texts; a 50-copy day's distinct texts.
        check = data / "check" / name
        _write_day(check / "one" / f"dt={day}", _Only(replicator, 7), 1, "copy.jsonl")
        copied = _stage_rows(check / "one", day, trace_format)
        same_shape = [_shape(r) for r in copied] == [_shape(r) for r in originals[name]]
        renamed = [a["question"] != b["question"] for a, b in zip(copied, originals[name], strict=True)]
        languages = [(b["language"], a["language"]) for a, b in zip(copied, originals[name], strict=True)]
        _write_day(check / "fifty" / f"dt={day}", replicator, 50, "copies.jsonl")
        fifty = _stage_rows(check / "fifty", day, trace_format)
        texts = [t for r in fifty for t in _texts(r) if t]
        one_copy = len({t for r in originals[name] for t in _texts(r) if t})
        checks[name] = {
            "same_shape": same_shape,
            "questions_renamed": f"{sum(renamed)}/{len(renamed)}",
            "languages_changed": [f"{a}->{b}" for a, b in languages if a != b],
            "distinct_texts_50_copies": len(set(texts)),
            "distinct_texts_one_copy_x50": one_copy * 50,
            "vocabulary_renamed": len(replicator.words),
            "han_renamed": sum(len(p) for p in replicator.han_pools),
        }
        if not same_shape:
            diff = [(a["trace_id"], _shape(a), _shape(b)) for a, b in zip(copied, originals[name], strict=True)
                    if _shape(a) != _shape(b)]  # fmt: skip
            raise SystemExit(f"{name}: a renamed copy stages differently: {diff[:3]}")
        folder = data / name
        file = f"{name}.jsonl"
        if not (folder / f"dt={day}" / file).is_file():
            print(f"writing {copies:,} copies of {name} ({per_copy} traces, {len(lines)} lines each)", flush=True)
            _write_day(folder / f"dt={day}", replicator, copies, file + ".part")
            (folder / f"dt={day}" / (file + ".part")).rename(folder / f"dt={day}" / file)
        size = (folder / f"dt={day}" / file).stat().st_size
        inputs[name] = {"source": str(folder), "format": trace_format, "day": day, "traces": copies * per_copy,
                        "records": copies * len(lines), "bytes": size, "check": checks[name]}  # fmt: skip
    return inputs


class _Only:
    """One copy (``index``) of a replicator, as a one-copy replicator."""

    def __init__(self, replicator: Replicator, index: int) -> None:
        self.replicator, self.index = replicator, index

    def copy(self, index: int, copies: int) -> Iterator[str]:
        return self.replicator.copy(self.index, 50)


# ========================================================================================= staging children


def _child(job: dict[str, Any]) -> dict[str, Any]:
    from ragpulse.tasks.ingest.language import identify_language
    from ragpulse.tasks.ingest.staging import select_source_files, stage_records

    identify_language("Where is the capital of Japan?")  # the model loaded before the clock
    date = dt.date.fromisoformat(job["day"])
    files = select_source_files(job["source"], date, trace_format=job["format"])
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with tempfile.TemporaryDirectory() as staged_dir:
        wall, cpu = time.perf_counter(), time.process_time()
        staged = stage_records(date, files, staged_url=staged_dir, batch_size=job["batch_size"],
                               trace_format=job["format"])  # fmt: skip
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    import ragpulse.tasks.ingest.staging as staging_module

    return {
        "code": str(Path(staging_module.__file__).resolve().parents[2]),
        "wall_s": wall,
        "cpu_s": cpu,
        "staged": staged.counts.staged,
        "quarantined": len(staged.quarantined),
        "records_read": staged.counts.records_read,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_before_mib": rss_before / 1024,
    }


_BASELINE_VARIABLE = "RAGPULSE_BENCH_BASELINE"


def _run_child(job: dict[str, Any], baseline: Path | None = None) -> dict[str, Any]:
    """One staging run in a child process; with ``baseline``, of the ragpulse package laid out there (first on the
    child's path, before this checkout)."""
    env = {**os.environ, _BASELINE_VARIABLE: str(baseline)} if baseline is not None else None
    done = subprocess.run(
        [sys.executable, __file__, "--child"], input=json.dumps(job), capture_output=True, text=True, check=False,
        env=env, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"child failed for {job['source']}:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def baseline_package(revision: str, root: Path) -> Path:
    """The ragpulse package of ``revision`` laid out under ``root`` as its import root (``root/ragpulse/<room>``), from
    ``git archive``: a child given it on PYTHONPATH stages with that revision's code."""
    source = root / "source"
    source.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "ragpulse", "cli", "flows", "tasks",
                              "metrics"], capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    package = root / "package" / "ragpulse"
    package.mkdir(parents=True)
    for item in (source / "ragpulse").iterdir():
        (package / item.name).symlink_to(item)
    for room in ("cli", "flows", "tasks", "metrics"):
        (package / room).symlink_to(source / room)
    return package.parent


def staging_part(data: Path, turns: int, repeat: int, batch_size: int, baseline: Path | None) -> dict[str, Any]:
    """Each input staged ``repeat`` times in the alternating order; with ``baseline``, the openinference inputs also
    by the baseline's code, after and before alternating in each round (side by side on the same machine state)."""
    import statistics

    inputs = build_days(data, turns)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in INPUTS}
    before: dict[str, list[dict[str, Any]]] = {name: [] for name in INPUTS if inputs[name]["format"] != "ragpulse"}
    load = [os.getloadavg()[0]]
    for round_ in range(repeat):
        for name in INPUTS if round_ % 2 == 0 else tuple(reversed(INPUTS)):
            job = {**inputs[name], "batch_size": batch_size}
            versions = [None, baseline] if round_ % 2 == 0 else [baseline, None]
            for version in versions if baseline is not None and name in before else [None]:
                (runs if version is None else before)[name].append(_run_child(job, version))
                last = (runs if version is None else before)[name][-1]
                label = "" if baseline is None else (" (baseline)" if version is not None else " (this checkout)")
                print(f"{name}{label} [{last['code']}]: {last['staged']:,} staged, {last['quarantined']:,} held, "
                      f"cpu {last['cpu_s']:.2f} s, wall {last['wall_s']:.2f} s, peak {last['peak_rss_mib']:.0f} MiB",
                      flush=True)  # fmt: skip
        load.append(os.getloadavg()[0])
    table: dict[str, Any] = {}
    for name in INPUTS:
        meta, done = inputs[name], runs[name]
        if any(r["staged"] != meta["traces"] or r["quarantined"] for r in done):
            raise SystemExit(f"{name}: staged {[r['staged'] for r in done]} of {meta['traces']}, quarantined")
        cpu = statistics.median(r["cpu_s"] for r in done)
        wall = statistics.median(r["wall_s"] for r in done)
        spans = meta["records"] if meta["format"] == "openinference" else None
        table[name] = {
            "traces": meta["traces"],
            "spans": spans,
            "mib": round(meta["bytes"] / 2**20, 1),
            "cpu_s_median": round(cpu, 3),
            "wall_s_median": round(wall, 3),
            "cpu_s_runs": [round(r["cpu_s"], 3) for r in done],
            "wall_s_runs": [round(r["wall_s"], 3) for r in done],
            "traces_per_cpu_s": round(meta["traces"] / cpu),
            "traces_per_wall_s": round(meta["traces"] / wall),
            "spans_per_cpu_s": round(spans / cpu) if spans else None,
            "spans_per_wall_s": round(spans / wall) if spans else None,
            "cpu_ms_per_trace": round(cpu / meta["traces"] * 1e3, 3),
            "peak_rss_mib_max": round(max(r["peak_rss_mib"] for r in done)),
            "rss_before_mib": round(statistics.median(r["rss_before_mib"] for r in done)),
            "check": meta["check"],
        }
    if baseline is not None:
        for name, done in before.items():
            cpu = statistics.median(r["cpu_s"] for r in done)
            per_round = [a["cpu_s"] / b["cpu_s"] for a, b in zip(runs[name], done, strict=True)]
            table[name]["baseline"] = {
                "staged": [r["staged"] for r in done],
                "quarantined": [r["quarantined"] for r in done],
                "cpu_s_median": round(cpu, 3),
                "cpu_s_runs": [round(r["cpu_s"], 3) for r in done],
                "cpu_ms_per_trace": round(cpu / inputs[name]["traces"] * 1e3, 3),
                "peak_rss_mib_max": round(max(r["peak_rss_mib"] for r in done)),
                "this_checkout_over_baseline_cpu_median": round(statistics.median(per_round), 2),
                "this_checkout_over_baseline_cpu_runs": [round(x, 2) for x in per_round],
            }
    ratios = {}
    pairs = [("agent-openinference", "flat-openinference"), ("agent-canonical", "flat-canonical"),
             ("agent-openinference", "agent-canonical"), ("flat-openinference", "flat-canonical")]  # fmt: skip
    for agent, flat in pairs:
        per_round = [a["cpu_s"] / f["cpu_s"] for a, f in zip(runs[agent], runs[flat], strict=True)]
        ratios[f"{agent} / {flat}"] = {
            "cpu_per_trace_median": round(statistics.median(per_round), 2),
            "cpu_per_trace_runs": [round(x, 2) for x in per_round],
            "wall_per_trace": round(table[agent]["wall_s_median"] / table[flat]["wall_s_median"], 2),
        }
    return {"turns": turns, "repeat": repeat, "batch_size": batch_size, "inputs": table, "ratios": ratios,
            "load_average_1min": [round(x, 2) for x in load]}  # fmt: skip


# ========================================================================================= main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("judge", "staging", "all"), default="all")
    parser.add_argument("--judge-n", type=int, default=200, help="turns of each kind judged")
    parser.add_argument("--turns", type=int, default=20_000, help="traces of each staged input")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=5_000)
    parser.add_argument("--data", type=Path, help="keep the replicated days here and reuse them")
    parser.add_argument("--out", type=Path, default=RESULTS / "agents.json")
    parser.add_argument("--baseline", help="a git revision whose staging runs beside this checkout's (side by side)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if baseline := os.environ.get(_BASELINE_VARIABLE):
            sys.path.insert(0, baseline)  # before this checkout (REPO), whose ragpulse/ would be found first
        json.dump(_child(json.load(sys.stdin)), sys.stdout)
        return 0

    from importlib import metadata

    from bench._common import cpu_model

    result: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    command = " ".join(["python", "bench/bench_agents.py", *sys.argv[1:]])
    if args.part in ("judge", "all"):
        result["judge"] = {"command": command, **judge_part(args.judge_n)}
    if args.part in ("staging", "all"):
        with tempfile.TemporaryDirectory(prefix="bench-agents-") as tmp:
            baseline = baseline_package(args.baseline, Path(tmp) / "baseline") if args.baseline else None
            staged = staging_part(args.data or Path(tmp) / "days", args.turns, args.repeat, args.batch_size, baseline)
            result["staging"] = {"command": command, "baseline": args.baseline, **staged}
        print(json.dumps({k: result["staging"][k] for k in ("ratios",)}, indent=2))
    result["environment"] = {
        "python": sys.version.split()[0],
        **{name: metadata.version(name) for name in ("prefect", "pyarrow", "openai")},
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
