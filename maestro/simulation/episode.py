"""One episode: the user opens; the assistant calls tools until it answers in text; the user
replies; until the user stops or transfers, the turn limit, or the deadline.

The user is the simulator, or, for a task with ``user_turns``, the task itself: its messages
come in order, the simulator is not called, and the episode ends (``user_stop``) once the last
one has been answered. A scripted turn may show the assistant tools the task hid until then
(BFCL's "missed function" turns). Both kinds run through this one loop, limits and endings.

A bad episode is data: provider errors, empty completions, malformed tool calls, tool
exceptions, user-simulator failures and timeouts end the episode with a typed termination
reason and the error, never an exception out of :func:`run_episode`.
"""

from __future__ import annotations

import asyncio
import time
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, Field

from maestro.agents.client import ProviderError
from maestro.conversation import Completion, Message, Trajectory, user_signal
from maestro.domains.models import Task
from maestro.domains.package import Domain, TaskStateError


class Termination(StrEnum):
    USER_STOP = "user_stop"
    TRANSFER = "transfer"
    MAX_TURNS = "max_turns"
    MAX_STEPS = "max_steps"
    DEADLINE = "deadline"
    ASSISTANT_ERROR = "assistant_error"
    USER_ERROR = "user_error"
    ENVIRONMENT_ERROR = "environment_error"


class EpisodeLimits(BaseModel):
    #: User messages plus assistant text answers.
    max_turns: int = Field(30, ge=1)
    #: Tool calls the assistant may make before it must answer in text.
    max_steps_per_turn: int = Field(12, ge=1)
    deadline_s: float = Field(600.0, gt=0)
    tool_deadline_s: float = Field(5.0, gt=0)


class EpisodeResult(BaseModel):
    """A finished episode: its trajectory, how it ended, and what it cost."""

    domain_id: str
    task_id: str
    trial: int
    seed: int
    trajectory: Trajectory
    termination: Termination
    error: str | None = None
    duration_s: float
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    #: The Ray node that ran the episode; None when it ran in the caller's own process.
    node_id: str | None = None

    @property
    def episode_key(self) -> str:
        return f"{self.domain_id}/{self.task_id}/{self.trial}"


class Speaker(Protocol):
    """The user side: the next user message."""

    async def respond(
        self, history: list[Message], *, episode: str, seed: int | None
    ) -> Completion: ...


class AssistantSpeaker(Protocol):
    """The assistant side. ``tools`` names the tools it may be shown now, in order; None
    means all of the domain's (the task hides none)."""

    async def respond(
        self,
        history: list[Message],
        *,
        episode: str,
        seed: int | None,
        tools: list[str] | None,
    ) -> Completion: ...


def scripted_message(task: Task, index: int) -> Completion | None:
    """The task's ``index``-th scripted user message; None once the script is over."""
    if index >= len(task.user_turns):
        return None
    return Completion(
        Message(role="user", content=task.user_turns[index].content), "stop", 0, 0, 0.0, 0
    )


class _Tally:
    def __init__(self) -> None:
        self.llm_calls = self.prompt_tokens = self.completion_tokens = self.tool_calls = 0

    def add(self, c: Completion) -> None:
        self.llm_calls += c.attempts
        self.prompt_tokens += c.prompt_tokens
        self.completion_tokens += c.completion_tokens


