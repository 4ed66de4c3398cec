"""The typed row of every lake table: the one declaration of each table's columns.

Each table is a pydantic model; its Arrow schema is derived from it (``schemas.py``), so the two
cannot drift. The rule of the derivation: a column is non-null in Arrow exactly when its Python
type is not optional, which holds for the key columns and nothing else (the lake keeps what older
writers wrote, with columns missing); nested structs are all-optional for the same reason. The
class docstring is the table's description in docs/tables.md.

Rows are storage, not the domain: the conversions to and from maestro's objects are in
:mod:`maestro.storage.records`.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class Struct(BaseModel):
    """A nested column's value (a struct in Arrow)."""

    model_config = ConfigDict(extra="forbid")


class Row(BaseModel):
    """One row of a lake table. ``run_id`` and ``written_at`` are stamped by ``Lake.write``."""

    model_config = ConfigDict(extra="forbid")

    TABLE: ClassVar[str]
    KEYS: ClassVar[tuple[str, ...]]

    run_id: str | None = None
    written_at: datetime | None = None


STAMP = ("run_id", "written_at")


# ----- nested values ------------------------------------------------------------------------------


class TableVersion(Struct):
    table: str | None = None
    version: int | None = None


class StoredToolCall(Struct):
    id: str | None = None
    name: str | None = None
    #: The call's arguments as JSON text (or the raw text the model wrote when it was not JSON).
    arguments: str | None = None


