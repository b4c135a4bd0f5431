"""The conformance corpus (tests/fixtures/conformance and the LangGraph corpus of tests/fixtures/agents) as truth to
check a reading against, field by field: each framework's exports, its turns as the application logged them, and the
comparison of a read turn with its truth. Used by the staging tests (tests/tasks/ingest/adapters/test_conformance.py)
and the CLI tests (tests/flows/test_conformance_cli.py), which read the same fields from staging and from the
warehouse."""

from __future__ import annotations

import ast
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "conformance"
LANGGRAPH = FIXTURES / "agents"


@dataclass(frozen=True)
class Export:
    """One framework's traces as one instrumentation exported them."""

    framework: str
    trace_format: str
    path: Path
    day: dt.date
    turns: tuple[dict[str, Any], ...]
    loses_document_ids: bool = False
    """The instrumentation logs no document id (SOURCES.md says which): steps and contexts are compared by text."""
    unlogged_rerankers: frozenset[str] = frozenset()
    """Scenarios whose reranker the instrumentation logs as no reranker span (the folder's losses.json says why)."""
    unreadable: str | None = None
    """Why no turn of the export can be read (its instrumentation logs no content): every trace is quarantined."""

    @property
    def name(self) -> str:
        return f"{self.framework}-{self.trace_format}"


def _langgraph_turns() -> tuple[dict[str, Any], ...]:
    """The LangGraph corpus's own log in the conformance schema (tests/fixtures/conformance/README.md)."""
    turns = []
    for turn in json.loads((LANGGRAPH / "expected.json").read_text(encoding="utf-8")):
        received = [turn["steps"][i] for i in turn["generator_steps"]]
        turns.append(
            {
                "framework": "langgraph",
                "app": turn["graph"],
                "scenario": turn["scenario"],
                "turn": turn["turn"],
                "start_time": turn["start_time"],
                "question": turn["question"],
                "language": turn["language"],
                "conversation_id": turn["conversation_id"],
                "answer": turn["answer"],
                "steps": [{k: step[k] for k in ("kind", "tool", "query", "document_ids")} for step in turn["steps"]],
                "contexts": list(dict.fromkeys(doc for step in received for doc in step["document_ids"])),
                "tool_calls": [{"name": c["name"], "error": c["error"] is not None} for c in turn["tool_calls"]],
                "history": turn["history"],
                "parallel": turn["parallel_tool_calls"],
            }
        )
    return tuple(turns)


def exports() -> list[Export]:
    """Every export of the corpus: the LangGraph app through OpenInference and OpenLLMetry, and each framework folder's
    ``openinference/`` and ``otel-genai/`` exports."""
    found = [
        Export("langgraph", "openinference", LANGGRAPH / "openinference", dt.date(2026, 11, 20), _langgraph_turns()),
        Export("langgraph", "otel-genai", LANGGRAPH / "otel-genai", dt.date(2026, 11, 20), _langgraph_turns(),
               loses_document_ids=True),
    ]  # fmt: skip
    for folder in sorted(p for p in CORPUS.iterdir() if (p / "expected.json").is_file()):
        turns = tuple(json.loads((folder / "expected.json").read_text(encoding="utf-8")))
        losses = json.loads(p.read_text()) if (p := folder / "losses.json").is_file() else {}
        for trace_format in ("openinference", "otel-genai"):
            if (folder / trace_format).is_dir():
                lost = losses.get(trace_format, {})
                export = Export(folder.name, trace_format, folder / trace_format, dt.date(2026, 11, 21), turns,
                                loses_document_ids=bool(lost.get("document_ids")),
                                unlogged_rerankers=frozenset(lost.get("reranker_steps", ())),
                                unreadable=lost.get("unreadable"))  # fmt: skip
                found.append(export)
    return found


