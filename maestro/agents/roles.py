"""The assistant under test and the user simulator: prompts, and one turn each.

Both are thin: they build the messages their role sees and ask their injected client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from maestro.agents.client import ChatClient
from maestro.conversation import STOP, TRANSFER, Completion, Message
from maestro.domains.models import Task
from maestro.domains.package import Domain

ASSISTANT_PREAMBLE = """You are a customer-service agent for {name}. {description}
Today is {today}. Follow the policy below exactly. Use the tools to look things up and to make
changes; never invent information a tool did not give you. Make one tool call at a time. Before
any change, explain what you will do and get the customer's explicit confirmation. If the policy
forbids a request, refuse politely and say why.{transfer}

# Policy

{policy}"""

#: The tool that hands the customer to a person (tau2-bench's name); the episode ends when it
#: succeeds. Only a domain that has it is told about it.
TRANSFER_TOOL = "transfer_to_human_agents"
TRANSFER_SENTENCE = f""" When you cannot help, you may transfer the
customer to a human agent by calling the tool `{TRANSFER_TOOL}`."""


def assistant_system_prompt(domain: Domain) -> str:
    """The assistant's system prompt for a domain: served in episodes, trained on in datasets."""
    m = domain.manifest
    if m.system_prompt == "policy":  # an imported benchmark's own instructions, alone
        return domain.policy
    today = m.clock.strftime("%A %Y-%m-%d %H:%M") if m.clock else "not given"
    transfer = TRANSFER_SENTENCE if TRANSFER_TOOL in domain.toolkit.specs else ""
    return ASSISTANT_PREAMBLE.format(
        name=m.name, description=m.description, today=today, policy=domain.policy, transfer=transfer
    )


USER_PREAMBLE = """You are role-playing a customer of {name} who is contacting its customer-service agent.
Stay in character as the customer; the other side of the conversation is the agent.

Persona: {persona}

Why you are contacting them: {reason}

What you know (give it only when the agent asks for it): {known}

What you do not know (say so if asked; never make it up): {unknown}

How to behave: {instructions}

Rules:
- Your first message says why you are contacting them, in your own words.
- Write one short message at a time, as a customer would; never write the agent's part.
- Never invent facts (names, numbers, ids, dates) that are not in your instructions.
- Later, once the agent has fully handled your request or it clearly cannot be done, send one
  last message that is only {stop} to end the conversation ({transfer} if the agent transfers
  you to someone else). Never send it before the agent has answered your request."""

OPENING = "Hi! Thanks for contacting us. How can I help you today?"


class Assistant:
    """The assistant under test: the domain policy as system prompt, the domain tools."""

    def __init__(self, client: ChatClient, domain: Domain) -> None:
        self.client = client
        self.domain = domain
        self.system = assistant_system_prompt(domain)
        self.tools: list[dict[str, Any]] = domain.toolkit.schemas()

    async def respond(
        self,
        history: Sequence[Message],
        *,
        episode: str,
        seed: int | None,
        tools: list[str] | None = None,
    ) -> Completion:
        """The assistant's next message; ``tools`` names the tools shown (None: all)."""
        messages: list[Message | dict[str, Any]] = [
            {"role": "system", "content": self.system},
            *history,
        ]
        shown = self.tools if tools is None else shown_tools(self.tools, tools)
        return await self.client.complete(messages, shown, episode=episode, seed=seed)


def shown_tools(schemas: list[dict[str, Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    """The schemas of the named tools, in the domain's order."""
    wanted = set(names)
    return [s for s in schemas if s["function"]["name"] in wanted]


class UserSimulator:
    """A simulated customer who knows only what the task's scenario says."""

    def __init__(self, client: ChatClient, domain: Domain, task: Task) -> None:
        self.client = client
        ins = task.user_scenario.instructions
        # One system prompt from the first request on, so a server's prefix cache holds it
        # for the whole conversation. The stop rule is in it from the start, worded so that the
        # first message states the request (an opening stop is still a user_error).
        self.system = USER_PREAMBLE.format(
            name=domain.manifest.name,
            persona=task.user_scenario.persona or "an ordinary customer",
            reason=ins.reason_for_call,
            known=ins.known_info or "nothing beyond the above",
            unknown=ins.unknown_info or "nothing in particular",
            instructions=ins.task_instructions,
            stop=STOP,
            transfer=TRANSFER,
        )

    async def respond(
        self, history: Sequence[Message], *, episode: str, seed: int | None
    ) -> Completion:
        """The user's next message; the conversation seen from the user's side (roles swapped,
        tool traffic hidden), opening with the agent's greeting."""
        messages: list[Message | dict[str, Any]] = [
            {"role": "system", "content": self.system},
            # The user answers a greeting, as a customer would: it keeps small models in role.
            {"role": "user", "content": OPENING},
        ]
        for m in history:
            if m.role == "user" and m.content:
                messages.append({"role": "assistant", "content": m.content})
            elif m.role == "assistant" and m.content:
                messages.append({"role": "user", "content": m.content})
        return await self.client.complete(messages, None, episode=episode, seed=seed)
