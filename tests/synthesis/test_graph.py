"""The synthesis graph end to end against the scripted OpenAI-compatible server, with the tools
tested in the real sandbox: a rich domain accepted, and every refused answer fed back to its
author with the answer itself and the error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maestro.agents.client import CallLog, Endpoints
from maestro.agents.codegen import Brief, SynthesisConfig, SynthesisResult, run_synthesis
from maestro.agents.codegen.scenarios import is_tool_refusal
from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.cli.domains import validate_targets
from maestro.domains import inspect_package, replay_gold
from maestro.domains.models import RewardType
from tests.conftest import role_settings
from tests.synthesis import scripted_team as team
from tests.synthesis.test_walks import assert_a_person_would_ask

BRIEF = Brief(text=team.BRIEF, industry=team.INDUSTRY)
CONFIG = SynthesisConfig(max_iterations=2)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(ServerConfig(mode="script", keep_requests=True)) as s:
        yield s


def synthesize(
    server: ScriptedServer, run_dir: Path, sid: str, config: SynthesisConfig = CONFIG
) -> SynthesisResult:
    async def go() -> SynthesisResult:
        log = CallLog()
        async with Endpoints(log) as endpoints:
            client = endpoints.client("codegen", role_settings(max_retries=0), server.base_url)
            return await run_synthesis(
                BRIEF, client, log, run_dir=run_dir, synthesis_id=sid, config=config
            )

    return asyncio.run(go())


def stages(result: SynthesisResult) -> list[tuple[str, int, str]]:
    return [(e.stage, e.attempt, e.outcome) for e in result.events]


def requests(server: ScriptedServer, episode: str) -> list[dict[str, Any]]:
    return [body for ep, _, body in server.model.requests if ep == episode]


def retry_of(server: ScriptedServer, sid: str, marker: str) -> list[dict[str, Any]]:
    """The requests whose prompt contains ``marker``, in order."""
    return [b for b in requests(server, sid) if marker in b["messages"][1]["content"]]


def assert_fed_back(request: dict[str, Any], previous: str, error: str) -> None:
    """The retry holds the refused answer as the model's turn, and the error after it."""
    *_, answer, told = request["messages"]
    assert answer == {"role": "assistant", "content": previous}
    assert told["role"] == "user" and error in told["content"], told["content"]


