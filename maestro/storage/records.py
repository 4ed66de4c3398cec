"""The one conversion between maestro's objects and lake rows, both ways: domains, tasks,
episodes (messages and tool calls), score cards, task sets, LLM calls.

Conversions are pure; :func:`write_unit_calls` is the one write that is not a plain
``Lake.write``: the LLM calls of whole units of work, stored exactly once however often a
killed run redid the unit.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from maestro.agents.client import LLMCall
from maestro.conversation import Message, ToolCall, Trajectory
from maestro.domains.models import Task
from maestro.domains.package import Domain
from maestro.scoring.card import ScoreCard
from maestro.simulation.episode import EpisodeResult, Termination
from maestro.storage.lake import Lake
from maestro.storage.rows import (
    DomainRow,
    EpisodeRow,
    LLMCallRow,
    ScoreRow,
    StoredCheck,
    StoredCriterion,
    StoredMessage,
    StoredToolCall,
    TableVersion,
    TaskRef,
    TaskRow,
    TaskSetRow,
)
from maestro.storage.where import OneOf

PACKAGE_FILES = ("domain.json", "models.py", "tools.py", "policy.md", "db.json")
#: Files a package may have: in the row, and in its hash only when present (so the hash of a
#: package without them is what it always was).
OPTIONAL_FILES = ("laws.json",)


class RecordError(ValueError):
    """A stored row cannot become the object it records; the message names the row."""


def episode_id(run_id: str, domain_id: str, task_id: str, trial: int, assistant_model: str) -> str:
    """The stable key of an episode: the same run re-running it writes the same row."""
    return f"{run_id}/{domain_id}/{task_id}/{trial}/{assistant_model}"


# ----- domains and tasks --------------------------------------------------------------------------


def domain_row(domain: Domain) -> DomainRow:
    files: dict[str, str | None] = {}
    for name in PACKAGE_FILES + OPTIONAL_FILES:
        path = Path(domain.path) / name if domain.path else None
        files[name] = path.read_text(encoding="utf-8") if path and path.is_file() else None
    hashed = [files[n] or "" for n in PACKAGE_FILES]
    hashed += [f"{n}\0{files[n]}" for n in OPTIONAL_FILES if files[n] is not None]
    digest = hashlib.sha256("\0".join(hashed).encode()).hexdigest()
    kinds = [s.kind for s in domain.toolkit.specs.values()]
    m = domain.manifest
    return DomainRow(
        domain_id=m.id,
        version=m.version,
        name=m.name,
        description=m.description,
        industry=m.industry,
        source=m.provenance.source,
        content_hash=digest,
        n_tools=len(kinds),
        n_write_tools=kinds.count("write"),
        n_records=domain.initial.count(),
        n_tasks=len(domain.tasks),
        domain_json=files["domain.json"],
        models_py=files["models.py"],
        tools_py=files["tools.py"],
        policy_md=files["policy.md"],
        db_json=files["db.json"],
        laws_json=files["laws.json"],
        n_laws=len(domain.laws),
    )


def task_row(domain: Domain, task: Task) -> TaskRow:
    crit = task.evaluation_criteria
    return TaskRow(
        domain_id=domain.id,
        domain_version=domain.manifest.version,
        task_id=task.id,
        category=task.category,
        split=task.split,
        difficulty=task.difficulty,
        source=task.provenance.source,
        reason_for_call=task.user_scenario.instructions.reason_for_call,
        reward_basis=[c.value for c in crit.reward_basis],
        n_gold_actions=len(task.gold_actions),
        n_nl_assertions=len(crit.nl_assertions),
        task_json=task.model_dump_json(),
    )


def task_from_row(row: TaskRow) -> Task:
    """The task a tasks row stores."""
    where = f"tasks row {row.domain_id}/{row.task_id} (version {row.domain_version})"
    if row.task_json is None:
        raise RecordError(f"{where} has no task_json")
    try:
        return Task.model_validate_json(row.task_json)
    except ValidationError as exc:
        raise RecordError(f"{where}: task_json is not a task: {exc}") from None


# ----- messages -----------------------------------------------------------------------------------


def message_row(m: Message) -> StoredMessage:
    """A trajectory message as stored: the same fields, tool-call arguments as JSON text.
    (A field Message gains and the row lacks is refused here, not lost.)"""
    calls = [
        StoredToolCall(
            id=c.id,
            name=c.name,
            arguments=c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments),
        )
        for c in m.tool_calls
    ]
    return StoredMessage(**m.model_dump(exclude={"tool_calls"}), tool_calls=calls)


def _arguments(text: str | None) -> dict[str, Any] | str:
    """Stored arguments back as the object the model sent, or its raw text if not an object."""
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return text or ""
    return value if isinstance(value, dict) else (text or "")


def message_from_row(m: StoredMessage) -> Message:
    """The trajectory message a stored one records."""
    calls = [
        ToolCall(id=c.id or "", name=c.name or "", arguments=_arguments(c.arguments))
        for c in m.tool_calls or []
    ]
    try:
        return Message.model_validate({**m.model_dump(exclude={"tool_calls"}), "tool_calls": calls})
    except ValidationError as exc:
        raise RecordError(f"a stored message is not a message: {exc}") from None


# ----- episodes and scores ------------------------------------------------------------------------


def episode_row(
    run_id: str, e: EpisodeResult, domain_version: str, assistant_model: str, user_model: str
) -> EpisodeRow:
    return EpisodeRow(
        episode_id=episode_id(run_id, e.domain_id, e.task_id, e.trial, assistant_model),
        domain_id=e.domain_id,
        domain_version=domain_version,
        task_id=e.task_id,
        trial=e.trial,
        seed=e.seed,
        assistant_model=assistant_model,
        user_model=user_model,
        termination=e.termination.value,
        error=e.error,
        duration_s=e.duration_s,
        llm_calls=e.llm_calls,
        prompt_tokens=e.prompt_tokens,
        completion_tokens=e.completion_tokens,
        n_tool_calls=e.tool_calls,
        messages=[message_row(m) for m in e.trajectory.messages],
        node_id=e.node_id,
    )


def trajectory_from_row(row: EpisodeRow) -> Trajectory:
    """The trajectory an episodes row stores."""
    if row.domain_id is None or row.task_id is None:
        raise RecordError(f"episodes row {row.episode_id} names no domain or task")
    return Trajectory(
        domain_id=row.domain_id,
        task_id=row.task_id,
        messages=[message_from_row(m) for m in row.messages or []],
        termination=row.termination,
    )


def episode_from_row(row: EpisodeRow) -> EpisodeResult:
    """The episode an episodes row stores."""
    trajectory = trajectory_from_row(row)
    if row.termination is None:
        raise RecordError(f"episodes row {row.episode_id} has no termination")
    return EpisodeResult(
        domain_id=trajectory.domain_id,
        task_id=trajectory.task_id,
        trial=row.trial or 0,
        seed=row.seed or 0,
        trajectory=trajectory,
        termination=Termination(row.termination),
        error=row.error,
        duration_s=row.duration_s or 0.0,
        llm_calls=row.llm_calls or 0,
        prompt_tokens=row.prompt_tokens or 0,
        completion_tokens=row.completion_tokens or 0,
        tool_calls=row.n_tool_calls or 0,
        node_id=row.node_id,
    )


def score_row(run_id: str, e: EpisodeResult, card: ScoreCard, assistant_model: str) -> ScoreRow:
    return ScoreRow(
        episode_id=episode_id(run_id, e.domain_id, e.task_id, e.trial, assistant_model),
        domain_id=e.domain_id,
        task_id=e.task_id,
        trial=e.trial,
        assistant_model=assistant_model,
        reward=card.reward,
        complete=card.complete,
        passed=card.succeeded,
        pending=[c.value for c in card.pending],
        errors=[c.value for c in card.errors],
        criteria=[
            StoredCriterion(
                criterion=c.criterion.value, status=c.status, reward=c.reward, details=c.details
            )
            for c in card.criteria.values()
        ],
        checks=[
            StoredCheck(
                criterion=c.criterion.value, subject=i.subject, passed=i.passed, reason=i.reason
            )
            for c in card.criteria.values()
            for i in c.items
        ],
        external_checker=card.external.checker if card.external else None,
        external_status=card.external.status if card.external else None,
        external_details=card.external.details if card.external else None,
    )


# ----- task sets ----------------------------------------------------------------------------------


def task_set_row(
    task_set_id: str,
    name: str,
    tasks: Iterable[tuple[str, str]],
    built_from: Iterable[tuple[str, int | None]],
) -> TaskSetRow:
    """A task set of (domain, task) pairs, naming the (table, version) pairs it was built from."""
    return TaskSetRow(
        task_set_id=task_set_id,
        name=name,
        tasks=[TaskRef(domain_id=d, task_id=t) for d, t in tasks],
        built_from=[TableVersion(table=t, version=v) for t, v in built_from],
    )


def task_refs(row: TaskSetRow) -> list[tuple[str, str]]:
    """A task set's (domain, task) pairs."""
    out = []
    for ref in row.tasks or []:
        if ref.domain_id is None or ref.task_id is None:
            raise RecordError(f"task set {row.task_set_id} has a task without domain or id")
        out.append((ref.domain_id, ref.task_id))
    return out


