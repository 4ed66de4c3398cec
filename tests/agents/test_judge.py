"""The LLM judge over real HTTP: verdicts parsed, malformed output retried, then an error."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from maestro.agents.client import Endpoints
from maestro.agents.judge import JUDGE_PROMPT, LLMJudge, parse_verdicts, verdict_schema
from maestro.agents.scripted_server import Reply, ScriptedServer, ServerConfig
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


# ----- the prompt, the schema and the parser are one contract ----------------------------------


def _stated_shape(n: int) -> str:
    """The answer JUDGE_PROMPT states, written out for ``n`` assertions."""
    line = JUDGE_PROMPT.split("in exactly this shape:\n", 1)[1].splitlines()[0]
    line = line.replace("{{", "{").replace("}}", "}")
    entry = re.search(r"\{\"index\": 1, .*?\}", line)
    assert entry and ", ...]" in line, f"the prompt's stated shape changed: {line}"
    entries = [entry.group(0).replace('"index": 1', f'"index": {i}') for i in range(1, n + 1)]
    return line.replace(entry.group(0) + ", ...", ", ".join(entries))


@pytest.mark.parametrize("n", [1, 2, 5])
def test_the_shape_the_prompt_states_is_parsed_and_fits_the_schema_sent(n: int) -> None:
    import jsonschema

    text = _stated_shape(n)
    assertions = [f"assertion {i}" for i in range(1, n + 1)]
    verdicts = parse_verdicts(text, assertions)
    assert [v.assertion for v in verdicts] == assertions
    assert all(v.met and v.reason == "one sentence" for v in verdicts)
    jsonschema.validate(json.loads(text), verdict_schema(n))


def test_the_judge_sends_its_schema_and_a_refused_answer_goes_back_with_the_reason(
    toy: Domain,
) -> None:
    verdict = {"verdicts": [{"index": 1, "met": True, "reason": "declined"}]}
    config = ServerConfig(mode="script", keep_requests=True)
    with ScriptedServer(config) as server:
        server.script(
            "toy/toy_refuse/judge",
            "judge",
            [Reply(content='{"verdicts": []}'), Reply(content=json.dumps(verdict))],
        )
        card = _judge_card(server, toy)
        server.assert_done()
    assert card.reward == 1.0
    formats = [f for _, _, f in server.model.formats]
    assert len(formats) == 2 and formats[0] == formats[1]
    assert formats[0]["type"] == "json_schema"
    assert formats[0]["json_schema"]["schema"] == verdict_schema(1)
    first, second = (body["messages"] for _, _, body in server.model.requests)
    assert len(first) == 1
    assert second[:2] == [first[0], {"role": "assistant", "content": '{"verdicts": []}'}]
    assert "That answer was refused: no verdict for assertion(s) [1]" in second[2]["content"]


def test_a_scripted_answer_that_misfits_the_schema_sent_fails_the_test(toy: Domain) -> None:
    config = ServerConfig(mode="script", check_response_format=True)
    with ScriptedServer(config) as server:
        # The parser takes a verdict without a reason; the schema the judge sends does not.
        server.script(
            "toy/toy_refuse/judge",
            "judge",
            [Reply(content='{"verdicts": [{"index": 1, "met": true}]}')],
        )
        _judge_card(server, toy)
        with pytest.raises(AssertionError, match="misfit their response_format") as err:
            server.assert_done()
    assert "at verdicts/0: 'reason' is a required property" in str(err.value)
    assert server.model.stats.response_formats["judge"] == 1


def test_no_assertions_need_no_judge_call(scripted: ScriptedServer, toy: Domain) -> None:
    async def go() -> list[object]:
        async with Endpoints() as endpoints:
            judge = LLMJudge(endpoints.client("judge", role_settings(), scripted.base_url))
            task = toy.task("toy_refuse")
            return list(await judge.judge(task, gold_trajectory(toy, task), []))

    assert asyncio.run(go()) == []
