"""The tau2-bench export: layout, field names, data round trip, and the generated toolkit.

tau2 is not installed here. The generated code is checked three ways: it parses; its imports of
tau2 are only the names tau2's toolkit module defines; and it runs, against a minimal stand-in
of those names (``STUB`` below, which copies tau2's decorator and base-class contract), where
replaying every task's gold actions must leave exactly the database maestro's replay leaves.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from maestro.domains import Domain, library_path, load_domain, replay_gold
from maestro.domains.models import InitialState
from maestro.domains.tau2_export import (
    Tau2ExportError,
    export_tau2,
    maestro_task,
    read_tau2_export,
    tau2_task,
)

# Field names of tau2-bench's Task model (src/tau2/data_model/tasks.py).
TAU2_TASK_FIELDS = {
    "id",
    "description",
    "user_scenario",
    "ticket",
    "initial_state",
    "evaluation_criteria",
    "issues",
    "required_documents",
    "user_tools",
}
TAU2_CRITERIA_FIELDS = {
    "actions",
    "env_assertions",
    "communicate_info",
    "nl_assertions",
    "reward_basis",
}
TAU2_ACTION_FIELDS = {"action_id", "requestor", "name", "arguments", "info", "compare_args"}


@pytest.fixture(scope="module")
def hotel() -> Domain:
    return load_domain(library_path("hotel"), check_gold=False)


@pytest.fixture(scope="module")
def exported(hotel: Domain, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tau2")
    export_tau2(hotel, out)
    return out


def test_layout_is_tau2s(exported: Path) -> None:
    data = exported / "data/tau2/domains/hotel"
    src = exported / "src/tau2/domains/hotel"
    assert {p.name for p in data.iterdir()} == {
        "db.json",
        "policy.md",
        "tasks.json",
        "split_tasks.json",
        "maestro_extras.json",
    }
    assert {"tools.py", "data_model.py", "environment.py", "utils.py"} <= {
        p.name for p in src.iterdir()
    }
    splits = json.loads((data / "split_tasks.json").read_text())
    assert set(splits) == {"train", "dev", "test", "base"}
    assert len(splits["base"]) == 30


def test_tasks_use_only_tau2_field_names(exported: Path) -> None:
    tasks = json.loads((exported / "data/tau2/domains/hotel/tasks.json").read_text())
    for t in tasks:
        assert set(t) <= TAU2_TASK_FIELDS, set(t) - TAU2_TASK_FIELDS
        assert set(t["evaluation_criteria"]) <= TAU2_CRITERIA_FIELDS
        for a in t["evaluation_criteria"]["actions"]:
            assert set(a) <= TAU2_ACTION_FIELDS


def test_data_files_round_trip(hotel: Domain, exported: Path) -> None:
    db, tasks, policy = read_tau2_export(exported, "hotel")
    assert db == hotel.initial.to_dict()
    assert tasks == hotel.tasks
    assert policy == hotel.policy


def test_initial_state_maps_to_tau2_and_back(hotel: Domain) -> None:
    state = InitialState.model_validate(
        {
            "initialization_data": {"guests": {"G1014": {"phone": "+1 555 0100"}, "G1001": None}},
            "initialization_actions": [
                {"action_id": "i1", "name": "get_guest_profile", "arguments": {"guest_id": "G1"}}
            ],
        }
    )
    task = hotel.tasks[0].model_copy(update={"initial_state": state})
    data, extras = tau2_task(task, hotel)
    init = data["initial_state"]
    assert init["initialization_data"]["agent_data"] == {
        "guests": {"G1014": {"phone": "+1 555 0100"}}
    }
    assert init["initialization_actions"] == [
        {"env_type": "assistant", "func_name": "get_guest_profile", "arguments": {"guest_id": "G1"}}
    ]
    assert maestro_task(data, extras) == task


def test_generated_modules_parse_and_import_only_tau2s_names(exported: Path) -> None:
    src = exported / "src/tau2/domains/hotel"
    for path in src.glob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "tau2.environment.toolkit":
                assert {a.name for a in node.names} <= {"ToolKitBase", "ToolType", "is_tool"}
            if isinstance(node, ast.ImportFrom | ast.Import):
                mods = (
                    [node.module]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                )
                assert not any((m or "").startswith("maestro") for m in mods), path.name
    tools = ast.parse((src / "tools.py").read_text())
    cls = next(n for n in tools.body if isinstance(n, ast.ClassDef))
    assert cls.name == "HotelTools" and ast.unparse(cls.bases[0]) == "ToolKitBase"
    decorated = {
        f.name: ast.unparse(f.decorator_list[0])
        for f in cls.body
        if isinstance(f, ast.FunctionDef) and f.decorator_list
    }
    hotel = load_domain(library_path("hotel"), check_gold=False)
    assert decorated == {
        n: f"is_tool(ToolType.{hotel.toolkit.kind(n).upper()})"  # type: ignore[union-attr]
        for n in hotel.toolkit.names
    }


STUB = {
    "__init__.py": "",
    "domains/__init__.py": "",
    "environment/__init__.py": "",
    "environment/db.py": (
        "import json\nfrom pydantic import BaseModel\n\n"
        "class DB(BaseModel):\n"
        "    @classmethod\n"
        "    def load(cls, path):\n"
        "        with open(path) as f:\n"
        "            return cls.model_validate(json.load(f))\n"
    ),
    "environment/toolkit.py": (
        "from enum import Enum\n\n"
        "class ToolType(str, Enum):\n"
        "    READ = 'read'\n    WRITE = 'write'\n\n"
        "def is_tool(tool_type=ToolType.READ):\n"
        "    def decorator(func):\n"
        "        func.__tool__ = True\n        func.__tool_type__ = tool_type\n"
        "        return func\n"
        "    return decorator\n\n"
        "class ToolKitBase:\n"
        "    def __init__(self, db=None):\n        self.db = db\n\n"
        "    def use_tool(self, tool_name, **kwargs):\n"
        "        return getattr(self, tool_name)(**kwargs)\n"
    ),
}

REPLAY = """
import json, sys
from tau2.domains.hotel.data_model import HotelDB
from tau2.domains.hotel.tools import HotelTools
calls, db_path = json.loads(sys.argv[1]), sys.argv[2]
finals, errors = [], []
for task_calls in calls:
    tools = HotelTools(HotelDB.load(db_path))
    for name, args in task_calls:
        tools.use_tool(name, **args)
    finals.append(tools.db.model_dump(mode="json"))
