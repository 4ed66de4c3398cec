"""The conversation vocabulary every stage speaks: messages, tool calls, trajectories,
completions, and the user's stop and transfer signals.

A leaf module: it imports nothing from maestro, so agents, simulation, scoring, storage and
training can all depend on it without cycles.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]

#: What the user simulator writes to end the conversation, or to ask for a human agent.
STOP = "###STOP###"
TRANSFER = "###TRANSFER###"


class ToolCall(BaseModel):
    """A call the assistant asked for; ``arguments`` stays the raw text when it was not JSON."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class Message(BaseModel):
    """One message in OpenAI chat order."""

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    #: For role "tool": the call this message answers, and how the call ended.
    tool_call_id: str | None = None
    name: str | None = None
    status: str | None = None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class Trajectory(BaseModel):
    """An episode's messages; scoring reads the assistant's calls and words from it."""

    model_config = ConfigDict(extra="forbid")

    domain_id: str
    task_id: str
    messages: list[Message] = Field(default_factory=list)
    termination: str | None = None

    def assistant_calls(self) -> list[ToolCall]:
        """The assistant's tool calls, in the order it made them."""
        return [c for m in self.messages if m.role == "assistant" for c in m.tool_calls]

    def assistant_texts(self) -> list[str]:
        return [m.content for m in self.messages if m.role == "assistant" and m.content]

    def transcript(self) -> str:
        """A plain-text rendering for judges and people: every turn, call and result."""
        lines = []
        for m in self.messages:
            if m.role == "tool":
                lines.append(f"[tool result {m.name or ''} ({m.status or 'ok'})] {m.content}")
                continue
            if m.content:
                lines.append(f"[{m.role}] {m.content}")
            for c in m.tool_calls:
                args = c.arguments if isinstance(c.arguments, str) else _json(c.arguments)
                lines.append(f"[{m.role} calls {c.name}] {args}")
        return "\n".join(lines)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass
class Completion:
    """The assistant message a call produced, and what it cost."""

    message: Message
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int


def to_openai(message: Message) -> dict[str, Any]:
    """A trajectory message in the chat-completions wire format."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.arguments
                    if isinstance(c.arguments, str)
                    else json.dumps(c.arguments),
                },
            }
            for c in message.tool_calls
        ]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    return out


def user_signal(text: str | None) -> str | None:
    """'stop' or 'transfer' when the user's message ends the conversation."""
    if not text:
        return None
    if STOP in text:
        return "stop"
    if TRANSFER in text:
        return "transfer"
    return None
