"""Every lake table, declared once: its Arrow schema, its keys, what it holds.

Messages and tool calls are nested ``list<struct>`` columns, so a data scientist can query into
them (``explode``, ``unnest``) instead of parsing JSON strings. Every row carries the ``run_id``
that wrote it and ``written_at``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import pyarrow as pa


@dataclass(frozen=True)
class TableDef:
    name: str
    keys: tuple[str, ...]
    schema: pa.Schema
    description: str


def _ts() -> pa.DataType:
    return pa.timestamp("us", tz="UTC")


STAMP = [
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("written_at", _ts(), nullable=False),
]

VERSION_REF = pa.struct([pa.field("table", pa.string()), pa.field("version", pa.int64())])

TOOL_CALL = pa.struct(
    [pa.field("id", pa.string()), pa.field("name", pa.string()), pa.field("arguments", pa.string())]
)

MESSAGE = pa.struct(
    [
        pa.field("role", pa.string()),
        pa.field("content", pa.string()),
        pa.field("tool_calls", pa.list_(TOOL_CALL)),
        pa.field("tool_call_id", pa.string()),
        pa.field("name", pa.string()),
        pa.field("status", pa.string()),
        pa.field("latency_s", pa.float64()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
    ]
)

CRITERION = pa.struct(
    [
        pa.field("criterion", pa.string()),
        pa.field("status", pa.string()),
        pa.field("reward", pa.float64()),
        pa.field("details", pa.string()),
    ]
)

#: One thing a criterion checked (an action, a piece of information, an assertion) and the
#: verdict's reason: "no successful call with these arguments", or the judge's own words.
CHECK = pa.struct(
    [
        pa.field("criterion", pa.string()),
        pa.field("subject", pa.string()),
        pa.field("passed", pa.bool_()),
        pa.field("reason", pa.string()),
    ]
)

TASK_REF = pa.struct([pa.field("domain_id", pa.string()), pa.field("task_id", pa.string())])


def _table(name: str, keys: tuple[str, ...], fields: list[pa.Field], description: str) -> TableDef:
    schema = pa.schema([*fields, *STAMP])
    missing = [k for k in keys if k not in schema.names]
    assert not missing, f"{name}: keys {missing} are not columns"
    return TableDef(name, keys, schema, description)


def _s(name: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, pa.string(), nullable=nullable)


def _i(name: str) -> pa.Field:
    return pa.field(name, pa.int64())


def _f(name: str) -> pa.Field:
    return pa.field(name, pa.float64())


def _b(name: str) -> pa.Field:
    return pa.field(name, pa.bool_())


_DEFS = [
    _table(
        "blueprints",
        ("blueprint_id",),
        [
            _s("blueprint_id", False),
            _s("brief"),
            _s("industry"),
            _s("blueprint_json"),
            _s("status"),
            _s("reason"),
            _s("domain_id"),
            _i("llm_calls"),
            _i("tokens"),
            _f("wall_s"),
        ],
        "Domain blueprints written by the synthesis team (entities, operations, rules), one per"
        " synthesis, with how it ended (accepted, rejected, error) and why.",
    ),
    _table(
        "domains",
        ("domain_id", "version"),
        [
            _s("domain_id", False),
            _s("version", False),
            _s("name"),
            _s("description"),
            _s("industry"),
            _s("source"),
            _s("content_hash"),
            _i("n_tools"),
            _i("n_write_tools"),
            _i("n_records"),
            _i("n_tasks"),
            _s("domain_json"),
            _s("models_py"),
            _s("tools_py"),
            _s("policy_md"),
            _s("db_json"),
        ],
        "Domain packages: every file, so a domain can be rebuilt from the lake.",
    ),
    _table(
        "tasks",
        ("domain_id", "domain_version", "task_id"),
        [
            _s("domain_id", False),
            _s("domain_version", False),
            _s("task_id", False),
            _s("category"),
            _s("split"),
            _s("difficulty"),
            _s("source"),
            _s("reason_for_call"),
            pa.field("reward_basis", pa.list_(pa.string())),
            _i("n_gold_actions"),
            _i("n_nl_assertions"),
            _s("task_json"),
        ],
        "Tasks in tau2-bench's format (task_json), with the fields people filter on.",
    ),
    _table(
        "synthesis_events",
        ("event_id",),
        [
            _s("event_id", False),
            _s("synthesis_id"),
            _s("stage"),
            _s("outcome"),
            _s("detail"),
            _i("llm_calls"),
            _i("tokens"),
            _f("duration_s"),
        ],
        "One row per synthesis stage attempt: what it cost and how it ended.",
    ),
    _table(
        "episodes",
        ("episode_id",),
        [
            _s("episode_id", False),
            _s("domain_id"),
            _s("domain_version"),
            _s("task_id"),
            _i("trial"),
            _i("seed"),
            _s("assistant_model"),
            _s("user_model"),
            _s("termination"),
            _s("error"),
            _f("duration_s"),
            _i("llm_calls"),
            _i("prompt_tokens"),
            _i("completion_tokens"),
            _i("n_tool_calls"),
            pa.field("messages", pa.list_(MESSAGE)),
        ],
        "Simulated conversations: every message, tool call and result, with how the episode ended.",
    ),
    _table(
        "scores",
        ("episode_id",),
        [
            _s("episode_id", False),
            _s("domain_id"),
            _s("task_id"),
            _i("trial"),
            _s("assistant_model"),
            _f("reward"),
            _b("complete"),
            _b("passed"),
            pa.field("pending", pa.list_(pa.string())),
            pa.field("errors", pa.list_(pa.string())),
            pa.field("criteria", pa.list_(CRITERION)),
            pa.field("checks", pa.list_(CHECK)),
        ],
        "One score card per episode: each criterion's verdict and the product, and each"
        " check's verdict and reason.",
    ),
    _table(
        "task_verdicts",
        ("run_id", "domain_id", "task_id"),
        [
            _s("domain_id", False),
            _s("task_id", False),
            _b("gold_replay_ok"),
            _b("gold_scores_one"),
            _b("null_scores_zero"),
            _i("trials"),
            _i("successes"),
            _f("pass_rate"),
            _s("difficulty_band"),
            _b("accepted"),
            pa.field("reasons", pa.list_(pa.string())),
            _b("gold_deterministic"),
            _s("review_cause"),
            _s("duplicate_of"),
            _s("rejected_at"),
        ],
        "Filtering verdicts: which tasks passed the gates (the first gate failed, the LLM review's"
        " cause for unsolved tasks, the near-duplicate twin), pass rate and difficulty band.",
    ),
    _table(
        "task_sets",
        ("task_set_id",),
        [
            _s("task_set_id", False),
            _s("name"),
            pa.field("tasks", pa.list_(TASK_REF)),
            pa.field("built_from", pa.list_(VERSION_REF)),
        ],
        "Curated task sets, each naming the table versions it was built from.",
    ),
    _table(
        "datasets",
        ("dataset_id",),
        [
            _s("dataset_id", False),
            _s("method"),
            _s("task_set_id"),
            _i("n_rows"),
            _s("uri"),
            pa.field("built_from", pa.list_(VERSION_REF)),
        ],
        "Training datasets (SFT, DPO, GRPO), each naming the table versions it was built from.",
    ),
    _table(
        "training_runs",
        ("training_run_id",),
        [
            _s("training_run_id", False),
            _s("method"),
            _s("dataset_id"),
            _s("base_model"),
            _s("status"),
            _s("config_json"),
            _s("metrics_json"),
        ],
        "Training runs: method, dataset, configuration, status and final metrics.",
    ),
    _table(
        "models",
        ("model_id",),
        [_s("model_id", False), _s("training_run_id"), _s("base_model"), _s("uri")],
        "Trained models and where their weights are.",
    ),
    _table(
        "evaluations",
        ("evaluation_id",),
        [
            _s("evaluation_id", False),
            _s("model_id"),
            _s("task_set_id"),
            _i("episodes"),
            _f("pass_hat_1"),
            _f("mean_reward"),
            _s("report_json"),
        ],
        "Evaluations of models on held-out task sets.",
    ),
    _table(
        "llm_calls",
        ("call_id",),
        [
            _s("call_id", False),
            _s("episode"),
            _s("role"),
            _s("model"),
            _s("endpoint"),
            pa.field("started_at", _ts()),
            _f("latency_s"),
            _i("attempts"),
            _i("prompt_tokens"),
            _i("completion_tokens"),
            _s("status"),
            _s("error"),
        ],
        "Every LLM call: role, model, endpoint, latency, attempts, tokens, outcome.",
    ),
    _table(
        "annotations",
        ("annotation_id",),
        [
            _s("annotation_id", False),
            _s("item_id"),
            _s("batch_id"),
            _s("episode_id"),
            _s("domain_id"),
            _s("task_id"),
            _i("assertion_index"),
            _s("assertion"),
            _s("annotator"),
            _b("label"),
            _b("judge_verdict"),
            _s("note"),
        ],
        "Expert labels of judged NL assertions (one row per item and annotator), with the"
        " judge's verdict at import time, for judge-expert agreement.",
    ),
]

TABLES: Mapping[str, TableDef] = MappingProxyType({d.name: d for d in _DEFS})
