"""SFT, DPO and GRPO datasets built from the lake, in TRL's conversational format.

Every row names the episodes it came from and the table versions it was read at; a dataset is
registered in the ``datasets`` table and exported as parquet (loadable with ``datasets``).

- SFT: the successful episodes of the task set's tasks, plus a gold-path conversation per
  task (the opening, the gold calls with their replayed results, the facts to communicate).
- DPO: for a task with both outcomes, chosen = a successful episode, rejected = a failed one;
  the prompt is the two conversations' shared prefix.
- GRPO: the system prompt and the user's opening; ``domain_id``/``task_id`` name the task.

Tool-call arguments stay JSON text (see :mod:`maestro.training.models`); ``tools`` is a JSON
string per row because different domains have different tools.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from maestro.agents.roles import ASSISTANT_PREAMBLE
from maestro.domains import Domain
from maestro.domains.models import Task
from maestro.domains.package import replay_gold
from maestro.storage import Lake

if TYPE_CHECKING:
    from datasets import Dataset

Method = Literal["sft", "dpo", "grpo"]
SOURCE_TABLES = ("task_sets", "tasks", "episodes", "scores")


class DatasetError(Exception):
    """A dataset cannot be built: unknown task set, domain missing, nothing to train on."""


@dataclass
class TrainingDataset:
    """A built dataset: rows in TRL's format, and where they came from."""

    dataset_id: str
    method: Method
    task_set_id: str
    rows: list[dict[str, Any]]
    built_from: list[dict[str, Any]] = field(default_factory=list)

    def to_hf(self) -> Dataset:
        """The rows as a Hugging Face dataset."""
        from datasets import Dataset

        if not self.rows:
            raise DatasetError(f"dataset {self.dataset_id} has no rows")
        return Dataset.from_list(self.rows)

    def export(self, folder: Path) -> Path:
        """Write the rows as one parquet file under ``folder``; returns its path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.dataset_id.replace('/', '__')}.parquet"
        self.to_hf().to_parquet(str(path))
        return path

    def register(self, lake: Lake, run_id: str, uri: str) -> None:
        """Write this dataset's row in the ``datasets`` table."""
        row = {
            "dataset_id": self.dataset_id,
            "method": self.method,
            "task_set_id": self.task_set_id,
            "n_rows": len(self.rows),
            "uri": uri,
            "built_from": self.built_from,
        }
        lake.write("datasets", [row], run_id)


# ----- conversation pieces ---------------------------------------------------------------------


def system_prompt(domain: Domain) -> str:
    """The assistant's system prompt, as :class:`maestro.agents.roles.Assistant` builds it."""
    m = domain.manifest
    today = m.clock.strftime("%A %Y-%m-%d %H:%M") if m.clock else "not given"
    return ASSISTANT_PREAMBLE.format(
        name=m.name, description=m.description, today=today, policy=domain.policy
    )


def tools_json(domain: Domain) -> str:
    return json.dumps(domain.toolkit.schemas())


