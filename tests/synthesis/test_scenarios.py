"""Task synthesis over real HTTP to the scripted server: walks dressed by the codegen model,
strict parsing with bounded retries, refusals, and tasks the loader accepts as they are."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maestro.agents.client import Endpoints
from maestro.agents.codegen.scenarios import (
    CANDIDATES_PER_REFUSAL,
    DraftError,
    RefusalDraft,
    ScenarioDraft,
    TaskSynthesis,
    grounding_problems,
    more_library_tasks,
    parse_draft,
    plan_walks,
    synthesize_tasks,
    tasks_jsonl,
)
from maestro.agents.scripted_server import Reply, ScriptedServer, ServerConfig
from maestro.agents.settings import LLMSettings
from maestro.domains import Domain, library_path, load_domain, replay_gold
from maestro.domains.walks import Walk
from maestro.scoring import check_task
from tests.conftest import role_settings


@pytest.fixture
def keeping() -> Iterator[ScriptedServer]:
    """A scripted server that keeps every request, to read what a retry was told."""
    with ScriptedServer(ServerConfig(mode="script", keep_requests=True)) as server:
        yield server
        server.assert_done()


def draft(walk: Walk, **overrides: Any) -> str:
    """A well-formed answer that tells the customer every value the walk needs."""
    values = [
        str(x)
        for v in walk.user_values.values()
        for x in (v if isinstance(v, list) else [v])
        if not isinstance(x, bool)
    ]
    body: dict[str, Any] = {
        "persona": "A busy customer who wants this sorted quickly.",
        "reason_for_call": "You want to make a change to your account.",
        "known_info": "You know: " + ", ".join(values),
        "unknown_info": None,
        "task_instructions": "Give the details when asked and confirm the change.",
        "nl_assertions": ["The assistant confirms the change to the customer."],
    }
    body.update(overrides)
    return json.dumps(body)


def run(server: ScriptedServer, domain: Domain, **kw: Any) -> TaskSynthesis:
    async def go() -> TaskSynthesis:
        async with Endpoints() as endpoints:
            client = endpoints.client("codegen", role_settings(), server.base_url)
            return await synthesize_tasks(domain, client, **kw)

    return asyncio.run(go())


def test_parse_draft_is_strict() -> None:
    good = '```json\n{"persona": "p", "reason_for_call": "r", "known_info": "k", "unknown_info": null, "task_instructions": "t", "nl_assertions": ["a"]}\n```'
    assert parse_draft(good, ScenarioDraft).nl_assertions == ["a"]
    for text, problem in [
        ("", "empty answer"),
        ("Sure! Here is the scenario.", "no JSON object"),
        ('{"persona": "p",', "no JSON object"),
        ('{"persona": "p"}', "reason_for_call: Field required"),
        (good.replace('"unknown_info"', '"mood": "calm", "unknown_info"'), "mood: Extra inputs"),
        (good.replace('["a"]', '"a"'), "nl_assertions: Input should be a valid list"),
        (good.replace('["a"]', "[]"), "nl_assertions: List should have at least 1 item"),
    ]:
        with pytest.raises(DraftError, match=problem):
            parse_draft(text, ScenarioDraft)
    with pytest.raises(DraftError, match="candidate: Field required"):
        parse_draft(good, RefusalDraft)


def test_a_refusal_answer_of_null_parses_without_dummy_fields() -> None:
    """The refusal prompt says: no forbidden candidate, answer {"candidate": null}."""
    assert parse_draft('{"candidate": null}', RefusalDraft).candidate is None
    nulls = {k: None for k in RefusalDraft.model_fields}
    assert parse_draft(json.dumps(nulls), RefusalDraft).candidate is None
    with pytest.raises(DraftError, match=r"a chosen candidate needs \['rule'"):
        parse_draft('{"candidate": 2, "persona": "p"}', RefusalDraft)


def test_walk_tasks_are_synthesized_after_a_malformed_answer_and_pass_the_loader(
    scripted: ScriptedServer, toy: Domain, toy_copy: Path
) -> None:
    walks, _ = plan_walks(toy, n=3, seed=0)
    assert len(walks) == 3
    for i, walk in enumerate(walks):
        replies = [Reply(content=draft(walk))]
        if i == 0:
            replies.insert(0, Reply(content="Here is a scenario for you!"))
        scripted.script(f"synthesis/toy/walk-{i}", "codegen", replies)
    out = run(scripted, toy, n=3, seed=0)
    assert out.rejected == []
    assert out.usage.calls == 4 and out.usage.failed_calls == 0
    assert out.usage.prompt_tokens > 0 and out.usage.completion_tokens > 0
    assert [t.id for t in out.tasks] == ["toy_syn0_w001", "toy_syn0_w002", "toy_syn0_w003"]
    for task, walk in zip(out.tasks, walks, strict=True):
        assert task.provenance.source == "synthesized" and task.split == "train"
        assert [(a.name, a.arguments) for a in task.gold_actions] == [
            (s.name, s.arguments) for s in walk.writes
        ]
        assert replay_gold(toy, task).session.state_hash() == walk.expected_state_hash
        assert check_task(toy, task).ok
    # The loader takes them as they are, gold replay included.
    with (toy_copy / "tasks.jsonl").open("a") as f:
        f.write(tasks_jsonl(out.tasks))
    loaded = load_domain(toy_copy, trusted=True)
    assert {t.id for t in out.tasks} <= {t.id for t in loaded.tasks}


def test_malformed_or_ungrounded_answers_are_retried_then_recorded(
    scripted: ScriptedServer, toy: Domain
) -> None:
    (walk,), _ = plan_walks(toy, n=1, seed=4)
    assert walk.user_values
    scripted.script(
        "synthesis/toy/walk-0",
        "codegen",
        [
            Reply(content='{"persona": "x"'),  # truncated
            Reply(content=draft(walk, known_info="You know nothing useful.")),
            Reply(content=draft(walk, nl_assertions="not a list")),
        ],
    )
    out = run(scripted, toy, n=1, seed=4, attempts=3)
    assert out.tasks == []
    assert out.usage.calls == 3
    ((reason, detail),) = out.rejected
    assert reason == "malformed_output"
    assert "attempt 1: no JSON object" in detail
    assert "attempt 2: known_info must state the exact value(s)" in detail
    assert "attempt 3: nl_assertions" in detail


def test_provider_failure_is_recorded_not_raised(scripted: ScriptedServer, toy: Domain) -> None:
    # Nothing scripted: the server answers 400 no_script, which the client does not retry.
    out = run(scripted, toy, n=1, seed=4)
    scripted.model.stats.unscripted.clear()
    assert out.tasks == []
    assert [r for r, _ in out.rejected] == ["provider_error"]
    assert out.usage.failed_calls == 1


def refusal(candidate: int | None, info: list[str], walk: Walk | None = None, **kw: Any) -> str:
    values = " ".join(str(v) for v in (walk.user_values.values() if walk else []))
    body = {
        "candidate": candidate,
        "rule": "rule 3: only the account holder may cancel an order",
        "communicate_info": info,
        "persona": "A pushy caller.",
        "reason_for_call": "You want someone else's order cancelled.",
        "known_info": f"You are Bo (C2); you give {values}.",
        "unknown_info": None,
        "task_instructions": "Insist once, then accept the refusal.",
        "nl_assertions": ["The assistant does not make the change."],
    }
    body.update(kw)
    return json.dumps(body)


def test_a_sentence_to_communicate_goes_back_and_its_fact_is_kept(
    keeping: ScriptedServer, toy: Domain
) -> None:
    _, plans = plan_walks(toy, n=0, seed=0, refusals=1)
    first = plans[0].group
    sentence = "Only the account holder may cancel an order."  # the policy's rule 3, verbatim
    keeping.script(
        "synthesis/toy/refusal-0",
        "codegen",
        [
            Reply(content=refusal(1, [sentence], first[0])),
            Reply(content=refusal(1, ["Account-holder"], first[0])),  # case and hyphen aside
        ],
    )
    out = run(keeping, toy, n=0, seed=0, refusals=1)
    (task,) = out.tasks
    assert task.evaluation_criteria.communicate_info == ["Account-holder"]
    asks = [b for ep, _, b in keeping.model.requests if ep == "synthesis/toy/refusal-0"]
    told = asks[1]["messages"][-1]["content"]
    assert f"communicate_info item {sentence!r} is a sentence" in told
    assert any("never a sentence" in m["content"] for m in asks[0]["messages"])  # stated
    assert check_task(toy, task).ok


def test_refusal_tasks_forbid_a_write_the_tools_would_accept(
    keeping: ScriptedServer, toy: Domain
) -> None:
    scripted = keeping
    _, plans = plan_walks(toy, n=0, seed=0, refusals=2)
    first = plans[0].group
    assert 0 < len(first) <= CANDIDATES_PER_REFUSAL
    scripted.script(
        "synthesis/toy/refusal-0",
        "codegen",
        [
            Reply(
                content=refusal(1, ["account holder refunded in full"], first[0])
            ),  # not in the policy
            Reply(content=refusal(1, ["account holder"])),  # the customer is not told the values
            Reply(content=refusal(1, ["account holder"], first[0])),
        ],
    )
    if plans[1].group:
        scripted.script(
            "synthesis/toy/refusal-1", "codegen", [Reply(content='{"candidate": null}')]
        )
    out = run(scripted, toy, n=0, seed=0, refusals=2)
    (task,) = out.tasks
    assert task.category == "refusal" and task.id == "toy_syn0_r001"
    crit = task.evaluation_criteria
    assert crit.actions == [] and crit.communicate_info == ["account holder"]
    (forbidden,) = crit.forbidden_actions
    assert (forbidden.name, forbidden.arguments) == (
        first[0].writes[0].name,
        first[0].writes[0].arguments,
    )
    check = check_task(toy, task)
    assert check.ok and check.perturbed_reward == 0.0
    reasons = [r for r, _ in out.rejected]
    assert reasons == (["no_forbidden_write"] if plans[1].group else ["no_walk"])
    asks = [body for episode, _, body in scripted.model.requests if episode.endswith("refusal-0")]
    told = asks[1]["messages"][-1]["content"]
    assert "not found in the policy text: ['account holder refunded in full']" in told
    # The rejection shows the policy line nearest the fact, to copy a run of words from.
    nearest = re.search(r"nearest to 'account holder refunded in full': '([^']+)'", told)
    assert nearest and nearest.group(1) == "3. Only the account holder may cancel an order.", told
    assert "known_info must state the exact value(s)" in asks[2]["messages"][-1]["content"]
    assert all(b["response_format"]["json_schema"]["name"] == "refusal" for b in asks)


def test_more_tasks_for_a_library_domain(scripted: ScriptedServer, tmp_path: Path) -> None:
    hotel = load_domain(library_path("hotel"), check_gold=False)
    walks, _ = plan_walks(hotel, n=2, seed=9)
    for i, walk in enumerate(walks):
        scripted.script(f"synthesis/hotel/walk-{i}", "codegen", [Reply(content=draft(walk))])
    settings = LLMSettings(codegen=role_settings(base_url=scripted.base_url))
    out = asyncio.run(more_library_tasks("hotel", settings, n=2, seed=9))
    assert len(out.tasks) == 2, out.rejected
    assert not {t.id for t in out.tasks} & {t.id for t in hotel.tasks}
    copy = tmp_path / "hotel"
    shutil.copytree(library_path("hotel"), copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "tasks.jsonl").open("a") as f:
        f.write(tasks_jsonl(out.tasks))
    assert len(load_domain(copy, trusted=True).tasks) == len(hotel.tasks) + 2


def test_grounding_accepts_a_number_however_it_is_written() -> None:
    base = {
        "persona": "p",
        "reason_for_call": "r",
        "known_info": "k",
        "task_instructions": "t",
        "nl_assertions": ["a"],
    }
    told = ScenarioDraft.model_validate(
        {**base, "known_info": "Refund 40 to payment PAY9, 6 instalments."}
    )
    assert (
        grounding_problems(told, {"amount": 40.0, "payment_id": "PAY9", "n": 6, "ok": True}) == []
    )
    (problem,) = grounding_problems(told, {"amount": 45.5, "payment_id": "PAY1"})
    assert "amount=45.5" in problem and "payment_id=PAY1" in problem
    # A code word in the customer's words (a capable model's "by debit card" was refused).
    said = ScenarioDraft.model_validate({**base, "known_info": "I pay by Debit Card."})
    assert grounding_problems(said, {"method": "debit_card"}) == []
    (problem,) = grounding_problems(said, {"method": "credit_card"})
    assert "method=credit_card" in problem


def test_a_retry_says_when_the_answer_hit_the_token_cap(
    scripted: ScriptedServer, toy: Domain
) -> None:
    (walk,), _ = plan_walks(toy, n=1, seed=4)
    cut = draft(walk)[:-40]  # what a model stopped at its cap sends
    scripted.script("synthesis/toy/walk-0", "codegen", [Reply(content=cut)] * 2)

    async def go() -> TaskSynthesis:
        async with Endpoints() as endpoints:
            small = role_settings(max_tokens=20)
            client = endpoints.client("codegen", small, scripted.base_url)
            return await synthesize_tasks(toy, client, n=1, seed=4, attempts=2)

    out = asyncio.run(go())
    ((reason, detail),) = out.rejected
    assert reason == "malformed_output" and detail.count("cut off at the length limit") == 2


def test_a_scenario_that_volunteers_a_known_fact_goes_back_with_the_rule(
    keeping: ScriptedServer, toy: Domain
) -> None:
    """The rule was checked only after the answer: a capable model's rental brief lost every
    refusal to it without ever being told. It is stated in the prompt and fed back."""
    (walk,), _ = plan_walks(toy, n=1, seed=0)
    value = "ann.lee@gmail.com"
    known = json.loads(draft(walk))["known_info"] + f"; your email is {value}"
    eager = draft(walk, known_info=known, task_instructions=f"Start by giving {value} at once.")
    keeping.script(
        "synthesis/toy/walk-0", "codegen", [Reply(content=eager), Reply(content=draft(walk))]
    )
    out = run(keeping, toy, n=1, seed=0)
    assert out.rejected == [] and len(out.tasks) == 1
    first, second = [b for ep, _, b in keeping.model.requests if ep == "synthesis/toy/walk-0"]
    assert "never tell the customer to give a" in first["messages"][0]["content"]
    assert f"task_instructions say to give {value} unasked" in second["messages"][-1]["content"]
