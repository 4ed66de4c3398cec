"""Issue 14's tau2 export fixes, as far as they can be checked without tau2 installed here
(scripts/tau2_check.py runs tau2-bench's own loaders and evaluator on the export; see
docs/interop.md): typed tool results, argument validation, the registration snippet with the
task splits, and how a command tells a library id from a folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from maestro.domains import Domain, library_path, load_domain, replay_gold
from maestro.domains.tau2_export import export_tau2

from ..conftest import FIXTURES
from ..domains.test_tau2_export import run_exported

MAESTRO = str(Path(sys.executable).with_name("maestro"))
DOCS = Path(__file__).parents[2] / "docs"

# tau2-bench 1.0.1's Environment.to_json_str (src/tau2/environment/environment.py), verbatim
# but for its name: how a tool's return value reaches the agent.
TO_JSON_STR = """
import json
from datetime import date, datetime
from typing import Any
from pydantic import BaseModel

def to_json_str(resp: Any) -> str:
    def _process(resp: Any) -> str:
        if isinstance(resp, BaseModel):
            return resp.model_dump()
        elif isinstance(resp, str):
            return resp
        elif resp is None:
            return resp
        elif isinstance(resp, (int, float, bool)):
            return str(resp)
        elif isinstance(resp, list):
            return [_process(item) for item in resp]
        elif isinstance(resp, tuple):
            return tuple(_process(item) for item in resp)
        elif isinstance(resp, dict):
            return {k: _process(v) for k, v in resp.items()}
        elif isinstance(resp, (datetime, date)):
            return resp.isoformat()
        else:
            raise ValueError(f"Unsupported type: {type(resp)}")

    if not isinstance(resp, str):
        return json.dumps(_process(resp), default=str)
    return resp
"""

CALLS = """
import json, sys
from tau2.domains.hotel.data_model import HotelDB
from tau2.domains.hotel.tools import HotelTools
from tau2.to_json import to_json_str
calls, db_path = json.loads(sys.argv[1]), sys.argv[2]
texts = []
for task_calls in calls:
    tools = HotelTools(HotelDB.load(db_path))
    texts.append([to_json_str(tools.use_tool(name, **args)) for name, args in task_calls])
tools = HotelTools(HotelDB.load(db_path))
try:
    tools.use_tool("get_reservation", reservation_id=["R30057"])
    bad = "no error"
except ValueError as exc:
    bad = str(exc)
print(json.dumps({"texts": texts, "bad": bad}))
"""


@pytest.fixture(scope="module")
def hotel() -> Domain:
    return load_domain(library_path("hotel"), check_gold=False)


def test_tool_results_reach_a_tau2_agent_typed_and_bad_arguments_are_named(
    hotel: Domain, tmp_path: Path
) -> None:
    export_tau2(hotel, tmp_path)
    tasks = [t for t in hotel.tasks if t.initial_state is None]
    calls = [[(a.name, a.arguments) for a in t.gold_actions] for t in tasks]
    got = run_exported(tmp_path, CALLS, calls, {"to_json.py": TO_JSON_STR})
    compared = typed = 0
    for task, texts in zip(tasks, got["texts"], strict=True):
        for outcome, text in zip(replay_gold(hotel, task).outcomes, texts, strict=True):
            compared += 1
            mine, theirs = json.loads(outcome.content), json.loads(text)
            assert theirs == mine, (task.id, outcome.name)
            typed += any(isinstance(v, int | float | bool) for v in _leaves(theirs))
    assert compared > 40 and typed > 20  # numbers and booleans arrive as such, not as "2"
    assert got["bad"] == (
        "invalid arguments for get_reservation: argument 'reservation_id': Input should be a"
        ' valid string (got ["R30057"])'
    )


def _leaves(value: object) -> list[object]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


def test_the_registration_snippet_registers_the_splits(hotel: Domain, tmp_path: Path) -> None:
    export_tau2(hotel, tmp_path)
    readme = (tmp_path / "src/tau2/domains/hotel/README.md").read_text()
    snippet = (
        'registry.register_tasks(hotel_get_tasks, "hotel", get_task_splits=hotel_get_tasks_split)'
    )
    assert snippet in readme
    assert snippet in (DOCS / "interop.md").read_text()


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MAESTRO, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=dict(os.environ)
    )


def test_a_bare_name_is_the_library_domain_and_a_folder_is_named_by_its_path(
    tmp_path: Path,
) -> None:
    # A folder named like a library domain, holding another package (the toy fixture).
    shutil.copytree(
        FIXTURES / "toy", tmp_path / "hotel", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        FIXTURES / "toy", tmp_path / "mine", ignore=shutil.ignore_patterns("__pycache__")
    )
    library = run(tmp_path, "domains", "validate", "hotel", "--json")
    assert library.returncode == 0, library.stderr[-2000:]
    assert list(json.loads(library.stdout.strip().splitlines()[-1])["per_domain"]) == ["hotel"]
    folder = run(tmp_path, "domains", "validate", "./hotel", "--json")
    assert folder.returncode == 0, folder.stderr[-2000:]
    assert list(json.loads(folder.stdout.strip().splitlines()[-1])["per_domain"]) == ["toy"]
    bare = run(tmp_path, "domains", "validate", "mine")
    assert bare.returncode == 2
    assert "A folder is named by its path: ./mine" in bare.stderr
    exported = run(tmp_path, "export", "tau2", "hotel", str(tmp_path / "out"))
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert (tmp_path / "out/data/tau2/domains/hotel/tasks.json").is_file()