def test_a_capable_model_yields_a_rich_valid_domain(server: ScriptedServer, tmp_path: Path) -> None:
    team.queue(server, "good", team.team_replies())
    scripted = team.queue_tasks(server, "good", CONFIG)

    result = synthesize(server, tmp_path, "good")

    assert result.status == "accepted", result.reason
    server.assert_done()
    assert result.package == str(tmp_path / "domains" / team.domain_id("good"))
    domain, problems = inspect_package(result.package)
    assert problems == []
    assert domain is not None
    kinds = {s.name: s.kind for s in domain.toolkit.specs.values()}
    creates = [op["name"] for op in team.BLUEPRINT["operations"] if op["kind"] == "create"]
    assert len(domain.tables) == 5 and len(kinds) == 15 and len(creates) == 3
    # Three main tables made to size, refunds one per cancelled booking, the catalog whole.
    sizes = {t: domain.initial.count(t) for t in domain.tables}
    assert {t: sizes[t] for t in ("passengers", "sailings", "bookings", "memberships")} == {
        "passengers": 100,
        "sailings": 100,
        "bookings": 100,
        "memberships": 10,
    }
    assert 4 < sizes["refunds"] < 40
    refusals = [t for t in domain.tasks if t.category == "refusal"]
    asked = [t for t in domain.tasks if t.category == "read"]
    tool_refused = [t for t in refusals if is_tool_refusal(t)]
    assert len(domain.tasks) == 15 and len(refusals) == 5 and len(asked) == CONFIG.information
    assert len(tool_refused) == CONFIG.tool_refusals  # refused by the tools themselves
    # An agent rule's refusal names its rule in the blueprint's words (the writer's own
    # rewording made the coverage count no rule refused).
    sentences = {r["rule"] for r in team.BLUEPRINT["agent_rules"]}
    for task in refusals:
        if not is_tool_refusal(task):
            assert task.description and task.description.relevant_policies in sentences
    for task in tool_refused:
        assert task.evaluation_criteria.forbidden_actions == []
        assert replay_gold(domain, task).session.diff().to_json() == []
    for task in asked:  # an information request: nothing changes, its facts are told
        crit = task.evaluation_criteria
        assert crit.communicate_info and RewardType.COMMUNICATE in crit.reward_basis
        assert replay_gold(domain, task).session.diff().to_json() == []
    assert all(replay_gold(domain, t).ok for t in domain.tasks)
    # Every task is one a person would bring: one customer, found first by their own email and
    # date of birth, nothing an agent rule forbids unless it is a refusal, values from each
    # parameter's own field, no change to what already holds (the relay check's findings).
    for task in domain.tasks:
        assert_a_person_would_ask(domain, task)
    assert (
        domain.manifest.clock is not None
        and domain.manifest.clock.isoformat() == "2026-01-05T09:00:00"
    )
    checks, totals = validate_targets([Path(result.package)])
    assert totals["problems"] == [] and len(checks) == 1, totals
    assert totals["gold_pass"] == totals["null_fail"] == totals["perturbed_fail"] == 15
    assert [s for s, _, o in stages(result) if o != "ok"] == []
    assert result.llm_calls == 1 + 1 + 15 + 1 + scripted + 1
    # Every JSON stage sent its answer's schema; code and Markdown stages did not.
    formats = [
        (b.get("response_format") or {}).get("json_schema", {}).get("name")
        for b in requests(server, "good")
    ]
    assert formats == ["blueprint", None, *[None] * 15, None, "review"]
    task_formats = {
        b["response_format"]["json_schema"]["name"]
        for ep, _, b in server.model.requests
        if ep.startswith("synthesis/")
    }
    assert task_formats == {"scenario", "refusal", "information"}


def test_every_refused_answer_goes_back_with_itself_and_the_error(
    server: ScriptedServer, tmp_path: Path
) -> None:
    no_lookup = json.loads(json.dumps(team.BLUEPRINT))
    no_lookup["operations"] = no_lookup["operations"][1:]
    placeholders = team.fence(team.DATA_PROGRAM.replace("'Rahul'", "'name 4'"))
    bare_policy = "Rules: be nice."
    bad_review = '{"verdict": "fix", "stage": "tools", "tool": "", "problem": "rule 6"}'
    replies = team.team_replies(
        blueprint=[json.dumps(no_lookup), json.dumps(team.BLUEPRINT)],
        data=[placeholders, team.fence(team.DATA_PROGRAM)],
        cancel=[team.CANCEL_BUGGY, team.TOOLS["cancel_booking"]],
        policy=[bare_policy, team.POLICY],
        review=[bad_review, team.OK],
    )
    team.queue(server, "back", replies)
    team.queue_tasks(server, "back", CONFIG)

    result = synthesize(server, tmp_path, "back")

    assert result.status == "accepted", result.reason
    server.assert_done()
    assert [(s, a) for s, a, o in stages(result) if o == "failed"] == [
        ("blueprint", 1),
        ("data", 1),
        ("tools:cancel_booking", 1),
        ("policy", 1),
        ("review", 1),
    ]
    asks = requests(server, "back")
    assert_fed_back(asks[1], replies[0], "no lookup operation")
    assert_fed_back(
        asks[3], replies[2], "passengers/PS1004.first_name 'name 4' is the field's name"
    )
    cancel = retry_of(server, "back", "the tool cancel_booking")
    assert len(cancel) == 2
    assert_fed_back(
        cancel[1],
        team.fence(team.CANCEL_BUGGY),
        "refuses when booking_id.sailing_id.departs_at is '2026-01-06T08:59:00'",
    )
    policy = retry_of(server, "back", "Write the policy")
    assert_fed_back(policy[1], bare_policy, "the policy must start with a '# ' title line")
    review = retry_of(server, "back", "Check that the policy")
    assert len(review) == 2 and review[0] != review[1]
    assert_fed_back(review[1], bad_review, "a tools fix must name one of the tools")


