"""The nightly run's stages as plain functions over the lake: ingest, simulate, score, filter,
curate a task set. The Prefect flow (``flows/nightly.py``) wraps each in a task.

Every stage is resumable: it reads what the run already wrote and does only the rest, so a run
killed at any point and started again with the same run id ends with every row exactly once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from maestro.agents.client import CallLog, ChatClient, Endpoints, LLMCall
from maestro.agents.judging import Judging
from maestro.agents.review import ReviewError, review_failures
from maestro.agents.settings import LLMSettings
from maestro.domains import (
    Domain,
    TaskStateError,
    domain_path,
    inspect_package,
    library_ids,
    replay_gold,
)
from maestro.domains.runtime import calls_end_within
from maestro.flows.endpoints import model_name
from maestro.flows.simulate import score_episodes
from maestro.scoring import check_task, gates
from maestro.scoring.conformance import TASK_CHECK_S
from maestro.settings import RunSettings
from maestro.simulation.episode import EpisodeLimits, EpisodeResult
from maestro.simulation.ray_support import RaySettings, ensure_ray, ray_cpus
from maestro.simulation.runner import BatchConfig, make_jobs, run_batch, run_on_ray
from maestro.storage import Lake, NoneOf, OneOf
from maestro.storage.records import (
    domain_row,
    episode_from_row,
    episode_id,
    episode_row,
    score_row,
    task_row,
    task_set_row,
    trajectory_from_row,
    write_unit_calls,
)
from maestro.storage.rows import EpisodeRow, ScoreRow, TaskSetRow, TaskVerdictRow


class NightlyError(Exception):
    """Bad input to the nightly run, found before anything is written."""


class NightlyParams(BaseModel):
    """What a nightly run covers; the defaults finish in about 15 minutes on the embedded model."""

    run_id: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,79}$")
    #: Library ids or package folders; empty means every library domain.
    domains: list[str] = Field(default_factory=list)
    #: The first N tasks of each domain (one per category first); None runs them all.
    tasks_per_domain: int | None = Field(2, ge=1)
    #: Explicit task ids; overrides ``tasks_per_domain`` for the domains that have them.
    task_ids: list[str] = Field(default_factory=list)
    trials: int = Field(1, ge=1, le=64)
    concurrency: int = Field(8, ge=1, le=4096)
    max_turns: int = Field(8, ge=1)
    episode_deadline_s: float = Field(600.0, gt=0)
    judge: bool = True
    #: Episodes written per commit during simulation (what a crash can lose and must redo).
    chunk_size: int = Field(50, ge=1)
    #: Fan each chunk out over this many Ray workers (a local Ray, or MAESTRO_RAY_ADDRESS's
    #: cluster); None: MAESTRO_RAY_WORKERS, else one per CPU that Ray has; 0: asyncio in the
    #: flow's own process.
    ray_workers: int | None = Field(None, ge=0, le=1024)
    #: Synthesis stage: briefs synthesized tonight (0: none). Each accepted domain is then
    #: ingested, simulated, scored and filtered with the others.
    synthesize: int = Field(1, ge=0, le=100)
    #: Wall time the synthesis stage may take; a synthesis still running then stops (resumable
    #: with the run id). Sized for the embedded model: three blueprint attempts fit in it.
    synthesis_budget_s: float = Field(900.0, gt=0)
    #: Briefs tonight's are taken from, in turn (the synthesis module's list when empty).
    briefs: list[str] = Field(default_factory=list)
    #: Training stage on the curated task set: a method, or None for the configured default
    #: (``MAESTRO_TRAINING__ENABLED``, off unless set).
    train: Literal["sft", "dpo", "grpo"] | None = None

    def ray_workers_wanted(self) -> int | None:
        """``ray_workers``, or ``MAESTRO_RAY_WORKERS`` when unset: 0 is no Ray, None is one
        worker per CPU that Ray has."""
        return RaySettings().workers if self.ray_workers is None else self.ray_workers


def resolve_domains(params: NightlyParams) -> list[Domain]:
    """Load and validate every domain named (or the library) before anything is written."""
    targets = params.domains or library_ids()
    paths = []
    for t in targets:
        try:
            paths.append(domain_path(t))
        except KeyError as exc:
            raise NightlyError(str(exc.args[0])) from None
    domains: list[Domain] = []
    problems: list[str] = []
    for p in paths:
        domain, found = inspect_package(p)
        problems.extend(f"{p}: {x}" for x in found)
        if domain is not None:
            domains.append(domain)
    if problems:
        raise NightlyError(
            "domain packages have problems:\n" + "\n".join(f"  - {x}" for x in problems)
        )
    ids = [d.id for d in domains]
    if len(set(ids)) != len(ids):
        raise NightlyError(f"two packages share a domain id: {ids}")
    known = {t.id for d in domains for t in d.tasks}
    unknown = [t for t in params.task_ids if t not in known]
    if unknown:
        raise NightlyError(f"no domain has task(s) {unknown}")
    return domains


def select_tasks(domain: Domain, params: NightlyParams) -> list[str]:
    """The tasks of a domain this run covers: the named ones, or a spread over categories."""
    named = [t.id for t in domain.tasks if t.id in params.task_ids]
    if named:
        return named
    if params.task_ids or params.tasks_per_domain is None:
        return [] if params.task_ids else [t.id for t in domain.tasks]
    by_category: dict[str | None, list[str]] = {}
    for t in domain.tasks:
        by_category.setdefault(t.category, []).append(t.id)
    picked: list[str] = []
    while len(picked) < params.tasks_per_domain and any(by_category.values()):
        for ids in by_category.values():
            if ids and len(picked) < params.tasks_per_domain:
                picked.append(ids.pop(0))
    return sorted(picked)


def ingest(lake: Lake, run_id: str, domains: Sequence[Domain]) -> dict[str, int]:
    """Write each domain package and its tasks (merged on their keys)."""
    lake.write("domains", [domain_row(d) for d in domains], run_id)
    lake.write("tasks", [task_row(d, t) for d in domains for t in d.tasks], run_id)
    return {"domains": len(domains), "tasks": sum(len(d.tasks) for d in domains)}


def simulate(
    lake: Lake,
    run_id: str,
    domain: Domain,
    task_ids: Sequence[str],
    params: NightlyParams,
    settings: LLMSettings,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> dict[str, Any]:
    """Run the episodes this run has not stored yet, writing them (and their LLM calls) chunk
    by chunk as they finish. ``settings`` are resolved: the assistant and the user have their
    endpoints (``flows.endpoints.model_endpoints``)."""
    assistant, user = model_name(settings, "assistant"), model_name(settings, "user")
    done = set(lake.values(EpisodeRow, "episode_id", run_id=run_id, domain_id=domain.id))
    jobs = [
        j
        for j in make_jobs(domain, task_ids, params.trials)
        if episode_id(run_id, domain.id, j.task_id, j.trial, assistant) not in done
    ]
    config = BatchConfig(
        concurrency=params.concurrency,
        limits=EpisodeLimits(max_turns=params.max_turns, deadline_s=params.episode_deadline_s),
    )
    started = time.perf_counter()
    stats = {"episodes": 0, "skipped": len(done), "llm_calls": 0, "simulate_s": 0.0, "write_s": 0.0}
    ray_workers = params.ray_workers_wanted()
    workers = 0
    if ray_workers != 0 and jobs:
        # Ray's start is orchestration, not simulation: it is left out of simulate_s.
        ensure_ray(RunSettings().dir)
        workers = ray_workers or ray_cpus()
    stats["ray_workers"] = workers
    for i in range(0, len(jobs), params.chunk_size):
        chunk = jobs[i : i + params.chunk_size]
        t0 = time.perf_counter()
        if workers:
            batch = run_on_ray(
                chunk, settings, None, config, workers=workers, on_episode=on_episode
            )
        else:
            batch = asyncio.run(run_batch(chunk, settings, None, config, on_episode=on_episode))
        t1 = time.perf_counter()
        # The calls first, the episodes last: an episode row marks its unit done (see
        # docs/architecture.md, "Exactly once").
        units = {e.episode_key: None for e in batch.episodes}  # none was done: none stored
        write_unit_calls(lake, run_id, units, batch.llm_calls)
        lake.write(
            EpisodeRow.TABLE,
            [
                episode_row(run_id, e, domain.manifest.version, assistant, user)
                for e in batch.episodes
            ],
            run_id,
            mode="insert",
        )
        stats["simulate_s"] += t1 - t0
        stats["write_s"] += time.perf_counter() - t1
        stats["episodes"] += len(batch.episodes)
        stats["llm_calls"] += len(batch.llm_calls)
    stats["wall_s"] = time.perf_counter() - started
    return stats


def score(lake: Lake, run_id: str, domain: Domain, judging: Judging) -> dict[str, int]:
    """Score the run's episodes of a domain that have no score yet (NL assertions judged when
    ``judging`` is on, pending when it is off)."""
    scored = set(lake.values(ScoreRow, "episode_id", run_id=run_id, domain_id=domain.id))
    rows = lake.rows(EpisodeRow, run_id=run_id, domain_id=domain.id, episode_id=NoneOf(scored))
    if not rows:
        return {"scored": 0, "skipped": len(scored)}
    episodes = [episode_from_row(r) for r in rows]
    judge_calls = CallLog()
    cards = asyncio.run(score_episodes(domain, episodes, judging, judge_calls))
    # The judge calls first, the scores last: a score row marks its episode scored.
    units = {f"{e.episode_key}/judge": None for e in episodes}  # none was scored
    write_unit_calls(lake, run_id, units, judge_calls.calls)
    lake.write(
        ScoreRow.TABLE,
        [
            score_row(run_id, e, c, r.assistant_model or "default")
            for e, c, r in zip(episodes, cards, rows, strict=True)
        ],
        run_id,
        mode="insert",
    )
    return {"scored": len(cards), "skipped": len(scored), "judge_calls": len(judge_calls.calls)}


def difficulty_band(pass_rate: float) -> str:
    """The band of a pass rate (kept here for callers of the stage; see scoring.gates)."""
    return gates.difficulty_band(pass_rate)


#: Failed transcripts an LLM review reads per unsolved task.
REVIEW_TRANSCRIPTS = 3


def filter_tasks(
    lake: Lake,
    run_id: str,
    domain: Domain,
    task_ids: Sequence[str],
    *,
    judging: Judging,
) -> dict[str, int]:
    """Task verdicts through the quality gates of ``scoring/gates.py``: gold replay succeeds and
    is deterministic, gold scores 1 (with its free text paraphrased too), doing nothing and a
    perturbed call score 0, episodes were scored, an unsolved task is not a task defect by the
    LLM review (the ``judge`` role, when ``judging`` is on; a verdict whose evidence does not
    check out is ``unsure`` and keeps the task, flagged; off, unsolved tasks are kept and say
    they were not reviewed), and no near duplicate of a task kept before it. Every rejection is
    stored with its reasons."""
    by_task = _score_tally(lake, run_id, domain)
    found = {t: _gate_inputs(domain, t, by_task.get(t, {})) for t in task_ids}
    unsolved = [t for t, g in found.items() if _unsolved(g)]
    # A re-run of the stage keeps the reviews it already stored instead of asking again.
    reviews = {t: r for t, r in _stored_reviews(lake, run_id, domain).items() if t in unsolved}
    todo = [t for t in unsolved if t not in reviews]
    fresh, calls = _review_unsolved(lake, run_id, domain, todo, judging)
    reviews |= fresh
    for task_id, (cause, reason) in reviews.items():
        found[task_id] = replace(found[task_id], review_cause=cause, review_reason=reason)
    survivors = [domain.task(i) for i, g in found.items() if gates.verdict(g).accepted]
    for task_id, (twin, sim) in gates.near_duplicates(survivors).items():
        similarity = f"scenario text similarity {sim:g} with {twin}"
        g = found[task_id]
        found[task_id] = replace(g, duplicate_of=twin, problems=(*g.problems, similarity))
    rows = [_verdict_row(domain, g, gates.verdict(g)) for g in found.values()]
    # The review calls first, the verdicts last: a verdict marks its review done.
    write_unit_calls(lake, run_id, _review_units(lake, run_id, domain, todo), calls)
    lake.write(TaskVerdictRow.TABLE, rows, run_id)
    return {
        "verdicts": len(rows),
        "accepted": sum(1 for r in rows if r.accepted),
        "reviewed": len(reviews),
        "task_defects": sum(1 for c, _ in reviews.values() if c == "task_defect"),
        "flagged": sum(1 for c, _ in reviews.values() if c == "unsure"),
        "near_duplicates": sum(1 for r in rows if r.duplicate_of),
    }


def _review_units(
    lake: Lake, run_id: str, domain: Domain, task_ids: Sequence[str]
) -> dict[str, datetime | None]:
    """The review of each task, labelled as its calls are, and when its verdict was last
    stored (a review asked again keeps the calls of the one before)."""
    stored = {
        r.task_id: r.written_at
        for r in lake.rows(
            TaskVerdictRow,
            run_id=run_id,
            domain_id=domain.id,
            task_id=OneOf(list(task_ids)),
            fields=["written_at"],
        )
    }
    return {f"{domain.id}/{t}/review": stored.get(t) for t in task_ids}


def _score_tally(lake: Lake, run_id: str, domain: Domain) -> dict[str, dict[str, int]]:
    """Per task: how many of the run's episodes were scored (trials), and succeeded."""
    tally: dict[str, dict[str, int]] = {}
    for r in lake.rows(ScoreRow, run_id=run_id, domain_id=domain.id, fields=["task_id", "passed"]):
        t = tally.setdefault(str(r.task_id), {"trials": 0, "successes": 0})
        t["trials"] += 1
        t["successes"] += bool(r.passed)
    return tally


