"""One way to ask for JSON: the schema sent, the answer parsed, a refused answer sent back with
its reason, a bounded number of times, over a real HTTP scripted server."""

from __future__ import annotations

import asyncio
import json

import pytest

from maestro.agents.client import ChatClient, Endpoints
from maestro.agents.scripted_server import Reply, ScriptedServer
from maestro.agents.structured import (
    AnswerRefused,
    StructuredAnswerError,
    ask_structured,
    json_object,
)
from tests.conftest import role_settings


def run(server: ScriptedServer, episode: str, **kwargs: object) -> object:
    async def go() -> object:
        async with Endpoints() as endpoints:
            client: ChatClient = endpoints.client("judge", role_settings(), server.base_url)
            return await ask_structured(  # type: ignore[call-overload]
                client, [{"role": "user", "content": "Give n."}], parse, episode=episode, **kwargs
            )

    return asyncio.run(go())


def test_json_is_found_in_a_fence_or_between_braces_and_refusals_say_why() -> None:
    assert json_object('Sure:\n```json\n{"a": 1}\n```') == {"a": 1}
    assert json_object('The answer is {"a": [1, 2]}.') == {"a": [1, 2]}
    for text, why in [
        ("", "empty answer"),
        ("no braces", "no JSON object in the answer"),
        ('{"a": 1,,}', "invalid JSON: Expecting property name"),
    ]:
        with pytest.raises(AnswerRefused, match=why):
            json_object(text)


def parse(text: str | None) -> int:
    data = json_object(text)
    if not isinstance(data.get("n"), int):
        raise ValueError("'n' must be a whole number")
    return int(data["n"])


def test_a_refused_answer_goes_back_with_itself_and_the_reason(scripted: ScriptedServer) -> None:
    scripted.model.config.keep_requests = True
    scripted.script("ep", "judge", [Reply(content='{"n": "two"}'), Reply(content='{"n": 2}')])
    asked = run(scripted, "ep", response_format={"type": "json_object"}, history="all")
    assert asked.value == 2 and len(asked.completions) == 2  # type: ignore[attr-defined]
    second = [b for ep, _, b in scripted.model.requests if ep == "ep"][1]
    assert second["messages"][-2] == {"role": "assistant", "content": '{"n": "two"}'}
    assert "'n' must be a whole number" in second["messages"][-1]["content"]
    assert second["response_format"] == {"type": "json_object"}


def test_every_attempt_refused_names_each_reason(scripted: ScriptedServer) -> None:
    answers = ["nothing", '{"n": null}', json.dumps({"m": 1})]
    scripted.script("ep2", "judge", [Reply(content=a) for a in answers])
    with pytest.raises(StructuredAnswerError) as err:
        run(scripted, "ep2", response_format=None, attempts=3)
    assert err.value.problems == [
        "attempt 1: no JSON object in the answer",
        "attempt 2: 'n' must be a whole number",
        "attempt 3: 'n' must be a whole number",
    ]
