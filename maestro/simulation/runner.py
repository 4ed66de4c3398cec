"""Run many episodes: concurrently with asyncio in one process, and fanned out over Ray.

Every job ends with an :class:`EpisodeResult`; an episode that cannot finish in the batch's time
ends with termination ``deadline``, never by being dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

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
    #: The whole batch's deadline; an episode's is cut to what is left of it. Unset, it is an
    #: hour or the episode deadline if longer: ``--episode-deadline-s 5400`` was cut to 3,600 s
    #: without a word (a relay check's episodes all ended at 3,599.6 s).
    batch_deadline_s: float = Field(3600.0, gt=0)

    @model_validator(mode="after")
    def _batch_holds_an_episode(self) -> BatchConfig:
        if "batch_deadline_s" not in self.model_fields_set:
            self.batch_deadline_s = max(self.batch_deadline_s, self.limits.deadline_s)
        return self


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
    """Domains loaded once per process, by package folder (a synthesized one through the
    sandbox: :meth:`close` stops its child)."""

    def __init__(self) -> None:
        self._domains: dict[str, Domain] = {}

    def get(self, path: str) -> Domain:
        key = str(Path(path).resolve())
        if key not in self._domains:
            self._domains[key] = load_domain(key, check_gold=False)
        return self._domains[key]

    def close(self) -> None:
        for domain in self._domains.values():
            domain.close()
        self._domains.clear()


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
    own_cache = domains is None
    domains = domains or DomainCache()
    base_urls = base_urls or {}
    log = CallLog()
    started = time.perf_counter()
    limit = asyncio.Semaphore(config.concurrency)
    assistants: dict[str, Assistant] = {}
    async with Endpoints(log) as endpoints:
        a_client = endpoints.client("assistant", settings.assistant, base_urls.get("assistant"))
        # Tasks with scripted user turns never call the user role: it needs no endpoint then.
        needs_user = any(not domains.get(j.domain_path).task(j.task_id).user_turns for j in jobs)
        u_client = (
            endpoints.client("user", settings.user, base_urls.get("user")) if needs_user else None
        )

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
                # A task with scripted turns is its own user.
                user = None
                if not task.user_turns:
                    assert u_client is not None
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

        try:
            episodes = await asyncio.gather(*(one(j) for j in jobs))
        finally:
            if own_cache:
                domains.close()
    return BatchResult(
        episodes=list(episodes), llm_calls=log.calls, wall_s=time.perf_counter() - started
    )


def _ray_worker_stream(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Runs inside a Ray worker: one asyncio batch, yielding each episode as plain data the
    moment it ends, then the batch's LLM calls. A Ray streaming generator, so the driver sees
    progress episode by episode instead of once per batch."""
    import ray

    jobs = [EpisodeJob.model_validate(j) for j in payload["jobs"]]
    settings = LLMSettings.model_validate(payload["settings"])
    config = BatchConfig.model_validate(payload["config"])
    domains = DomainCache()
    index = {(domains.get(j.domain_path).id, j.task_id, j.trial): i for i, j in enumerate(jobs)}
    done: queue.Queue[tuple[str, Any]] = queue.Queue()
    node = ray.get_runtime_context().get_node_id()

    def ended(e: EpisodeResult) -> None:
        e = e.model_copy(update={"node_id": node})
        done.put(("episode", (index[(e.domain_id, e.task_id, e.trial)], e.model_dump(mode="json"))))

    def run() -> None:
        try:
            result = asyncio.run(
                run_batch(jobs, settings, payload["base_urls"], config, domains, ended)
            )
            done.put(("calls", [c.model_dump(mode="json") for c in result.llm_calls]))
        except BaseException as exc:  # reported to the driver, not lost in the thread
            done.put(("error", f"{type(exc).__name__}: {exc}"))

    thread = threading.Thread(target=run, name="maestro-ray-batch", daemon=True)
    thread.start()
    try:
        while True:
            kind, data = done.get()
            yield {"kind": kind, "data": data}
            if kind != "episode":
                break
        thread.join()
    finally:
        domains.close()


