"""The synthesis team's pure parts: the blueprint language, its conditions at the clock,
rendering, answer parsing."""

from __future__ import annotations

import copy
import json
import re
from datetime import date, datetime
from typing import Any

import pytest

from maestro.agents.codegen.answers import (
    ParseError,
    ReviewFinding,
    extract_code,
    extract_json,
    parse_review,
    policy_problem,
)
from maestro.agents.codegen.blueprint import BlueprintError, Condition, FieldType
from maestro.agents.codegen.checks import fixture_problems
from maestro.agents.codegen.conditions import all_hold, legacy_words
from maestro.agents.codegen.normalise import parse_blueprint
from maestro.agents.codegen.render import models_source
from maestro.agents.codegen.tools_code import normalise_tool, tools_source
from maestro.agents.settings import load_llm_settings
from maestro.domains.sandbox import check_models_source, check_tools_source
from maestro.flows.synthesis import SynthesisParams, select_briefs, synthesis_id
from tests.synthesis import scripted_team as team

CLOCK = datetime(2026, 1, 5, 9, 0)


def blueprint(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(team.BLUEPRINT)
    data.update(changes)
    return data


def op(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(o for o in data["operations"] if o["name"] == name)


def test_the_example_blueprint_is_valid_and_renders_safe_models() -> None:
    bp = parse_blueprint(blueprint(), clock=CLOCK, industry="transport")
    assert bp.industry == "transport" and bp.clock == CLOCK
    assert [o.kind for o in bp.operations].count("create") == 3
    source = models_source(bp)
    assert check_models_source(source, "models.py") == []
    assert "status: Literal['confirmed', 'cancelled', 'travelled']" in source
    assert "passenger_id: Annotated[str, Ref('passengers')]" in source
    assert "date_of_birth: date" in source and "departs_at: datetime" in source
    assert "seat_note: str | None = None" in source
    assert fixture_problems(bp) == []


def _set(path: str, value: Any) -> Any:
    def change(d: dict[str, Any]) -> None:
        target: Any = d
        *head, last = path.split("/")
        for part in head:
            target = op(d, part) if part.islower() and "_" in part else target[part]
        target[last] = value

    return change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["entities"][2]["fields"].update(passenger_id="ref:clients"),
            "Booking.passenger_id refers to unknown table 'clients'",
        ),
        (
            lambda d: op(d, "add_vehicle").update(params={"id": "str"}),
            "operation add_vehicle: needs the parameter 'booking_id'",
        ),
        (
            lambda d: op(d, "book_sailing")["params"].update(booking_id="str"),
            "a create operation makes its key with db.new_id",
        ),
        (
            lambda d: op(d, "add_vehicle")["requires"][0].update(check="status in ['lost']"),
            "'lost' is not a value of status (confirmed|cancelled|travelled)",
        ),
        (
            lambda d: op(d, "update_phone").update(sets={"phone": "$mobile"}),
            "'$mobile' names no parameter",
        ),
        (
            lambda d: op(d, "get_booking").update(sets={"status": "cancelled"}),
            "a read operation has no requires or sets",
        ),
        (
            lambda d: d["entities"][0]["fields"].update(age="money?!"),
            "unknown field type 'money?!'",
        ),
        (lambda d: d.pop("operations"), "operations: Field required"),
        (
            lambda d: d["operations"].remove(op(d, "find_passenger")),
            "no lookup operation",
        ),
        (
            lambda d: op(d, "add_vehicle")["requires"].append(
                {"check": "sailing.status", "test": "in", "value": ["scheduled"]}
            ),
            "'sailing' is neither a parameter that names a record",
        ),
        (
            lambda d: op(d, "add_vehicle")["requires"].append(
                {"check": "status", "test": "is_null"}
            ),
            "status is not nullable, so it is never null",
        ),
        (
            lambda d: op(d, "update_phone").update(
                requires=[{"check": "phone", "test": "within_last_days", "value": 3}]
            ),
            "phone is a str, not a date or datetime",
        ),
        (
            lambda d: op(d, "add_vehicle").update(
                requires=[{"check": "booked_on", "test": "at_least_hours_ahead", "value": 3}]
            ),
            "booked_on is a date, not a datetime",
        ),
        (
            lambda d: op(d, "add_vehicle").update(sets={"vehicle": None}),
            "null into a field that is not nullable",
        ),
        (
            lambda d: op(d, "book_sailing")["sets"].pop("new.fare_paid"),
            "the new bookings record needs a value for ['fare_paid']",
        ),
        (
            lambda d: op(d, "update_phone")["params"].update(note="str"),
            "parameter(s) ['note'] are used by no check or effect",
        ),
        (
            lambda d: d["agent_rules"][0].update(operation="get_booking"),
            "agent_rules[0]: 'get_booking' is not an update or create operation",
        ),
        (
            lambda d: op(d, "find_passenger").update(params={"email": "str"}),
            "its params must be exactly its by fields",
        ),
        (
            lambda d: op(d, "update_phone")["sets"].update(phone="$today", **{}),
            None,
        ),
        (
            lambda d: op(d, "add_vehicle")["sets"].update(booked_on="$now"),
            "$now into a date field (it is a datetime)",
        ),
        (
            lambda d: op(d, "add_vehicle")["sets"].update(status={"add": 1}),
            "add/subtract on a field that is not a number",
        ),
    ],
)
def test_a_bad_blueprint_says_what_is_wrong(change: Any, message: str | None) -> None:
    data = blueprint()
    change(data)
    if message is None:  # a string field may hold today's date: no problem
        parse_blueprint(data, clock=CLOCK)
        return
    with pytest.raises(BlueprintError) as err:
        parse_blueprint(data, clock=CLOCK)
    assert message in str(err.value)


