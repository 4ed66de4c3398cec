"""The trajectory: every message of an episode, tool calls and tool results included."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


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
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)
