"""Evaluate a trained model: serve it over HTTP, run its episodes on the held-out tasks of a
task set with the usual simulation and scoring, and write episodes, scores and an evaluations
row. The model is one more OpenAI-compatible assistant; nothing here is special to training."""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from maestro.agents.judging import Judging, score_all
from maestro.agents.settings import LLMSettings
from maestro.domains import Domain
from maestro.scoring import mean_pass_hat_k
from maestro.simulation.episode import EpisodeLimits
from maestro.simulation.runner import BatchConfig, make_jobs, run_batch
from maestro.storage import Lake
from maestro.storage.records import episode_row, score_row, task_refs
from maestro.storage.rows import EpisodeRow, EvaluationRow, ScoreRow, TaskSetRow
from maestro.training.generation import ChatGenerator, SamplingSettings
from maestro.training.models import BaseModelSpec, load_model, load_tokenizer
from maestro.training.serving import ModelServer


class EvaluationError(Exception):
    """Nothing to evaluate: no held-out task, unknown task set or model."""


class EvaluationSettings(BaseModel):
    split: str = "test"
    trials: int = Field(1, ge=1)
    limits: EpisodeLimits = Field(
        default_factory=lambda: EpisodeLimits(max_turns=8, deadline_s=600)
    )
    sampling: SamplingSettings = Field(
        default_factory=lambda: SamplingSettings(max_new_tokens=256, temperature=0.0)
    )
    judge: bool = True
    concurrency: int = Field(4, ge=1)


def held_out_tasks(
    lake: Lake, domains: Mapping[str, Domain], task_set_id: str, split: str
) -> dict[str, list[str]]:
    """The task set's tasks in ``split``, by domain id."""
    sets = lake.rows(TaskSetRow, task_set_id=task_set_id)
    if not sets:
        raise EvaluationError(f"task set {task_set_id!r} is not in the task_sets table")
    out: dict[str, list[str]] = defaultdict(list)
    for domain_id, task_id in task_refs(sets[0]):
        domain = domains.get(domain_id)
        if domain is None:
            raise EvaluationError(f"task set names domain {domain_id!r}, which is not loaded")
        if domain.task(task_id).split == split:
            out[domain.id].append(task_id)
    if not out:
        raise EvaluationError(f"task set {task_set_id!r} has no task in split {split!r}")
    return dict(out)


def evaluate_model(
    lake: Lake,
    run_id: str,
    model_id: str,
    model_dir: Path,
    task_set_id: str,
    domains: Mapping[str, Domain],
    llm: LLMSettings,
    settings: EvaluationSettings | None = None,
) -> dict[str, Any]:
    """Serve the model, run and score its episodes, write them and the evaluations row."""
    settings = settings or EvaluationSettings()
    tasks = held_out_tasks(lake, domains, task_set_id, settings.split)
    spec = BaseModelSpec(kind="path", path=str(model_dir))
    tokenizer = load_tokenizer(spec)
    gen = ChatGenerator(load_model(spec, tokenizer), tokenizer, settings.sampling)
    config = BatchConfig(concurrency=settings.concurrency, limits=settings.limits)
    episodes: list[EpisodeRow] = []
    scores: list[ScoreRow] = []
    judging = Judging.by(llm) if settings.judge else Judging.off()
    with ModelServer(gen, model_id) as server:
        local = llm.model_copy(deep=True)
        local.assistant.base_url = server.base_url
        local.assistant.model = model_id
        for domain_id, task_ids in tasks.items():
            domain = domains[domain_id]
            jobs = make_jobs(domain, task_ids, settings.trials)
            batch = asyncio.run(run_batch(jobs, local, None, config))
            trajectories = [e.trajectory for e in batch.episodes]
            cards = asyncio.run(score_all(domain, trajectories, judging))
            user = local.user.model or "default"
            for e, card in zip(batch.episodes, cards, strict=True):
                episodes.append(episode_row(run_id, e, domain.manifest.version, model_id, user))
                scores.append(score_row(run_id, e, card, model_id))
    lake.write(EpisodeRow.TABLE, episodes, run_id)
    lake.write(ScoreRow.TABLE, scores, run_id)
    return _record(lake, run_id, model_id, task_set_id, settings, episodes, scores)


def external_scores(scores: list[ScoreRow]) -> dict[str, dict[str, Any]]:
    """Per benchmark checker (imported tasks, BFCL): episodes, passes, errors and pass rate."""
    out: dict[str, dict[str, Any]] = {}
    for s in scores:
        if not s.external_checker:
            continue
        row = out.setdefault(s.external_checker, {"episodes": 0, "passed": 0, "errors": 0})
        row["episodes"] += 1
        row["passed"] += s.external_status == "pass"
        row["errors"] += s.external_status == "error"
    for row in out.values():
        judged = row["episodes"] - row["errors"]
        row["pass_rate"] = row["passed"] / judged if judged else None
    return out


def _record(
    lake: Lake,
    run_id: str,
    model_id: str,
    task_set_id: str,
    settings: EvaluationSettings,
    episodes: list[EpisodeRow],
    scores: list[ScoreRow],
) -> dict[str, Any]:
    trials: dict[str, list[bool]] = defaultdict(list)
    for s in scores:
        trials[f"{s.domain_id}/{s.task_id}"].append(bool(s.passed))
    rewards = [s.reward for s in scores if s.complete and s.reward is not None]
    report = {
        "split": settings.split,
        "trials": settings.trials,
        "per_task": {k: sum(v) / len(v) for k, v in sorted(trials.items())},
        "terminations": dict(Counter(e.termination for e in episodes)),
        "incomplete_scores": sum(1 for s in scores if not s.complete),
        "external": external_scores(scores),
    }
    row = EvaluationRow(
        evaluation_id=f"{model_id}/{task_set_id}/{settings.split}/{run_id}",
        model_id=model_id,
        task_set_id=task_set_id,
        episodes=len(episodes),
        pass_hat_1=mean_pass_hat_k(trials, 1),
        mean_reward=sum(rewards) / len(rewards) if rewards else None,
        report_json=json.dumps(report, sort_keys=True),
    )
    lake.write(row.TABLE, [row], run_id)
    return row.model_dump(exclude={"run_id", "written_at"})
