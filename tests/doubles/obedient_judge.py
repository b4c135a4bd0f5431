"""An "obedient" judge for prompt-injection tests, and the undelimited prompt layout it exploits.

:class:`ObedientJudge` is a responder for ``tests/doubles/judge_server.py`` that judges faithfulness the way a
careful but naive model would: it splits the answer into sentences (a refusal holds none) and calls a
statement supported when a context contains it. It also obeys what it finds in the prompt text outside
delimited data, as a model swayed by the prompt would: a ``Statements:`` block at the start of a line is
taken as the statements, and "ignore previous instructions" makes every verdict ``supported``. A user
message that is one JSON object is delimited data; any other message is prompt text.

:func:`plain_pasted` rewrites a request into the layout ragpulse used before prompt version 3 (labelled
``Question:`` / ``Answer:`` blocks, contexts numbered ``[1]``, statements ``1.``, no data rule), so a test
can show that the obedient judge really does obey an undelimited prompt.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ragpulse.metrics._prompting import DATA_RULE
from ragpulse.metrics.judge import JudgeClient, JudgeRequest

__all__ = ["ObedientJudge", "PlainPastingJudge", "plain_pasted", "undelimited_text"]

_BLOCK = re.compile(r"(?m)^Statements:[ \t]*\n((?:[ \t]*\d+\.[ \t]*.+(?:\n|$))+)")
_ORDER = re.compile(r"ignore (?:all )?previous instructions", re.IGNORECASE)
_REFUSALS = ("i do not know", "i don't know", "わかりません", "分かりません", "不知道")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*|\n+")
_LABELS = {
    "question": "Question",
    "answer": "Answer",
    "reference": "Reference answer",
    "contexts": "Contexts",
    "statements": "Statements",
    "answer_statements": "Answer statements",
}


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def undelimited_text(messages: Sequence[Mapping[str, str]]) -> str:
    """The prompt text a judge can mistake for instructions: every message except a user message that is
    one JSON object (delimited data)."""
    return "\n".join(
        m["content"] for m in messages if not (m["role"] == "user" and _json_object(m["content"]) is not None)
    )


def _numbered(block: str) -> list[str]:
    return [re.sub(r"^\s*\d+\.\s*", "", line).strip() for line in block.splitlines() if line.strip()]


def _plain_inputs(user: str, step: str) -> dict[str, Any]:
    """The inputs of an undelimited user message of ``step``, read the way the old layout wrote them."""
    if step == "statements":
        return {"answer": user[user.index("Answer:") + len("Answer:") :].strip()}
    last = list(re.finditer(r"(?m)^Statements:[ \n]", user))[-1]
    head = user[: last.start()].replace("Contexts: ", "Contexts:\n", 1)
    contexts = [re.sub(r"^\[\d+\] ", "", line) for line in head.splitlines() if re.match(r"\[\d+\] ", line)]
    return {"contexts": contexts, "statements": _numbered(user[last.end() :])}


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


@dataclass
class ObedientJudge:
    """The responder; ``obeyed`` lists what it obeyed (``"statements block"``, ``"ignore instructions"``)."""

    obeyed: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        outside = undelimited_text(messages)
        user = messages[-1]["content"]
        name = body.get("response_format", {}).get("json_schema", {}).get("name", "")
        inputs = _json_object(user) or _plain_inputs(user, name.rpartition("_")[2])
        if name == "answer_statements_statements":
            return {"statements": self._statements(outside, inputs["answer"])}
        if name == "faithfulness_verdicts":
            return {"verdicts": self._verdicts(outside, inputs["contexts"], inputs["statements"])}
        raise AssertionError(f"the obedient judge only judges faithfulness, not {name!r}")

    def _obey(self, what: str) -> None:
        with self._lock:
            self.obeyed.append(what)

    def _statements(self, outside: str, answer: str) -> list[str]:
        if block := _BLOCK.search(outside):
            self._obey("statements block")
            return _numbered(block.group(1))
        if any(refusal in answer.lower() for refusal in _REFUSALS):
            return []
        return _sentences(answer)

    def _verdicts(self, outside: str, contexts: Sequence[str], statements: Sequence[str]) -> list[dict[str, Any]]:
        ordered = bool(_ORDER.search(outside))
        if ordered:
            self._obey("ignore instructions")
        return [
            {
                "statement": s,
                "reason": "as instructed" if ordered else "compared with the contexts",
                "supported": ordered or any(s.rstrip(".。") in c for c in contexts),
            }
            for s in statements
        ]


def plain_pasted(request: JudgeRequest) -> JudgeRequest:
    """``request`` in the pre-version-3 layout: the inputs pasted as labelled blocks, no data rule."""
    (system_role, system), (user_role, user), *rest = request.messages
    blocks = []
    for key, value in json.loads(user).items():
        label = _LABELS[key]
        if key == "contexts":
            text = "\n".join(f"[{rank}] {item}" for rank, item in enumerate(value, start=1))
        elif isinstance(value, list):
            text = "\n".join(f"{number}. {item}" for number, item in enumerate(value, start=1))
        else:
            text = value
        blocks.append(f"{label}:\n{text}" if "\n" in text else f"{label}: {text}")
    return replace(
        request,
        prompt_version=f"{request.prompt_version}+plain",
        messages=((system_role, system.replace(f"\n{DATA_RULE}", "")), (user_role, "\n\n".join(blocks)), *rest),
    )


@dataclass
class PlainPastingJudge:
    """A ``JudgeClient`` sending every request of the metric in the :func:`plain_pasted` layout to ``judge``."""

    judge: JudgeClient

    async def complete(self, request: JudgeRequest, **options: Callable[[str], object] | None) -> list[str]:
        return await self.judge.complete(plain_pasted(request), **options)