class StoredMessage(Struct):
    role: str | None = None
    content: str | None = None
    tool_calls: list[StoredToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    status: str | None = None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class StoredCriterion(Struct):
    criterion: str | None = None
    status: str | None = None
    reward: float | None = None
    details: str | None = None


class StoredCheck(Struct):
    """One thing a criterion checked (an action, a piece of information, an assertion) and the
    verdict's reason: "no successful call with these arguments", or the judge's own words."""

    criterion: str | None = None
    subject: str | None = None
    passed: bool | None = None
    reason: str | None = None


class TaskRef(Struct):
    domain_id: str | None = None
    task_id: str | None = None


# ----- tables -------------------------------------------------------------------------------------


class BlueprintRow(Row):
    """Domain blueprints written by the synthesis team (entities, operations, rules), one per
    synthesis, with how it ended (accepted, rejected, error) and why."""

    TABLE = "blueprints"
    KEYS = ("blueprint_id",)

    blueprint_id: str
    brief: str | None = None
    industry: str | None = None
    blueprint_json: str | None = None
    status: str | None = None
    reason: str | None = None
    domain_id: str | None = None
    llm_calls: int | None = None
    tokens: int | None = None
    wall_s: float | None = None


class DomainRow(Row):
    """Domain packages: every file, so a domain can be rebuilt from the lake."""

    TABLE = "domains"
    KEYS = ("domain_id", "version")

    domain_id: str
    version: str
    name: str | None = None
    description: str | None = None
    industry: str | None = None
    source: str | None = None
    content_hash: str | None = None
    n_tools: int | None = None
    n_write_tools: int | None = None
    n_records: int | None = None
    n_tasks: int | None = None
    domain_json: str | None = None
    models_py: str | None = None
    tools_py: str | None = None
    policy_md: str | None = None
    db_json: str | None = None
    #: The world's laws (laws.json), when the package declares them.
    laws_json: str | None = None
    n_laws: int | None = None


class TaskRow(Row):
    """Tasks in tau2-bench's format (task_json), with the fields people filter on."""

    TABLE = "tasks"
    KEYS = ("domain_id", "domain_version", "task_id")

    domain_id: str
    domain_version: str
    task_id: str
    category: str | None = None
    split: str | None = None
    difficulty: str | None = None
    source: str | None = None
    reason_for_call: str | None = None
    reward_basis: list[str] | None = None
    n_gold_actions: int | None = None
    n_nl_assertions: int | None = None
    task_json: str | None = None


class SynthesisEventRow(Row):
    """One row per synthesis stage attempt: what it cost and how it ended."""

    TABLE = "synthesis_events"
    KEYS = ("event_id",)

    event_id: str
    synthesis_id: str | None = None
    stage: str | None = None
    outcome: str | None = None
    detail: str | None = None
    llm_calls: int | None = None
    tokens: int | None = None
    duration_s: float | None = None


class EpisodeRow(Row):
    """Simulated conversations: every message, tool call and result, with how the episode
    ended and the Ray node that ran it."""

    TABLE = "episodes"
    KEYS = ("episode_id",)

    episode_id: str
    domain_id: str | None = None
    domain_version: str | None = None
    task_id: str | None = None
    trial: int | None = None
    seed: int | None = None
    assistant_model: str | None = None
    user_model: str | None = None
    termination: str | None = None
    error: str | None = None
    duration_s: float | None = None
    llm_calls: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    n_tool_calls: int | None = None
    messages: list[StoredMessage] | None = None
    node_id: str | None = None


class ScoreRow(Row):
    """One score card per episode: each criterion's verdict and the product, and each check's
    verdict and reason. ``passed`` is the episode's success: every criterion judged, and the
    reward 1. For a task imported from a benchmark, that benchmark's own checker on the same
    episode (external_*: which checker, pass/fail/error, why)."""

    TABLE = "scores"
    KEYS = ("episode_id",)

    episode_id: str
    domain_id: str | None = None
    task_id: str | None = None
    trial: int | None = None
    assistant_model: str | None = None
    reward: float | None = None
    complete: bool | None = None
    passed: bool | None = None
    pending: list[str] | None = None
    errors: list[str] | None = None
    criteria: list[StoredCriterion] | None = None
    checks: list[StoredCheck] | None = None
    #: A task imported from a benchmark: that benchmark's own checker on the same episode
    #: (which checker, pass/fail/error, why).
    external_checker: str | None = None
    external_status: str | None = None
    external_details: str | None = None


class TaskVerdictRow(Row):
    """Filtering verdicts: which tasks passed the gates (the first gate failed, the LLM
    review's cause and reason for unsolved tasks, the near-duplicate twin), pass rate and
    difficulty band."""

    TABLE = "task_verdicts"
    KEYS = ("run_id", "domain_id", "task_id")

    domain_id: str
    task_id: str
    gold_replay_ok: bool | None = None
    gold_scores_one: bool | None = None
    null_scores_zero: bool | None = None
    trials: int | None = None
    successes: int | None = None
    pass_rate: float | None = None
    difficulty_band: str | None = None
    accepted: bool | None = None
    reasons: list[str] | None = None
    gold_deterministic: bool | None = None
    review_cause: str | None = None
    duplicate_of: str | None = None
    rejected_at: str | None = None
    review_reason: str | None = None


class TaskSetRow(Row):
    """Curated task sets, each naming the table versions it was built from."""

    TABLE = "task_sets"
    KEYS = ("task_set_id",)

    task_set_id: str
    name: str | None = None
    tasks: list[TaskRef] | None = None
    built_from: list[TableVersion] | None = None


class DatasetRow(Row):
    """Training datasets (SFT, DPO, GRPO), each naming the table versions it was built from."""

    TABLE = "datasets"
    KEYS = ("dataset_id",)

    dataset_id: str
    method: str | None = None
    task_set_id: str | None = None
    n_rows: int | None = None
    uri: str | None = None
    built_from: list[TableVersion] | None = None
    #: Rows the build left out (a prompt over the training budget, a chat-template control
    #: string in the text), and each reason as JSON: reason, domain, task, where, detail, rows.
    n_dropped: int | None = None
    dropped_json: str | None = None


class TrainingRunRow(Row):
    """Training runs: method, dataset, configuration, status and final metrics."""

    TABLE = "training_runs"
    KEYS = ("training_run_id",)

    training_run_id: str
    method: str | None = None
    dataset_id: str | None = None
    base_model: str | None = None
    status: str | None = None
    config_json: str | None = None
    metrics_json: str | None = None


class ModelRow(Row):
    """Trained models and where their weights are."""

    TABLE = "models"
    KEYS = ("model_id",)

    model_id: str
    training_run_id: str | None = None
    base_model: str | None = None
    uri: str | None = None


class EvaluationRow(Row):
    """Evaluations of models on held-out task sets."""

    TABLE = "evaluations"
    KEYS = ("evaluation_id",)

    evaluation_id: str
    model_id: str | None = None
    task_set_id: str | None = None
    episodes: int | None = None
    pass_hat_1: float | None = None
    mean_reward: float | None = None
    report_json: str | None = None


class LLMCallRow(Row):
    """Every LLM call: role, model, endpoint, latency, attempts, tokens, outcome. ``episode``
    names the unit of work the call belongs to (an episode, its judging, a task's review, a
    synthesis), and the key is that label and the call's place in it."""

    TABLE = "llm_calls"
    KEYS = ("call_id",)

    call_id: str
    episode: str | None = None
    role: str | None = None
    model: str | None = None
    endpoint: str | None = None
    started_at: datetime | None = None
    latency_s: float | None = None
    attempts: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: str | None = None
    error: str | None = None


class AnnotationRow(Row):
    """Expert labels of judged NL assertions (one row per item and annotator), with the judge's
    verdict at import time, for judge-expert agreement."""

    TABLE = "annotations"
    KEYS = ("annotation_id",)

    annotation_id: str
    item_id: str | None = None
    batch_id: str | None = None
    episode_id: str | None = None
    domain_id: str | None = None
    task_id: str | None = None
    assertion_index: int | None = None
    assertion: str | None = None
    annotator: str | None = None
    label: bool | None = None
    judge_verdict: bool | None = None
    note: str | None = None


#: Every table's row model, in the order of docs/tables.md.
ROW_MODELS: tuple[type[Row], ...] = (
    BlueprintRow,
    DomainRow,
    TaskRow,
    SynthesisEventRow,
    EpisodeRow,
    ScoreRow,
    TaskVerdictRow,
    TaskSetRow,
    DatasetRow,
    TrainingRunRow,
    ModelRow,
    EvaluationRow,
    LLMCallRow,
    AnnotationRow,
)
