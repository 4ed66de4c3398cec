"""The blueprint's newer forms, each derived into tests at its boundary and run in the sandbox
against a right and a wrong tool: a comparison of a parameter with a field, a count of what must
not exist yet, a conditional check, a computed fee, a second record a create adds, a restored
value, and a quote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from maestro.agents.codegen.checks import operation_tests, sample_database
from maestro.agents.codegen.normalise import parse_blueprint
from maestro.agents.codegen.render import db_json, laws_json, manifest_json, models_source
from maestro.agents.codegen.state import SynthesisConfig
from maestro.agents.codegen.tools_code import normalise_tool, tools_source
from maestro.agents.codegen.verify import run_tests
from maestro.domains.sandbox import load_sandboxed_domain

CLOCK = SynthesisConfig().clock
RENTALS: dict[str, Any] = {
    "domain_id": "car_returns",
    "name": "Returns desk",
    "description": "A car rental's return desk.",
    "entities": [
        {
            "name": "Customer",
            "table": "customers",
            "key": "customer_id",
            "prefix": "CU",
            "fields": {"email": "str"},
        },
        {
            "name": "CarClass",
            "table": "car_classes",
            "key": "car_class_id",
            "prefix": "CC",
            "catalog": True,
            "fields": {"name": "str", "daily_rate": "float:20..300", "premium": "bool"},
        },
        {
            "name": "Rental",
            "table": "rentals",
            "key": "rental_id",
            "prefix": "RN",
            "fields": {
                "customer_id": "ref:customers",
                "car_class_id": "ref:car_classes",
                "due_at": "datetime:-20d..+20d",
                "mileage_out": "int:0..200000",
                "status": "enum:active|returned",
                "cabin": "enum:standard|plus",
            },
        },
        {
            "name": "Return",
            "table": "returns",
            "key": "return_id",
            "prefix": "RT",
            "fields": {
                "rental_id": "ref:rentals",
                "mileage_in": "int:0..300000",
                "fuel_level": "float:0..1",
                "late_fee": "float:0..5000",
                "returned_at": "datetime:-30d..0d",
            },
        },
        {
            "name": "Charge",
            "table": "charges",
            "key": "charge_id",
            "prefix": "CH",
            "fields": {"rental_id": "ref:rentals", "amount": "float:0..10000", "reason": "str"},
        },
        {
            "name": "Upgrade",
            "table": "upgrades",
            "key": "upgrade_id",
            "prefix": "UP",
            "fields": {
                "rental_id": "ref:rentals",
                "previous_cabin": "enum:standard|plus",
                "status": "enum:active|cancelled",
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
            "name": "get_rental",
            "kind": "read",
            "table": "rentals",
            "description": "Show.",
            "params": {"rental_id": "str"},
        },
        {
            "name": "list_rentals",
            "kind": "list",
            "table": "rentals",
            "description": "List.",
            "by": ["customer_id"],
        },
        {
            "name": "record_return",
            "kind": "create",
            "table": "returns",
            "description": "Record a car's return, its late fee and the bill.",
            "params": {"rental_id": "str", "mileage_in": "int", "fuel_level": "float"},
            "adds": {"bill": "charges"},
            "requires": [
                {"check": "rental_id.status = 'active'"},
                {"check": "$mileage_in >= rental_id.mileage_out"},
                {"check": "count(returns where rental_id = $rental_id) = 0"},
                {"check": "$fuel_level >= 0.5", "when": "rental_id.car_class_id.premium"},
            ],
            "sets": {
                "new.rental_id": "$rental_id",
                "new.mileage_in": "$mileage_in",
                "new.fuel_level": "$fuel_level",
                "new.returned_at": "$now",
                "new.late_fee": {"expr": "25 * max(0, days_between(rental_id.due_at, now))"},
                "rental_id.status": "returned",
                "bill.rental_id": "$rental_id",
                "bill.amount": {
                    "expr": "round(rental_id.car_class_id.daily_rate * 3 + 25 * max(0, days_between(rental_id.due_at, now)), 2)"
                },
                "bill.reason": "rental and late fee",
            },
        },
        {
            "name": "cancel_upgrade",
            "kind": "update",
            "table": "upgrades",
            "description": "Cancel an upgrade: the rental goes back to its cabin.",
            "params": {"upgrade_id": "str"},
            "requires": [{"check": "status = 'active'"}],
            "sets": {
                "status": "cancelled",
                "rental_id.cabin": {"restore": "upgrade_id.previous_cabin"},
            },
        },
        {
            "name": "quote_return",
            "kind": "quote",
            "table": "rentals",
            "description": "What returning now would cost.",
            "params": {"rental_id": "str"},
            "requires": [{"check": "status = 'active'"}],
            "returns": {
                "late_fee": "25 * max(0, days_between(due_at, now))",
                "days_late": "max(0, days_between(due_at, now))",
            },
        },
    ],
    "rules": ["Verify the customer by email first."],
    "laws": [
        {
            "table": "returns",
            "holds": "mileage_in >= rental_id.mileage_out",
            "says": "A car comes back with at least the miles it left with.",
        },
        {
            "table": "rentals",
            "holds": "count(returns where rental_id = self) <= 1",
            "says": "A rental is returned once.",
        },
    ],
}

RECORD_RETURN = """def record_return(db, rental_id, mileage_in, fuel_level):
    rental = db.require("rentals", rental_id)
    if rental["status"] != "active":
        raise ToolError("the rental is not active")
    if mileage_in < rental["mileage_out"]:
        raise ToolError("mileage in is below mileage out")
    if db.find("returns", rental_id=rental_id):
        raise ToolError("this rental was returned already")
    car_class = db.require("car_classes", rental["car_class_id"])
    if car_class["premium"] and fuel_level < 0.5:
        raise ToolError("premium cars come back at least half full")
    late = max(0, (db.today() - datetime.fromisoformat(rental["due_at"]).date()).days)
    db.update("rentals", rental_id, status="returned")
    db.insert("charges", {"charge_id": db.new_id("charges", "CH"), "rental_id": rental_id,
        "amount": round(car_class["daily_rate"] * 3 + 25 * late, 2), "reason": "rental and late fee"})
    return db.insert("returns", {"return_id": db.new_id("returns", "RT"), "rental_id": rental_id,
        "mileage_in": mileage_in, "fuel_level": fuel_level, "late_fee": 25 * late,
        "returned_at": db.now().isoformat(timespec="seconds")})"""
CANCEL_UPGRADE = """def cancel_upgrade(db, upgrade_id):
    upgrade = db.require("upgrades", upgrade_id)
    if upgrade["status"] != "active":
        raise ToolError("the upgrade is not active")
    db.update("rentals", upgrade["rental_id"], cabin=upgrade["previous_cabin"])
    return db.update("upgrades", upgrade_id, status="cancelled")"""
QUOTE_RETURN = """def quote_return(db, rental_id):
    rental = db.require("rentals", rental_id)
    if rental["status"] != "active":
        raise ToolError("the rental is not active")
    late = max(0, (db.today() - datetime.fromisoformat(rental["due_at"]).date()).days)
    return {"late_fee": 25 * late, "days_late": late}"""
READS = {
    "find_customer": """def find_customer(db, email):
    found = db.find("customers", email=email)
    if not found:
        raise ToolError("no customer")
    return found[0]""",
    "get_rental": """def get_rental(db, rental_id):
    return db.require("rentals", rental_id)""",
    "list_rentals": """def list_rentals(db, customer_id):
    db.require("customers", customer_id)
    return db.find("rentals", customer_id=customer_id)""",
}
GOOD = {
    **READS,
    "record_return": RECORD_RETURN,
    "cancel_upgrade": CANCEL_UPGRADE,
    "quote_return": QUOTE_RETURN,
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    bp = parse_blueprint(RENTALS, clock=CLOCK)
    db = sample_database(bp)
    root = tmp_path_factory.mktemp("returns")
    files = {
        "models.py": models_source(bp),
        "db.json": db_json({t: {} for t in db}),  # laws hold on an empty world
        "laws.json": laws_json(bp),
        "domain.json": manifest_json(bp, domain_id="car_returns", synthesis_id="t", run_id=None),
        "policy.md": "# Policy\n1. Verify.\n",
        "tasks.jsonl": "",
    }
    files["db.json"] = db_json(db)
    files.pop("laws.json")  # the sample world's random records break the laws; tests add them
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return bp, db, root


def run(world: tuple[Any, Any, Path], name: str, code: str, db: Any = None) -> list[str]:
    bp, sample, root = world
    db = sample if db is None else db
    functions = {op.name: normalise_tool(bp, op, GOOD[op.name]) for op in bp.operations}
    functions[name] = normalise_tool(bp, bp.operation(name), code)
    (root / "tools.py").write_text(tools_source(bp, functions), encoding="utf-8")
    with load_sandboxed_domain(root, check_gold=False) as domain:
        return run_tests(domain, operation_tests(bp, bp.operation(name), db))


def test_each_new_form_is_tested_at_its_boundary(world: tuple[Any, Any, Path]) -> None:
    bp, db, _ = world
    names = [t.name for t in operation_tests(bp, bp.operation("record_return"), db)]
    text = "\n".join(names)
    # the parameter compared with a field: one mile short is refused
    assert "($mileage_in >= rental_id.mileage_out fails)" in text
    # the count: one return already there is refused
    assert "(count(returns where rental_id = $rental_id) = 0 fails)" in text
    # the conditional check: refused on a premium car, accepted when the car is not premium
    assert "($fuel_level >= 0.5 fails)" in text
    assert "so 'rental_id.car_class_id.premium' does not hold and its check does not apply" in text
    success = operation_tests(bp, bp.operation("record_return"), db)[0]
    assert [a.table for a in success.creates] == ["returns", "charges"]
    fee = next(e for e in success.expect if e.field == "late_fee")
    assert isinstance(fee.value, int | float)
    quote = operation_tests(bp, bp.operation("quote_return"), db)[0]
    assert {r.name for r in quote.returns} == {"late_fee", "days_late"}


def test_the_right_tools_pass_every_new_forms_tests(world: tuple[Any, Any, Path]) -> None:
    for name in ("record_return", "cancel_upgrade", "quote_return"):
        assert run(world, name, GOOD[name]) == [], name


@pytest.mark.parametrize(
    ("name", "wrong", "expected"),
    [
        (
            "record_return",
            (
                'if mileage_in < rental["mileage_out"]:',
                'if mileage_in < rental["mileage_out"] - 1:',
            ),
            "($mileage_in >= rental_id.mileage_out fails)",
        ),
        (
            "record_return",
            (
                '    if db.find("returns", rental_id=rental_id):\n        raise ToolError("this rental was returned already")\n',
                "",
            ),
            "(count(returns where rental_id = $rental_id) = 0 fails)",
        ),
        (
            "record_return",
            ('if car_class["premium"] and fuel_level < 0.5:', "if fuel_level < 0.5:"),
            "does not hold and its check does not apply",
        ),
        (
            "record_return",
            ('"amount": round(car_class["daily_rate"] * 3 + 25 * late, 2)', '"amount": 0.0'),
            "charges/",
        ),
        (
            "record_return",
            ('    db.insert("charges",', '    0 and db.insert("charges",'),
            "added 0 charges record(s), expected 1",
        ),
        (
            "cancel_upgrade",
            (
                'cabin=upgrade["previous_cabin"]',
                'cabin={"plus": "standard", "standard": "plus"}[upgrade["previous_cabin"]]',
            ),
            ".cabin is '",
        ),
        ("quote_return", ('"days_late": late', '"days_late": late + 1'), "answered days_late"),
    ],
)
def test_a_tool_that_gets_a_new_form_wrong_fails_its_test(
    world: tuple[Any, Any, Path], name: str, wrong: tuple[str, str], expected: str
) -> None:
    code = GOOD[name]
    assert wrong[0] in code
    found = run(world, name, code.replace(wrong[0], wrong[1]))
    assert any(expected in line for line in found), found


def test_a_tool_that_breaks_a_law_fails_its_test_naming_the_law(
    world: tuple[Any, Any, Path],
) -> None:
    bp, db, root = world
    lawful = json.loads(json.dumps(db))
    rentals = sorted(lawful["rentals"])
    for i, key in enumerate(sorted(lawful["returns"])):
        rental = lawful["rentals"][rentals[i]]
        lawful["returns"][key].update(rental_id=rentals[i], mileage_in=rental["mileage_out"] + 10)
    (root / "db.json").write_text(db_json(lawful), encoding="utf-8")
    (root / "laws.json").write_text(laws_json(bp), encoding="utf-8")
    try:
        # Every effect the blueprint names is right; the tool also moves the car's mileage out.
        careless = RECORD_RETURN.replace(
            'db.update("rentals", rental_id, status="returned")',
            'db.update("rentals", rental_id, status="returned", mileage_out=mileage_in + 500)',
        )
        assert careless != RECORD_RETURN
        found = run(world, "record_return", careless, lawful)
        law = "law returns_1 (A car comes back with at least the miles it left with."
        assert any(law in f and "such as returns/" in f for f in found), found
        assert run(world, "record_return", RECORD_RETURN, lawful) == []
    finally:
        (root / "db.json").write_text(db_json(db), encoding="utf-8")
        (root / "laws.json").unlink()


BANK: dict[str, Any] = {
    "domain_id": "card_disputes",
    "name": "Disputes desk",
    "description": "A card issuer's dispute desk.",
    "entities": [
        {
            "name": "Account",
            "table": "accounts",
            "key": "account_id",
            "prefix": "AC",
            "fields": {"email": "str", "disputed_amount": "float:0..10000"},
        },
        {
            "name": "Dispute",
            "table": "disputes",
            "key": "dispute_id",
            "prefix": "DP",
            "fields": {
                "account_id": "ref:accounts",
                "amount": "float:1..5000",
                "status": "enum:open|withdrawn",
            },
        },
    ],
    "operations": [
        {
            "name": "find_account",
            "kind": "lookup",
            "table": "accounts",
            "description": "Find.",
            "by": ["email"],
        },
        {
            "name": "get_dispute",
            "kind": "read",
            "table": "disputes",
            "description": "Show.",
            "params": {"dispute_id": "str"},
        },
        {
            "name": "list_disputes",
            "kind": "list",
            "table": "disputes",
            "description": "List.",
            "by": ["account_id"],
        },
        {
            "name": "get_account",
            "kind": "read",
            "table": "accounts",
            "description": "Show.",
            "params": {"account_id": "str"},
        },
        {
            "name": "withdraw_dispute",
            "kind": "update",
            "table": "disputes",
            "description": "Withdraw an open dispute: its amount leaves the hold.",
            "params": {"dispute_id": "str"},
            "requires": [{"check": "status = 'open'"}],
            "sets": {"status": "withdrawn", "account_id.disputed_amount": {"subtract": "amount"}},
        },
    ],
    "rules": ["Verify the account holder by email."],
    "laws": [
        {"table": "accounts", "holds": "disputed_amount >= 0", "says": "A hold is never negative."}
    ],
}
WITHDRAW = """def withdraw_dispute(db, dispute_id):
    dispute = db.require("disputes", dispute_id)
    if dispute["status"] != "open":
        raise ToolError("the dispute is not open")
    account = db.require("accounts", dispute["account_id"])
    db.update("accounts", account["account_id"], disputed_amount=round(account["disputed_amount"] - dispute["amount"], 2))
    return db.update("disputes", dispute_id, status="withdrawn")"""


def test_a_law_broken_on_a_prepared_state_the_blueprint_itself_breaks_is_not_the_tools(
    tmp_path: Path,
) -> None:
    """A capable model's card desk was rejected: the success test opened a withdrawn dispute
    whose amount was in no hold, so subtracting it (as the blueprint says) made the hold
    negative, and the tool was blamed for the law whichever way it was written."""
    bp = parse_blueprint(BANK, clock=CLOCK)
    db = {
        "accounts": {
            "AC1001": {"account_id": "AC1001", "email": "a@b.com", "disputed_amount": 0.0}
        },
        "disputes": {
            "DP1001": {
                "dispute_id": "DP1001",
                "account_id": "AC1001",
                "amount": 25.0,
                "status": "withdrawn",
            }
        },
    }
    tests = operation_tests(bp, bp.operation("withdraw_dispute"), db)
    success = next(t for t in tests if t.expect_ok)
    assert success.keeps_laws is False  # the blueprint's own subtraction breaks the law here
    files = {
        "models.py": models_source(bp),
        "db.json": db_json(db),
        "laws.json": laws_json(bp),
        "domain.json": manifest_json(bp, domain_id="card_disputes", synthesis_id="t", run_id=None),
        "policy.md": "# Policy\n1. Verify.\n",
        "tasks.jsonl": "",
    }
    functions = {
        "find_account": READS["find_customer"]
        .replace("find_customer", "find_account")
        .replace("customers", "accounts"),
        "get_dispute": "def get_dispute(db, dispute_id):\n    return db.require('disputes', dispute_id)",
        "list_disputes": "def list_disputes(db, account_id):\n    db.require('accounts', account_id)\n    return db.find('disputes', account_id=account_id)",
        "get_account": "def get_account(db, account_id):\n    return db.require('accounts', account_id)",
        "withdraw_dispute": WITHDRAW,
    }
    code = {op.name: normalise_tool(bp, op, functions[op.name]) for op in bp.operations}
    files["tools.py"] = tools_source(bp, code)
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    with load_sandboxed_domain(tmp_path, check_gold=False) as domain:
        assert run_tests(domain, tests) == []
