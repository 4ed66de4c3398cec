"""The synthesis team's pure parts: blueprint validation, rendering, parsing, derived tests."""

from __future__ import annotations

import copy
import json
from datetime import date
from typing import Any

import pytest

from maestro.agents.codegen.blueprint import BlueprintError, FieldType, parse_blueprint
from maestro.agents.codegen.checks import operation_tests
from maestro.agents.codegen.prompts import ParseError, extract_code, extract_json
from maestro.agents.codegen.render import fill_database, models_source, validate_records
from maestro.agents.codegen.stages import parse_review, policy_problem
from maestro.agents.codegen.tools_code import normalise_tool, tools_source
from maestro.domains.sandbox import check_models_source, check_tools_source
from maestro.flows.synthesis import SynthesisParams, select_briefs, synthesis_id
from tests.synthesis import scripted_team as team


def blueprint(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(team.BLUEPRINT)
    data.update(changes)
    return data


def test_the_scripted_blueprint_is_valid_and_renders_safe_models() -> None:
    bp = parse_blueprint(blueprint(), industry="leisure")
    assert bp.industry == "leisure"
    source = models_source(bp)
    assert check_models_source(source, "models.py") == []
    assert "status: Literal['active', 'returned', 'cancelled']" in source
    assert "customer_id: Annotated[str, Ref('customers')]" in source


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["entities"][1]["fields"].update(customer_id="ref:clients"),
            "Rental.customer_id refers to unknown table 'clients'",
        ),
        (
            lambda d: d["operations"][1].update(params={"id": "str"}),
            "operation return_rental: needs the parameter 'rental_id'",
        ),
        (
            lambda d: d["operations"][1].update(requires={"status": ["lost"]}),
            "operation return_rental: requires status in ['lost']",
        ),
        (
            lambda d: d["operations"][2].update(sets={"status": "$why"}),
            "sets status from unknown parameter 'why'",
        ),
        (
            lambda d: d["operations"][0].update(sets={"status": "active"}),
            "operation get_rental: a read operation cannot set fields",
        ),
        (
            lambda d: d["entities"][0]["fields"].update(age="money"),
            "unknown field type 'money'",
        ),
        (lambda d: d.pop("operations"), "operations: Field required"),
    ],
)
def test_a_bad_blueprint_says_what_is_wrong(change: Any, message: str) -> None:
    data = blueprint()
    change(data)
    with pytest.raises(BlueprintError) as err:
        parse_blueprint(data)
    assert message in str(err.value)


def test_field_types() -> None:
    assert FieldType.parse("enum:a|b").choices == ("a", "b")
    assert FieldType.parse("ref:customers").ref == "customers"
    assert FieldType.parse("int").accepts(3) and not FieldType.parse("int").accepts(True)
    with pytest.raises(ValueError, match=r"unknown field type 'enum:a\|a'"):
        FieldType.parse("enum:a|a")


def test_records_are_validated_then_filled_with_real_references() -> None:
    bp = parse_blueprint(blueprint())
    db, dropped = validate_records(bp, team.RECORDS)
    assert sorted(db["rentals"]) == ["R1"]
    assert dropped == ["rentals[1].days: Input should be a valid integer"]
    db["rentals"]["R1"]["customer_id"] = "C404"  # dangling: repaired, not kept
    notes = fill_database(bp, db, size=5, seed=1)
    assert notes == ["rentals/R1.customer_id: 'C404' -> 'C1'"]
    assert [len(db[t]) for t in ("customers", "rentals")] == [5, 5]
    assert all(r["customer_id"] in db["customers"] for r in db["rentals"].values())
    again, _ = validate_records(bp, team.RECORDS)
    fill_database(bp, again, size=5, seed=1)
    assert again["customers"] == db["customers"]  # the same seed fills the same records


def test_json_and_code_are_found_around_prose_and_fences() -> None:
    assert extract_json('Sure! ```json\n{"a": 1}\n``` done') == {"a": 1}
    assert extract_json('The answer is {"a": [1, 2]}.') == {"a": [1, 2]}
    with pytest.raises(ParseError, match="holds no JSON object"):
        extract_json("no braces here")
    with pytest.raises(ParseError, match="does not parse"):
        extract_json('{"a": 1,,}')
    assert extract_code("x\n```python\nprint(1)\n```\n") == "print(1)\n"
    assert extract_code("print(2)") == "print(2)\n"
    with pytest.raises(ParseError, match="not closed"):
        extract_code("```python\nprint(1)\n")