def test_the_reviewer_sends_a_missing_operation_back_to_the_blueprint(
    server: ScriptedServer, tmp_path: Path
) -> None:
    finding = json.dumps(
        {
            "verdict": "fix",
            "stage": "blueprint",
            "tool": "",
            "problem": "Missing operation: no tool shows a refund, which customers ask about.",
        }
    )
    first = team.team_replies(review=[finding])
    again = [json.dumps(team.WITH_GET_REFUND), team.fence(team.TOOLS["get_refund"]), team.OK]
    team.queue(server, "missing", first + again)
    team.queue_tasks(server, "missing", CONFIG)
    team.queue_tasks(server, "missing", CONFIG, attempt=2, raw=team.WITH_GET_REFUND)

    result = synthesize(server, tmp_path, "missing")

    assert result.status == "accepted", result.reason
    server.assert_done()
    assert [s for s, _, _ in stages(result)][-6:] == [
        "review",
        "blueprint",
        "tools:get_refund",
        "tasks",
        "review",
        "finalize",
    ]  # the data, the other tools and the policy were kept: only the new tool was written
    blueprints = retry_of(server, "missing", "Design the data and operations")
    assert_fed_back(blueprints[1], first[0], "the reviewer found: Missing operation")
    domain, problems = inspect_package(str(result.package))
    assert problems == [] and domain is not None and "get_refund" in domain.toolkit.specs


def test_a_tool_never_fixed_ends_in_rejection(server: ScriptedServer, tmp_path: Path) -> None:
    replies = team.team_replies(cancel=[team.CANCEL_BUGGY, team.CANCEL_BUGGY])
    team.queue(server, "never", replies[:10])  # nothing after cancel_booking: it is not reached

    result = synthesize(server, tmp_path, "never")

    assert result.status == "rejected"
    server.assert_done()
    assert result.reason is not None
    assert result.reason.startswith("stage tools:cancel_booking failed 2 time(s), the bound is 2")
    assert "should raise ToolError but succeeded" in result.reason
    # What each failed attempt failed on, not only the last one's error.
    assert "; earlier: attempt 1: " in result.reason
    assert stages(result)[-2:] == [
        ("tools:cancel_booking", 1, "failed"),
        ("tools:cancel_booking", 2, "rejected"),
    ]
    assert result.package is None
    assert not (tmp_path / "domains").exists()


def test_a_law_no_world_keeps_goes_back_to_the_blueprint(
    server: ScriptedServer, tmp_path: Path
) -> None:
    impossible = json.loads(json.dumps(team.BLUEPRINT))
    impossible["laws"] = [
        {"table": "sailings", "holds": "seats_left < 0 and seats_left > 0", "says": "Impossible."}
    ]
    program = team.fence(team.DATA_PROGRAM)
    bad = json.dumps(impossible)
    team.queue(server, "unmet", [bad, program, program, bad, program])

    result = synthesize(server, tmp_path, "unmet")

    assert result.status == "rejected"
    server.assert_done()
    assert stages(result) == [
        ("blueprint", 1, "ok"),
        ("data", 1, "failed"),  # the program is told: perhaps its records are wrong
        ("data", 2, "failed"),  # the same law broken by every record again: the blueprint's
        ("blueprint", 2, "ok"),
        ("data", 3, "rejected"),
    ]
    blueprints = retry_of(server, "unmet", "Design the data and operations")
    assert len(blueprints) == 2
    assert_fed_back(
        blueprints[1],
        bad,
        "law(s) sailings_1 broken by every record of two worlds in a row: no data may be able "
        "to keep them; correct or drop each such law: law sailings_1 (Impossible.",
    )