def message(
    role: str, content: str | None = None, calls: Sequence[tuple[str, str]] = (), name: str = ""
) -> dict[str, Any]:
    """One message with the same keys whatever its role (Arrow wants one struct type)."""
    return {
        "role": role,
        "content": content or "",
        "tool_calls": [
            {"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls
        ],
        "name": name,
    }


def from_lake_messages(system: str, stored: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """An episodes row's messages in TRL's format, after the assistant's system prompt."""
    out = [message("system", system)]
    for m in stored:
        calls = [(c["name"], c["arguments"] or "{}") for c in m.get("tool_calls") or []]
        out.append(message(m["role"], m.get("content"), calls, m.get("name") or ""))
    return out


def gold_conversation(domain: Domain, task: Task) -> list[dict[str, Any]]:
    """The gold path as a conversation: opening, gold calls with replayed results, the facts
    the task wants communicated."""
    replay = replay_gold(domain, task)
    if not replay.ok:
        raise DatasetError(f"{domain.id}/{task.id}: the gold path does not replay cleanly")
    out = [
        message("system", system_prompt(domain)),
        message("user", task.user_scenario.instructions.reason_for_call),
    ]
    for action, outcome in zip(task.gold_actions, replay.outcomes, strict=True):
        out.append(message("assistant", None, [(action.name, json.dumps(action.arguments))]))
        out.append(message("tool", outcome.content, name=action.name))
    info = task.evaluation_criteria.communicate_info
    out.append(message("assistant", ("To confirm: " + "; ".join(info) + ".") if info else "Done."))
    return out


# ----- reading the lake ------------------------------------------------------------------------


@dataclass
class _Source:
    versions: list[dict[str, Any]]
    tasks: list[tuple[Domain, Task]]
    episodes: list[dict[str, Any]]


def _read_source(
    lake: Lake, domains: Mapping[str, Domain], task_set_id: str, split: str | None
) -> _Source:
    versions = lake.versions(SOURCE_TABLES)
    at = {v["table"]: v["version"] for v in versions}
    if at["task_sets"] is None:
        raise DatasetError("the lake has no task_sets table yet: curate a task set first")
    sets = (
        lake.read("task_sets", at["task_sets"])
        .filter(pl.col("task_set_id") == task_set_id)
        .collect()
        .to_dicts()
    )
    if not sets:
        raise DatasetError(f"task set {task_set_id!r} is not in the task_sets table")
    refs = [(r["domain_id"], r["task_id"]) for r in sets[0]["tasks"] or []]
    missing = sorted({d for d, _ in refs if d not in domains})
    if missing:
        raise DatasetError(f"task set {task_set_id!r} names domain(s) not loaded: {missing}")
    tasks = [(domains[d], domains[d].task(t)) for d, t in refs]
    if split is not None:
        tasks = [(d, t) for d, t in tasks if t.split == split]
    episodes: list[dict[str, Any]] = []
    if at["episodes"] is not None and at["scores"] is not None and tasks:
        keys = pl.DataFrame(
            {"domain_id": [d.id for d, _ in tasks], "task_id": [t.id for _, t in tasks]}
        ).lazy()
        scores = lake.read("scores", at["scores"]).select("episode_id", "reward", "passed")
        episodes = (
            lake.read("episodes", at["episodes"])
            .join(keys, on=["domain_id", "task_id"])
            .join(scores, on="episode_id")
            .sort("episode_id")
            .collect()
            .to_dicts()
        )
    return _Source(versions, tasks, episodes)


def _row_meta(source: _Source, domain: Domain, task: Task, episodes: list[str]) -> dict[str, Any]:
    return {
        "domain_id": domain.id,
        "task_id": task.id,
        "episode_ids": episodes,
        "table_versions": source.versions,
        "tools": tools_json(domain),
    }


def build_sft(
    lake: Lake,
    domains: Mapping[str, Domain],
    task_set_id: str,
    *,
    split: str | None = "train",
    include_gold: bool = True,
    dataset_id: str | None = None,
) -> TrainingDataset:
    """Successful episodes plus gold-path conversations of the task set's tasks."""
    source = _read_source(lake, domains, task_set_id, split)
    by_key = {(d.id, t.id): (d, t) for d, t in source.tasks}
    rows = []
    for e in source.episodes:
        if not e["passed"]:
            continue
        domain, task = by_key[(e["domain_id"], e["task_id"])]
        rows.append(
            {
                "messages": from_lake_messages(system_prompt(domain), e["messages"] or []),
                "source": "episode",
                **_row_meta(source, domain, task, [e["episode_id"]]),
            }
        )
    if include_gold:
        for domain, task in source.tasks:
            rows.append(
                {
                    "messages": gold_conversation(domain, task),
                    "source": "gold",
                    **_row_meta(source, domain, task, []),
                }
            )
    return _finish("sft", task_set_id, rows, source, dataset_id)


def shared_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items two sequences share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def build_dpo(
    lake: Lake,
    domains: Mapping[str, Domain],
    task_set_id: str,
    *,
    split: str | None = "train",
    pairs_per_task: int = 4,
    dataset_id: str | None = None,
) -> TrainingDataset:
    """Chosen = a successful episode, rejected = a failed one of the same task."""
    source = _read_source(lake, domains, task_set_id, split)
    rows = []
    for domain, task in source.tasks:
        mine = [
            e for e in source.episodes if (e["domain_id"], e["task_id"]) == (domain.id, task.id)
        ]
        good = [e for e in mine if e["passed"]]
        bad = [e for e in mine if not e["passed"]]
        system = system_prompt(domain)
        for g, b in list(zip(good, bad, strict=False))[:pairs_per_task]:
            chosen = from_lake_messages(system, g["messages"] or [])
            rejected = from_lake_messages(system, b["messages"] or [])
            n = shared_prefix(chosen, rejected)
            # The completion must start with an assistant turn the two disagree on.
            while n > 0 and chosen[n - 1]["role"] == "assistant":
                n -= 1
            if n < 2 or n >= len(chosen) or n >= len(rejected):
                continue
            rows.append(
                {
                    "prompt": chosen[:n],
                    "chosen": chosen[n:],
                    "rejected": rejected[n:],
                    **_row_meta(source, domain, task, [g["episode_id"], b["episode_id"]]),
                }
            )
    return _finish("dpo", task_set_id, rows, source, dataset_id)


def build_grpo(
    lake: Lake,
    domains: Mapping[str, Domain],
    task_set_id: str,
    *,
    split: str | None = "train",
    dataset_id: str | None = None,
) -> TrainingDataset:
    """One prompt per task: the system prompt and the user's opening."""
    source = _read_source(lake, domains, task_set_id, split)
    rows = [
        {
            "prompt": [
                message("system", system_prompt(domain)),
                message("user", task.user_scenario.instructions.reason_for_call),
            ],
            **_row_meta(source, domain, task, []),
        }
        for domain, task in source.tasks
    ]
    return _finish("grpo", task_set_id, rows, source, dataset_id)


def _finish(
    method: Method,
    task_set_id: str,
    rows: list[dict[str, Any]],
    source: _Source,
    dataset_id: str | None,
) -> TrainingDataset:
    if not rows:
        raise DatasetError(
            f"{method} dataset of task set {task_set_id!r}: no rows "
            f"({len(source.tasks)} task(s), {len(source.episodes)} scored episode(s))"
        )
    stamp = "-".join(str(v["version"]) for v in source.versions)
    return TrainingDataset(
        dataset_id=dataset_id or f"{method}/{task_set_id}/v{stamp}",
        method=method,
        task_set_id=task_set_id,
        rows=rows,
        built_from=source.versions,
    )


BUILDERS = {"sft": build_sft, "dpo": build_dpo, "grpo": build_grpo}
