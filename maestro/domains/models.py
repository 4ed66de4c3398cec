"""Pydantic models of a domain package: the manifest and the task (tau2-bench field names).

Where tau2-bench has a name we use it (``user_scenario``, ``evaluation_criteria``, ``actions``,
``compare_args``, ``communicate_info``, ``nl_assertions``, ``reward_basis``); ``split``,
``provenance``, ``difficulty`` and ``category`` are maestro's additions.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: The most characters of one piece of a task's own text (its scenario, descriptions, assertions,
#: facts, turns, ids): what the lints and prompts read (the library's longest is 297; a 40 KB
#: ``known_info`` held the scenario lint 22 s before it was linear).
MAX_TASK_PROSE = 8_000
#: The most characters of one value the task hands a tool or the database (an action's argument,
#: a record of ``initialization_data``; BFCL's long-context files reach 6,690).
MAX_TASK_VALUE = 100_000
#: The most items of one list or object of the task's own structure (actions, turns, assertions,
#: a part's keys; BFCL's longest task has 35 actions).
MAX_TASK_ITEMS = 1_000
#: The most characters of one key anywhere in a task.
MAX_TASK_KEY = 1_000
#: Keys under which a task holds data rather than its own structure.
_DATA_KEYS = frozenset({"arguments", "initialization_data"})
_MAX_SIZE_PROBLEMS = 20
#: Lists with a tighter cap of their own, checked after validation (``facts.MAX_FACTS``).
_COUNTED_ELSEWHERE = frozenset({"evaluation_criteria.communicate_info"})


def task_size_problems(raw: Any) -> list[str]:
    """Why a task as read from ``tasks.jsonl`` (parsed, not validated) is too large to check,
    one line per oversized part (``user_scenario.instructions.known_info is 40,500 characters;
    at most 8,000``): one pass over the value, before validation."""
    out: list[str] = []
    stack: list[tuple[Any, str, bool]] = [(raw, "", False)]  # (value, path, under a data key)
    while stack and len(out) < _MAX_SIZE_PROBLEMS:
        value, path, data = stack.pop()
        name = path or "the task"
        if isinstance(value, str):
            limit = MAX_TASK_VALUE if data else MAX_TASK_PROSE
            if len(value) > limit:
                out.append(f"{name} is {len(value):,} characters; at most {limit:,}")
            continue
        if not isinstance(value, dict | list):
            continue
        if not data and len(value) > MAX_TASK_ITEMS and path not in _COUNTED_ELSEWHERE:
            noun = "keys" if isinstance(value, dict) else "items"
            out.append(f"{name} holds {len(value):,} {noun}; at most {MAX_TASK_ITEMS:,}")
        # Data is bounded by the file's size alone; the task's own parts by the cap as well.
        shown = len(value) if data or path in _COUNTED_ELSEWHERE else MAX_TASK_ITEMS
        children: list[tuple[Any, str, bool]] = []
        if isinstance(value, list):
            children = [(v, f"{path}[{i}]", data) for i, v in enumerate(value[:shown])]
        else:
            for key, v in itertools.islice(value.items(), shown):
                if len(key) > MAX_TASK_KEY:
                    out.append(
                        f"{name} has a key of {len(key):,} characters; at most {MAX_TASK_KEY:,}"
                    )
                    continue
                children.append((v, f"{path}.{key}" if path else key, data or key in _DATA_KEYS))
        stack.extend(reversed(children))
    return out


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ImportOrigin(_Strict):
    """The outside benchmark an imported domain or task comes from, at which version."""

    #: The benchmark's short name ("bfcl"); importers are keyed by it.
    benchmark: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    #: The distribution it was read from and its version ("bfcl-eval", "2026.3.23").
    package: str
    version: str
    #: The benchmark's own category and item id, for a task ("multi_turn_base", "multi_turn_base_0").
    category: str | None = None
    item_id: str | None = None


class Provenance(_Strict):
    """Where an artifact came from."""

    source: Literal["hand-built", "synthesized", "imported"] = "hand-built"
    authors: list[str] = Field(default_factory=list)
    created: str | None = None
    run_id: str | None = None
    notes: str | None = None
    #: For ``source="imported"``: the benchmark, version and item it was imported from.
    imported_from: ImportOrigin | None = None


class DomainManifest(_Strict):
    """``domain.json``."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]{1,39}$")
    name: str = Field(min_length=1)
    #: ASCII digits only: the pattern engine's ``\d`` also takes "١.٠.٠" and fullwidth digits.
    version: str = Field(pattern=r"^[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}$")
    description: str = Field(min_length=1)
    industry: str | None = None
    #: The fixed "now" of the domain's world, so that episodes replay identically.
    clock: datetime | None = None
    provenance: Provenance = Field(default_factory=Provenance)
    #: The assistant's system prompt: maestro's customer-service preamble around the policy, or
    #: the policy alone (an imported benchmark brings its own instructions, and the preamble's
    #: "confirm before any change" would contradict a user whose turns are scripted).
    system_prompt: Literal["customer_service", "policy"] = "customer_service"


class RewardType(StrEnum):
    """Criteria a task's reward is the product of (tau2-bench's names)."""

    DB = "DB"
    ACTION = "ACTION"
    COMMUNICATE = "COMMUNICATE"
    NL_ASSERTION = "NL_ASSERTION"


