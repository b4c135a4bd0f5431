"""The assembly rules of docs/traces.md ("Reading agent traces: the rules"), each on a small hand-built turn whose
spans differ from every framework in the conformance corpus: a rule must hold by lineage and the conventions, not by
the shapes of the corpus. The spans are invented; what each asserts is worked out from the written rule."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ragpulse.tasks.ingest.adapters import AdapterOptions, Span, assemble
from ragpulse.tasks.ingest.adapters.span import Document, ToolRequest, ToolResult

START = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)
QUESTION = "Which rivers flow through Vienna?"
DANUBE = "The Danube flows through Vienna, Bratislava, Budapest and Belgrade on its way to the Black Sea."
WIEN = "The Wien river gives the city its German name and joins the Danube canal in the city centre."
CODE_A = "import os\nclient = Client(os.environ['KEY'])\nclient.rivers.list(city='Vienna') returns every river."
CODE_B = "import os\nclient = Client(os.environ['KEY'])\nclient.lakes.list(city='Vienna') returns every lake."


def span(span_id: str, kind: str, second: float, parent: str | None = "root", **fields: Any) -> Span:
    at = START + dt.timedelta(seconds=second)
    return Span(
        trace_id="t1", span_id=span_id, parent_id=parent, kind=kind, name=fields.pop("name", span_id), start=at,
        end=at + dt.timedelta(seconds=fields.pop("seconds", 0.5)), **fields,
    )  # fmt: skip


def docs(*items: tuple[str | None, str]) -> tuple[Document, ...]:
    return tuple(Document(id=doc_id, text=text, score=None, where=f"d{i}") for i, (doc_id, text) in enumerate(items))


def read(*spans: Span) -> dict[str, Any]:
    return assemble("t1", list(spans), source_format="openinference", options=AdapterOptions())


def test_a_grader_prompt_that_comes_first_is_not_the_question() -> None:
    """No input on the top span (an OpenLLMetry root without entity input): the grader's prompt embeds the user's
    message, the generator received it whole; rule 2.4 skips the template around another call's message."""
    turn = read(
        span("root", "chain", 0, parent=None),
        span("r1", "retriever", 0.1, query="rivers Vienna", documents=docs(("danube", DANUBE))),
        span("grade", "llm", 1, messages=(("system", DANUBE), ("user", f"Are these documents relevant to '{QUESTION}'? "
                                                                         "Answer yes or no.")), answer="yes"),
        span("gen", "llm", 2, messages=(("system", f"Context: {DANUBE}"), ("user", QUESTION)), answer="The Danube."),
    )  # fmt: skip
    assert (turn["question"], turn["metadata"]["source"]["question_from"]) == (QUESTION, "llm")


def test_a_prompt_quoting_the_documents_is_not_the_question() -> None:
    """The only model call's user message is a RAG prompt quoting the retrieved document: rule 2.5 takes the query."""
    turn = read(
        span("root", "chain", 0, parent=None),
        span("r1", "retriever", 0.1, query="rivers in Vienna", documents=docs(("danube", DANUBE))),
        span("gen", "llm", 1, messages=(("user", f"Context:\n{DANUBE}\n\nQuestion: {QUESTION}"),), answer="Danube."),
    )
    assert (turn["question"], turn["metadata"]["source"]["question_from"]) == ("rivers in Vienna", "retrieval_query")


def test_a_text_under_an_unnamed_key_that_reached_the_model_is_the_question() -> None:
    """{"ticket": ..., "locale": "en"}: both texts occur in the model's prompt ("en" inside any English word); the
    longest that reached it is the user's message (rule 2.2)."""
    root = span("root", "chain", 0, parent=None, input_texts=(QUESTION, "en", "tenant-7"))
    turn = read(root, span("gen", "llm", 1, messages=(("user", f"Answer briefly: {QUESTION}"),), answer="The Danube."))
    assert (turn["question"], turn["metadata"]["source"]["question_from"]) == (QUESTION, "root_input")


def test_an_object_rendering_is_never_the_question() -> None:
    """The top input is a workflow's ``StartEvent()`` repr: no question there; the model call has it (rule 2.1)."""
    root = span("root", "chain", 0, parent=None, question="StartEvent()", input_texts=())
    turn = read(root, span("gen", "llm", 1, messages=(("user", QUESTION),), answer="The Danube."))
    assert turn["question"] == QUESTION


