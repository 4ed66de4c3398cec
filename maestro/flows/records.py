"""Rows for the lake from maestro's objects: domains, tasks, episodes, score cards, LLM calls.

Pure conversions, no I/O: the flows call these, then ``Lake.write``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from maestro.agents.client import LLMCall
from maestro.conversation import Message
from maestro.domains.models import Task
from maestro.domains.package import Domain
from maestro.scoring.card import ScoreCard
from maestro.simulation.episode import EpisodeResult

PACKAGE_FILES = ("domain.json", "models.py", "tools.py", "policy.md", "db.json")


def episode_id(run_id: str, domain_id: str, task_id: str, trial: int, assistant_model: str) -> str:
    """The stable key of an episode: the same run re-running it writes the same row."""
    return f"{run_id}/{domain_id}/{task_id}/{trial}/{assistant_model}"


def domain_row(domain: Domain) -> dict[str, Any]:
    files: dict[str, str | None] = {}
    for name in PACKAGE_FILES:
        path = Path(domain.path) / name if domain.path else None
        files[name] = path.read_text(encoding="utf-8") if path and path.is_file() else None
    digest = hashlib.sha256("\0".join(files[n] or "" for n in PACKAGE_FILES).encode()).hexdigest()
    kinds = [s.kind for s in domain.toolkit.specs.values()]
    m = domain.manifest
    return {
        "domain_id": m.id,
        "version": m.version,
        "name": m.name,
        "description": m.description,
        "industry": m.industry,
        "source": m.provenance.source,
        "content_hash": digest,
        "n_tools": len(kinds),
        "n_write_tools": kinds.count("write"),
        "n_records": domain.initial.count(),
        "n_tasks": len(domain.tasks),
        "domain_json": files["domain.json"],
        "models_py": files["models.py"],
        "tools_py": files["tools.py"],
        "policy_md": files["policy.md"],
        "db_json": files["db.json"],
    }


def task_row(domain: Domain, task: Task) -> dict[str, Any]:
    crit = task.evaluation_criteria
    return {
        "domain_id": domain.id,
        "domain_version": domain.manifest.version,
        "task_id": task.id,
        "category": task.category,
        "split": task.split,
        "difficulty": task.difficulty,
        "source": task.provenance.source,
        "reason_for_call": task.user_scenario.instructions.reason_for_call,
        "reward_basis": [c.value for c in crit.reward_basis],
        "n_gold_actions": len(task.gold_actions),
        "n_nl_assertions": len(crit.nl_assertions),
        "task_json": task.model_dump_json(),
    }


def _message(m: Message) -> dict[str, Any]:
    return {
        "role": m.role,
        "content": m.content,
        "tool_calls": [
            {
                "id": c.id,
                "name": c.name,
                "arguments": c.arguments
                if isinstance(c.arguments, str)
                else json.dumps(c.arguments),
            }
            for c in m.tool_calls
        ],
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "status": m.status,
        "latency_s": m.latency_s,
        "prompt_tokens": m.prompt_tokens,
        "completion_tokens": m.completion_tokens,
    }


def episode_row(
    run_id: str, e: EpisodeResult, domain_version: str, assistant_model: str, user_model: str
) -> dict[str, Any]:
    return {
        "episode_id": episode_id(run_id, e.domain_id, e.task_id, e.trial, assistant_model),
        "domain_id": e.domain_id,
        "domain_version": domain_version,
        "task_id": e.task_id,
        "trial": e.trial,
        "seed": e.seed,
        "assistant_model": assistant_model,
        "user_model": user_model,
        "termination": e.termination.value,
        "error": e.error,
        "duration_s": e.duration_s,
        "llm_calls": e.llm_calls,
        "prompt_tokens": e.prompt_tokens,
        "completion_tokens": e.completion_tokens,
        "n_tool_calls": e.tool_calls,
        "messages": [_message(m) for m in e.trajectory.messages],
    }


def score_row(
    run_id: str, e: EpisodeResult, card: ScoreCard, assistant_model: str
) -> dict[str, Any]:
    return {
        "episode_id": episode_id(run_id, e.domain_id, e.task_id, e.trial, assistant_model),
        "domain_id": e.domain_id,
        "task_id": e.task_id,
        "trial": e.trial,
        "assistant_model": assistant_model,
        "reward": card.reward,
        "complete": card.complete,
        "passed": card.passed and card.complete,
        "pending": [c.value for c in card.pending],
        "errors": [c.value for c in card.errors],
        "criteria": [
            {
                "criterion": c.criterion.value,
                "status": c.status,
                "reward": c.reward,
                "details": c.details,
            }
            for c in card.criteria.values()
        ],
        "checks": [
            {
                "criterion": c.criterion.value,
                "subject": i.subject,
                "passed": i.passed,
                "reason": i.reason,
            }
            for c in card.criteria.values()
            for i in c.items
        ],
    }


def llm_call_row(run_id: str, call: LLMCall) -> dict[str, Any]:
    return {
        "call_id": f"{run_id}/{call.episode or '-'}/{call.role}/{call.started_at.isoformat()}",
        "episode": call.episode,
        "role": call.role,
        "model": call.model,
        "endpoint": call.endpoint,
        "started_at": call.started_at,
        "latency_s": call.latency_s,
        "attempts": call.attempts,
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": call.completion_tokens,
        "status": call.status,
        "error": call.error,
    }