class Action(_Strict):
    """A tool call a correct conversation makes (gold) or must not make (forbidden)."""

    action_id: str
    requestor: Literal["assistant", "user"] = "assistant"
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    info: str | None = None
    #: Arguments compared when matching a call to this action; None compares all of them.
    compare_args: list[str] | None = None

    @model_validator(mode="after")
    def _compare_args_known(self) -> Action:
        if self.compare_args is not None:
            unknown = [a for a in self.compare_args if a not in self.arguments]
            if unknown:
                raise ValueError(f"compare_args names argument(s) not in arguments: {unknown}")
        return self

    def compared(self) -> dict[str, Any]:
        """The arguments a matching call must have equal values for."""
        names = self.arguments if self.compare_args is None else self.compare_args
        return {n: self.arguments[n] for n in names}


class UserInstructions(_Strict):
    """What the simulated user knows and wants (tau2's StructuredUserInstructions)."""

    domain: str
    reason_for_call: str = Field(min_length=1)
    known_info: str | None = None
    unknown_info: str | None = None
    task_instructions: str = Field(min_length=1)


class UserScenario(_Strict):
    persona: str | None = None
    instructions: UserInstructions


class TaskDescription(_Strict):
    purpose: str | None = None
    relevant_policies: str | None = None
    notes: str | None = None


class InitialState(_Strict):
    """How a task's starting state differs from the domain's database.

    ``initialization_data`` patches records (``{table: {key: record or null}}``; null deletes);
    ``initialization_actions`` are tool calls applied after the patch.
    """

    initialization_data: dict[str, dict[str, dict[str, Any] | None]] = Field(default_factory=dict)
    initialization_actions: list[Action] = Field(default_factory=list)


class EvaluationCriteria(_Strict):
    actions: list[Action] = Field(default_factory=list)
    communicate_info: list[str] = Field(default_factory=list)
    nl_assertions: list[str] = Field(default_factory=list)
    reward_basis: list[RewardType] = Field(
        default_factory=lambda: [RewardType.DB, RewardType.ACTION, RewardType.NL_ASSERTION]
    )
    #: When true, gold actions must be matched in order; by default order does not matter.
    ordered_actions: bool = False
    #: Writes the policy forbids in this task (refusals); used to build the perturbed check.
    forbidden_actions: list[Action] = Field(default_factory=list)

    @field_validator("reward_basis")
    @classmethod
    def _basis_not_empty(cls, v: list[RewardType]) -> list[RewardType]:
        if not v:
            raise ValueError("reward_basis must name at least one criterion")
        if len(set(v)) != len(v):
            raise ValueError("reward_basis names a criterion twice")
        return v

    def empty_criteria(self) -> list[RewardType]:
        """Criteria named in reward_basis that have nothing to check: a validation error."""
        has = {
            RewardType.DB: True,  # the expected state always exists, even if unchanged
            RewardType.ACTION: bool(self.actions),
            RewardType.COMMUNICATE: bool(self.communicate_info),
            RewardType.NL_ASSERTION: bool(self.nl_assertions),
        }
        return [c for c in self.reward_basis if not has[c]]


TaskCategory = Literal["read", "single_write", "multi_write", "refusal", "ask_info"]


class UserTurn(_Strict):
    """One scripted user message (a task whose user is not simulated, as in BFCL).

    ``add_tools`` become visible to the assistant from this turn on (they must be among the
    task's ``hidden_tools``); ``action_ids`` name the gold actions that answer this turn, in
    order, so that the gold path can be written as a conversation.
    """

    content: str = Field(min_length=1)
    add_tools: list[str] = Field(default_factory=list)
    action_ids: list[str] = Field(default_factory=list)


class Task(_Strict):
    """One task: a user scenario and what a correct conversation must achieve."""

    id: str = Field(min_length=1)
    description: TaskDescription | None = None
    user_scenario: UserScenario
    initial_state: InitialState | None = None
    evaluation_criteria: EvaluationCriteria
    category: TaskCategory | None = None
    split: Literal["train", "dev", "test"] = "test"
    difficulty: Literal["easy", "medium", "hard"] | None = None
    provenance: Provenance = Field(default_factory=Provenance)
    #: Scripted user turns: when given, the episode's user messages are these, in order, and
    #: the user simulator is not called; the episode ends (``user_stop``) after the last one.
    user_turns: list[UserTurn] = Field(default_factory=list)
    #: Tools of the domain the assistant is not shown at the start (a turn may add them back).
    #: Hiding changes what the assistant is told, not the environment: a call still runs.
    hidden_tools: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _turns_consistent(self) -> Task:
        hidden = set(self.hidden_tools)
        ids = {a.action_id for a in self.evaluation_criteria.actions}
        placed: list[str] = []
        for i, turn in enumerate(self.user_turns):
            stray = [t for t in turn.add_tools if t not in hidden]
            if stray:
                raise ValueError(
                    f"user_turns[{i}].add_tools names tools not in hidden_tools: {stray}"
                )
            unknown = [a for a in turn.action_ids if a not in ids]
            if unknown:
                raise ValueError(f"user_turns[{i}].action_ids names unknown actions: {unknown}")
            placed += turn.action_ids
        if len(set(placed)) != len(placed):
            raise ValueError("user_turns place a gold action in more than one turn")
        return self

    @property
    def gold_actions(self) -> list[Action]:
        return [a for a in self.evaluation_criteria.actions if a.requestor == "assistant"]

    def visible_tools(self, tools: list[str], turns_heard: int) -> list[str] | None:
        """The tools the assistant is shown after ``turns_heard`` scripted user turns, in the
        domain's order; None when the task hides nothing (every tool is shown)."""
        if not self.hidden_tools:
            return None
        hidden = set(self.hidden_tools)
        for turn in self.user_turns[:turns_heard]:
            hidden -= set(turn.add_tools)
        return [t for t in tools if t not in hidden]
