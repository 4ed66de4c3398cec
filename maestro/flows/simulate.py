"""Simulate a domain's tasks k times each, score every episode, and report pass^k.

A plain composition of simulation/ and scoring/ (``maestro simulate``); the nightly's stages
run the same calls and store them.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from maestro.agents.client import CallRecorder
from maestro.agents.judging import Judging, score_all
from maestro.agents.settings import LLMSettings, load_llm_settings
from maestro.domains.package import Domain
from maestro.flows.endpoints import model_endpoints, model_name, roles_called
from maestro.scoring.card import ScoreCard
from maestro.scoring.external import Agreement, agreement
from maestro.scoring.metrics import pass_at_k, pass_hat_k
from maestro.settings import RunSettings
from maestro.simulation.episode import EpisodeResult
from maestro.simulation.ray_support import ensure_ray
from maestro.simulation.runner import BatchConfig, BatchResult, make_jobs, run_batch, run_on_ray
from maestro.storage import Lake
from maestro.storage.records import episode_row, score_row, write_unit_calls
from maestro.storage.rows import EpisodeRow, ScoreRow


class EpisodeFailure(BaseModel):
    """An episode that did not succeed, and why: each criterion that failed or has no verdict,
    with its reasons, and how the conversation ended."""

    task_id: str
    trial: int
    reward: float
    termination: str
    error: str | None = None
    #: "<CRITERION> <status>: <details>" for each criterion that did not pass.
    criteria: list[str]


def episode_failures(
    episodes: Sequence[EpisodeResult], cards: Sequence[ScoreCard]
) -> list[EpisodeFailure]:
    """The episodes whose card is no success, each with its failed criteria's reasons."""
    out = []
    for e, card in zip(episodes, cards, strict=True):
        if card.succeeded:
            continue
        out.append(
            EpisodeFailure(
                task_id=e.task_id,
                trial=e.trial,
                reward=card.reward,
                termination=e.termination.value,
                error=e.error,
                criteria=[
                    f"{name} {c.status}: {c.details}"
                    for name, c in card.criteria.items()
                    if c.status != "pass"
                ],
            )
        )
    return out


def store_simulation(
    lake: Lake,
    run_id: str,
    domain: Domain,
    batch: BatchResult,
    cards: Sequence[ScoreCard],
    settings: LLMSettings,
) -> None:
    """The episodes, their LLM calls and their score cards in the lake under ``run_id`` (what
    ``maestro view`` shows), in the nightly's order: calls, episodes, then scores."""
    assistant, user = model_name(settings, "assistant"), model_name(settings, "user")
    write_unit_calls(lake, run_id, {e.episode_key: None for e in batch.episodes}, batch.llm_calls)
    lake.write(
        EpisodeRow.TABLE,
        [episode_row(run_id, e, domain.manifest.version, assistant, user) for e in batch.episodes],
        run_id,
        mode="insert",
    )
    lake.write(
        ScoreRow.TABLE,
        [score_row(run_id, e, c, assistant) for e, c in zip(batch.episodes, cards, strict=True)],
        run_id,
        mode="insert",
    )


class TaskOutcome(BaseModel):
    task_id: str
    rewards: list[float]
    #: Trials that succeeded (``ScoreCard.succeeded``: every criterion judged, reward 1).
    successes: int
    #: Trials with a criterion left without a verdict (not judged, or the judge failed).
    unjudged: int = 0


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
    #: Episodes whose card is not complete: they count as not succeeded in pass^k.
    unjudged: int = 0
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    per_task: list[TaskOutcome]
    #: For imported tasks: the benchmark checker's name, its pass rate, and how it agrees
    #: with maestro's card on the same episodes.
    external_checker: str | None = None
    external_pass_rate: float | None = None
    external_agreement: Agreement | None = None
    #: Every episode that did not succeed, with the reasons of its failed criteria.
    failures: list[EpisodeFailure] = []
    #: The run the episodes and score cards are stored under (``maestro view RUN_ID``).
    run_id: str | None = None


def report(
    domain: Domain, trials: int, batch: BatchResult, cards: Sequence[ScoreCard], nl_judged: bool
) -> SimulationReport:
    """pass^k and pass@k for k = 1..trials, with what the run cost. Success is
    ``ScoreCard.succeeded``, as in the nightly: with judging off, a task with NL assertions has
    no success, and ``unjudged`` says how many episodes that concerns."""
    by_task: dict[str, list[ScoreCard]] = defaultdict(list)
    for card in cards:
        by_task[card.task_id].append(card)
    per_task = [
        TaskOutcome(
            task_id=t,
            rewards=[c.reward for c in cs],
            successes=sum(c.succeeded for c in cs),
            unjudged=sum(not c.complete for c in cs),
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
        unjudged=sum(not c.complete for c in cards),
        llm_calls=len(batch.llm_calls),
        prompt_tokens=sum(c.prompt_tokens for c in batch.llm_calls),
        completion_tokens=sum(c.completion_tokens for c in batch.llm_calls),
        wall_s=batch.wall_s,
        per_task=per_task,
        failures=episode_failures(batch.episodes, cards),
        **external_summary(cards),
    )


def external_summary(cards: Sequence[ScoreCard]) -> dict[str, object]:
    """The benchmark checker's pass rate and its agreement with the cards (imported tasks); a
    card without a final verdict (an NL assertion not judged) has no side in the agreement."""
    checked = [c for c in cards if c.external is not None]
    if not checked:
        return {}
    judged = [c.external.passed for c in checked if c.external and c.external.passed is not None]
    return {
        "external_checker": checked[0].external.checker if checked[0].external else None,
        "external_pass_rate": sum(judged) / len(judged) if judged else None,
        "external_agreement": agreement(
            (c.succeeded if c.complete else None, c.external.passed if c.external else None)
            for c in checked
        ),
    }


async def score_episodes(
    domain: Domain,
    episodes: Sequence[EpisodeResult],
    judging: Judging,
    recorder: CallRecorder | None = None,
) -> list[ScoreCard]:
    """Score episodes of one domain; judge calls recorded per episode and an imported task's
    benchmark checker beside each card (see ``score_all``)."""
    return await score_all(
        domain,
        [e.trajectory for e in episodes],
        judging,
        labels=[e.episode_key for e in episodes],
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
    run: RunSettings | None = None,
    base_seed: int = 0,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> tuple[BatchResult, list[ScoreCard], SimulationReport]:
    """Run k trials of each task (on Ray when ``ray_workers`` > 0), score them, and report.
    The embedded model starts only if a role this calls (the judge only when judging) has no
    endpoint."""
    settings = settings or load_llm_settings()
    run = run or RunSettings()
    jobs = make_jobs(domain, task_ids, trials, base_seed)
    with model_endpoints(settings, roles_called(judge=judge), run.dir) as live:
        if ray_workers > 0:
            ensure_ray(run.dir)
            batch = run_on_ray(jobs, live, None, config, workers=ray_workers, on_episode=on_episode)
        else:
            batch = asyncio.run(run_batch(jobs, live, None, config, on_episode=on_episode))
        judging = Judging.by(live) if judge else Judging.off()
        cards = asyncio.run(score_episodes(domain, batch.episodes, judging))
    return batch, cards, report(domain, trials, batch, cards, judge)
