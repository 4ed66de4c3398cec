"""A run's transcripts as the viewer shows them: every task with its gate verdict and reasons,
every episode with its messages, tool calls, tool results and statuses, and its score card
with each criterion's verdict and each check's reason.

Read from the lake; every row read goes through :func:`_rows`, so the viewer follows the
tables' row models in one place. Messages are read cut to :data:`TEXT_LIMIT` characters each
(inside the query, so an answer of 15 MB never reaches Python whole), with how many characters
were left out: the page says so where the text stops.
"""

from __future__ import annotations

from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, Field

from maestro.conversation import Role
from maestro.domains.models import RewardType
from maestro.scoring.card import CheckItem, CriterionScore
from maestro.scoring.gates import GATE_LABELS
from maestro.storage import Lake

Outcome = Literal["passed", "failed", "incomplete", "unscored"]

#: The most characters of one text (a message, a tool call's arguments, a reason) the page
#: shows; the rest is counted, not shown.
TEXT_LIMIT = 64 * 1024


class ViewError(Exception):
    """Nothing to show: no such run, or an empty lake; the message says which."""


class ToolCallView(BaseModel):
    id: str
    name: str
    #: The text the model wrote, cut to :data:`TEXT_LIMIT` characters.
    arguments: str = ""
    #: How many characters of ``arguments`` were left out.
    arguments_omitted: int = 0


class MessageView(BaseModel):
    role: Role
    #: Cut to :data:`TEXT_LIMIT` characters.
    content: str | None = None
    #: How many characters of ``content`` were left out.
    content_omitted: int = 0
    tool_calls: list[ToolCallView] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    status: str | None = None
    latency_s: float | None = None


class EpisodeView(BaseModel):
    episode_id: str
    domain_id: str
    task_id: str
    trial: int
    assistant_model: str
    user_model: str
    termination: str
    error: str | None = None
    duration_s: float = 0.0
    outcome: Outcome
    reward: float | None = None
    #: The score card's criteria, each with what it checked and why it passed or failed.
    criteria: list[CriterionScore] = Field(default_factory=list)
    #: Every message; a tool call's ``arguments`` is the text the model wrote.
    messages: list[MessageView] = Field(default_factory=list)


class TaskView(BaseModel):
    domain_id: str
    task_id: str
    reason_for_call: str = ""
    #: None when the run has no verdict on the task (it was not filtered yet).
    accepted: bool | None = None
    rejected_at: str | None = None
    #: The gate's label ("gold scores 1"), for people.
    gate: str | None = None
    reasons: list[str] = Field(default_factory=list)
    trials: int = 0
    successes: int = 0
    pass_rate: float | None = None
    difficulty_band: str | None = None
    review_cause: str | None = None
    duplicate_of: str | None = None


class RunView(BaseModel):
    run_id: str
    tasks: list[TaskView]
    episodes: list[EpisodeView]


def latest_run(lake: Lake) -> str:
    """The run that last wrote episodes."""
    for commit in lake.history("episodes"):
        if commit["run_id"]:
            return str(commit["run_id"])
    raise ViewError(f"the lake at {lake.root} has no episodes yet: run maestro nightly first")


def load_run(lake: Lake, run_id: str) -> RunView:
    """Everything the viewer shows of one run."""
    episodes = _rows(lake, "episodes", run_id, clip=_clipped_messages())
    verdicts = _rows(lake, "task_verdicts", run_id)
    if not episodes and not verdicts:
        raise ViewError(
            f"the lake at {lake.root} has no episodes or task verdicts of run {run_id!r}"
        )
    scores = {r["episode_id"]: r for r in _rows(lake, "scores", run_id)}
    pairs = {(r["domain_id"], r["task_id"]) for r in [*episodes, *verdicts]}
    reasons_for_call = {
        (r["domain_id"], r["task_id"]): r.get("reason_for_call") or ""
        for r in _rows(lake, "tasks", None, ["domain_id", "task_id", "reason_for_call"])
        if (r["domain_id"], r["task_id"]) in pairs
    }
    views = sorted(
        (_episode(r, scores.get(r["episode_id"])) for r in episodes),
        key=lambda e: (e.domain_id, e.task_id, e.trial, e.assistant_model),
    )
    by_task = {(v["domain_id"], v["task_id"]): v for v in verdicts}
    counted: dict[tuple[str, str], tuple[int, int]] = {}
    for e in views:
        key = (e.domain_id, e.task_id)
        by_task.setdefault(key, {"domain_id": e.domain_id, "task_id": e.task_id})
        trials, successes = counted.get(key, (0, 0))
        counted[key] = (trials + 1, successes + (e.outcome == "passed"))
    tasks = [
        _task(row, reasons_for_call.get(key, ""), counted.get(key, (0, 0)))
        for key, row in sorted(by_task.items())
    ]
    return RunView(run_id=run_id, tasks=tasks, episodes=views)