def start_of(turn: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(turn["start_time"].replace("Z", "+00:00"))


def pair(export: Export, starts: dict[str, dt.datetime]) -> dict[str, dict[str, Any]]:
    """Each read trace id with the turn that started at the same time (turns start a minute or more apart)."""
    paired = {}
    for trace_id, start in starts.items():
        turn = min(export.turns, key=lambda t: abs(start_of(t) - start))
        if abs(start_of(turn) - start) < dt.timedelta(seconds=30):
            paired[trace_id] = turn
    return paired


def turn_key(turn: dict[str, Any]) -> tuple[str, int]:
    return (turn["scenario"], turn["turn"])


def mismatches(export: Export, turn: dict[str, Any], read: dict[str, Any], *, own_conversation: bool) -> list[str]:
    """Where a read turn differs from its truth. ``read`` holds question, answer, language, conversation_id, steps
    ([{kind, query, ids}]), contexts ([{id, text}]) and tool_calls ([{name, error}]). ``own_conversation``: no other
    turn read has this turn's conversation id. A turn the application started outside any session may carry the
    conversation id its framework gives every run (PydanticAI's): a conversation of that one turn, which is right.

    The expected contexts are the documents this turn retrieved whose whole text the final model call received: a
    document quoted there only because an earlier answer repeated it is not a context of this turn."""
    wrong = []
    for field in ("question", "answer", "conversation_id"):
        if field == "conversation_id" and turn[field] is None and (read[field] is None or own_conversation):
            continue
        got, want = read[field], turn[field]
        if field in ("question", "answer") and isinstance(got, str) and isinstance(want, str):
            got, want = got.strip(), want.strip()  # a framework's trailing newline is no different answer
        if got != want:
            wrong.append(f"{field}: read {str(read[field])[:120]!r}, expected {str(turn[field])[:120]!r}")
    if read["language"] != expected_language(turn):
        wrong.append(f"language: read {read['language']!r}, expected {expected_language(turn)!r}")
    retrievals = [s for s in turn["steps"] if s["kind"] != "reranker"]
    got_steps = [(s["query"], s["ids"]) for s in read["steps"] if s["kind"] != "reranker"]
    want_steps = [(s["query"], s["document_ids"]) for s in retrievals]
    if export.loses_document_ids:
        got_steps = [(query, None) for query, _ in got_steps]
        want_steps = [(query, None) for query, _ in want_steps]
    if turn.get("parallel"):
        got_steps, want_steps = sorted(got_steps, key=str), sorted(want_steps, key=str)
    if got_steps != want_steps:
        wrong.append(f"steps: read {got_steps}, expected {want_steps}")
    rerankers = [s["document_ids"] for s in turn["steps"] if s["kind"] == "reranker"]
    got_rerankers = [s["ids"] for s in read["steps"] if s["kind"] == "reranker"]
    if turn["scenario"] in export.unlogged_rerankers:
        rerankers = []
    if rerankers and got_rerankers != rerankers:
        wrong.append(f"reranker steps: read {got_rerankers}, expected {rerankers}")
    if export.loses_document_ids:
        from_text = {text: doc_id for doc_id, text in _texts(export).items()}
        got_contexts = sorted(str(from_text.get(c["text"], c["text"])) for c in read["contexts"])
    else:
        got_contexts = sorted(str(c["id"]) for c in read["contexts"])
    retrieved = {doc for step in turn["steps"] for doc in step["document_ids"]}
    want_contexts = sorted(doc for doc in turn["contexts"] if doc in retrieved)
    if got_contexts != want_contexts:
        wrong.append(f"contexts: read {got_contexts}, expected {want_contexts}")
    got_tools = [(c["name"], bool(c["error"])) for c in read["tool_calls"] or []]
    want_tools = [(c["name"], c["error"]) for c in turn["tool_calls"]]
    if turn.get("parallel"):
        got_tools, want_tools = sorted(got_tools), sorted(want_tools)
    if got_tools != want_tools:
        wrong.append(f"tool_calls: read {got_tools}, expected {want_tools}")
    return wrong


def expected_language(turn: dict[str, Any]) -> str | None:
    """The language staging gives the right question: the application's own tag for Japanese and Chinese (decided
    by script), else what identification makes of the question (py3langid takes the short English "How do I install
    the Kestrel Python SDK?" for Nigerian Pidgin, which is no fault of the reading)."""
    if turn["language"] in ("ja", "zh"):
        return str(turn["language"])
    from ragpulse.tasks.ingest.language import identify_language

    return identify_language(turn["question"])


def _texts(export: Export) -> dict[str, str]:
    """Document id -> text of every document the application's turns name: a folder's ``documents.json`` (written by
    ``kb.Truth``), or for LangGraph its app.py's ``Document(id=..., page_content=...)`` calls and web results, read
    from the source without importing it (the frameworks are not installed here)."""
    if export.framework == "langgraph":
        found = {}
        for node in ast.walk(ast.parse((LANGGRAPH / "app.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Document":
                kwargs = {k.arg: k.value for k in node.keywords}
                if isinstance(kwargs.get("id"), ast.Constant) and "page_content" in kwargs:
                    found[ast.literal_eval(kwargs["id"])] = ast.literal_eval(kwargs["page_content"])
            elif isinstance(node, ast.Dict) and {"url", "content"} <= {getattr(k, "value", None) for k in node.keys}:
                result = ast.literal_eval(node)  # web_search's results
                found[result["url"]] = result["content"]
        return found
    return dict(json.loads((CORPUS / export.framework / "documents.json").read_text(encoding="utf-8")))
