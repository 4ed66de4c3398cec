"""What a hostile package may make the host hold while it is validated: a failure's text, the
failures of a run, a database once its records' defaults are filled in (issue 23, third red
team's rows 02 and 23).

Before: a gold action failing with a 16 MB error (an emoji makes CPython hold its text at 4
bytes a character), 12 tasks x 3, made ``domains validate`` peak at 1,997 MB, every failure's
text kept whole for the run and copied into each summary; 32-byte records whose record type
fills 7 empty-container defaults made a 13.6 MB db.json peak at 1,061 MB, db.json's caps
counting what the file holds, not what the defaults fill in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import Field

from maestro.domains import inspect_package
from maestro.domains.errors import Problem
from maestro.domains.loader import MAX_DATABASE_HELD_BYTES, load_db
from maestro.domains.package import MAX_FAILURE_CHARS, MAX_FAILURES_NAMED
from maestro.domains.sdk import Record
from maestro.domains.store import State, TableSpec, held_bytes

MANIFEST = {
    "id": "hm",
    "name": "Host memory",
    "version": "1.0.0",
    "description": "A hostile domain.",
    "industry": "retail",
    "clock": "2026-01-01T10:00:00",
    "provenance": {"source": "hand-built", "authors": ["maestro tests"]},
}

ITEM_MODELS = """
from typing import ClassVar
from maestro.domains.sdk import Record

class Item(Record):
    key_field: ClassVar[str] = "item_id"
    item_id: str
    qty: int = 0

TABLES = {"items": Item}
"""

# Seven empty-container defaults: a record of 32 bytes in db.json holds nine values once built.
DEFAULTS_MODELS = """
from typing import ClassVar
from pydantic import Field
from maestro.domains.sdk import Record

class Item(Record):
    key_field: ClassVar[str] = "item_id"
    item_id: str
    a: list[str] = Field(default_factory=list)
    b: dict[str, str] = Field(default_factory=dict)
    c: list[int] = Field(default_factory=list)
    d: dict[str, int] = Field(default_factory=dict)
    e: list[str] = Field(default_factory=list)
    f: dict[str, str] = Field(default_factory=dict)
    g: list[str] = Field(default_factory=list)

