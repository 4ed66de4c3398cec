"""One way to ask a model for JSON: send the answer's JSON Schema as ``response_format``,
parse the answer, and send a refused answer back to its author with the reason, a bounded
number of times. And one way to pull the JSON object out of an answer.

Every JSON stage uses it: the judge, the failure reviewer, the synthesis's scenario and refusal
writers, and the codegen team's JSON stages (their parsers call :func:`json_object`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from maestro.agents.client import ChatClient
from maestro.conversation import Completion

T = TypeVar("T")

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n(.*?)```", re.DOTALL)


class AnswerRefused(ValueError):
    """A model's answer that cannot be used; the message is what the author is told."""


class StructuredAnswerError(RuntimeError):
    """Every attempt was refused; ``problems`` holds each attempt's reason."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def json_object(text: str | None) -> Any:
    """The JSON object of an answer: inside a code fence, or from its first ``{`` to its last
    ``}``; :class:`AnswerRefused` saying why there is none."""
    if not text or not text.strip():
        raise AnswerRefused("empty answer")
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    if not candidates:
        raise AnswerRefused("no JSON object in the answer")
    first: json.JSONDecodeError | None = None
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError as exc:
            first = first or exc
    assert first is not None
    raise AnswerRefused(f"invalid JSON: {first.msg} at line {first.lineno} column {first.colno}")


def _default_retry(problem: str, done: Completion) -> str:
    return f"That answer was refused: {problem}. Answer again."


@dataclass
class Asked(Generic[T]):
    """What asking gave: the parsed value, and every completion it took."""

    value: T
    completions: list[Completion] = field(default_factory=list)


async def ask_structured(
    client: ChatClient,
    messages: list[dict[str, Any]],
    parse: Callable[[str | None], T],
    *,
    response_format: dict[str, Any] | None,
    episode: str | None = None,
    attempts: int = 3,
    history: Literal["latest", "all"] = "latest",
    retry: Callable[[str, Completion], str] = _default_retry,
    explain: Callable[[str, Completion], str] | None = None,
    on_completion: Callable[[Completion], None] | None = None,
) -> Asked[T]:
    """Ask until ``parse`` accepts an answer (it raises ValueError with the reason, which goes
    back to the model with its answer); :class:`StructuredAnswerError` with every attempt's
    reason when none does. Provider errors propagate. ``history``: keep every refused answer
    in the conversation, or only the latest (a short prompt for a small model). ``explain``
    adds to a reason what the completion tells (it was cut off at the token cap)."""
    first = list(messages)
    convo = list(messages)
    problems: list[str] = []
    completions: list[Completion] = []
    for attempt in range(attempts):
        done = await client.complete(
            convo, episode=episode, seed=attempt, response_format=response_format
        )
        completions.append(done)
        if on_completion is not None:
            on_completion(done)
        text = done.message.content
        try:
            return Asked(parse(text), completions)
        except ValueError as exc:
            why = explain(str(exc), done) if explain is not None else str(exc)
            problems.append(f"attempt {attempt + 1}: {why}")
            turn = [
                {"role": "assistant", "content": text or ""},
                {"role": "user", "content": retry(why, done)},
            ]
            convo = (convo if history == "all" else first) + turn
    raise StructuredAnswerError(problems)
