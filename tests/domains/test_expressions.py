"""The expression language of blueprints and laws: its text, its types and its meaning."""

from __future__ import annotations

import re
from datetime import date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maestro.domains.expressions import (
    Aggregate,
    Arith,
    Compare,
    Env,
    EvaluationError,
    ExpressionError,
    Lit,
    Logic,
    Node,
    Path,
    Scope,
    TableShape,
    VType,
    check_condition,
    evaluate,
    infer,
    parse,
    unparse,
)

CLOCK = datetime(2026, 1, 5, 9, 0)
TABLES = {
    "rentals": TableShape(
        "rentals",
        "rental_id",
        {
            "customer_id": VType("ref", ref="customers"),
            "pickup_at": VType("datetime"),
            "due_at": VType("datetime"),
            "daily_rate": VType("float"),
            "mileage_out": VType("int"),
            "status": VType("enum", choices=("reserved", "active", "returned")),
            "note": VType("str", nullable=True),
        },
    ),
    "returns": TableShape(
        "returns",
        "return_id",
        {
            "rental_id": VType("ref", ref="rentals"),
            "returned_at": VType("datetime"),
            "mileage_in": VType("int"),
            "fee": VType("float"),
        },
    ),
    "customers": TableShape("customers", "customer_id", {"born_on": VType("date")}),
}
DB = {
    "customers": {"CU1": {"customer_id": "CU1", "born_on": "1990-04-01"}},
    "rentals": {
        "RN1": {
            "rental_id": "RN1",
            "customer_id": "CU1",
            "pickup_at": "2026-01-01T10:00:00",
            "due_at": "2026-01-04T10:00:00",
            "daily_rate": 42.5,
            "mileage_out": 1200,
            "status": "returned",
            "note": None,
        },
        "RN2": {
            "rental_id": "RN2",
            "customer_id": "CU1",
            "pickup_at": "2026-01-06T10:00:00",
            "due_at": "2026-01-09T10:00:00",
            "daily_rate": 0.0,
            "mileage_out": 800,
            "status": "reserved",
            "note": "child seat",
        },
    },
    "returns": {
        "RT1": {
            "return_id": "RT1",
            "rental_id": "RN1",
            "returned_at": "2026-01-04T12:00:00",
            "mileage_in": 1550,
            "fee": 12.0,
        }
    },
}
OP = Scope(
    TABLES,
    params={"rental_id": VType("ref", ref="rentals"), "days": VType("int"), "reason": VType("str")},
    records={"rental_id": "rentals"},
)
LAW = Scope(TABLES, records={"self": "returns", "return_id": "returns"}, own="self")


def env(scope: Scope, **args: object) -> Env:
    def get(table: str, key: str) -> dict[str, object] | None:
        return DB.get(table, {}).get(key)

    def rows(table: str) -> list[tuple[str, dict[str, object]]]:
        return list(DB.get(table, {}).items())

    roots = {"self": args.pop("self")} if "self" in args else {}
    return Env(scope, get, rows, CLOCK, dict(args), roots)


def value(text: str, scope: Scope = OP, **args: object) -> object:
    node = parse(text)
    infer(node, scope)
    return evaluate(node, env(scope, **args))


def test_arithmetic_dates_and_counts_mean_what_they_say() -> None:
    assert value("rental_id.daily_rate * $days + 10", rental_id="RN1", days=3) == 137.5
    assert value("days_between(rental_id.pickup_at, rental_id.due_at)", rental_id="RN1") == 3
    assert value("hours_between(rental_id.pickup_at, rental_id.due_at)", rental_id="RN1") == 72
    assert value("rental_id.due_at + days($days)", rental_id="RN1", days=2) == datetime(
        2026, 1, 6, 10, 0
    )
    assert value("date(rental_id.pickup_at) <= today - days(4)", rental_id="RN1") is True
    assert value("rental_id.customer_id.born_on < date('2000-01-01')", rental_id="RN1") is True
    assert value("count(rentals where customer_id = $rental_id.customer_id)", rental_id="RN1") == 2
    # inside the where, the counted table's key is the counted record's
    assert value("count(rentals where rental_id != $rental_id)", rental_id="RN1") == 1
    assert (
        value("count(returns where rental_id = $rental_id and mileage_in >= 1000)", rental_id="RN1")
        == 1
    )
    assert value("sum(returns.fee where rental_id = $rental_id)", rental_id="RN2") == 0
    assert value("round(2.345, 2)") == 2.35  # half up, as money is rounded
    assert value("min(3, 1.5) + max(2, 4) + abs(-1)") == 6.5
    assert value("rental_id.status in ['returned', 'active']", rental_id="RN1") is True
    assert value("if(rental_id.status = 'returned', 10, 2.5)", rental_id="RN1") == 10
    assert value("if(rental_id.status = 'returned', 10, 2.5)", rental_id="RN2") == 2.5
    assert value("if(rental_id.note = 'x', 1, 2)", rental_id="RN1") is None  # a null condition
    with pytest.raises(ExpressionError, match="two values of one type"):
        infer(parse("if(true, 1, 'a')"), OP)


