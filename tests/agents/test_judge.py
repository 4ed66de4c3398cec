"""The LLM judge over real HTTP: verdicts parsed, malformed output retried, then an error."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from maestro.agents.client import Endpoints
from maestro.agents.judge import LLMJudge, parse_verdicts
from maestro.agents.scripted_server import Reply, ScriptedServer
from maestro.domains import Domain
from maestro.scoring import JudgeError, ScoreCard, Scorer
from maestro.simulation import Message, gold_trajectory
from tests.conftest import role_settings

ASSERTIONS = ["The assistant refuses.", "The assistant is polite."]


def test_parse_verdicts_accepts_json_with_surrounding_text() -> None:
    text = 'Here you go:\n{"verdicts": [{"index": 2, "met": false, "reason": "rude"}, {"index": 1, "met": true, "reason": "refused"}]}'
    verdicts = parse_verdicts(text, ASSERTIONS)
    assert [(v.assertion, v.met, v.reason) for v in verdicts] == [
        ("The assistant refuses.", True, "refused"),
        ("The assistant is polite.", False, "rude"),
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty answer"),
        ("I think yes.", "no JSON object"),
        ('{"verdicts": [{"index": 1, "met": true}', "invalid JSON"),  # truncated output
        (
            '{"verdicts": [{"index": 1, "met": "yes"}, {"index": 2, "met": true}]}',
            "'met' must be true or false",
        ),
        ('{"verdicts": [{"index": 3, "met": true}]}', "index 3 is not 1..2"),
        ('{"verdicts": [{"index": 1, "met": true}]}', "no verdict for assertion(s) [2]"),
        ('{"answer": []}', "no 'verdicts' list"),
    ],
)
def test_parse_verdicts_names_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_verdicts(text, ASSERTIONS)


def _judge_card(server: ScriptedServer, toy: Domain) -> ScoreCard:
    task = toy.task("toy_refuse")
    traj = gold_trajectory(toy, task)
    traj.messages.append(
        Message(role="assistant", content="I cannot cancel an order that is not yours.")
    )

    async def go() -> ScoreCard:
        async with Endpoints() as endpoints:
            judge = LLMJudge(
                endpoints.client("judge", role_settings(), server.base_url), attempts=3
            )
            return await Scorer(toy, judge).ascore(task, traj)

    return asyncio.run(go())


def test_the_judge_sees_the_transcript_and_its_verdict_scores(
    scripted: ScriptedServer, toy: Domain
) -> None:
    seen: list[str] = []
    original = scripted.model.answer

    def spy(episode: str, role: str, body: dict) -> Reply:  # type: ignore[type-arg]
        seen.append(body["messages"][0]["content"])
        return original(episode, role, body)

    scripted.model.answer = spy  # type: ignore[method-assign]
    verdict = {"verdicts": [{"index": 1, "met": True, "reason": "the assistant declined"}]}
    scripted.script(
        "toy/toy_refuse/judge",
        "judge",
        [Reply(content="not json"), Reply(content=json.dumps(verdict))],
    )
    card = _judge_card(scripted, toy)
    assert card.complete and card.reward == 1.0
    assert card.criteria["NL_ASSERTION"].items[0].reason == "the assistant declined"
    assert "I cannot cancel an order that is not yours." in seen[0]
    assert (
        "1. The assistant refuses to cancel an order for someone who is not its account holder."
        in seen[0]
    )


def test_malformed_output_every_time_is_a_judge_error_not_a_verdict(
    scripted: ScriptedServer, toy: Domain
) -> None:
    scripted.script("toy/toy_refuse/judge", "judge", [Reply(content="yes")] * 3)
    card = _judge_card(scripted, toy)
    nl = card.criteria["NL_ASSERTION"]
    assert nl.status == "error" and nl.reward is None and not card.complete
    assert "malformed judge output" in nl.details and "attempt 3" in nl.details


def test_judge_endpoint_failure_is_a_judge_error(scripted: ScriptedServer, toy: Domain) -> None:
    scripted.script("toy/toy_refuse/judge", "judge", [Reply(fault="server_error")] * 5)
    card = _judge_card(scripted, toy)
    assert card.criteria["NL_ASSERTION"].status == "error"
    assert "judge endpoint failed" in card.criteria["NL_ASSERTION"].details


def test_judge_error_type() -> None:
    assert issubclass(JudgeError, Exception)
