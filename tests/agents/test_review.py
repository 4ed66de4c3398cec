"""The review of unsolved tasks: its prompt, JSON Schema and parser are one contract, and a
verdict stands only on evidence the code finds (otherwise it is ``unsure``); over real HTTP."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from typing import Any

import jsonschema
import pytest

from maestro.agents.client import Endpoints
from maestro.agents.review import (
    CAUSES,
    MIN_QUOTE_WORDS,
    Review,
    ReviewAnswer,
    ReviewCase,
    ReviewError,
    parse_review,
    quoted_in,
    review_failures,
    review_schema,
    schema_shape,
)
from maestro.agents.scripted_server import Reply, ScriptedServer, ServerConfig
from maestro.domains import Domain
from maestro.simulation import null_trajectory
from tests.conftest import role_settings


def answer(**kw: str) -> dict[str, str]:
    base = {
        "cause": "assistant_failure",
        "reason": "The agent never cancelled the order.",
        "evidence": "[assistant] Hello! How can I help you today?",
        "about": "a1",
    }
    return {**base, **kw}


# ----- the contract: prompt, schema, parser ------------------------------------------------------

#: The toy's cancel task: one expected call (a1) and one assertion (A1).
LABELS = ["a1", "A1"]
SCHEMA = review_schema(LABELS)


def test_the_prompt_states_the_shape_the_schema_defines(toy: Domain) -> None:
    case = ReviewCase(toy.policy, toy.task("toy_cancel"), ("a transcript",))
    assert case.schema == SCHEMA
    prompt = case.prompt()
    shape = schema_shape(SCHEMA)
    assert shape in prompt
    assert shape == (
        '{"cause": "task_defect" | "user_simulator_error" | "assistant_failure", '
        '"reason": "one or two sentences", "evidence": "a quote", "about": "a1" | "A1"}'
    )
    for cause in CAUSES:
        assert f'- "{cause}"' in prompt  # each choice is explained
    assert "a1: cancel_order" in prompt and "A1: The assistant confirms" in prompt


@pytest.mark.parametrize(
    ("cause", "about", "wrapping"),
    list(itertools.product(CAUSES, LABELS, ["{}", "```json\n{}\n```", "Here it is:\n{}\nThanks."])),
)
def test_every_shape_the_prompt_states_is_accepted(cause: str, about: str, wrapping: str) -> None:
    data = answer(cause=cause, about=about)
    jsonschema.validate(data, SCHEMA)  # what the schema allows ...
    parsed = parse_review(wrapping.replace("{}", json.dumps(data)), SCHEMA)  # ... the parser takes
    assert parsed == ReviewAnswer(**data)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({k: v for k, v in answer().items() if k != "evidence"}, "missing key(s) ['evidence']"),
        ({**answer(), "confidence": "high"}, "unexpected key(s) ['confidence']"),
        (answer(cause="bad_luck"), "cause must be one of"),
        (answer(about="a label"), "about must be one of ['a1', 'A1'], not 'a label'"),
        (answer(about="cancel_order"), "about must be one of"),
        (answer(evidence=""), "evidence must be a non-empty string"),
        ({**answer(), "reason": 3}, "reason must be a non-empty string"),
    ],
)
def test_what_the_schema_refuses_the_parser_refuses_and_says_why(
    data: dict[str, Any], problem: str
) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_review(json.dumps(data), SCHEMA)


# ----- evidence -----------------------------------------------------------------------------------

POLICY = "1. Orders may be cancelled while pending.\n2. Only the account holder may cancel."


@pytest.mark.parametrize(
    "quote",
    [
        "Only the account holder may cancel.",
        "only the   ACCOUNT holder may cancel",  # whitespace and case
        "\u201cOnly the account holder may cancel\u201d",  # curly quotes around it
        "Orders may be cancelled ... account holder may cancel",  # an ellipsis, parts in order
    ],
)
def test_a_quote_found_word_for_word_counts(quote: str) -> None:
    assert quoted_in(quote, [POLICY])


@pytest.mark.parametrize(
    "quote",
    [
        "Only the account owner may cancel.",  # reworded
        "account holder may",  # too short to prove anything
        "account holder may cancel ... Orders may be cancelled",  # parts out of order
    ],
)
def test_a_reworded_short_or_reordered_quote_does_not(quote: str) -> None:
    assert not quoted_in(quote, [POLICY])
    assert MIN_QUOTE_WORDS == 4


def _case(toy: Domain, task_id: str = "toy_cancel") -> ReviewCase:
    task = toy.task(task_id)
    return ReviewCase(toy.policy, task, (null_trajectory(toy, task).transcript(),))


@pytest.mark.parametrize("about", LABELS)
def test_a_verdict_with_real_evidence_stands(toy: Domain, about: str) -> None:
    review = _case(toy).check(ReviewAnswer(**answer(about=about)))  # type: ignore[arg-type]
    assert review.cause == review.claimed == "assistant_failure"
    assert "evidence:" in review.summary()


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"evidence": "The policy forbids cancelling orders over the phone."}, "not quoted"),
        ({"evidence": "   "}, "not quoted"),  # the schema allows it; it proves nothing
        ({"evidence": "help you today"}, "under 4 words"),
    ],
)
def test_a_verdict_without_checkable_evidence_is_unsure(
    toy: Domain, kw: dict[str, str], why: str
) -> None:
    review = _case(toy).check(ReviewAnswer(**answer(cause="task_defect", **kw)))  # type: ignore[arg-type]
    assert review.cause == "unsure" and review.claimed == "task_defect"
    assert why in review.reason and review.reason.startswith("the reviewer said task_defect")


def test_a_task_defect_resting_on_the_expectation_itself_or_a_transcript_is_unsure(
    toy: Domain,
) -> None:
    # Found by bench/review.py: the embedded reviewer called vetclinic_021 defective quoting the
    # task's own assertion (and could have quoted what the agent said in a failed attempt); the
    # library task was rejected. A defect needs what the expectation contradicts.
    case = _case(toy)
    greeting = "Hello! How can I help you today?"  # the failed attempt's line
    expected = _action_line_of(case)  # the expected call, as the prompt shows it
    for evidence in (greeting, expected):
        said = ReviewAnswer(cause="task_defect", reason="x", evidence=evidence, about="a1")
        review = case.check(said)
        assert review.cause == "unsure", evidence
        assert "from the policy or the customer's scenario" in review.reason
    blamed = ReviewAnswer(cause="assistant_failure", reason="x", evidence=greeting, about="a1")
    assert case.check(blamed).cause == "assistant_failure"  # the same line shows how it went


def _action_line_of(case: ReviewCase) -> str:
    action = next(iter(case.actions.values()))
    return f"{action.name} {json.dumps(action.arguments, sort_keys=True)}"


def test_evidence_may_come_from_the_task_or_its_forbidden_actions(toy: Domain) -> None:
    case = _case(toy, "toy_refuse")
    said = ReviewAnswer(
        cause="task_defect",
        reason="x",
        evidence="You are Bo (C2) and want order O1",  # the scenario
        about="f1",  # a forbidden action
    )
    assert case.check(said).cause == "task_defect"


# ----- over HTTP ----------------------------------------------------------------------------------


def _review(server: ScriptedServer, toy: Domain, attempts: int = 3) -> Review:
    case = _case(toy)

    async def go() -> Review:
        async with Endpoints() as endpoints:
            client = endpoints.client("judge", role_settings(), server.base_url)
            return await review_failures(
                client, case.policy, case.task, case.transcripts, episode="ep", attempts=attempts
            )

    return asyncio.run(go())


def test_the_review_sends_its_schema_and_hands_a_refused_answer_back(toy: Domain) -> None:
    with ScriptedServer(ServerConfig(mode="script", keep_requests=True)) as server:
        fabricated = answer(cause="task_defect", evidence="Cancelling is never allowed by phone.")
        server.script(
            "ep", "judge", [Reply(content="no idea"), Reply(content=json.dumps(fabricated))]
        )
        review = _review(server, toy)
        server.assert_done()
        first, second = (body for _, _, body in server.model.requests)
    assert review.cause == "unsure" and review.claimed == "task_defect"
    for body in (first, second):
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "task_review", "schema": SCHEMA, "strict": True},
        }
    assert second["messages"][1] == {"role": "assistant", "content": "no idea"}
    assert "That answer was refused: no JSON object" in second["messages"][2]["content"]


def test_malformed_answers_every_time_are_a_review_error(
    scripted: ScriptedServer, toy: Domain
) -> None:
    scripted.script("ep", "judge", [Reply(content="{}")] * 2)
    with pytest.raises(ReviewError, match="attempt 2: missing key"):
        _review(scripted, toy, attempts=2)
