"""Scripted user turns through the one episode loop, against the scripted server over HTTP."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from maestro.agents.judging import Judging
from maestro.agents.scripted_server import Reply, ScriptedCall, ScriptedServer, ServerConfig
from maestro.domains import Domain, load_domain
from maestro.domains.importers.bfcl import ImportResult
from maestro.flows.simulate import report, score_episodes
from maestro.simulation.episode import EpisodeLimits, Termination
from maestro.simulation.runner import BatchConfig, make_jobs, run_batch

from ..conftest import FIXTURES
from ..simulation.test_runner import fast_settings, urls


def test_bfcl_episodes_end_after_the_script_and_score_both_ways(gorilla: Domain) -> None:
    jobs = make_jobs(gorilla, None, trials=1)
    settings = fast_settings()
    config = ServerConfig(mode="oracle", domain_paths=[str(gorilla.path)])
    with ScriptedServer(config) as server:
        batch = asyncio.run(run_batch(jobs, settings, urls(server), BatchConfig(concurrency=4)))  # type: ignore[arg-type]
        cards = asyncio.run(score_episodes(gorilla, batch.episodes, Judging.off()))
        calls = dict(server.model.stats.calls)
    assert "user" not in calls  # the task is the user: the simulator is never asked
    assert {e.termination for e in batch.episodes} == {Termination.USER_STOP}
    for e in batch.episodes:
        task = gorilla.task(e.task_id)
        said = [m.content for m in e.trajectory.messages if m.role == "user"]
        assert said == [t.content for t in task.user_turns]
    assert all(c.passed for c in cards)
    assert {c.external.status for c in cards if c.external} == {"pass"}
    summary = report(gorilla, 1, batch, cards, nl_judged=False)
    assert summary.external_pass_rate == 1.0 and summary.external_agreement is not None
    assert summary.external_agreement.both_pass == len(jobs)


def test_doing_nothing_fails_both_ways(gorilla: Domain) -> None:
    jobs = make_jobs(gorilla, None, trials=1)[:4]
    settings = fast_settings()
    with ScriptedServer(ServerConfig(mode="nothing", domain_paths=[str(gorilla.path)])) as server:
        batch = asyncio.run(run_batch(jobs, settings, urls(server)))  # type: ignore[arg-type]
        cards = asyncio.run(score_episodes(gorilla, batch.episodes, Judging.off()))
    assert not any(c.passed for c in cards)
    assert {c.external.status for c in cards if c.external} == {"fail"}


def test_a_turn_shows_the_functions_it_adds(miss_func: ImportResult) -> None:
    domain = load_domain(miss_func.packages[0], check_gold=False)
    task = domain.tasks[0]
    added = next(i for i, t in enumerate(task.user_turns) if t.add_tools)
    job = make_jobs(domain, [task.id], trials=1)[0]
    episode = f"{domain.id}/{task.id}/0"
    with ScriptedServer(ServerConfig(mode="script", keep_requests=True)) as server:
        server.script(episode, "assistant", [Reply(content="ok")] * len(task.user_turns))
        batch = asyncio.run(run_batch([job], fast_settings(), urls(server)))  # type: ignore[arg-type]
        server.assert_done()
        shown = [
            {t["function"]["name"] for t in body.get("tools") or []}
            for _, role, body in server.model.requests
            if role == "assistant"
        ]
    domain.close()
    assert batch.episodes[0].termination == Termination.USER_STOP
    held = set(task.user_turns[added].add_tools)
    assert all(not held & s for s in shown[:added]) and all(held <= s for s in shown[added:])


def test_any_domain_can_script_its_user_and_the_turn_limit_still_holds(tmp_path: Path) -> None:
    toy = tmp_path / "toy"
    shutil.copytree(FIXTURES / "toy", toy, ignore=shutil.ignore_patterns("__pycache__"))
    first = json.loads((toy / "tasks.jsonl").read_text().splitlines()[0])
    first.update(
        id="toy_scripted",
        user_turns=[
            {"content": "Hi, I am customer C1."},
            {"content": "Please cancel order O1; I changed my mind.", "action_ids": ["a1"]},
            {"content": "Thanks."},
        ],
    )
    with (toy / "tasks.jsonl").open("a") as f:
        f.write(json.dumps(first) + "\n")
    domain = load_domain(toy)
    job = make_jobs(domain, ["toy_scripted"], trials=1)[0]
    episode = "toy/toy_scripted/0"
    cancel = ScriptedCall(
        name="cancel_order", arguments={"order_id": "O1", "reason": "changed my mind"}
    )
    with ScriptedServer(ServerConfig(mode="script")) as server:
        server.script(
            episode,
            "assistant",
            [Reply(content="Hello C1."), Reply(tool_calls=[cancel]), Reply(content="Cancelled.")],
        )
        server.script(episode, "assistant", [Reply(content="Bye.")])
        batch = asyncio.run(run_batch([job], fast_settings(), urls(server)))  # type: ignore[arg-type]
        server.assert_done()
        cards = asyncio.run(score_episodes(domain, batch.episodes, Judging.off()))
        # The same script with a turn limit of four: the episode stops at the limit.
        server.script(episode, "assistant", [Reply(content="Hello C1."), Reply(content="No.")])
        limited = BatchConfig(limits=EpisodeLimits(max_turns=4))
        cut = asyncio.run(run_batch([job], fast_settings(), urls(server), limited))  # type: ignore[arg-type]
        server.assert_done()
    e = batch.episodes[0]
    assert e.termination == Termination.USER_STOP and e.llm_calls == 4
    assert cards[0].criteria["DB"].status == "pass" and cards[0].criteria["ACTION"].status == "pass"
    assert cards[0].external is None  # maestro's own domain: no outside checker
    assert cut.episodes[0].termination == Termination.MAX_TURNS