async def run_episode(
    domain: Domain,
    task: Task,
    assistant: AssistantSpeaker,
    user: Speaker | None,
    *,
    trial: int = 0,
    seed: int = 0,
    limits: EpisodeLimits | None = None,
) -> EpisodeResult:
    """Run one episode to its end; never raises for anything the models or tools do.

    ``user`` is not called for a task with scripted ``user_turns`` (it may be None then)."""
    limits = limits or EpisodeLimits()
    key = f"{domain.id}/{task.id}/{trial}"
    history: list[Message] = []
    tally = _Tally()
    started = time.perf_counter()
    termination = Termination.MAX_TURNS
    error: str | None = None

    def finish() -> EpisodeResult:
        traj = Trajectory(
            domain_id=domain.id, task_id=task.id, messages=history, termination=termination.value
        )
        return EpisodeResult(
            domain_id=domain.id,
            task_id=task.id,
            trial=trial,
            seed=seed,
            trajectory=traj,
            termination=termination,
            error=error,
            duration_s=time.perf_counter() - started,
            llm_calls=tally.llm_calls,
            prompt_tokens=tally.prompt_tokens,
            completion_tokens=tally.completion_tokens,
            tool_calls=tally.tool_calls,
        )

    try:
        session = domain.start_session(task)
    except TaskStateError as exc:
        termination, error = Termination.ENVIRONMENT_ERROR, str(exc)
        return finish()

    if user is None and not task.user_turns:
        termination, error = Termination.USER_ERROR, "no user simulator for an unscripted task"
        return finish()
    names = domain.toolkit.names

    async def next_user_message(heard: int) -> Completion | None:
        if task.user_turns:
            return scripted_message(task, heard)
        assert user is not None
        return await user.respond(history, episode=key, seed=seed)

    async def converse() -> tuple[Termination, str | None]:
        turns = heard = 0
        while turns < limits.max_turns:
            # The user speaks.
            try:
                said = await next_user_message(heard)
            except ProviderError as exc:
                return Termination.USER_ERROR, f"{exc.kind}: {exc}"
            if said is None:
                return Termination.USER_STOP, None  # the script is over
            heard += 1
            tally.add(said)
            text = said.message.content
            if not text:
                return (
                    Termination.USER_ERROR,
                    "the user simulator answered with tool calls instead of text",
                )
            if turns == 0 and user_signal(text):
                # Ending the conversation before it began is a simulator failure, not a stop.
                return (
                    Termination.USER_ERROR,
                    f"the user simulator opened with {text.strip()[:40]!r}",
                )
            history.append(_stamp(Message(role="user", content=text), said))
            turns += 1
            signal = user_signal(text)
            if signal == "stop":
                return Termination.USER_STOP, None
            if signal == "transfer":
                return Termination.TRANSFER, None
            # The assistant acts until it answers in text.
            shown = task.visible_tools(names, heard)
            for _step in range(limits.max_steps_per_turn + 1):
                try:
                    reply = await assistant.respond(history, episode=key, seed=seed, tools=shown)
                except ProviderError as exc:
                    return Termination.ASSISTANT_ERROR, f"{exc.kind}: {exc}"
                tally.add(reply)
                msg = _stamp(reply.message, reply)
                history.append(msg)
                if not msg.tool_calls:
                    break
                if _step == limits.max_steps_per_turn:
                    return (
                        Termination.MAX_STEPS,
                        f"more than {limits.max_steps_per_turn} tool calls without answering",
                    )
                for call in msg.tool_calls:
                    tally.tool_calls += 1
                    out = domain.toolkit.call(
                        session, call.name, call.arguments, deadline_s=limits.tool_deadline_s
                    )
                    history.append(
                        Message(
                            role="tool",
                            content=out.content,
                            tool_call_id=call.id,
                            name=call.name,
                            status=out.status,
                            latency_s=out.duration_s,
                        )
                    )
                    if call.name == "transfer_to_human_agents" and out.ok:
                        return Termination.TRANSFER, None
            turns += 1
        return Termination.MAX_TURNS, None

    try:
        async with asyncio.timeout(limits.deadline_s):
            termination, error = await converse()
    except TimeoutError:
        termination, error = (
            Termination.DEADLINE,
            f"episode passed its deadline of {limits.deadline_s:g} s",
        )
    session.closed = True
    return finish()


def _stamp(message: Message, completion: Completion) -> Message:
    message.latency_s = completion.latency_s
    message.prompt_tokens = completion.prompt_tokens
    message.completion_tokens = completion.completion_tokens
    return message