def _rows(
    lake: Lake,
    table: str,
    run_id: str | None,
    columns: list[str] | None = None,
    clip: pl.Expr | None = None,
) -> list[dict[str, Any]]:
    """A table's rows written by ``run_id`` (every row when None), all columns or ``columns``,
    a column replaced by ``clip`` (evaluated in the query): the viewer's one read of the lake."""
    frame = lake.read(table)
    if run_id is not None:
        frame = frame.filter(run_id=run_id)
    if columns is not None:
        frame = frame.select(columns)
    if clip is not None:
        frame = frame.with_columns(clip)
    return frame.collect().to_dicts()


def _clip(field: str) -> list[pl.Expr]:
    """A struct's text ``field`` cut to :data:`TEXT_LIMIT` characters, and ``<field>_omitted``:
    how many were left out."""
    text = pl.field(field)
    return [
        text.str.slice(0, TEXT_LIMIT).alias(field),
        (text.str.len_chars().cast(pl.Int64) - TEXT_LIMIT)
        .clip(lower_bound=0)
        .alias(f"{field}_omitted"),
    ]


def _clipped_messages() -> pl.Expr:
    """The episodes' ``messages`` with each content and each call's arguments cut."""
    calls = pl.field("tool_calls").list.eval(pl.element().struct.with_fields(*_clip("arguments")))
    return pl.col("messages").list.eval(
        pl.element().struct.with_fields(*_clip("content"), calls.alias("tool_calls"))
    )


def _task(row: dict[str, Any], reason_for_call: str, counted: tuple[int, int]) -> TaskView:
    accepted = row.get("accepted")
    gate = row.get("rejected_at") if accepted is False else None
    trials = row.get("trials")
    return TaskView(
        domain_id=row["domain_id"],
        task_id=row["task_id"],
        reason_for_call=reason_for_call,
        accepted=accepted,
        rejected_at=gate,
        gate=GATE_LABELS.get(gate, gate) if gate else None,
        reasons=list(row.get("reasons") or []),
        # The verdict's own counts when filtered; else what the run's episodes say.
        trials=counted[0] if trials is None else trials,
        successes=counted[1] if trials is None else row.get("successes") or 0,
        pass_rate=row.get("pass_rate"),
        difficulty_band=row.get("difficulty_band"),
        review_cause=row.get("review_cause"),
        duplicate_of=row.get("duplicate_of"),
    )


def _episode(row: dict[str, Any], score: dict[str, Any] | None) -> EpisodeView:
    return EpisodeView(
        episode_id=row["episode_id"],
        domain_id=row["domain_id"] or "",
        task_id=row["task_id"] or "",
        trial=row["trial"] or 0,
        assistant_model=row["assistant_model"] or "",
        user_model=row["user_model"] or "",
        termination=row["termination"] or "",
        error=row["error"],
        duration_s=row["duration_s"] or 0.0,
        outcome=_outcome(score),
        reward=None if score is None else score["reward"],
        criteria=_criteria(score),
        messages=[_message(m) for m in row["messages"] or []],
    )


def _outcome(score: dict[str, Any] | None) -> Outcome:
    if score is None:
        return "unscored"
    if (score["reward"] or 0.0) < 1.0:
        return "failed"  # a judged criterion failed, whatever is still pending
    return "passed" if score["complete"] else "incomplete"


def _criteria(score: dict[str, Any] | None) -> list[CriterionScore]:
    if score is None:
        return []
    items: dict[str, list[CheckItem]] = {}
    for c in score.get("checks") or []:  # absent in rows written before checks were kept
        items.setdefault(c["criterion"], []).append(
            CheckItem(subject=c["subject"] or "", passed=c["passed"], reason=c["reason"] or "")
        )
    return [
        CriterionScore(
            criterion=RewardType(c["criterion"]),
            status=c["status"],
            reward=c["reward"],
            details=c["details"] or "",
            items=items.get(c["criterion"], []),
        )
        for c in score["criteria"] or []
    ]


def _message(m: dict[str, Any]) -> MessageView:
    return MessageView(
        role=m["role"],
        content=m.get("content"),
        content_omitted=m.get("content_omitted") or 0,
        tool_calls=[
            ToolCallView(
                id=c["id"] or "",
                name=c["name"] or "",
                arguments=c["arguments"] or "",
                arguments_omitted=c.get("arguments_omitted") or 0,
            )
            for c in m.get("tool_calls") or []
        ],
        tool_call_id=m.get("tool_call_id"),
        name=m.get("name"),
        status=m.get("status"),
        latency_s=m.get("latency_s"),
    )
