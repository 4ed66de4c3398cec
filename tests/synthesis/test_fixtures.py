"""Derived tests whose fixture must meet every check at once: the event ticketing blueprint of
the capable-model check (``cases/ticketing_blueprint.json``, as the model wrote it), whose
upgrade was rejected three times because its own success test contradicted its spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maestro.agents.codegen.blueprint import Blueprint
from maestro.agents.codegen.checks import (
    ToolTest,
    contradictions,
    operation_tests,
    prepared,
    sample_database,
)
from maestro.agents.codegen.data import Database
from maestro.agents.codegen.normalise import parse_blueprint
from maestro.agents.codegen.render import db_json, manifest_json, models_source
from maestro.agents.codegen.state import SynthesisConfig
from maestro.agents.codegen.tools_code import normalise_tool, tools_source
from maestro.agents.codegen.verify import run_tests
from maestro.domains.sandbox import load_sandboxed_domain

CASES = Path(__file__).parent / "cases"

# The spec-faithful code the capable model wrote (request 0014): it checks the order's own
# category and the target category separately, as the prompt lists them.
UPGRADE = '''@tool("write")
def upgrade_to_premium(db: Database, order_id: str, event_id: str, new_category_id: str, quantity: int) -> dict:
    """Move an active standard order to a premium category of the same event."""
    order = db.require("orders", order_id)
    event = db.require("events", event_id)
    new_category = db.require("price_categories", new_category_id)
    if order.get("status") not in ("active",):
        raise ToolError("order_id.status must be 'active'")
    if order.get("event_id") != event_id:
        raise ToolError("order_id.event_id must equal event_id")
    if new_category.get("event_id") != event_id:
        raise ToolError("new_category_id.event_id must equal event_id")
    starts_at = event.get("starts_at")
    if starts_at is None or datetime.fromisoformat(starts_at) < db.now():
        raise ToolError("event_id.starts_at must not be in the past")
    old_category_id = order.get("category_id")
    old_category = db.get("price_categories", old_category_id) if old_category_id else None
    if old_category is None or old_category.get("level") not in ("standard",):
        raise ToolError("order_id.category_id.level must be 'standard'")
    if new_category.get("level") not in ("premium",):
        raise ToolError("new_category_id.level must be 'premium'")
    if order.get("quantity") != quantity:
        raise ToolError("order_id.quantity must equal quantity")
    if new_category.get("seats_left") is None or new_category["seats_left"] < quantity:
        raise ToolError("new_category_id.seats_left must be at least quantity")
    db.update("price_categories", old_category_id, seats_left=(old_category.get("seats_left") or 0) + quantity)
    seats_now = db.require("price_categories", new_category_id).get("seats_left") or 0
    db.update("price_categories", new_category_id, seats_left=seats_now - quantity)
    return db.update("orders", order_id, category_id=new_category_id, unit_price=round(new_category["price"], 2))
'''


def ticketing() -> Blueprint:
    raw = json.loads((CASES / "ticketing_blueprint.json").read_text())
    return parse_blueprint(raw, clock=SynthesisConfig().clock)


def same_category_db(bp: Blueprint) -> Database:
    """The run's shape: the first order is in the first price category, the one the test
    names as the upgrade's target."""
    db = sample_database(bp)
    db["orders"]["OR1001"]["category_id"] = "PC1001"
    return db


def test_checks_reached_by_two_paths_get_two_records() -> None:
    bp = ticketing()
    db = same_category_db(bp)
    tests = operation_tests(bp, bp.operation("upgrade_to_premium"), db)
    success = [t for t in tests if t.expect_ok]
    assert len(success) == 2  # every check at its boundary, and the agent rule's case
    for t in success:
        assert t.arguments["new_category_id"] == "PC1001"
        state = prepared(db, t.setup)
        own = (state.get("orders", "OR1001") or {})["category_id"]
        assert own != "PC1001"  # the order's own category is another record...
        assert (state.get("price_categories", own) or {})["level"] == "standard"  # ...standard
        assert (state.get("price_categories", "PC1001") or {})["level"] == "premium"
    assert contradictions(bp, bp.operation("upgrade_to_premium"), db, tests) == []