# ----- LLM calls ----------------------------------------------------------------------------------


def call_rows(
    run_id: str, calls: Sequence[LLMCall], first: Mapping[str, int] | None = None
) -> list[LLMCallRow]:
    """LLM calls as rows keyed by their unit's label (``call.episode``) and their place in it,
    counted from ``first[label]`` (0 by default).

    The calls of one unit (an episode, the judging of one, a task's review, a synthesis) are
    made one after another, so their order by start time is the same each time the unit is
    done: a redone unit's calls get the same keys.
    """
    by_label: dict[str, list[LLMCall]] = defaultdict(list)
    for c in calls:
        by_label[c.episode or "-"].append(c)
    rows = []
    for label, group in by_label.items():
        start = (first or {}).get(label, 0)
        for seq, c in enumerate(sorted(group, key=lambda c: c.started_at), start=start):
            rows.append(LLMCallRow(call_id=f"{run_id}/{label}/{seq}", **c.model_dump()))
    return rows


def write_unit_calls(
    lake: Lake, run_id: str, units: Mapping[str, datetime | None], calls: Sequence[LLMCall]
) -> int:
    """Store the LLM calls of whole units of work, before the rows that mark the units done.

    ``units`` maps each unit's label (an episode's key, ``<key>/judge``, ``<domain>/<task>/review``)
    to when the row that marks it done was last written (None: never). Calls stored after that
    are a killed attempt's: the unit is being redone, so they are deleted and the new calls take
    their keys; calls stored before it belong to an attempt whose result was kept (a review asked
    again on purpose), and stay. So each attempt's calls are in the table once. (Two commits: a
    kill between them leaves the units to be redone again.)
    """
    strays = sorted({c.episode or "-" for c in calls} - set(units))
    if strays:
        raise ValueError(f"calls of units not being stored: {strays[:3]}")
    stored = (
        lake.rows(
            LLMCallRow,
            run_id=run_id,
            episode=OneOf(sorted(units)),
            fields=["episode", "written_at"],
        )
        if units
        else []
    )
    orphans, kept = [], Counter[str]()
    for c in stored:
        done = units[str(c.episode)]
        if done is None or c.written_at is None or c.written_at > done:
            orphans.append(c.call_id)
        else:
            kept[str(c.episode)] += 1
    if orphans:
        lake.delete(LLMCallRow, run_id, call_id=OneOf(orphans))
    rows = call_rows(run_id, calls, kept)
    lake.write(LLMCallRow.TABLE, rows, run_id, mode="insert")
    return len(rows)