def _unsolved(g: gates.GateInputs) -> bool:
    """Scored, never solved, and through every gate before the review."""
    return g.trials > 0 and g.successes == 0 and gates.verdict(g).accepted


def _gate_inputs(domain: Domain, task_id: str, scored: dict[str, Any]) -> gates.GateInputs:
    task = domain.task(task_id)
    # One budget for all of the task's replays, the two below included (check_task's own).
    with calls_end_within(TASK_CHECK_S):
        check = check_task(domain, task)
        try:
            deterministic = gates.replay_deterministic(
                replay_gold(domain, task), replay_gold(domain, task)
            )
        except TaskStateError:
            deterministic = False
    return gates.GateInputs(
        task_id=task_id,
        gold_replay_ok=check.gold_replay_ok,
        gold_deterministic=deterministic,
        gold_scores_one=check.gold_pass,
        paraphrased_scores_one=check.paraphrased_pass,
        null_scores_zero=check.null_fail,
        perturbed_scores_zero=check.perturbed_fail,
        trials=int(scored.get("trials") or 0),
        successes=int(scored.get("successes") or 0),
        problems=tuple(check.problems),
    )


def _verdict_row(domain: Domain, g: gates.GateInputs, v: gates.GateVerdict) -> TaskVerdictRow:
    return TaskVerdictRow(
        domain_id=domain.id,
        task_id=g.task_id,
        gold_replay_ok=g.gold_replay_ok,
        gold_scores_one=g.gold_scores_one,
        null_scores_zero=g.null_scores_zero,
        trials=g.trials,
        successes=g.successes,
        pass_rate=v.pass_rate,
        difficulty_band=v.difficulty_band,
        accepted=v.accepted,
        reasons=v.reasons,
        gold_deterministic=g.gold_deterministic,
        review_cause=g.review_cause,
        review_reason=g.review_reason,
        duplicate_of=g.duplicate_of,
        rejected_at=v.rejected_at,
    )