def test_a_reviewers_finding_is_not_held_against_the_failures_before_success(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """A capable model's bank brief: the data stage used its three attempts to pass, the
    reviewer then found a data problem, and the synthesis was rejected without a try."""
    finding = json.dumps(
        {"verdict": "fix", "stage": "policy", "tool": "", "problem": "Rule 3 lost its limit."}
    )
    replies = team.team_replies(
        policy=["Rules: be nice.", team.POLICY, team.POLICY], review=[finding, team.OK]
    )
    # The second policy is the fix the review asks for: it comes after the first review.
    *head, fixed, first_review, ok = replies
    team.queue(server, "settled", [*head, first_review, fixed, ok])
    team.queue_tasks(server, "settled", CONFIG)
    team.queue_tasks(server, "settled", CONFIG, attempt=2)  # made again on the new policy

    result = synthesize(server, tmp_path, "settled")

    assert result.status == "accepted", result.reason
    server.assert_done()
    assert [(s, a, o) for s, a, o in stages(result) if s in ("policy", "review")] == [
        ("policy", 1, "failed"),
        ("policy", 2, "ok"),
        ("review", 1, "failed"),
        ("policy", 3, "ok"),  # 3 attempts, the bound is 2: one failure since its success
        ("review", 2, "ok"),
    ]


def test_a_crash_resumes_after_the_last_finished_stage(
    server: ScriptedServer, tmp_path: Path
) -> None:
    replies = team.team_replies()
    team.queue(server, "crash", replies[:17])  # blueprint, data, 15 tools; policy unscripted

    crashed = synthesize(server, tmp_path, "crash")

    assert crashed.status == "error"
    assert crashed.reason is not None and "stage policy crashed" in crashed.reason
    assert crashed.events[-1].outcome == "error" and crashed.events[-1].stage == "policy"
    assert len(server.model.stats.unscripted) == 1
    calls_before = server.model.stats.calls["codegen"]

    team.queue(server, "crash", replies[17:])
    scripted = team.queue_tasks(server, "crash", CONFIG)
    resumed = synthesize(server, tmp_path, "crash")

    assert resumed.status == "accepted", resumed.reason
    assert resumed.resumed
    # Only the policy, the task scenarios and the review were asked for: nothing finished redone.
    assert server.model.stats.calls["codegen"] - calls_before == 2 + scripted
    assert server.model.leftovers() == {}
    assert [s for s, _, _ in stages(resumed)].count("tools:get_booking") == 1
    assert ("policy", 1, "ok") in stages(resumed)


def test_too_few_tasks_are_topped_up_not_redone(server: ScriptedServer, tmp_path: Path) -> None:
    config = CONFIG.model_copy(update={"min_tasks": 15})
    team.queue(server, "topup", team.team_replies())
    replies = team.task_replies("topup", config)
    lost = sorted(e for e in replies if "/walk-" in e)[0]  # never answered usably
    for episode, answers in replies.items():
        team.queue(server, episode, ["no JSON here"] * 3 if episode == lost else answers)
    # The second attempt samples with the next seed and asks only for the one missing task.
    team.queue(server, lost, [team.scenario_knowing_everything("topup", config)])

    result = synthesize(server, tmp_path, "topup", config)

    assert result.status == "accepted", result.reason
    server.assert_done()
    assert [(s, o) for s, _, o in stages(result) if s == "tasks"] == [
        ("tasks", "failed"),
        ("tasks", "ok"),
    ]
    domain, _ = inspect_package(str(result.package))
    assert domain is not None and len(domain.tasks) == 15


def test_a_synthesis_past_its_deadline_stops_as_a_resumable_crash(tmp_path: Path) -> None:
    with ScriptedServer(ServerConfig(mode="script", latency_s=2.0)) as slow:
        team.queue(slow, "late", team.team_replies()[:1])

        async def go() -> SynthesisResult:
            log = CallLog()
            async with Endpoints(log) as endpoints:
                client = endpoints.client("codegen", role_settings(), slow.base_url)
                config = CONFIG.model_copy(update={"deadline_s": 0.5})
                return await run_synthesis(
                    BRIEF, client, log, run_dir=tmp_path, synthesis_id="late", config=config
                )

        result = asyncio.run(go())
    assert result.status == "error"
    assert result.reason == (
        "stage blueprint crashed: TimeoutError: the synthesis ran past its deadline of 0.5 s"
    )


def flag(task_ids: list[str], problem: str) -> str:
    return json.dumps(
        {"verdict": "fix", "stage": "tasks", "tool": "", "tasks": task_ids, "problem": problem}
    )


def test_tasks_the_reviewer_flags_are_dropped_and_the_rest_kept(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """A flagged task is dropped, not the whole stage redone: with enough left, the domain is
    finalized at once (the relay check's three rounds of regenerated tasks ended in rejection)."""
    did = team.domain_id("drop")
    finding = "It asks for a transfer the policy forbids."
    team.queue(server, "drop", team.team_replies(review=[flag(["w002"], finding)]))
    team.queue_tasks(server, "drop", CONFIG)

    result = synthesize(server, tmp_path, "drop")

    assert result.status == "accepted", result.reason
    server.assert_done()
    assert [s for s, _, _ in stages(result)][-3:] == ["tasks", "review", "finalize"]
    domain, problems = inspect_package(str(result.package))
    assert problems == [] and domain is not None
    assert len(domain.tasks) == 14 and f"{did}_syn0_w002" not in {t.id for t in domain.tasks}
    assert f"review: {did}_syn0_w002: {finding}" in result.rejected_tasks
    # Every write is in a kept task's gold or reported as not covered (a write only the dropped
    # task held is named, with the reviewer's finding).
    writes = {op.name for op in team.blueprint(CONFIG).operations if op.tool_kind == "write"}
    gold = {a.name for t in domain.tasks for a in t.gold_actions}
    reported = {
        line.split(": ")[1] for line in result.rejected_tasks if line.startswith("not_covered: ")
    }
    assert writes - gold <= reported and not reported & gold, (writes - gold, reported)


def test_too_few_tasks_left_after_review_are_replaced_and_the_writer_told_why(
    server: ScriptedServer, tmp_path: Path
) -> None:
    config = CONFIG.model_copy(update={"min_tasks": 15})
    did = team.domain_id("again")
    finding = "The customer gives a booking number they could not know."
    team.queue(server, "again", team.team_replies(review=[flag(["w001"], finding), team.OK]))
    replies = team.task_replies("again", config)
    for episode, answers in replies.items():
        team.queue(server, episode, answers)
    # The second attempt asks only for the one task dropped, never the same walk again.
    team.queue(
        server, f"synthesis/{did}/walk-0", [team.scenario_knowing_everything("again", config)]
    )

    result = synthesize(server, tmp_path, "again", config)

    assert result.status == "accepted", result.reason
    server.assert_done()
    assert [(s, o) for s, _, o in stages(result) if s in ("tasks", "review")] == [
        ("tasks", "ok"),
        ("review", "failed"),
        ("tasks", "ok"),
        ("review", "ok"),
    ]
    domain, _ = inspect_package(str(result.package))
    assert domain is not None and len(domain.tasks) == 15
    ids = {t.id for t in domain.tasks}
    assert f"{did}_syn0_w001" not in ids and f"{did}_syn1_w001" in ids
    # The writer of the replacement was told the reviewer's finding.
    (again,) = [b for ep, _, b in server.model.requests if ep == f"synthesis/{did}/walk-0"][1:]
    assert finding in again["messages"][-1]["content"]