tools = HotelTools(HotelDB.load(db_path))
before = tools.db.model_dump(mode="json")
try:
    tools.use_tool("cancel_reservation", reservation_id="R-nope", reason="x")
except ValueError as exc:
    errors.append(str(exc))
errors.append(tools.db.model_dump(mode="json") == before)
print(json.dumps({"finals": finals, "errors": errors}))
"""


def run_exported(
    exported: Path, script: str, calls: list[Any], extra: dict[str, str] | None = None
) -> Any:
    """Run ``script`` against the exported hotel toolkit, tau2 being the stand-in (plus
    ``extra`` modules under tau2/); its JSON output."""
    root = exported / "src/tau2"
    for rel, text in {**STUB, **(extra or {})}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if not (root / rel).exists():
            (root / rel).write_text(text)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            json.dumps(calls),
            str(exported / "data/tau2/domains/hotel/db.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(exported / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_generated_toolkit_replays_gold_like_maestro(hotel: Domain, exported: Path) -> None:
    tasks = [t for t in hotel.tasks if t.initial_state is None]
    calls = [[(a.name, a.arguments) for a in t.gold_actions] for t in tasks]
    got = run_exported(exported, REPLAY, calls)
    initial = hotel.initial.to_dict()
    assert sum(final != initial for final in got["finals"]) >= 10  # the gold writes did land
    for task, final in zip(tasks, got["finals"], strict=True):
        assert final == replay_gold(hotel, task).session.materialise(), task.id
    message, unchanged = got["errors"]
    assert "R-nope" in message and unchanged is True


def test_a_domain_without_a_folder_cannot_be_exported(hotel: Domain, tmp_path: Path) -> None:
    detached = Domain(
        hotel.manifest, None, hotel.tables, hotel.initial, hotel.toolkit, hotel.policy, hotel.tasks
    )
    with pytest.raises(Tau2ExportError, match="no package folder"):
        export_tau2(detached, tmp_path)


@pytest.mark.parametrize("name", ["get_db_hash", "update_db", "use_tool"])
def test_a_tool_named_like_tau2s_own_toolkit_methods_is_not_exported(
    tmp_path: Path, name: str
) -> None:
    """The fourth red team's case 12: a tool named ``get_db_hash`` became a method of the
    exported toolkit class replacing tau2's own, the one tau2's database check calls."""
    package = tmp_path / "hotel"
    shutil.copytree(library_path("hotel"), package)
    tools = package / "tools.py"
    tools.write_text(
        tools.read_text(encoding="utf-8")
        + f'\n\n@tool("read")\ndef {name}(db: Database) -> str:\n    """Say hello."""\n'
        + '    return "hello"\n',
        encoding="utf-8",
    )
    domain = load_domain(package, check_gold=False)
    assert name in domain.toolkit.specs
    with pytest.raises(Tau2ExportError, match=rf"tool {name} would replace tau2's own"):
        export_tau2(domain, tmp_path / "out")
    assert not (tmp_path / "out" / "tools.py").exists()
