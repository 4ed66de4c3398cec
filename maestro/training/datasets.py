"""SFT, DPO and GRPO datasets built from the lake, in TRL's conversational format.

Every row names the episodes it came from and the table versions it was read at; a dataset is
registered in the ``datasets`` table and exported as parquet (loadable with ``datasets``).

- SFT: the successful episodes of the task set's tasks, plus a gold-path conversation per
  task (the opening, the gold calls with their replayed results, the facts to communicate;
  for a task with scripted user turns, such as an imported BFCL entry, each turn's message,
  then the ground-truth calls placed in that turn with their results, then a short answer).
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

from maestro.agents.roles import assistant_system_prompt
from maestro.conversation import Message, ToolCall, to_openai
from maestro.domains import Domain
from maestro.domains.models import Action, Task
from maestro.domains.package import replay_gold
from maestro.storage import Lake, OneOf
from maestro.storage.records import message_from_row, task_refs
from maestro.storage.rows import DatasetRow, EpisodeRow, ScoreRow, TableVersion, TaskSetRow

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
        row = DatasetRow(
            dataset_id=self.dataset_id,
            method=self.method,
            task_set_id=self.task_set_id,
            n_rows=len(self.rows),
            uri=uri,
            built_from=[TableVersion.model_validate(v) for v in self.built_from],
        )
        lake.write(row.TABLE, [row], run_id)


# ----- conversation pieces ---------------------------------------------------------------------


def tools_json(domain: Domain) -> str:
    return json.dumps(domain.toolkit.schemas())


def trl_message(m: Message) -> dict[str, Any]:
    """A message in TRL's conversational format: the chat wire format with the same keys
    whatever the role (Arrow wants one struct type); tool-call arguments stay JSON text."""
    wire = to_openai(m)
    return {
        "role": m.role,
        "content": m.content or "",
        "tool_calls": [
            {"type": c["type"], "function": c["function"]} for c in wire.get("tool_calls", [])
        ],
        "name": m.name or "",
    }


def conversation(domain: Domain, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """A conversation in TRL's format after the assistant's system prompt, the one it is
    served with."""
    system = Message(role="system", content=assistant_system_prompt(domain))
    return [trl_message(m) for m in (system, *messages)]


def opening(task: Task) -> Message:
    """The user's first message in a task: the reason for calling."""
    return Message(role="user", content=task.user_scenario.instructions.reason_for_call)


def gold_conversation(domain: Domain, task: Task) -> list[dict[str, Any]]:
    """The gold path as a conversation: opening, gold calls with replayed results, the facts
    the task wants communicated."""
    replay = replay_gold(domain, task)
    if not replay.ok:
        raise DatasetError(f"{domain.id}/{task.id}: the gold path does not replay cleanly")
    info = task.evaluation_criteria.communicate_info
    closing = ("To confirm: " + "; ".join(info) + ".") if info else "Done."
    results = {a.action_id: o for a, o in zip(task.gold_actions, replay.outcomes, strict=True)}
    index = {a.action_id: i for i, a in enumerate(task.gold_actions)}
    messages = []
    for said, actions in gold_turns(task):
        messages.append(Message(role="user", content=said))
        for action in actions:
            call = ToolCall(
                id=f"gold_{index[action.action_id]}", name=action.name, arguments=action.arguments
            )
            messages.append(Message(role="assistant", tool_calls=[call]))
            content = results[action.action_id].content
            messages.append(
                Message(role="tool", content=content, name=action.name, tool_call_id=call.id)
            )
        messages.append(Message(role="assistant", content=closing))
    return conversation(domain, messages)


def gold_turns(task: Task) -> list[tuple[str, list[Action]]]:
    """The user's messages, each with the gold actions that answer it (gold replay order)."""
    gold = task.gold_actions
    if not task.user_turns:
        return [(task.user_scenario.instructions.reason_for_call, gold)]
    turn_of = {a: i for i, t in enumerate(task.user_turns) for a in t.action_ids}
    last = len(task.user_turns) - 1
    return [
        (t.content, [a for a in gold if turn_of.get(a.action_id, last) == i])
        for i, t in enumerate(task.user_turns)
    ]


# ----- reading the lake ------------------------------------------------------------------------


@dataclass
class _Episode:
    """A stored episode of the task set's tasks, and whether it succeeded."""

    row: EpisodeRow
    passed: bool

    @property
    def key(self) -> tuple[str, str]:
        return (str(self.row.domain_id), str(self.row.task_id))

    def conversation(self, domain: Domain) -> list[dict[str, Any]]:
        return conversation(domain, [message_from_row(m) for m in self.row.messages or []])


@dataclass
class _Source:
    versions: list[dict[str, Any]]
    tasks: list[tuple[Domain, Task]]
    episodes: list[_Episode]


def _read_source(
    lake: Lake, domains: Mapping[str, Domain], task_set_id: str, split: str | None
) -> _Source:
    versions = lake.versions(SOURCE_TABLES)
    at = {v["table"]: v["version"] for v in versions}
    if at["task_sets"] is None:
        raise DatasetError("the lake has no task_sets table yet: curate a task set first")
    sets = lake.rows(TaskSetRow, at=at["task_sets"], task_set_id=task_set_id)
    if not sets:
        raise DatasetError(f"task set {task_set_id!r} is not in the task_sets table")
    refs = task_refs(sets[0])
    missing = sorted({d for d, _ in refs if d not in domains})
    if missing:
        raise DatasetError(f"task set {task_set_id!r} names domain(s) not loaded: {missing}")
    tasks = [(domains[d], domains[d].task(t)) for d, t in refs]
    if split is not None:
        tasks = [(d, t) for d, t in tasks if t.split == split]
    episodes: list[_Episode] = []
    if at["episodes"] is not None and at["scores"] is not None and tasks:
        episodes = _scored_episodes(lake, at["episodes"], at["scores"], tasks)
    return _Source(versions, tasks, episodes)


def _scored_episodes(
    lake: Lake, episodes_at: int, scores_at: int, tasks: Sequence[tuple[Domain, Task]]
) -> list[_Episode]:
    """The scored episodes of the tasks, at the table versions given, by episode id."""
    wanted = {(d.id, t.id) for d, t in tasks}
    rows = lake.rows(
        EpisodeRow,
        at=episodes_at,
        domain_id=OneOf(sorted({d for d, _ in wanted})),
        task_id=OneOf(sorted({t for _, t in wanted})),
    )
    rows = [r for r in rows if (r.domain_id, r.task_id) in wanted]
    passed = {
        s.episode_id: bool(s.passed)
        for s in lake.rows(
            ScoreRow,
            at=scores_at,
            episode_id=OneOf([r.episode_id for r in rows]),
            fields=["passed"],
        )
    }
    scored = [_Episode(r, passed[r.episode_id]) for r in rows if r.episode_id in passed]
    return sorted(scored, key=lambda e: e.row.episode_id)


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
        if not e.passed:
            continue
        domain, task = by_key[e.key]
        rows.append(
            {
                "messages": e.conversation(domain),
                "source": "episode",
                **_row_meta(source, domain, task, [e.row.episode_id]),
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
        mine = [e for e in source.episodes if e.key == (domain.id, task.id)]
        good = [e for e in mine if e.passed]
        bad = [e for e in mine if not e.passed]
        for g, b in list(zip(good, bad, strict=False))[:pairs_per_task]:
            chosen = g.conversation(domain)
            rejected = b.conversation(domain)
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
                    **_row_meta(source, domain, task, [g.row.episode_id, b.row.episode_id]),
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
            "prompt": conversation(domain, [opening(task)]),
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
