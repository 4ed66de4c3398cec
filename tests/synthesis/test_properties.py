"""Hypothesis's stateful checking of the written tools on the generated world: random sequences
of calls keep every law, a refused call changes nothing, and a failure comes back shrunk to the
call at fault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maestro.agents.codegen.checks import operation_tests
from maestro.agents.codegen.properties import argument_pools, check_properties
from maestro.agents.codegen.render import laws_json
from maestro.agents.codegen.state import SynthesisConfig
from maestro.agents.codegen.tools_code import normalise_tool, tools_source
from maestro.domains.sandbox import load_sandboxed_domain
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
