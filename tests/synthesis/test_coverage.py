"""Every operation in some task's gold (issue 20, 3): the walk tasks grow to one per write, and
what no task covers is reported with why, to the reviewer and in ``maestro synthesize --json``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from maestro.agents.codegen.guide import walk_guide
from maestro.agents.codegen.prompts import coverage_lines
from maestro.agents.codegen.scenarios import not_covered, plan_walks
from maestro.agents.codegen.state import SynthesisConfig
from maestro.domains import Domain
from tests.synthesis import scripted_team as team

CONFIG = SynthesisConfig(max_iterations=2)
WRITES = sorted(op.name for op in team.blueprint(CONFIG).operations if op.tool_kind == "write")


@pytest.fixture(scope="module")
def ferry() -> Iterator[Domain]:
    with team.loaded("coverage", CONFIG) as domain:
        yield domain


def test_the_walks_asked_for_grow_to_one_per_write_and_the_information_requests() -> None:
    assert SynthesisConfig(n_tasks=4, information=2).walk_target(8) == 10
    assert SynthesisConfig(n_tasks=12, information=2).walk_target(8) == 12
    assert SynthesisConfig(n_tasks=4, cover_operations=False).walk_target(8) == 4
    assert SynthesisConfig(n_tasks=4).walk_target(500) == 200


def test_writes_no_walk_reached_are_named_with_why(ferry: Domain) -> None:
    bp = team.blueprint(CONFIG)
    guide = walk_guide(bp)
    few, _ = plan_walks(ferry, n=2, seed=0, guide=guide)
    lines = not_covered(ferry, few, [], 2, 0, guide)
    walked = {s.name for w in few for s in w.writes}
    in_gold = {a.name for t in ferry.tasks for a in t.gold_actions}
    assert lines and [line.split(":")[0] for line in lines] == [
        w for w in WRITES if w not in in_gold
    ]
    for line in lines:
        name, why = line.split(": ", 1)
        if name in walked:
            assert why == "its walks' tasks were rejected (see their reasons)"
        else:
            assert why == f"2 write walks were asked for and the domain has {len(WRITES)} writes"
    # Asked for one walk a write: each write the data allows has one.
    every, _ = plan_walks(ferry, n=len(WRITES), seed=0, guide=guide)
    assert {s.name for w in every for s in w.writes[:1]} == set(WRITES)
    for line in not_covered(ferry, every, [], len(WRITES), 0, guide):
        assert line.endswith("its walks' tasks were rejected (see their reasons)")


def test_the_reviewer_reads_why_an_operation_is_in_no_task() -> None:
    bp = team.blueprint(CONFIG)
    rejected = [
        "not_covered: add_vehicle: no walk from it was grounded (no record its checks accept "
        "that a customer can reach, or each request drawn was made already)",
        "conformance: x",
    ]
    (line, *_rest, reasons) = coverage_lines(bp, [], rejected)
    assert "add_vehicle (no walk from it was grounded (no record its checks accept" in line
    assert "update_phone," in line or line.endswith("update_phone")  # no reason known: bare
    assert reasons == "tasks not made, by reason: conformance 1, not_covered 1"