def test_a_law_reads_its_own_record_and_what_points_at_it() -> None:
    assert value("mileage_in >= rental_id.mileage_out", LAW, self="RT1") is True
    assert value("returned_at >= rental_id.pickup_at", LAW, self="RT1") is True
    rental_scope = Scope(TABLES, records={"self": "rentals", "rental_id": "rentals"}, own="self")
    assert value("count(returns where rental_id = self) <= 1", rental_scope, self="RN1") is True
    assert value("count(returns where rental_id = rental_id)", rental_scope, self="RN1") == 1


def test_a_null_is_neither_true_nor_false() -> None:
    assert value("rental_id.note = 'child seat'", rental_id="RN1") is None
    assert value("rental_id.note = 'child seat' or true", rental_id="RN1") is True
    assert value("rental_id.note = 'child seat' and false", rental_id="RN1") is False
    assert value("not (rental_id.note = 'x')", rental_id="RN1") is None
    assert value("rental_id.note is null", rental_id="RN1") is True
    assert value("rental_id.daily_rate + $days", rental_id="RN9", days=1) is None  # no record


def test_division_by_zero_is_a_located_error_not_a_crash() -> None:
    with pytest.raises(
        EvaluationError, match=re.escape("division by zero in '100 / rental_id.daily_rate'")
    ):
        value("100 / rental_id.daily_rate", rental_id="RN2")


@pytest.mark.parametrize(
    ("text", "scope", "message"),
    [
        ("rental_id.pickup_at + $reason", OP, "a datetime + a str"),
        ("rental_id.pickup_at - rental_id.due_at", OP, "days_between"),
        ("rental_id.status = 'retruned'", OP, "'retruned' is not a value of rental_id.status"),
        ("rental_id.pickup_at > today", OP, "compare a datetime with now"),
        ("rental_id.daily_rate > 'cheap'", OP, "cannot be compared"),
        ("count(refunds) = 0", OP, "no table 'refunds'"),
        ("sum(rentals.status) > 1", OP, "not a number field"),
        ("rental_id.mileage_ot > 3", OP, "rentals has no field 'mileage_ot'"),
        ("$nope = 1", OP, "'$nope' names no parameter"),
        ("rental_id.daily_rate", OP, "where a condition (true or false) is needed"),
        ("rental_id.mileage_out is null", OP, "never null"),
        ("mileage_in >= rentl_id.mileage_out", LAW, "'rentl_id' is neither"),
        ("frobnicate(1) = 1", OP, "unknown function 'frobnicate'"),
    ],
)
def test_every_ill_typed_expression_is_a_located_problem(
    text: str, scope: Scope, message: str
) -> None:
    with pytest.raises(ExpressionError, match=re.escape(message)):
        check_condition(parse(text), scope)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a = ", "found the end"),
        ("a = 1 )", "expected an operator or the end"),
        ("a ~ 1", "unexpected '~' at character 3"),
        ("count(1)", "expected a table name"),
        ("a not b", "expected 'in' after 'not'"),
        ("x" * 1100, "longer than 1000"),
        ("(" * 40 + "1" + ")" * 40, "nested more than"),
        (" + ".join(["1"] * 150), "more than 200 parts"),
    ],
)
def test_text_that_does_not_parse_says_where(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        parse(text)


# ----- printing and parsing agree ----------------------------------------------------------------

_names = st.sampled_from(["status", "fee", "rental_id", "mileage_in"])
_leaf = st.one_of(
    st.integers(0, 500).map(Lit),
    st.sampled_from(["a", "it's", "x y"]).map(Lit),
    st.booleans().map(Lit),
    st.just(Lit(None)),
    st.lists(_names, min_size=1, max_size=3).map(lambda p: Path(False, tuple(p))),
    _names.map(lambda n: Path(True, (n,))),
)


def _extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    return st.one_of(
        st.tuples(st.sampled_from("+-*/"), children, children).map(lambda t: Arith(*t)),
        st.tuples(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), children, children).map(
            lambda t: Compare(*t)
        ),
        st.tuples(st.sampled_from(["and", "or"]), st.lists(children, min_size=2, max_size=3)).map(
            lambda t: Logic(t[0], tuple(t[1]))
        ),
        st.tuples(st.sampled_from(["returns", "rentals"]), children).map(
            lambda t: Aggregate("count", t[0], None, t[1])
        ),
    )


def _flat(node: Node) -> Node:
    """Nested and/or of the same kind print as one; compare trees with them flattened."""
    if isinstance(node, Logic):
        items: list[Node] = []
        for item in (_flat(i) for i in node.items):
            items += list(item.items) if isinstance(item, Logic) and item.op == node.op else [item]
        return Logic(node.op, tuple(items))
    if isinstance(node, Arith):
        return Arith(node.op, _flat(node.left), _flat(node.right))
    if isinstance(node, Compare):
        return Compare(node.op, _flat(node.left), _flat(node.right))
    if isinstance(node, Aggregate) and node.where is not None:
        return Aggregate(node.kind, node.table, node.field, _flat(node.where))
    return node


@settings(max_examples=300, deadline=None)
@given(st.recursive(_leaf, _extend, max_leaves=8))
def test_what_is_printed_parses_back_to_the_same_tree(node: Node) -> None:
    text = unparse(node)
    if len(text) > 1000:
        return
    assert _flat(parse(text)) == _flat(node), text


def test_a_date_text_reads_as_a_date() -> None:
    assert value("date('2026-01-05') = today") is True
    assert value("date('not a date') is null") is True
    assert isinstance(value("today"), date)