def _ray_worker_batch(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """:func:`_ray_worker_stream`'s items as one list, for Ray Client (``ray://``), which cannot
    stream a task's results: progress then comes worker by worker."""
    return list(_ray_worker_stream(payload))


def run_on_ray(
    jobs: Sequence[EpisodeJob],
    settings: LLMSettings,
    base_urls: dict[Role, str] | None = None,
    config: BatchConfig | None = None,
    *,
    workers: int = 2,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> BatchResult:
    """Split the jobs over ``workers`` Ray tasks, each running an asyncio batch; results in job
    order. ``on_episode`` is told of each episode as it ends, whichever worker ran it (through
    Ray Client, ``ray://``, when its worker's batch ends: Ray Client cannot stream).

    Ray must already be initialised in this process (see :func:`maestro.simulation.ray_support.ensure_ray`).
    """
    import ray
    from ray.util.client import ray as ray_client

    config = config or BatchConfig()
    started = time.perf_counter()
    if not jobs:
        return BatchResult(episodes=[], llm_calls=[], wall_s=0.0)
    # Never more workers than episodes in flight: total concurrency stays what was asked.
    workers = max(1, min(workers, config.concurrency, len(jobs)))
    slots = [list(range(i, len(jobs), workers)) for i in range(workers)]
    whole = ray_client.is_connected()
    remote = ray.remote(num_cpus=1)(_ray_worker_batch if whole else _ray_worker_stream)
    per_worker = config.model_copy(update={"concurrency": config.concurrency // workers})
    streams: dict[Any, list[int]] = {
        remote.options(**({} if whole else {"num_returns": "streaming"})).remote(
            {
                "jobs": [jobs[i].model_dump() for i in slot],
                "settings": settings_payload(settings),
                "base_urls": base_urls or {},
                "config": per_worker.model_dump(mode="json"),
            }
        ): slot
        for slot in slots
    }
    episodes: list[EpisodeResult | None] = [None] * len(jobs)
    calls: list[LLMCall] = []
    # Each worker's batch ends by its own deadline; this margin covers Ray's start and transfers.
    deadline = time.monotonic() + config.batch_deadline_s + 120
    pending: list[Any] = list(streams)
    while pending:
        left = deadline - time.monotonic()
        ready: list[Any]
        ready, _ = ray.wait(pending, num_returns=1, timeout=max(0.0, left))
        if not ready:
            for gen in pending:
                ray.cancel(gen, force=True)
            raise TimeoutError(
                f"Ray workers did not finish within {config.batch_deadline_s + 120:g} s "
                "(the batch deadline and a margin for Ray)"
            )
        for gen in ready:
            items: list[dict[str, Any]]
            if whole:
                items = ray.get(gen, timeout=max(1.0, left))
                pending.remove(gen)
            else:
                try:
                    items = [ray.get(next(gen), timeout=max(1.0, left))]
                except StopIteration:
                    pending.remove(gen)
                    continue
            for item in items:
                _take(item, streams[gen], episodes, calls, on_episode)
    missing = [jobs[i].task_id for i, e in enumerate(episodes) if e is None]
    if missing:
        raise RuntimeError(
            f"Ray workers returned no episode for {len(missing)} job(s): {missing[:5]}"
        )
    return BatchResult(
        episodes=[e for e in episodes if e is not None],
        llm_calls=calls,
        wall_s=time.perf_counter() - started,
    )


def _take(
    item: dict[str, Any],
    slot: list[int],
    episodes: list[EpisodeResult | None],
    calls: list[LLMCall],
    on_episode: Callable[[EpisodeResult], None] | None,
) -> None:
    """One item a Ray worker sent: an episode (put at its job's place), its batch's LLM calls,
    or its failure."""
    if item["kind"] == "episode":
        i, data = item["data"]
        episode = EpisodeResult.model_validate(data)
        episodes[slot[i]] = episode
        if on_episode is not None:
            on_episode(episode)
    elif item["kind"] == "calls":
        calls.extend(LLMCall.model_validate(c) for c in item["data"])
    else:
        raise RuntimeError(f"a Ray simulation worker failed: {item['data']}")


def settings_payload(settings: LLMSettings) -> dict[str, Any]:
    """Settings as plain data for another process, API keys included (a JSON dump masks them)."""
    data = settings.model_dump(mode="json")
    for role in ROLES:
        key = settings.role(role).api_key
        data[role]["api_key"] = key.get_secret_value() if key is not None else None
    return data