def test_the_spec_faithful_upgrade_passes_its_derived_tests(tmp_path: Path) -> None:
    bp = ticketing()
    db = same_category_db(bp)
    op = bp.operation("upgrade_to_premium")
    files = {
        "models.py": models_source(bp),
        "db.json": db_json(db),
        "domain.json": manifest_json(bp, domain_id="ticketing", synthesis_id="t", run_id=None),
        "tools.py": tools_source(bp, {op.name: normalise_tool(bp, op, UPGRADE)}),
        "policy.md": "# Policy\n1. Pending.\n",
        "tasks.jsonl": "",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    tests = operation_tests(bp, op, db)
    with load_sandboxed_domain(tmp_path, check_gold=False) as domain:
        assert run_tests(domain, tests) == []


def test_a_success_test_that_breaks_a_check_is_a_pipeline_error() -> None:
    """The exact test the run sent back to the model three times: the order's category is the
    target category, prepared as premium, while the order's category must be standard."""
    bp = ticketing()
    db = same_category_db(bp)
    quoted = ToolTest(
        "upgrade_to_premium: succeeds when every check passes (at its boundary)",
        "upgrade_to_premium",
        {"order_id": "OR1001", "event_id": "EV1001", "new_category_id": "PC1001", "quantity": 2},
        (
            ("events", "EV1001", {"starts_at": "2026-01-05T09:00:00"}),
            ("orders", "OR1001", {"status": "active", "event_id": "EV1001", "quantity": 2}),
            (
                "price_categories",
                "PC1001",
                {"event_id": "EV1001", "level": "premium", "seats_left": 2},
            ),
        ),
        True,
    )
    found = contradictions(bp, bp.operation("upgrade_to_premium"), db, [quoted])
    assert found == [
        "'upgrade_to_premium: succeeds when every check passes (at its boundary)' expects "
        "success but order_id.category_id.level in ['standard'] does not hold "
        "(order_id.category_id.level = 'premium')"
    ]


@pytest.mark.parametrize("name", [op.name for op in ticketing().operations])
def test_every_ticketing_operation_derives_consistent_tests(name: str) -> None:
    bp = ticketing()
    db = same_category_db(bp)
    tests = operation_tests(bp, bp.operation(name), db)  # raises TestDerivationError if not
    assert tests


RENTAL: dict[str, object] = {
    "domain_id": "rentals",
    "name": "Rentals",
    "description": "A car rental desk.",
    "entities": [
        {
            "name": "Customer",
            "table": "customers",
            "key": "customer_id",
            "prefix": "CU",
            "fields": {"email": "str", "license_expires": "date:-1y..+5y"},
        },
        {
            "name": "Reservation",
            "table": "reservations",
            "key": "reservation_id",
            "prefix": "RS",
            "fields": {
                "customer_id": "ref:customers",
                "pickup_at": "datetime:-40d..+45d",
                "return_at": "datetime:-39d..+75d",
                "status": "enum:reserved|picked_up|completed",
            },
        },
    ],
    "operations": [
        {
            "name": "find_customer",
            "kind": "lookup",
            "table": "customers",
            "description": "Find.",
            "by": ["email"],
        },
        {
            "name": "get_reservation",
            "kind": "read",
            "table": "reservations",
            "description": "Show.",
            "params": {"reservation_id": "str"},
        },
        {
            "name": "list_reservations",
            "kind": "list",
            "table": "reservations",
            "description": "List.",
            "by": ["customer_id"],
        },
        {
            "name": "get_customer",
            "kind": "read",
            "table": "customers",
            "description": "Show.",
            "params": {"customer_id": "str"},
        },
        {
            "name": "extend_reservation",
            "kind": "update",
            "table": "reservations",
            "description": "Move the return later.",
            "params": {"reservation_id": "str", "new_return_at": "datetime"},
            "requires": [
                {"check": "status in ['reserved', 'picked_up']"},
                {"check": "return_at >= now"},
                {"check": "date($new_return_at) > date(return_at)"},
                {"check": "days_between(date(pickup_at), date($new_return_at)) <= 30"},
                {"check": "customer_id.license_expires >= date($new_return_at)"},
            ],
            "sets": {"return_at": "$new_return_at"},
        },
    ],
    "rules": ["Verify the customer by email."],
    "agent_rules": [
        {
            "operation": "extend_reservation",
            "rule": "An extension of more than 7 days at once is arranged at the branch.",
            "refuse_when": [{"check": "days_between(date(return_at), date($new_return_at)) > 7"}],
        },
    ],
}


def test_values_that_must_move_together_are_found_together() -> None:
    """A capable model's rental blueprint was refused because its agent rule (an extension of
    more than 7 days) seemed never to apply: meeting it moves the new return date, which breaks
    the 30-day limit unless the pickup moves with it."""
    bp = parse_blueprint(RENTAL, clock=SynthesisConfig().clock)
    db = sample_database(bp)
    tests = operation_tests(bp, bp.operation("extend_reservation"), db)
    rule = next(t for t in tests if t.applies)
    state = prepared(db, rule.setup)
    res = state.get("reservations", rule.arguments["reservation_id"]) or {}
    new = rule.arguments["new_return_at"][:10]
    from datetime import date

    gap = (date.fromisoformat(new) - date.fromisoformat(res["return_at"][:10])).days
    span = (date.fromisoformat(new) - date.fromisoformat(res["pickup_at"][:10])).days
    assert gap > 7 and span <= 30
    assert contradictions(bp, bp.operation("extend_reservation"), db, tests) == []
    # And the boundary of a limit read by the day is found to the day.
    success = next(t for t in tests if t.expect_ok and not t.applies and not t.lifted)
    state = prepared(db, success.setup)
    res = state.get("reservations", success.arguments["reservation_id"]) or {}
    assert (
        date.fromisoformat(success.arguments["new_return_at"][:10])
        - date.fromisoformat(res["pickup_at"][:10])
    ).days == 30
