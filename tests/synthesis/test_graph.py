"""The synthesis graph end to end against the scripted OpenAI-compatible server, with the tools
tested in the real sandbox."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from maestro.agents.client import CallLog, Endpoints
from maestro.agents.codegen import Brief, SynthesisConfig, SynthesisResult, run_synthesis
from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.domains import inspect_package, replay_gold
from tests.conftest import role_settings
from tests.synthesis import scripted_team as team

BRIEF = Brief(text="A bike rental shop: customers rent bikes by the day.", industry="leisure")
CONFIG = SynthesisConfig(max_iterations=2, n_tasks=2, refusals=0)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(ServerConfig(mode="script", keep_requests=True)) as s:
        yield s


def synthesize(server: ScriptedServer, run_dir: Path, sid: str) -> SynthesisResult:
    async def go() -> SynthesisResult:
        log = CallLog()
        async with Endpoints(log) as endpoints:
            client = endpoints.client("codegen", role_settings(max_retries=0), server.base_url)
            return await run_synthesis(
                BRIEF, client, log, run_dir=run_dir, synthesis_id=sid, config=CONFIG
            )

    return asyncio.run(go())


def stages(result: SynthesisResult) -> list[tuple[str, int, str]]:
    return [(e.stage, e.attempt, e.outcome) for e in result.events]


def test_a_good_model_yields_a_valid_domain(server: ScriptedServer, tmp_path: Path) -> None:
    team.queue(server, "good", team.team_replies())
    team.queue_tasks(server, "good", 2)

    result = synthesize(server, tmp_path, "good")

    assert result.status == "accepted", result.reason
    server.assert_done()
    assert result.package == str(tmp_path / "domains" / team.domain_id("good"))
    domain, problems = inspect_package(result.package)
    assert problems == []
    assert domain is not None and len(domain.tasks) == 2
    assert all(replay_gold(domain, t).ok for t in domain.tasks)
    assert {s.name: s.kind for s in domain.toolkit.specs.values()} == {
        "get_rental": "read",
        "return_rental": "write",
        "cancel_rental": "write",
    }
    assert domain.manifest.provenance.source == "synthesized"
    assert domain.initial.count("rentals") == 6  # one LLM record kept, five filled
    assert [s for s, _, o in stages(result) if o != "ok"] == []
    assert [s for s, _, _ in stages(result)] == [
        "blueprint",
        "data",
        "tools:get_rental",
        "tools:return_rental",
        "tools:cancel_rental",
        "policy",
        "tasks",
        "review",
        "finalize",
    ]
    assert result.llm_calls == 9 and result.tokens > 0
    tasks_event = next(e for e in result.events if e.stage == "tasks")
    assert tasks_event.llm_calls == 2  # the task synthesis's calls count for its stage


def test_a_broken_tool_is_caught_fed_back_and_fixed(server: ScriptedServer, tmp_path: Path) -> None:
    team.queue(server, "fix", team.team_replies(cancel=[team.CANCEL_BUGGY, team.CANCEL]))
    team.queue_tasks(server, "fix", 2)

    result = synthesize(server, tmp_path, "fix")

    assert result.status == "accepted", result.reason
    server.assert_done()
    failed = [e for e in result.events if e.outcome == "failed"]
    assert [(e.stage, e.attempt) for e in failed] == [("tools:cancel_rental", 1)]
    assert "rentals/R1.status is 'returned', expected 'cancelled'" in failed[0].detail
    assert "should raise ToolError but succeeded" in failed[0].detail
    # The second request for the tool shows the model its code and the failing test.
    asks = [
        body["messages"][-1]["content"]
        for _, _, body in server.model.requests
        if "def cancel_rental" in body["messages"][-1]["content"]
    ]
    assert len(asks) == 2
    assert "failed: cancel_rental: succeeds when allowed" in asks[1]
    assert 'status="returned"' in asks[1]
    tools_py = (Path(str(result.package)) / "tools.py").read_text()
    assert "only active rentals can be cancelled" in tools_py


def test_a_tool_never_fixed_ends_in_rejection(server: ScriptedServer, tmp_path: Path) -> None:
    replies = team.team_replies(cancel=[team.CANCEL_BUGGY, team.CANCEL_BUGGY])[:-2]
    team.queue(server, "never", replies)  # no policy or review: they must not be reached

    result = synthesize(server, tmp_path, "never")

    assert result.status == "rejected"
    server.assert_done()
    assert result.reason is not None
    assert result.reason.startswith("stage tools:cancel_rental failed 2 time(s), the bound is 2")
    assert "expected 'cancelled'" in result.reason
    assert stages(result)[-2:] == [
        ("tools:cancel_rental", 1, "failed"),
        ("tools:cancel_rental", 2, "rejected"),
    ]
    assert result.package is None
    assert not (tmp_path / "domains").exists()


def test_a_crash_resumes_after_the_last_finished_stage(
    server: ScriptedServer, tmp_path: Path
) -> None:
    replies = team.team_replies()
    team.queue(server, "crash", replies[:5])  # blueprint, data, three tools; policy unscripted

    crashed = synthesize(server, tmp_path, "crash")

    assert crashed.status == "error"
    assert crashed.reason is not None and "stage policy crashed" in crashed.reason
    assert crashed.events[-1].outcome == "error" and crashed.events[-1].stage == "policy"
    assert len(server.model.stats.unscripted) == 1
    calls_before = server.model.stats.calls["codegen"]

    team.queue(server, "crash", replies[5:])
    team.queue_tasks(server, "crash", 2)
    resumed = synthesize(server, tmp_path, "crash")

    assert resumed.status == "accepted", resumed.reason
    assert resumed.resumed
    # Only policy, two task scenarios and review were asked for again: nothing finished redone.
    assert server.model.stats.calls["codegen"] - calls_before == 4
    assert server.model.leftovers() == {}
    assert [s for s, _, _ in stages(resumed)].count("tools:get_rental") == 1
    assert ("policy", 1, "ok") in stages(resumed)
    assert json.loads(
        (tmp_path / "synthesis" / "crash" / "work" / "package" / "db.json").read_text()
    )


def test_a_bad_blueprint_and_a_reviewers_finding_go_back_to_their_stages(
    server: ScriptedServer, tmp_path: Path
) -> None:
    bad = json.loads(json.dumps(team.BLUEPRINT))
    bad["entities"][1]["fields"]["customer_id"] = "ref:clients"
    finding = json.dumps(
        {"verdict": "fix", "stage": "policy", "tool": "", "problem": "rule 2 is missing"}
    )
    replies = team.team_replies(review=finding)
    team.queue(server, "loop", [json.dumps(bad), *replies, team.POLICY, team.OK])
    team.queue_tasks(server, "loop", 2)
    team.queue_tasks(server, "loop", 2)  # the tasks are made again after the policy changed

    result = synthesize(server, tmp_path, "loop")

    assert result.status == "accepted", result.reason
    server.assert_done()
    assert [(s, a) for s, a, o in stages(result) if o == "failed"] == [
        ("blueprint", 1),
        ("review", 1),
    ]
    assert [s for s, _, _ in stages(result)][-5:] == [
        "review",
        "policy",
        "tasks",
        "review",
        "finalize",
    ]
    prompts = [body["messages"][-1]["content"] for _, _, body in server.model.requests]
    assert (
        "Your previous answer was rejected: Rental.customer_id refers to unknown table 'clients'"
        in prompts[1]
    )
    assert any("the reviewer found: rule 2 is missing" in p for p in prompts)


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
