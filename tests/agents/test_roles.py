"""The assistant's and the user simulator's prompts: what each is told, and that the user's
system prompt is the same on every request (a server's prefix cache keeps it)."""

from __future__ import annotations

from pathlib import Path

from maestro.agents.roles import (
    TRANSFER_TOOL,
    Assistant,
    UserSimulator,
    assistant_system_prompt,
)
from maestro.agents.scripted_server import Reply, ScriptedServer, ServerConfig
from maestro.conversation import STOP, TRANSFER
from maestro.domains import Domain, load_domain
from maestro.training.datasets import conversation
from tests.simulation.test_episode import EP, play

TRANSFER_TOOL_CODE = f'''

@tool("write")
def {TRANSFER_TOOL}(db: Database, summary: str) -> str:
    """Hand the customer to a human agent.

    Args:
        summary: What the customer needs.
    """
    return "transferred"
'''


def test_the_assistant_hears_of_a_transfer_tool_only_when_the_domain_has_one(
    toy: Domain, toy_copy: Path
) -> None:
    assert TRANSFER_TOOL not in assistant_system_prompt(toy)
    assert "human agent" not in assistant_system_prompt(toy)
    with (toy_copy / "tools.py").open("a") as f:
        f.write(TRANSFER_TOOL_CODE)
    with_transfer = load_domain(toy_copy)
    prompt = assistant_system_prompt(with_transfer)
    assert f"calling the tool `{TRANSFER_TOOL}`." in prompt and "if it exists" not in prompt
    # Training data and serving see the same prompt.
    for domain in (toy, with_transfer):
        trained = conversation(domain, [])[0]
        assert trained["role"] == "system"
        assert (
            trained["content"]
            == Assistant(None, domain).system  # type: ignore[arg-type]
            == assistant_system_prompt(domain)
        )


def test_the_user_simulator_sends_one_system_prompt_from_the_first_request_on(
    toy: Domain,
) -> None:
    with ScriptedServer(ServerConfig(mode="script", keep_requests=True)) as server:
        server.script(EP, "user", [Reply(content="Please cancel O1."), Reply(content=STOP)])
        server.script(EP, "assistant", [Reply(content="It is cancelled.")])
        play(server, toy)
        server.assert_done()
        systems = [
            b["messages"][0]["content"] for _, role, b in server.model.requests if role == "user"
        ]
    assert len(systems) == 2 and systems[0] == systems[1]
    user = UserSimulator(None, toy, toy.task("toy_cancel"))  # type: ignore[arg-type]
    assert systems[0] == user.system
    # The stop rule is there from the start, after the rule that the first message states the
    # request, and it forbids stopping before the agent has answered.
    first, stop = user.system.index("Your first message says why"), user.system.index(STOP)
    assert first < stop and TRANSFER in user.system
    assert "Never send it before the agent has answered your request." in user.system