def test_nested_retrievals_are_one_step_read_from_the_member_with_ids() -> None:
    """The outer retriever logged texts only, the inner one ids too: one step, with the inner's ids (rule 4)."""
    turn = read(
        span("root", "chain", 0, parent=None, question=QUESTION),
        span("outer", "retriever", 0.1, query=QUESTION, documents=docs((None, DANUBE), (None, WIEN)), seconds=1),
        span("inner", "retriever", 0.2, parent="outer", query=None, documents=docs(("danube", DANUBE), ("wien", WIEN))),
        span("gen", "llm", 2, messages=(("user", f"{DANUBE}\n{WIEN}\n{QUESTION}"),), answer="Two."),
    )
    assert [(s["query"], [c["id"] for c in s["contexts"]]) for s in turn["steps"]] == [(QUESTION, ["danube", "wien"])]
    assert [c["id"] for c in turn["contexts"]] == ["danube", "wien"]


def test_the_contexts_are_the_rerankers_whole_documents_not_a_shared_fragment() -> None:
    """Five retrieved, two kept by a reranker whose own model call saw all five; the generator's prompt shares the
    code line of CODE_B without quoting it whole (rule 5)."""
    five = docs(("a", CODE_A), ("b", CODE_B), ("danube", DANUBE), ("wien", WIEN), ("x", "Unrelated text."))
    turn = read(
        span("root", "chain", 0, parent=None, question=QUESTION),
        span("r1", "retriever", 0.1, query=QUESTION, documents=five),
        span("rerank", "reranker", 1, documents=docs(("a", CODE_A), ("danube", DANUBE)), seconds=1),
        span("rerank-call", "llm", 1.1, parent="rerank", messages=(("user", " ".join(d.text for d in five)),),
             answer="1, 3"),
        span("synth", "chain", 3, seconds=3),
        span("refine-1", "llm", 3.1, parent="synth", messages=(("user", f"{CODE_A}\n{QUESTION}"),), answer="Partial"),
        span("refine-2", "llm", 4, parent="synth", messages=(("user", f"import os\nclient = Client(os.environ['KEY'])"
                                                             f"\n{DANUBE}\nPartial"),), answer="Final."),
    )  # fmt: skip
    assert [c["id"] for c in turn["contexts"]] == ["a", "danube"]
    assert turn["metadata"]["source"]["contexts_from"] == "final_llm_input"


def test_a_cut_top_output_is_completed_from_the_final_call() -> None:
    """A tracer cut the workflow's ``StopEvent(result='...')`` at 30 characters (rule 3)."""
    whole = "The Danube and the Wien river flow through Vienna."
    turn = read(
        span("root", "chain", 0, parent=None, question=QUESTION, answer=whole[:30] + "..."),
        span("gen", "llm", 1, messages=(("user", QUESTION),), answer=whole),
    )
    assert turn["answer"] == whole


def test_tool_calls_leave_out_the_answer_tool_and_hand_offs_and_see_reported_failures() -> None:
    """A tool span that ended well although the model was handed its result as a failure is a failed call; the
    framework's answer tool and a hand-off are no tool calls (rule 6)."""
    turn = read(
        span("root", "chain", 0, parent=None, question=QUESTION),
        span("weather", "tool", 1, output_text="service unavailable", arguments={"city": "Vienna"}),
        span("handoff", "tool", 2, name="handoff to German support"),
        span("gen", "llm", 3, messages=(("user", QUESTION),), answer="Sorry.",
             tool_results=(ToolResult(call_id=None, text="service unavailable", error=True),)),
        span("final", "tool", 4, name="final_answer", output_text="Sorry."),
    )  # fmt: skip
    assert [(c["name"], c["error"] is not None) for c in turn["tool_calls"]] == [("weather", True)]


def test_without_tool_spans_the_models_requests_are_the_tool_calls() -> None:
    turn = read(
        span("root", "chain", 0, parent=None, question=QUESTION),
        span("call-1", "llm", 1, messages=(("user", QUESTION),),
             tool_requests={"c1": ToolRequest("river_search", '{"city": "Vienna"}')}),
        span("call-2", "llm", 2, messages=(("user", QUESTION), ("tool", "timeout")), answer="Sorry.",
             tool_results=(ToolResult(call_id="c1", text="timeout", error=True),)),
    )  # fmt: skip
    assert [(c["name"], c["arguments"], c["error"] is not None) for c in turn["tool_calls"]] == [
        ("river_search", {"city": "Vienna"}, True)
    ]