def test_an_impossible_operation_is_found_before_any_code_is_written() -> None:
    data = blueprint()
    op(data, "add_vehicle")["requires"].append(
        {"check": "status", "test": "not_in", "value": ["confirmed"]}
    )
    bp = parse_blueprint(data, clock=CLOCK)
    assert fixture_problems(bp) == [
        "add_vehicle: no records and arguments meet status = 'confirmed' and "
        "status not in ['confirmed'] together"
    ]
    data = blueprint()
    data["agent_rules"][0]["refuse_when"] = [
        {"check": "booking_id.status", "test": "in", "value": ["travelled"]}
    ]
    (problem,) = fixture_problems(parse_blueprint(data, clock=CLOCK))
    assert "can never apply to a call the tool accepts" in problem


def test_field_types() -> None:
    assert FieldType.parse("enum:a|b").choices == ("a", "b")
    assert FieldType.parse("ref:customers?") == FieldType(
        base="ref", ref="customers", nullable=True
    )
    window = FieldType.parse("date:-30d..+2w")
    assert (window.low, window.high) == (-30, 14)
    assert window.window(CLOCK) == (date(2025, 12, 6), date(2026, 1, 19))
    assert (
        window.bounds_problem("2025-12-05", CLOCK)
        == "'2025-12-05' is outside 2025-12-06..2026-01-19"
    )
    assert window.bounds_problem("2025-12-06", CLOCK) is None
    assert FieldType.parse("date:-85y..-18y").low == -85 * 365
    assert FieldType.parse("float:0..9.5").bounds_problem(9.6, CLOCK) == "9.6 is outside 0..9.5"
    assert FieldType.parse("int").accepts(3) and not FieldType.parse("int").accepts(True)
    assert FieldType.parse("datetime").accepts("2026-01-05T09:00:00")
    assert not FieldType.parse("datetime").accepts("2026-01-05")
    assert not FieldType.parse("date").accepts("05/01/2026")
    assert FieldType.parse("datetime:+1d..+30d").describe(CLOCK) == (
        "datetime YYYY-MM-DDTHH:MM:SS from 2026-01-06 to 2026-02-04"
    )
    for bad in ("enum:a|a", "date:-3d", "int:9..1", "ref:Bad-Name", "money"):
        with pytest.raises(ValueError, match="unknown field type"):
            FieldType.parse(bad)


