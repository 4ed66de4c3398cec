"""Simulate a domain's tasks k times each, score every episode, and report pass^k.

A plain composition of simulation/ and scoring/; the Prefect flow wraps the same calls.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel

from maestro.agents.client import CallRecorder
from maestro.agents.judging import Judging, score_all
from maestro.agents.settings import LLMSettings, load_llm_settings
from maestro.domains.package import Domain
from maestro.flows.endpoints import model_endpoints
from maestro.scoring.card import ScoreCard
from maestro.scoring.metrics import pass_at_k, pass_hat_k
from maestro.simulation.episode import EpisodeResult
from maestro.simulation.runner import BatchConfig, BatchResult, make_jobs, run_batch, run_on_ray


class TaskOutcome(BaseModel):
    task_id: str
    rewards: list[float]
    successes: int


class SimulationReport(BaseModel):
    domain_id: str
    tasks: int
    trials: int
    episodes: int
    nl_judged: bool
    pass_hat_k: dict[int, float]
    pass_at_k: dict[int, float]
    mean_reward: float
    terminations: dict[str, int]
    judge_errors: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    per_task: list[TaskOutcome]


def report(
    domain: Domain, trials: int, batch: BatchResult, cards: Sequence[ScoreCard], nl_judged: bool
) -> SimulationReport:
    """pass^k and pass@k for k = 1..trials, with what the run cost."""
    by_task: dict[str, list[ScoreCard]] = defaultdict(list)
    for card in cards:
        by_task[card.task_id].append(card)

    def success(c: ScoreCard) -> bool:
        return c.passed and (c.complete or not nl_judged)

    per_task = [
        TaskOutcome(
            task_id=t, rewards=[c.reward for c in cs], successes=sum(success(c) for c in cs)
        )
        for t, cs in by_task.items()
    ]
    hat = {
        k: sum(pass_hat_k(trials, o.successes, k) for o in per_task) / len(per_task)
        for k in range(1, trials + 1)
    }
    at = {
        k: sum(pass_at_k(trials, o.successes, k) for o in per_task) / len(per_task)
        for k in range(1, trials + 1)
    }
    return SimulationReport(
        domain_id=domain.id,
        tasks=len(per_task),
        trials=trials,
        episodes=len(batch.episodes),
        nl_judged=nl_judged,
        pass_hat_k=hat,
        pass_at_k=at,
        mean_reward=sum(c.reward for c in cards) / len(cards),
        terminations=dict(Counter(e.termination.value for e in batch.episodes)),
        judge_errors=sum(1 for c in cards if c.errors),
        llm_calls=len(batch.llm_calls),
        prompt_tokens=sum(c.prompt_tokens for c in batch.llm_calls),
        completion_tokens=sum(c.completion_tokens for c in batch.llm_calls),
        wall_s=batch.wall_s,
        per_task=per_task,
    )


async def score_batch(
    domain: Domain,
    batch: BatchResult,
    settings: LLMSettings,
    judge_url: str | None,
    recorder: CallRecorder | None = None,
) -> list[ScoreCard]:
    """Score every episode; NL assertions judged by the judge role when ``judge_url`` is given
    (its calls recorded through ``recorder``, each under ``<episode key>/judge``)."""
    judging = (
        Judging.off()
        if judge_url is None
        else Judging(settings.judge.model_copy(update={"base_url": judge_url}))
    )
    return await score_all(
        domain,
        [e.trajectory for e in batch.episodes],
        judging,
        labels=[e.episode_key for e in batch.episodes],
        recorder=recorder,
    )


def simulate_domain(
    domain: Domain,
    *,
    task_ids: Sequence[str] | None = None,
    trials: int = 1,
    settings: LLMSettings | None = None,
    config: BatchConfig | None = None,
    judge: bool = True,
    ray_workers: int = 0,
    run_dir: Path = Path("runs"),
    base_seed: int = 0,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> tuple[BatchResult, list[ScoreCard], SimulationReport]:
    """Run k trials of each task (on Ray when ``ray_workers`` > 0), score them, and report."""
    settings = settings or load_llm_settings()
    jobs = make_jobs(domain, task_ids, trials, base_seed)
    with model_endpoints(settings, run_dir) as (settings, urls):
        if ray_workers > 0:
            from maestro.simulation.ray_support import ensure_ray

            ensure_ray(run_dir)
            batch = run_on_ray(
                jobs, settings, urls, config, workers=ray_workers, on_episode=on_episode
            )
        else:
            batch = asyncio.run(run_batch(jobs, settings, urls, config, on_episode=on_episode))
        cards = asyncio.run(score_batch(domain, batch, settings, urls["judge"] if judge else None))
    return batch, cards, report(domain, trials, batch, cards, judge)