TABLES = {"items": Item}
"""


def _failing_tools(chars: int) -> str:
    """A write tool whose every call fails with ``chars`` characters, one an emoji."""
    return textwrap.dedent(
        f'''
        from maestro.domains.sdk import Database, ToolError, tool

        @tool("write")
        def set_qty(db: Database, item_id: str, qty: int) -> dict:
            """Set an item's quantity.

            Args:
                item_id: The item's id.
                qty: The new quantity.
            """
            raise ToolError("\\U0001f600" + "x" * {chars - 1})

        @tool("read")
        def get_item(db: Database, item_id: str) -> dict:
            """Look up an item.

            Args:
                item_id: The item's id.
            """
            return db.require("items", item_id)
        '''
    )


def _action(i: int, name: str = "set_qty") -> dict[str, Any]:
    args: dict[str, Any] = {"item_id": "I1", "qty": i} if name == "set_qty" else {"item_id": "I1"}
    return {"action_id": f"a{i}", "name": name, "arguments": args, "compare_args": ["item_id"]}


def _task(tid: str, actions: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": tid,
        "category": "single_write",
        "user_scenario": {
            "persona": "A shopper.",
            "instructions": {
                "domain": "hm",
                "reason_for_call": "You want item I1 set to 5.",
                "known_info": "Your item is I1.",
                "unknown_info": None,
                "task_instructions": "Ask to set item I1 to 5.",
            },
        },
        "evaluation_criteria": {
            "actions": actions,
            "nl_assertions": ["The assistant sets it."],
            "reward_basis": ["DB", "ACTION"],
        },
        **extra,
    }


def _package(root: Path, *, models: str, tools: str, db: Any, tasks: list[dict[str, Any]]) -> Path:
    root.mkdir()
    (root / "domain.json").write_text(json.dumps(MANIFEST))
    (root / "models.py").write_text(models)
    (root / "tools.py").write_text(tools)
    (root / "db.json").write_text(json.dumps(db, separators=(",", ":")))
    (root / "policy.md").write_text("# Policy\n\n1. Set quantities when asked.\n")
    (root / "tasks.jsonl").write_text("\n".join(json.dumps(t) for t in tasks) + "\n")
    return root


def _failing_package(root: Path, *, chars: int, tasks: int, actions: int) -> Path:
    gold = [_action(i) for i in range(actions)]
    return _package(
        root,
        models=ITEM_MODELS,
        tools=_failing_tools(chars),
        db={"items": {"I1": {"item_id": "I1", "qty": 1}}},
        tasks=[_task(f"t{i:03d}", gold) for i in range(tasks)],
    )


def _defaults_package(root: Path, records: int) -> Path:
    rows = {f"I{i:07d}": {"item_id": f"I{i:07d}"} for i in range(records)}
    gold = [_action(1, "get_item") | {"arguments": {"item_id": "I0000000"}}]
    return _package(
        root,
        models=DEFAULTS_MODELS,
        tools=_failing_tools(10),
        db={"items": rows},
        tasks=[_task("t000", gold)],
    )


# ----- a failure's text, and how many failures a report keeps ---------------------------------


def test_a_gold_failure_keeps_a_bounded_part_of_its_text(tmp_path: Path) -> None:
    """Through the sandbox, as ``domains validate`` loads every package outside the library."""
    chars = 1_000_000  # 4 MB held: under the per-call cap
    root = _failing_package(tmp_path / "hm", chars=chars, tasks=2, actions=3)
    domain, problems = inspect_package(root)
    if domain is not None:
        domain.close()
    failures = [p for p in problems if "failed:" in p.message]
    assert len(failures) == 6, [str(p)[:200] for p in problems]
    total = len("Error: ") + chars
    for p in failures:
        assert p.message.startswith("gold action a")
        assert "failed: Error: \U0001f600xxx" in p.message
        assert len(p.message) < MAX_FAILURE_CHARS + 200
        assert p.message.endswith(f"(cut; {total:,} characters in all)")
    assert sum(held_bytes(str(p)) for p in problems) < 6 * 4 * (MAX_FAILURE_CHARS + 200)


def test_a_replay_names_its_first_failures_and_counts_the_rest(tmp_path: Path) -> None:
    root = _failing_package(tmp_path / "hm", chars=50, tasks=1, actions=MAX_FAILURES_NAMED + 3)
    _, problems = inspect_package(root, trusted=True)
    messages = [p.message for p in problems]
    assert len(messages) == MAX_FAILURES_NAMED + 1
    assert all(m.startswith("gold action a") for m in messages[:-1])
    assert messages[-1] == "and 3 more gold action(s) failed"


def test_a_short_failure_is_reported_whole(tmp_path: Path) -> None:
    root = _failing_package(tmp_path / "hm", chars=50, tasks=1, actions=1)
    _, problems = inspect_package(root, trusted=True)
    assert [p.message for p in problems] == [
        "gold action a0 (set_qty) failed: Error: \U0001f600" + "x" * 49
    ]


def test_a_failing_initialization_action_keeps_a_bounded_part_of_its_text(
    tmp_path: Path,
) -> None:
    chars = 300_000
    root = _failing_package(tmp_path / "hm", chars=chars, tasks=0, actions=0)
    init = {"initialization_actions": [_action(0)]}
    task = _task("t_init", [_action(1, "get_item")], initial_state=init)
    (root / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    _, problems = inspect_package(root, trusted=True)
    (problem,) = problems
    assert "initialization action a0 (set_qty): Error: \U0001f600" in problem.message
    assert len(problem.message) < MAX_FAILURE_CHARS + 200
    assert problem.message.endswith(f"(cut; {len('Error: ') + chars:,} characters in all)")


# ----- a database, its defaults filled in -----------------------------------------------------


class _Filled(Record):
    key_field: ClassVar[str] = "item_id"
    item_id: str
    a: list[str] = Field(default_factory=list)
    b: dict[str, str] = Field(default_factory=dict)
    c: list[int] = Field(default_factory=list)
    d: dict[str, int] = Field(default_factory=dict)
    e: list[str] = Field(default_factory=list)
    f: dict[str, str] = Field(default_factory=dict)
    g: list[str] = Field(default_factory=list)


_TABLES = {"items": TableSpec("items", _Filled, "item_id")}


def _raw(records: int) -> dict[str, Any]:
    return {"items": {f"I{i:07d}": {"item_id": f"I{i:07d}"} for i in range(records)}}


def test_defaults_cannot_grow_a_database_past_the_hosts_budget() -> None:
    """The budget counts the records as built (defaults filled in, as Python holds them), and
    the load stops at the record that crosses it: the rest is never built."""
    one = held_bytes("I0000000") + held_bytes(_Filled(item_id="I0000000").model_dump(mode="json"))
    problems: list[Problem] = []
    raw = _raw(1000)
    state = load_db(raw, _TABLES, problems, max_held_bytes=100 * one)
    assert state is None
    (problem,) = problems
    assert (problem.file, problem.location) == ("db.json", "items/I0000100")
    assert problem.message.startswith("101 records hold ")
    assert problem.message.endswith(
        f"bytes in the host once their defaults are filled in; a database may hold at most "
        f"{100 * one:,}"
    )
    assert len(raw["items"]) == 899  # never built


def test_a_database_under_the_budget_loads_whole() -> None:
    problems: list[Problem] = []
    state = load_db(_raw(1000), _TABLES, problems)
    assert problems == [] and isinstance(state, State) and state.count("items") == 1000
    assert list(state.keys("items"))[:2] == ["I0000000", "I0000001"]  # db.json's order kept
    assert state.raw("items", "I0000999") == _Filled(item_id="I0000999").model_dump()
    assert MAX_DATABASE_HELD_BYTES == 256 * 1024 * 1024


def test_loading_a_database_holds_one_copy_of_it_at_a_time() -> None:
    """db.json as parsed (or the child's normalized copy) is freed record by record as the
    host's records are built: both were held whole together."""
    raw = _raw(20_000)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        state = load_db(raw, _TABLES, [])
        built, peak = (m - start for m in tracemalloc.get_traced_memory())
    finally:
        tracemalloc.stop()
    assert isinstance(state, State) and state.count() == 20_000
    assert raw == {"items": {}}
    # The records built are larger than those read (defaults): the peak is theirs, plus little.
    assert peak < 1.25 * built, (peak, built)


# ----- domains validate, end to end, measured ---------------------------------------------------

_PEAK = """
import resource, sys
from maestro.cli.app import main
sys.argv = ["maestro", "domains", "validate", sys.argv[1]]
try:
    main()
finally:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"host peak MB {peak}", file=sys.stderr)
"""


def _validate_peak(root: Path) -> tuple[int, str, int]:
    """``maestro domains validate`` on ``root`` in a fresh process: its exit status, output
    and the host's own peak RSS in MB (the sandbox child's is its own)."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    peak = int(done.stderr.rsplit("host peak MB ", 1)[1])
    return done.returncode, done.stdout + done.stderr, peak


def _growth(root: Path, baseline: Path) -> tuple[int, str, int]:
    """As :func:`_validate_peak` for ``root``, with the peak less that of ``baseline`` (a small
    package of the same shape, validated the same way: the CLI's own imports and the machine
    count for both)."""
    rc, out, peak = _validate_peak(root)
    return rc, out, peak - _validate_peak(baseline)[2]


@pytest.mark.slow
def test_validate_holds_a_bounded_report_of_huge_failures(tmp_path: Path) -> None:
    """Six 16 MB failures (the per-call cap's worth each) grew the host by 320 MB; now by what
    one call holds while it is answered."""
    root = _failing_package(tmp_path / "hm", chars=4_190_000, tasks=2, actions=3)
    small = _failing_package(tmp_path / "small", chars=50, tasks=2, actions=3)
    rc, out, growth = _growth(root, small)
    assert rc == 1, out[-2000:]
    assert out.count("characters in all)") == 6, out[-2000:]
    assert len(out) < 100_000
    assert "Traceback" not in out
    assert growth < 100, growth


@pytest.mark.slow
def test_validate_refuses_a_database_its_defaults_grow_past_the_budget(tmp_path: Path) -> None:
    """The red team's case: 430k records of 32 bytes, 7 empty defaults each, grew the host by
    880 MB (1,128 MB peak). The load now stops at the budget and ``json_nodes`` counts without
    a copy: 192 MB of growth, 424 MB peak, measured."""
    root = _defaults_package(tmp_path / "hm", 430_000)
    rc, out, growth = _growth(root, _defaults_package(tmp_path / "small", 1_000))
    assert rc == 1, out[-2000:]
    assert "once their defaults are filled in; a database may hold at most" in out, out[-2000:]
    assert "db.json:items/I" in out
    assert "Traceback" not in out
    assert growth < 350, growth