@pytest.mark.parametrize(
    ("test", "n", "base", "passes", "fails"),
    [
        # Day N of "within N days" passes; day N+1 does not.
        ("within_last_days", 30, "date", "2025-12-06", "2025-12-05"),
        ("older_than_days", 30, "date", "2025-12-05", "2025-12-06"),
        # 0 days ahead: today is not in the past, yesterday is.
        ("at_least_days_ahead", 0, "date", "2026-01-05", "2026-01-04"),
        ("less_than_days_ahead", 2, "date", "2026-01-06", "2026-01-07"),
        ("within_last_days", 1, "datetime", "2026-01-04T09:00:00", "2026-01-04T08:59:00"),
        ("at_least_hours_ahead", 24, "datetime", "2026-01-06T09:00:00", "2026-01-06T08:59:00"),
        ("less_than_hours_ahead", 24, "datetime", "2026-01-06T08:59:00", "2026-01-06T09:00:00"),
    ],
)
def test_date_conditions_hold_up_to_their_boundary_at_the_clock(
    test: str, n: int, base: str, passes: str, fails: str
) -> None:
    bp = parse_blueprint(blueprint(), clock=CLOCK)
    op = bp.operation("cancel_booking")
    path = "booking_id.booked_on" if base == "date" else "booking_id.sailing_id.departs_at"
    cond = Condition.model_validate({"check": path, "test": test, "value": n})

    def state(value: str | None) -> dict[str, Any]:
        booking = {"booking_id": "BK1", "sailing_id": "SL1", "booked_on": "2026-01-01"}
        sailing = {"sailing_id": "SL1", "departs_at": "2026-01-10T09:00:00"}
        if base == "date":
            booking["booked_on"] = value
        else:
            sailing["departs_at"] = value
        return {"bookings": {"BK1": booking}, "sailings": {"SL1": sailing}}

    args = {"booking_id": "BK1"}
    assert all_hold(bp, op, [cond], args, state(passes), CLOCK)
    assert not all_hold(bp, op, [cond], args, state(fails), CLOCK)
    assert not all_hold(bp, op, [cond], args, state(None), CLOCK)  # a null fails every test


def test_conditions_in_words_carry_their_absolute_dates() -> None:
    cond = Condition(check="order_id.delivered_on", test="within_last_days", value=30)
    assert legacy_words(cond, FieldType(base="date"), CLOCK) == (
        "order_id.delivered_on is on or after today - 30 days (2025-12-06 or later)"
    )
    cond = Condition(check="slot_id.starts_at", test="less_than_hours_ahead", value=2)
    assert legacy_words(cond, FieldType(base="datetime"), CLOCK) == (
        "slot_id.starts_at is before now + 2 hours (earlier than 2026-01-05T11:00:00)"
    )
    cond = Condition(check="account_id.balance", test="at_least", value="$amount")
    assert legacy_words(cond, FieldType(base="float"), CLOCK) == "account_id.balance >= $amount"


def test_a_models_usual_slips_are_forgiven() -> None:
    data = blueprint()
    data["domain_id"] = "Ferry-Line"
    data["entities"][0]["prefix"] = "ps"
    data["entities"][0]["fields"]["first_name"] = "String"
    data["entities"][1]["fields"]["status"] = "enum:[scheduled, cancelled, departed]"
    lookup = op(data, "find_passenger")
    lookup["kind"] = "find"
    del lookup["params"]
    vehicle = op(data, "add_vehicle")
    vehicle["kind"] = "write"
    vehicle["name"] = "Add Vehicle"
    vehicle["requires"] = {"status": "confirmed", "vehicle": [False]}
    data["rules"][0] = {"id": "R1", "rule": "Verify the passenger first."}
    bp = parse_blueprint(data, clock=CLOCK)
    assert bp.domain_id == "ferry_line" and bp.entities[0].prefix == "PS"
    assert bp.entities[0].fields["first_name"] == "str"
    assert bp.operation("find_passenger").params == {"email": "str", "date_of_birth": "date"}
    updated = bp.operation("add_vehicle")
    assert updated.kind == "update"
    assert [(c.check, c.test, c.value) for c in updated.requires] == [
        ("status", "in", ["confirmed"]),
        ("vehicle", "in", [False]),
    ]
    assert bp.rules[0] == "Verify the passenger first."


def test_the_clock_is_the_hosts_not_the_models() -> None:
    bp = parse_blueprint(blueprint(clock="2024-06-03T10:00:00"), clock=CLOCK)
    assert bp.clock == CLOCK


def test_a_wrongly_shaped_value_is_reported_once() -> None:
    data = blueprint()
    op(data, "add_vehicle")["sets"] = {"vehicle": {"from": False, "to": True}}
    with pytest.raises(BlueprintError) as err:
        parse_blueprint(data, clock=CLOCK)
    assert "operations.8.sets.vehicle" in str(err.value)
    assert str(err.value).count("operations.8.sets.vehicle") == 1


