"""Run many episodes: concurrently with asyncio in one process, and fanned out over Ray.

Every job ends with an :class:`EpisodeResult`; an episode that cannot finish in the batch's time
ends with termination ``deadline``, never by being dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from maestro.agents.client import CallLog, Endpoints, LLMCall
from maestro.agents.roles import Assistant, UserSimulator
from maestro.agents.settings import ROLES, LLMSettings, Role
from maestro.domains.loader import load_domain
from maestro.domains.package import Domain
from maestro.simulation.episode import EpisodeLimits, EpisodeResult, run_episode


class EpisodeJob(BaseModel):
    """One episode to run: a task of a domain (by package folder), a trial and its seed."""

    domain_path: str
    task_id: str
    trial: int = 0
    seed: int = 0


class BatchConfig(BaseModel):
    concurrency: int = Field(32, ge=1)
    limits: EpisodeLimits = Field(default_factory=EpisodeLimits)
    batch_deadline_s: float = Field(3600.0, gt=0)


class BatchResult(BaseModel):
    episodes: list[EpisodeResult]
    llm_calls: list[LLMCall]
    wall_s: float

    def __repr__(self) -> str:
        # Short on purpose: CPython 3.11's asyncio.run formats the main task's repr, result
        # included, when it restores the SIGINT handler; a full repr of 10k episodes took 1.2 s.
        return f"BatchResult(episodes={len(self.episodes)}, llm_calls={len(self.llm_calls)}, wall_s={self.wall_s:.2f})"


def trial_seed(task_id: str, trial: int, base_seed: int = 0) -> int:
    """A distinct, reproducible seed per (task, trial)."""
    digest = hashlib.sha256(f"{base_seed}:{task_id}:{trial}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def make_jobs(
    domain: Domain, task_ids: Sequence[str] | None, trials: int, base_seed: int = 0
) -> list[EpisodeJob]:
    """k trials of each task (all tasks when none named); unknown task ids are an error."""
    if domain.path is None:
        raise ValueError(f"domain {domain.id} has no package folder to load in workers")
    known = {t.id for t in domain.tasks}
    wanted = list(task_ids) if task_ids else [t.id for t in domain.tasks]
    unknown = [t for t in wanted if t not in known]
    if unknown:
        raise ValueError(f"domain {domain.id} has no task(s) {unknown}")
    return [
        EpisodeJob(
            domain_path=str(domain.path), task_id=t, trial=k, seed=trial_seed(t, k, base_seed)
        )
        for t in wanted
        for k in range(trials)
    ]


class DomainCache:
    """Domains loaded once per process, by package folder."""

    def __init__(self) -> None:
        self._domains: dict[str, Domain] = {}

    def get(self, path: str) -> Domain:
        key = str(Path(path).resolve())
        if key not in self._domains:
            self._domains[key] = load_domain(key, check_gold=False)
        return self._domains[key]


async def run_batch(
    jobs: Sequence[EpisodeJob],
    settings: LLMSettings,
    base_urls: dict[Role, str] | None = None,
    config: BatchConfig | None = None,
    domains: DomainCache | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> BatchResult:
    """Run jobs concurrently in this event loop; results in job order. ``on_episode`` is told of
    each episode as it ends (progress)."""
    config = config or BatchConfig()
    domains = domains or DomainCache()
    base_urls = base_urls or {}
    log = CallLog()
    started = time.perf_counter()
    limit = asyncio.Semaphore(config.concurrency)
    assistants: dict[str, Assistant] = {}
    async with Endpoints(log) as endpoints:
        a_client = endpoints.client("assistant", settings.assistant, base_urls.get("assistant"))
        u_client = endpoints.client("user", settings.user, base_urls.get("user"))

        async def one(job: EpisodeJob) -> EpisodeResult:
            async with limit:
                domain = domains.get(job.domain_path)
                task = domain.task(job.task_id)
                if domain.id not in assistants:
                    assistants[domain.id] = Assistant(a_client, domain)
                left = config.batch_deadline_s - (time.perf_counter() - started)
                limits = config.limits.model_copy(
                    update={"deadline_s": max(0.001, min(config.limits.deadline_s, left))}
                )
                user = UserSimulator(u_client, domain, task)
                result = await run_episode(
                    domain,
                    task,
                    assistants[domain.id],
                    user,
                    trial=job.trial,
                    seed=job.seed,
                    limits=limits,
                )
                if on_episode is not None:
                    on_episode(result)
                return result

        episodes = await asyncio.gather(*(one(j) for j in jobs))
    return BatchResult(
        episodes=list(episodes), llm_calls=log.calls, wall_s=time.perf_counter() - started
    )


def _ray_worker_batch(payload: dict[str, Any]) -> dict[str, Any]:
    """Runs inside a Ray worker: one asyncio batch, returned as plain data."""
    jobs = [EpisodeJob.model_validate(j) for j in payload["jobs"]]
    settings = LLMSettings.model_validate(payload["settings"])
    config = BatchConfig.model_validate(payload["config"])
    result = asyncio.run(run_batch(jobs, settings, payload["base_urls"], config))
    return result.model_dump(mode="json")


def run_on_ray(
    jobs: Sequence[EpisodeJob],
    settings: LLMSettings,
    base_urls: dict[Role, str] | None = None,
    config: BatchConfig | None = None,
    *,
    workers: int = 2,
) -> BatchResult:
    """Split the jobs over ``workers`` Ray tasks, each running an asyncio batch.

    Ray must already be initialised in this process (see :func:`maestro.simulation.ray_support.ensure_ray`).
    """
    import ray

    config = config or BatchConfig()
    started = time.perf_counter()
    # Never more workers than episodes in flight: total concurrency stays what was asked.
    workers = max(1, min(workers, config.concurrency, len(jobs)))
    slots = [list(range(i, len(jobs), workers)) for i in range(workers)]
    remote = ray.remote(num_cpus=1)(_ray_worker_batch)
    per_worker = config.model_copy(update={"concurrency": config.concurrency // workers})
    refs = [
        remote.remote(
            {
                "jobs": [jobs[i].model_dump() for i in slot],
                "settings": settings_payload(settings),
                "base_urls": base_urls or {},
                "config": per_worker.model_dump(mode="json"),
            }
        )
        for slot in slots
    ]
    done = [
        BatchResult.model_validate(d) for d in ray.get(refs, timeout=config.batch_deadline_s + 120)
    ]
    episodes: list[EpisodeResult | None] = [None] * len(jobs)
    for slot, result in zip(slots, done, strict=True):
        for i, episode in zip(slot, result.episodes, strict=True):
            episodes[i] = episode
    assert all(e is not None for e in episodes)
    return BatchResult(
        episodes=[e for e in episodes if e is not None],
        llm_calls=[c for r in done for c in r.llm_calls],
        wall_s=time.perf_counter() - started,
    )


def settings_payload(settings: LLMSettings) -> dict[str, Any]:
    """Settings as plain data for another process, API keys included (a JSON dump masks them)."""
    data = settings.model_dump(mode="json")
    for role in ROLES:
        key = settings.role(role).api_key
        data[role]["api_key"] = key.get_secret_value() if key is not None else None
    return data
