"""Batches of episodes against the scripted server: the library through the real HTTP path,
injected faults, and the Ray fan-out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from maestro.agents.judging import Judging
from maestro.agents.scripted_server import FaultRates, ScriptedServer, ServerConfig
from maestro.agents.settings import LLMSettings, RoleSettings
from maestro.domains import Domain, library_ids, library_path, load_domain
from maestro.flows.simulate import score_episodes
from maestro.simulation.episode import EpisodeLimits, Termination
from maestro.simulation.runner import BatchConfig, EpisodeJob, make_jobs, run_batch, trial_seed

FIXTURES = Path(__file__).parents[1] / "fixtures"


def fast_settings(**overrides: object) -> LLMSettings:
    rs = RoleSettings.model_validate(
        {
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
            "timeout_s": 2.0,
            "deadline_s": 30.0,
            "max_concurrency": 256,
            **overrides,
        }
    )
    return LLMSettings(assistant=rs, user=rs, judge=rs, codegen=rs)


def urls(server: ScriptedServer) -> dict[str, str]:
    return {"assistant": server.base_url, "user": server.base_url, "judge": server.base_url}


def library() -> list[Domain]:
    return [load_domain(library_path(i)) for i in library_ids()]


@pytest.mark.parametrize(("mode", "expected"), [("oracle", 1.0), ("nothing", 0.0)])
def test_oracle_scores_one_and_doing_nothing_zero_on_every_library_task(
    mode: str, expected: float
) -> None:
    domains = library()
    jobs = [j for d in domains for j in make_jobs(d, None, trials=1)]
    assert len(jobs) == 90
    settings = fast_settings()
    with ScriptedServer(ServerConfig(mode=mode)) as server:  # type: ignore[arg-type]
        batch = asyncio.run(run_batch(jobs, settings, urls(server), BatchConfig(concurrency=32)))  # type: ignore[arg-type]
        cards = []
        for d in domains:
            part = batch.model_copy(
                update={"episodes": [e for e in batch.episodes if e.domain_id == d.id]}
            )
            judging = Judging.by(fast_settings(base_url=server.base_url))
            cards.extend(asyncio.run(score_episodes(d, part.episodes, judging)))
        assert not server.model.stats.unscripted
    assert len(cards) == 90
    assert all(e.termination == Termination.USER_STOP for e in batch.episodes)
    assert all(c.complete for c in cards), [c.task_id for c in cards if not c.complete]
    wrong = [c.task_id for c in cards if c.reward != expected]
    assert not wrong
    # Every call was recorded with its tokens. An episode counts attempts (a retry under load
    # is one more), so compare attempts with attempts.
    assert sum(c.attempts for c in batch.llm_calls) == sum(e.llm_calls for e in batch.episodes)


def test_five_hundred_episodes_with_every_fault_injected_all_end() -> None:
    toy = load_domain(FIXTURES / "toy", trusted=True)
    hotel = load_domain(library_path("hotel"))
    jobs = make_jobs(hotel, None, trials=15) + make_jobs(toy, None, trials=17)[:50]
    assert len(jobs) == 500
    faults = FaultRates(
        rate_limit=0.1, server_error=0.1, timeout=0.1, malformed_args=0.1, empty=0.1
    )
    config = ServerConfig(
        mode="oracle",
        faults=faults,
        stall_s=5.0,
        seed=7,
        domain_paths=[str(library_path("hotel")), str(FIXTURES / "toy")],
    )
    settings = fast_settings(timeout_s=0.5, max_retries=4, empty_retries=2)
    with ScriptedServer(config) as server:
        batch = asyncio.run(
            run_batch(
                jobs,
                settings,
                urls(server),  # type: ignore[arg-type]
                BatchConfig(
                    concurrency=100, limits=EpisodeLimits(deadline_s=60.0), batch_deadline_s=240.0
                ),
            )
        )
        stats = server.model.stats
    assert len(batch.episodes) == 500
    assert [(e.task_id, e.trial) for e in batch.episodes] == [(j.task_id, j.trial) for j in jobs]
    for e in batch.episodes:
        assert isinstance(e.termination, Termination)
        if e.termination != Termination.USER_STOP:
            assert e.error, e.termination
    # Each fault really was injected, many times.
    assert all(
        stats.faults[f] > 50
        for f in ("rate_limit", "server_error", "timeout", "malformed_args", "empty")
    ), stats.faults
    # Retries absorbed most faults; malformed calls were answered and corrected.
    finished = sum(e.termination == Termination.USER_STOP for e in batch.episodes)
    assert finished > 400
    assert any(m.status == "invalid_call" for e in batch.episodes for m in e.trajectory.messages)


def test_trials_get_distinct_reproducible_seeds(toy: Domain) -> None:
    jobs = make_jobs(toy, ["toy_cancel"], trials=3, base_seed=5)
    assert len({j.seed for j in jobs}) == 3
    assert [j.seed for j in jobs] == [trial_seed("toy_cancel", k, 5) for k in range(3)]
    with pytest.raises(ValueError, match="no task"):
        make_jobs(toy, ["nope"], trials=1)


def test_batch_deadline_ends_episodes_as_deadline_not_lost(toy: Domain) -> None:
    jobs = [
        EpisodeJob(domain_path=str(FIXTURES / "toy"), task_id="toy_cancel", trial=k)
        for k in range(6)
    ]
    with ScriptedServer(
        ServerConfig(mode="oracle", latency_s=0.4, domain_paths=[str(FIXTURES / "toy")])
    ) as server:
        batch = asyncio.run(
            run_batch(
                jobs,
                fast_settings(),
                urls(server),
                BatchConfig(concurrency=2, batch_deadline_s=1.0),
            )  # type: ignore[arg-type]
        )
    assert len(batch.episodes) == 6
    assert {e.termination for e in batch.episodes} == {Termination.DEADLINE}


@pytest.mark.slow
def test_ray_fan_out_runs_batches_on_two_workers(tmp_path: Path) -> None:
    from maestro.simulation.ray_support import ensure_ray
    from maestro.simulation.runner import run_on_ray

    ensure_ray(tmp_path)
    toy = load_domain(FIXTURES / "toy", trusted=True)
    jobs = make_jobs(toy, None, trials=4)
    with ScriptedServer(
        ServerConfig(mode="oracle", domain_paths=[str(FIXTURES / "toy")])
    ) as server:
        seen: list[tuple[str, int]] = []
        batch = run_on_ray(
            jobs,
            fast_settings(),
            urls(server),  # type: ignore[arg-type]
            BatchConfig(concurrency=8),
            workers=2,
            on_episode=lambda e: seen.append((e.task_id, e.trial)),
        )
    assert [(e.task_id, e.trial) for e in batch.episodes] == [(j.task_id, j.trial) for j in jobs]
    # Progress streams from both workers, one call per episode.
    assert sorted(seen) == sorted((j.task_id, j.trial) for j in jobs)
    assert len(batch.llm_calls) >= len(jobs)
    assert all(e.termination == Termination.USER_STOP for e in batch.episodes)
    cards = asyncio.run(score_episodes(toy, batch.episodes, Judging.off()))
    assert [c.reward for c in cards] == [1.0] * len(jobs)


def test_the_batch_deadline_holds_the_episode_deadline_asked_for() -> None:
    """``maestro simulate --episode-deadline-s 5400`` ended every episode at 3,599.6 s: the
    batch's default hour cut it without a word."""
    asked = BatchConfig(limits=EpisodeLimits(deadline_s=5400.0))
    assert asked.batch_deadline_s == 5400.0
    assert BatchConfig().batch_deadline_s == 3600.0
    # A batch deadline given is kept, shorter than an episode's or not.
    assert (
        BatchConfig(limits=EpisodeLimits(deadline_s=60.0), batch_deadline_s=1.0).batch_deadline_s
        == 1.0
    )
