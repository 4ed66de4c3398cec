"""Hypothesis's stateful checking of the written tools on the generated world: random sequences
of calls keep every law, a refused call changes nothing, and a failure comes back shrunk to the
call at fault."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from maestro.agents.client import CallLog, Endpoints
from maestro.agents.codegen.checks import operation_tests
from maestro.agents.codegen.properties import argument_pools, check_properties
from maestro.agents.codegen.render import laws_json
from maestro.agents.codegen.stages import SynthesisTeam
from maestro.agents.codegen.state import SynthesisConfig, SynthesisState
from maestro.agents.codegen.tools_code import normalise_tool, tools_source
from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.domains.sandbox import load_sandboxed_domain
from tests.conftest import role_settings
from tests.synthesis import scripted_team as team

CONFIG = SynthesisConfig()


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ferry")
    bp = team.blueprint(CONFIG)
    files = team.package_files("props", CONFIG)
    files["laws.json"] = laws_json(bp)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def check(package: Path, name: str, code: str) -> object:
    bp = team.blueprint(CONFIG)
    functions = {op.name: normalise_tool(bp, op, team.TOOLS[op.name]) for op in bp.operations}
    functions[name] = normalise_tool(bp, bp.operation(name), code)
    (package / "tools.py").write_text(tools_source(bp, functions), encoding="utf-8")
    db = json.loads((package / "db.json").read_text())
    writes = [op for op in bp.operations if op.tool_kind == "write"]
    tests = operation_tests(bp, bp.operation(name), db)
    with load_sandboxed_domain(package, check_gold=False) as domain:
        assert len(domain.laws) == len(bp.laws)
        return check_properties(domain, argument_pools(bp, writes, db, tests, focus=name))


def test_the_good_tools_keep_every_law_under_random_sequences(package: Path) -> None:
    assert check(package, "cancel_booking", team.TOOLS["cancel_booking"]) is None


def test_a_tool_that_breaks_a_law_is_found_and_shrunk_to_its_call(package: Path) -> None:
    # Without its check, cancelling a booking whose refund is already pending adds a second one.
    careless = team.TOOLS["cancel_booking"].replace(
        '    if db.find("refunds", booking_id=booking_id, status="pending"):\n'
        '        raise ToolError("a refund for this booking is already pending")\n',
        "",
    )
    assert careless != team.TOOLS["cancel_booking"]
    found = check(package, "cancel_booking", careless)
    assert found is not None
    text = str(found)
    assert found.operation == "cancel_booking"  # type: ignore[attr-defined]
    assert "A booking has at most one refund pending" in text
    # Shrunk: the one call that breaks it, on a booking with a refund pending already.
    assert text.count(" -> ") == 1 and "cancel_booking(booking_id=" in text


def test_a_tool_that_crashes_instead_of_refusing_is_found(package: Path) -> None:
    crashing = team.TOOLS["add_vehicle"].replace(
        '        raise ToolError("the booking already has a vehicle")',
        '        raise KeyError("vehicle")',
    )
    found = check(package, "add_vehicle", crashing)
    assert found is not None and "instead of a ToolError" in str(found)


def test_a_law_broken_by_an_earlier_tool_sends_that_tool_back_not_the_one_being_written(
    tmp_path: Path,
) -> None:
    """A read tool cannot mend another tool's effect: when a sequence of the other tools' calls
    alone breaks a law, the tool at fault is written again with the failure, and the read is
    kept (airline3: change_flight's breach went to list_flight_changes, which could not fix it)."""
    bp = team.blueprint(CONFIG)
    names = [op.name for op in bp.operations]
    current = "quote_cancellation"
    assert bp.operation(current).tool_kind == "read"
    assert names.index("cancel_booking") < names.index(current)
    careless = team.TOOLS["cancel_booking"].replace(
        '"amount": booking["fare_paid"]', '"amount": booking["fare_paid"] * 2'
    )
    assert careless != team.TOOLS["cancel_booking"]
    done = {
        n: normalise_tool(bp, bp.operation(n), careless if n == "cancel_booking" else team.TOOLS[n])
        for n in names[: names.index(current)]
    }
    files = team.package_files("sendback", CONFIG)
    files = {k: v for k, v in files.items() if k not in ("tools.py", "policy.md", "tasks.jsonl")}
    files["laws.json"] = laws_json(bp)
    state: SynthesisState = {
        "synthesis_id": "sendback",
        "brief": team.BRIEF,
        "blueprint": bp.model_dump(mode="json"),
        "files": files,
        "tools": done,
        "drafts": {"tools:cancel_booking": team.fence(careless)},
        "attempts": {"tools:cancel_booking": 1},
        "settled": {"tools:cancel_booking": 1},
        "feedback": {},
    }

    async def go(state: SynthesisState) -> dict[str, Any]:
        log = CallLog()
        async with Endpoints(log) as endpoints:
            client = endpoints.client("codegen", role_settings(max_retries=0), server.base_url)
            stages = SynthesisTeam(client, log, CONFIG, tmp_path / "work", tmp_path / "domains")
            return await stages.tools(state)

    with ScriptedServer(ServerConfig(mode="script")) as server:
        team.queue(server, "sendback", [team.fence(team.TOOLS[current])])
        update = asyncio.run(go(state))
        server.assert_done()

    assert update["route"] == "tools", update["events"]
    # The read is kept; the careless write goes back with the law it broke and its own calls.
    assert current in update["tools"] and "cancel_booking" not in update["tools"]
    told = update["feedback"]["tools:cancel_booking"]
    assert "A refund is never more than the fare paid" in told
    assert "cancel_booking(booking_id=" in told and current + "(" not in told
    [event] = update["events"]
    assert event["stage"] == f"tools:{current}" and event["outcome"] == "ok"
    assert "cancel_booking sent back" in event["detail"]

    # Out of attempts, the same finding rejects the synthesis, naming the tool at fault.
    spent = {**state, "attempts": {"tools:cancel_booking": CONFIG.max_iterations}}
    with ScriptedServer(ServerConfig(mode="script")) as server:
        team.queue(server, "sendback", [team.fence(team.TOOLS[current])])
        update = asyncio.run(go(spent))
    assert update["route"] == "reject"
    assert update["reason"].startswith("stage tools:cancel_booking failed")
