"""What one task or record of a package may cost the host: sizes capped at load, each refusal
a located problem, never a traceback (issue 23)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from maestro.domains import inspect_package
from maestro.domains.errors import Problem
from maestro.domains.loader import load_db
from maestro.domains.models import MAX_TASK_ITEMS, MAX_TASK_PROSE, MAX_TASK_VALUE
from maestro.domains.sdk import Record
from maestro.domains.store import State, TableSpec


def _rewrite_task(path: Path, change: Any) -> None:
    lines = (path / "tasks.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    change(first)
    (path / "tasks.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")


def _messages(path: Path) -> list[str]:
    _, problems = inspect_package(path, trusted=True)
    return [str(p) for p in problems]


def test_a_forty_kilobyte_known_info_is_a_located_problem(toy_copy: Path) -> None:
    def change(task: dict[str, Any]) -> None:
        task["user_scenario"]["instructions"]["known_info"] = "Your id is C1. " * 2700

    _rewrite_task(toy_copy, change)
    assert _messages(toy_copy) == [
        "tasks.jsonl:line 1 (task toy_cancel): user_scenario.instructions.known_info is "
        f"40,500 characters; at most {MAX_TASK_PROSE:,}"
    ]


def test_long_lists_and_values_of_a_task_are_located_problems(toy_copy: Path) -> None:
    def change(task: dict[str, Any]) -> None:
        crit = task["evaluation_criteria"]
        one = crit["actions"][0]
        crit["actions"] = [dict(one, action_id=f"a{i}") for i in range(MAX_TASK_ITEMS + 1)]
        crit["actions"][0] = dict(one, arguments={"reason": "y" * (MAX_TASK_VALUE + 1)})
        crit["nl_assertions"] = ["x" * (MAX_TASK_PROSE + 1)]
        task["id"] = "t" * 100_000

    _rewrite_task(toy_copy, change)
    messages = _messages(toy_copy)
    assert messages == [
        f"tasks.jsonl:line 1: id is 100,000 characters; at most {MAX_TASK_PROSE:,}",
        f"tasks.jsonl:line 1: evaluation_criteria.actions holds {MAX_TASK_ITEMS + 1:,} items;"
        f" at most {MAX_TASK_ITEMS:,}",
        f"tasks.jsonl:line 1: evaluation_criteria.actions[0].arguments.reason is "
        f"{MAX_TASK_VALUE + 1:,} characters; at most {MAX_TASK_VALUE:,}",
        f"tasks.jsonl:line 1: evaluation_criteria.nl_assertions[0] is {MAX_TASK_PROSE + 1:,}"
        f" characters; at most {MAX_TASK_PROSE:,}",
    ]


def test_a_task_of_many_unknown_keys_is_one_problem(toy_copy: Path) -> None:
    _rewrite_task(toy_copy, lambda task: task.update({f"k{i}": i for i in range(50_000)}))
    assert _messages(toy_copy) == [
        f"tasks.jsonl:line 1 (task toy_cancel): the task holds 50,004 keys; at most"
        f" {MAX_TASK_ITEMS:,}"
    ]


class _Note(Record):
    key_field: ClassVar[str] = "id"
    id: str
    data: dict[str, Any] = Field(default_factory=dict)
    weight: Annotated[float, Field(min_length=1)] = 1.0


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_a_forged_normalized_database_is_a_located_problem() -> None:
    """The sandbox's child normalizes db.json; what it sends is as hostile as the package. A
    value nested past pydantic's serializer raised ValueError; a constraint that does not apply
    to its type (a float's min_length) raised TypeError."""
    tables = {"notes": TableSpec("notes", _Note, "id")}
    problems: list[Problem] = []
    raw = {
        "notes": {
            "N1": {"id": "N1", "data": _nested(400)},
            "N2": {"id": "N2", "weight": 2.0},
            "N3": {"id": "N3"},
        }
    }
    state = load_db(raw, tables, problems)
    assert isinstance(state, State) and list(state.keys("notes")) == ["N3"]
    assert [(p.file, p.location) for p in problems] == [
        ("db.json", "notes/N1"),
        ("db.json", "notes/N2"),
    ]
    assert "nested deeper than" in problems[0].message
    assert "min_length" in problems[1].message


def test_a_forged_write_is_a_store_error() -> None:
    from maestro.domains.errors import StoreError

    tables = {"notes": TableSpec("notes", _Note, "id")}
    session = State({"notes": {}}, tables).session()
    for record in ({"id": "N1", "data": _nested(400)}, {"id": "N2", "weight": 2.0}):
        try:
            session.put("notes", record)
        except StoreError as exc:
            assert "invalid notes record" in str(exc)
        else:
            raise AssertionError("the write was stored")