def _stored_reviews(
    lake: Lake, run_id: str, domain: Domain
) -> dict[str, tuple[gates.ReviewCause, str]]:
    """(cause, reason) of the LLM reviews this run's verdicts already hold, from their own
    columns; a failed or missing review is asked again."""
    rows = lake.rows(
        TaskVerdictRow,
        run_id=run_id,
        domain_id=domain.id,
        fields=["task_id", "review_cause", "review_reason"],
    )
    return {
        r.task_id: (r.review_cause, r.review_reason or "")
        for r in rows
        if r.review_cause in gates.REVIEWED
    }


def _review_unsolved(
    lake: Lake,
    run_id: str,
    domain: Domain,
    task_ids: Sequence[str],
    judging: Judging,
) -> tuple[dict[str, tuple[gates.ReviewCause, str]], list[LLMCall]]:
    """(cause, reason) per unsolved task from the LLM review of its failed transcripts; a
    review that fails is recorded as ``review_failed``, one whose evidence does not check out
    as ``unsure`` (both keep the task)."""
    if not task_ids:
        return {}, []
    if judging.judge is None:
        return {t: ("not_reviewed", "no judge endpoint for the review") for t in task_ids}, []
    judge = judging.judge
    rows = lake.rows(EpisodeRow, run_id=run_id, domain_id=domain.id, task_id=OneOf(list(task_ids)))
    transcripts: dict[str, list[str]] = {t: [] for t in task_ids}
    for r in sorted(rows, key=lambda r: (r.task_id or "", r.trial or 0)):
        if len(transcripts[str(r.task_id)]) < REVIEW_TRANSCRIPTS:
            transcripts[str(r.task_id)].append(trajectory_from_row(r).transcript())

    async def one(client: ChatClient, task_id: str) -> tuple[gates.ReviewCause, str]:
        try:
            review = await review_failures(
                client,
                domain.policy,
                domain.task(task_id),
                transcripts[task_id],
                episode=f"{domain.id}/{task_id}/review",
            )
        except ReviewError as exc:
            return "review_failed", str(exc)
        return review.cause, review.summary()

    async def run() -> list[tuple[gates.ReviewCause, str]]:
        async with Endpoints(recorder=log) as endpoints:
            client = endpoints.client("judge", judge)
            return await asyncio.gather(*(one(client, t) for t in task_ids))

    log = CallLog()
    results = asyncio.run(run())
    return dict(zip(task_ids, results, strict=True)), log.calls