def test_a_tool_gets_the_hosts_decorator_signature_and_docstring() -> None:
    bp = parse_blueprint(blueprint())
    op = bp.operation("cancel_rental")
    code = team.CANCEL.split("```python\n")[1].split("```")[0]
    function = normalise_tool(bp, op, "import os\n" + code)
    assert function.startswith("@tool('write')\ndef cancel_rental(db: Database, rental_id: str)")
    assert "Cancel an active rental." in function and "Args:" in function
    assert "import os" not in function
    assert check_tools_source(tools_source(bp, {op.name: function}), "tools.py") == []
    with pytest.raises(ParseError, match=r"must take \(db, rental_id\), not \(db, rid\)"):
        normalise_tool(bp, op, "def cancel_rental(db, rid):\n    pass\n")
    with pytest.raises(ParseError, match="no function named cancel_rental"):
        normalise_tool(bp, op, "def cancel(db, rental_id):\n    pass\n")
    with pytest.raises(ParseError, match="syntax error at line 1"):
        normalise_tool(bp, op, "def cancel_rental(db, rental_id)\n")


def test_effects_and_preconditions_become_tests() -> None:
    bp = parse_blueprint(blueprint())
    db: dict[str, dict[str, Any]] = {"customers": {"C1": {}}, "rentals": {"R1": {}, "R2": {}}}
    tests = operation_tests(bp, bp.operation("cancel_rental"), db)
    assert [(t.expect_ok, t.setup, t.expect_fields) for t in tests] == [
        (True, {"status": "active"}, {"status": "cancelled"}),
        (False, {"status": "returned"}, {"status": "returned"}),
        (False, {"status": "active"}, {}),
    ]
    assert tests[2].arguments == {"rental_id": "R0000"}
    assert [t.expect_ok for t in operation_tests(bp, bp.operation("get_rental"), db)] == [
        True,
        False,
    ]


def test_policy_and_review_answers_are_checked() -> None:
    assert policy_problem("# P\n1. One.\n2. Two.\n", 2) is None
    assert policy_problem("P\n1. One.", 1) == "the policy must start with a '# ' title line"
    assert "1 numbered item(s); it needs one per rule (2)" in str(policy_problem("# P\n1. a", 2))
    tools = ["get_rental", "cancel_rental"]
    assert parse_review('{"verdict": "ok"}', tools) is None
    fix = json.dumps({"verdict": "fix", "stage": "tools", "tool": "cancel_rental", "problem": "x"})
    assert parse_review(fix, tools) == ("tools:cancel_rental", "x")
    with pytest.raises(ParseError, match="must name one of the tools"):
        parse_review('{"verdict": "fix", "stage": "tools", "tool": "nope", "problem": "x"}', tools)
    with pytest.raises(ParseError, match='"verdict": "ok" or "fix"'):
        parse_review('{"ok": true}', tools)


def test_briefs_rotate_by_night_and_ids_are_stable() -> None:
    params = SynthesisParams(per_night=2)
    texts = [b.text for b in params.briefs]
    first = [b.text for b in select_briefs(params.model_copy(update={"night": 0}))]
    second = [b.text for b in select_briefs(params.model_copy(update={"night": 1}))]
    assert first == texts[:2] and second == [texts[2], texts[0]]
    by_date = select_briefs(params, today=date(2026, 11, 29))
    assert by_date == select_briefs(params, today=date(2026, 11, 29))
    brief = params.briefs[0]
    assert synthesis_id("n1", brief) == synthesis_id("n1", brief) != synthesis_id("n2", brief)


def test_a_small_models_usual_slips_are_forgiven() -> None:
    data = blueprint()
    rental = data["entities"][1]
    rental["prefix"] = "rental"
    rental["fields"] = {
        "rental_id": "string",
        "customer_id": "ref:customers",
        "status": "enum:[active, returned, cancelled]",
        "days": "Integer",
        "starts": "datetime",
    }
    data["operations"][1]["requires"] = {"status": "active"}
    data["domain_id"] = "Bike-Rental"
    data["operations"][0]["name"] = "Get Rental"
    data["rules"] = [{"id": "R1", "rule": "Only active rentals can be returned."}]
    bp = parse_blueprint(data)
    assert bp.domain_id == "bike_rental" and bp.operations[0].name == "get_rental"
    entity = bp.entity("rentals")
    assert entity.prefix == "R"
    assert entity.fields == {
        "customer_id": "ref:customers",
        "status": "enum:active|returned|cancelled",
        "days": "int",
        "starts": "str",
    }
    assert bp.operation("return_rental").requires == {"status": ["active"]}
    assert bp.rules == ["Only active rentals can be returned."]


def test_a_wrongly_shaped_value_is_reported_once() -> None:
    data = blueprint()
    data["operations"][1]["sets"] = {"status": {"from": "active", "to": "returned"}}
    with pytest.raises(BlueprintError) as err:
        parse_blueprint(data)
    assert str(err.value) == (
        "operations.1.sets.status: must be a string, number or true/false, not a list or object"
    )