def test_json_and_code_are_found_around_prose_and_fences() -> None:
    assert extract_json('Sure! ```json\n{"a": 1}\n``` done') == {"a": 1}
    assert extract_json('The answer is {"a": [1, 2]}.') == {"a": [1, 2]}
    with pytest.raises(ParseError, match="no JSON object in the answer"):
        extract_json("no braces here")
    with pytest.raises(ParseError, match="invalid JSON: Expecting property name"):
        extract_json('{"a": 1,,}')
    assert extract_code("x\n```python\nprint(1)\n```\n") == "print(1)\n"
    assert extract_code("print(2)") == "print(2)\n"
    with pytest.raises(ParseError, match="not closed"):
        extract_code("```python\nprint(1)\n")


def test_a_tool_gets_the_hosts_decorator_signature_and_docstring() -> None:
    bp = parse_blueprint(blueprint(), clock=CLOCK)
    lookup = bp.operation("find_passenger")
    function = normalise_tool(bp, lookup, "import os\n" + team.TOOLS["find_passenger"])
    assert function.startswith(
        "@tool('read')\ndef find_passenger(db: Database, email: str, date_of_birth: IsoDate) -> dict:"
    )
    assert "Find a passenger by email and date of birth" in function
    assert "date_of_birth: The date of birth, a date written YYYY-MM-DD." in function
    assert "import os" not in function
    listing = normalise_tool(
        bp, bp.operation("list_passenger_bookings"), team.TOOLS["list_passenger_bookings"]
    )
    assert "-> list:" in listing and 'such as "PS1001"' in listing
    assert check_tools_source(tools_source(bp, {"find_passenger": function}), "tools.py") == []
    vehicle = bp.operation("add_vehicle")
    with pytest.raises(ParseError, match=r"must take \(db, booking_id\), not \(db, bid\)"):
        normalise_tool(bp, vehicle, "def add_vehicle(db, bid):\n    pass\n")
    with pytest.raises(ParseError, match="no function named add_vehicle"):
        normalise_tool(bp, vehicle, "def add(db, booking_id):\n    pass\n")
    with pytest.raises(ParseError, match="syntax error at line 1"):
        normalise_tool(bp, vehicle, "def add_vehicle(db, booking_id)\n")


def test_policy_and_review_answers_are_checked() -> None:
    assert policy_problem("# P\n1. One.\n2. Two.\n", 2) is None
    assert policy_problem("P\n1. One.", 1) == "the policy must start with a '# ' title line"
    assert "1 numbered item(s); it needs one per rule (2)" in str(policy_problem("# P\n1. a", 2))
    tools = ["get_booking", "cancel_booking"]
    assert parse_review('{"verdict": "ok"}', tools) is None
    assert parse_review('{"verdict": "ok", "stage": "", "tool": "", "problem": ""}', tools) is None
    fix = json.dumps({"verdict": "fix", "stage": "tools", "tool": "cancel_booking", "problem": "x"})
    assert parse_review(fix, tools) == ReviewFinding("tools:cancel_booking", "x")
    # The tool is empty when the stage is not tools, exactly as the prompt's shape allows.
    missing = {"verdict": "fix", "stage": "blueprint", "tool": "", "problem": "Missing operation."}
    assert parse_review(json.dumps(missing), tools) == ReviewFinding(
        "blueprint", "Missing operation."
    )
    # Tasks at fault are named by id, in full or by their ending; an unknown one goes back.
    ids = ["ferry_syn0_w001", "ferry_syn0_w002", "ferry_syn0_r001"]
    flagged = {
        "verdict": "fix",
        "stage": "tasks",
        "tool": "",
        "tasks": ["w002", "ferry_syn0_r001"],
        "problem": "p",
    }
    assert parse_review(json.dumps(flagged), tools, ids) == ReviewFinding(
        "tasks", "p", ("ferry_syn0_w002", "ferry_syn0_r001")
    )
    with pytest.raises(ParseError, match=r"names no task \(or more than one\): \['w009'\]"):
        parse_review(json.dumps({**flagged, "tasks": ["w009"]}), tools, ids)
    with pytest.raises(ParseError, match="must name one of the tools"):
        parse_review('{"verdict": "fix", "stage": "tools", "tool": "nope", "problem": "x"}', tools)
    with pytest.raises(ParseError, match=re.escape('{"verdict": "ok" | "fix", ...}')):
        parse_review('{"ok": true}', tools)
    with pytest.raises(ParseError, match='needs "stage"'):
        parse_review('{"verdict": "fix", "stage": "", "tool": "", "problem": "x"}', tools)


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