def curate_task_set(lake: Lake, run_id: str) -> dict[str, Any]:
    """The run's accepted tasks as a task set naming the table versions it was built from."""
    accepted = sorted(
        (r.domain_id, r.task_id)
        for r in lake.rows(
            TaskVerdictRow, run_id=run_id, accepted=True, fields=["domain_id", "task_id"]
        )
    )
    built_from = lake.versions(["domains", "tasks", "episodes", "scores", "task_verdicts"])
    row = task_set_row(
        f"nightly/{run_id}",
        f"nightly {run_id}",
        accepted,
        [(v["table"], v["version"]) for v in built_from],
    )
    lake.write(row.TABLE, [row], run_id)
    return task_set_summary(row)


def task_set_summary(row: TaskSetRow) -> dict[str, Any]:
    """What the report says of a task set: its id, how many tasks, what it was built from."""
    return {
        "task_set_id": row.task_set_id,
        "tasks": len(row.tasks or []),
        "built_from": [v.model_dump() for v in row.built_from or []],
    }


def run_task_set(lake: Lake, run_id: str) -> dict[str, Any]:
    """The summary of the task set a run curated; empty when it curated none yet."""
    rows = lake.rows(TaskSetRow, run_id=run_id)
    return task_set_summary(rows[0]) if rows else {}
