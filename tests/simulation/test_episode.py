"""Episodes over real HTTP against the scripted server: every way an episode can end."""

from __future__ import annotations

import asyncio

import pytest

from maestro.agents.client import Endpoints
from maestro.agents.roles import OPENING, Assistant, UserSimulator
from maestro.agents.scripted_server import Reply, ScriptedCall, ScriptedServer
from maestro.conversation import STOP, TRANSFER
from maestro.domains import Domain
from maestro.scoring import Scorer
from maestro.simulation.episode import EpisodeLimits, EpisodeResult, Termination, run_episode
from tests.conftest import role_settings

EP = "toy/toy_cancel/0"


def play(
    server: ScriptedServer, toy: Domain, limits: EpisodeLimits | None = None, **settings: object
) -> EpisodeResult:
    async def go() -> EpisodeResult:
        async with Endpoints() as endpoints:
            rs = role_settings(**settings)
            assistant = Assistant(endpoints.client("assistant", rs, server.base_url), toy)
            task = toy.task("toy_cancel")
            user = UserSimulator(endpoints.client("user", rs, server.base_url), toy, task)
            return await run_episode(toy, task, assistant, user, limits=limits)

    return asyncio.run(go())


def test_a_good_episode_records_everything_and_scores_one(
    scripted: ScriptedServer, toy: Domain
) -> None:
    scripted.script(
        EP, "user", [Reply(content="Please cancel my order O1."), Reply(content=f"Thanks! {STOP}")]
    )
    scripted.script(
        EP,
        "assistant",
        [
            Reply(
                tool_calls=[
                    ScriptedCall(
                        name="cancel_order",
                        arguments={"order_id": "O1", "reason": "no longer needed"},
                    )
                ]
            ),
            Reply(content="Order O1 is cancelled."),
        ],
    )
    result = play(scripted, toy)
    assert result.termination == Termination.USER_STOP and result.error is None
    roles = [m.role for m in result.trajectory.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    tool_msg = result.trajectory.messages[2]
    assert tool_msg.status == "ok" and '"status": "cancelled"' in (tool_msg.content or "")
    assert result.llm_calls == 4 and result.tool_calls == 1
    assert result.prompt_tokens > 0 and all(
        m.latency_s is not None for m in result.trajectory.messages
    )
    assert Scorer(toy).score(toy.task("toy_cancel"), result.trajectory).reward == 1.0


def test_malformed_and_unknown_tool_calls_are_answered_and_the_episode_goes_on(
    scripted: ScriptedServer, toy: Domain
) -> None:
    scripted.script(EP, "user", [Reply(content="Cancel O1."), Reply(content=STOP)])
    scripted.script(
        EP,
        "assistant",
        [
            Reply(
                tool_calls=[ScriptedCall(name="cancel_order", arguments={})], fault="malformed_args"
            ),
            Reply(tool_calls=[ScriptedCall(name="delete_everything", arguments={})]),
            Reply(tool_calls=[ScriptedCall(name="cancel_order", arguments={"order_id": "O2"})]),
            Reply(content="Sorry, I could not."),
        ],
    )
    result = play(scripted, toy)
    statuses = [m.status for m in result.trajectory.messages if m.role == "tool"]
    assert statuses == ["invalid_call", "unknown_tool", "tool_error"]
    assert result.termination == Termination.USER_STOP


def test_transfer_ends_the_episode(scripted: ScriptedServer, toy: Domain) -> None:
    scripted.script(EP, "user", [Reply(content="Cancel O1."), Reply(content=TRANSFER)])
    scripted.script(EP, "assistant", [Reply(content="Let me transfer you.")])
    assert play(scripted, toy).termination == Termination.TRANSFER


def test_max_turns(scripted: ScriptedServer, toy: Domain) -> None:
    scripted.script(EP, "user", [Reply(content="Hello?")] * 2)
    scripted.script(EP, "assistant", [Reply(content="Hi!")] * 2)
    result = play(scripted, toy, EpisodeLimits(max_turns=4))
    assert result.termination == Termination.MAX_TURNS


def test_max_steps_without_answering(scripted: ScriptedServer, toy: Domain) -> None:
    scripted.script(EP, "user", [Reply(content="Where is O1?")])
    scripted.script(
        EP,
        "assistant",
        [Reply(tool_calls=[ScriptedCall(name="get_order", arguments={"order_id": "O1"})])] * 4,
    )
    result = play(scripted, toy, EpisodeLimits(max_steps_per_turn=3))
    assert result.termination == Termination.MAX_STEPS
    assert "more than 3 tool calls" in (result.error or "")


def test_provider_failures_end_the_episode_with_a_typed_error(
    scripted: ScriptedServer, toy: Domain
) -> None:
    scripted.script(EP, "user", [Reply(content="Cancel O1.")])
    scripted.script(EP, "assistant", [Reply(fault="server_error")] * 2)
    result = play(scripted, toy, max_retries=1)
    assert result.termination == Termination.ASSISTANT_ERROR
    assert "HTTP 500" in (result.error or "")
    assert [m.role for m in result.trajectory.messages] == ["user"]


def test_user_simulator_failure(scripted: ScriptedServer, toy: Domain) -> None:
    scripted.script(EP, "user", [Reply(fault="empty")] * 2)
    result = play(scripted, toy, empty_retries=1)
    assert result.termination == Termination.USER_ERROR
    assert "empty_completion" in (result.error or "")


def test_episode_deadline(toy: Domain) -> None:
    from maestro.agents.scripted_server import ServerConfig

    with ScriptedServer(ServerConfig(mode="script", latency_s=0.3)) as server:
        server.script(EP, "user", [Reply(content="Hello?")] * 10)
        server.script(EP, "assistant", [Reply(content="Hi!")] * 10)
        result = play(server, toy, EpisodeLimits(deadline_s=1.0))
    assert result.termination == Termination.DEADLINE
    assert 1 <= len(result.trajectory.messages) < 10


@pytest.mark.parametrize("stop_text", [STOP, f"Great, thanks. {STOP}"])
def test_stop_signal_anywhere_in_the_message(
    scripted: ScriptedServer, toy: Domain, stop_text: str
) -> None:
    scripted.script(EP, "user", [Reply(content="Is O1 shipped?"), Reply(content=stop_text)])
    scripted.script(EP, "assistant", [Reply(content="Not yet.")])
    assert play(scripted, toy).termination == Termination.USER_STOP


def test_a_user_who_stops_before_saying_anything_is_a_simulator_error(
    scripted: ScriptedServer, toy: Domain
) -> None:
    scripted.script(EP, "user", [Reply(content=STOP)])
    result = play(scripted, toy)
    assert result.termination == Termination.USER_ERROR
    assert "opened with '###STOP###'" in (result.error or "")


def test_the_user_sees_no_tool_traffic_and_swapped_roles(toy: Domain) -> None:
    from maestro.conversation import Message, ToolCall

    user = UserSimulator(None, toy, toy.task("toy_cancel"))  # type: ignore[arg-type]
    assert "Your customer id is C1." in user.system and STOP in user.system
    history = [
        Message(role="user", content="Cancel O1."),
        Message(role="assistant", tool_calls=[ToolCall(id="1", name="get_order", arguments={})]),
        Message(role="tool", content="{}", tool_call_id="1"),
        Message(role="assistant", content="Done."),
    ]
    seen: list[dict[str, object]] = []

    class Capture:
        async def complete(
            self, messages: list[dict[str, object]], tools: object, **kw: object
        ) -> None:
            seen.extend(messages)

    user.client = Capture()  # type: ignore[assignment]
    asyncio.run(user.respond(history, episode="e", seed=0))
    assert [(m["role"], m["content"]) for m in seen[1:]] == [
        ("user", OPENING),
        ("assistant", "Cancel O1."),
        ("user", "Done."),
    ]
    assert seen[0]["content"] == user.system  # one system prompt, from the first request on