def test_a_codegen_endpoint_set_by_one_variable_keeps_the_codegen_token_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Setting MAESTRO_CODEGEN__BASE_URL once reset max_tokens to 1,024: a blueprint of a rich
    domain (4-5k tokens) could not fit."""
    monkeypatch.setenv("MAESTRO_CODEGEN__BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MAESTRO_JUDGE__MODEL", "judge")
    settings = load_llm_settings()
    assert settings.codegen.base_url == "http://127.0.0.1:9/v1"
    assert (settings.codegen.max_tokens, settings.codegen.temperature) == (16384, 0.2)
    assert settings.judge.max_tokens == 2048
    monkeypatch.setenv("MAESTRO_CODEGEN__MAX_TOKENS", "3000")
    assert load_llm_settings().codegen.max_tokens == 3000
    # The embedded model keeps its own, smaller cap for the roles it serves.
    assert settings.embedded.codegen_max_tokens < settings.codegen.max_tokens


def test_a_nullable_value_fits_a_required_field_once_a_check_requires_it() -> None:
    data = blueprint()
    transfer = op(data, "request_transfer")
    transfer["sets"] = {
        "transfer_sailing_id": "$new_sailing_id",
        "seat_note": "$booking_id.seat_note",
    }
    data["entities"][2]["fields"]["seat_note"] = "str?"
    bp = parse_blueprint(data, clock=CLOCK)  # a nullable value into a nullable field
    assert bp.operation("request_transfer").sets["seat_note"] == "$booking_id.seat_note"
    add = op(data, "add_vehicle")
    add["sets"] = {
        "vehicle": True,
        "fare_paid": {"expr": "fare_paid + coalesce(transfer_sailing_id.fare, 0)"},
    }
    parse_blueprint(data, clock=CLOCK)  # coalesce makes it a number
    add["sets"] = {"vehicle": True, "fare_paid": {"expr": "fare_paid + transfer_sailing_id.fare"}}
    with pytest.raises(BlueprintError, match="because it may be null: require the nullable value"):
        parse_blueprint(data, clock=CLOCK)
    add["requires"].append({"check": "transfer_sailing_id is not null"})
    parse_blueprint(data, clock=CLOCK)  # required set, so never null in the effect


def test_a_fee_that_divides_by_zero_at_a_boundary_is_a_located_problem() -> None:
    data = blueprint()
    book = op(data, "book_sailing")
    book["requires"] = [c for c in book["requires"] if "seats_left" not in c["check"]]
    book["requires"].append({"check": "sailing_id.seats_left >= 0"})
    book["sets"]["new.fare_paid"] = {
        "expr": "round(sailing_id.fare * 100 / sailing_id.seats_left, 2)"
    }
    with pytest.raises(BlueprintError, match=r"division by zero in '.*sailing_id.seats_left'"):
        bp = parse_blueprint(data, clock=CLOCK)
        problems = fixture_problems(bp)
        if problems:
            raise BlueprintError("; ".join(problems))


def test_a_law_no_record_can_keep_is_reported_with_every_record() -> None:
    from maestro.agents.codegen.data import law_problems
    from maestro.agents.codegen.state import SynthesisConfig

    data = blueprint()
    data["laws"] = [
        {"table": "sailings", "holds": "seats_left < 0 and seats_left > 0", "says": "Impossible."}
    ]
    bp = parse_blueprint(data, clock=CLOCK)
    db = json.loads(team.package_files("impossible", SynthesisConfig())["db.json"])
    (line,) = law_problems(bp, db)
    assert (
        "(Impossible.: seats_left < 0 and seats_left > 0) is broken by every one of the 100 sailings"
        in line
    )


@pytest.mark.parametrize("name", ["model_group", "json", "copy"])
def test_a_field_named_as_the_record_models_own_is_the_blueprints_to_rename(name: str) -> None:
    data = blueprint()
    data["entities"][0]["fields"][name] = "str"
    with pytest.raises(BlueprintError, match=f"{name!r} is a name the record models keep"):
        parse_blueprint(data, clock=CLOCK)
