"""Unit tests derived from a blueprint's operations, run against generated tools.

For each operation: a call on a record that meets every precondition must succeed and leave
every declared effect in place (a read must return the record); a call on a record that breaks
one precondition must fail with a ToolError and change nothing; a call on a key that does not
exist must fail with a ToolError. The tools run wherever the given domain runs them: the
synthesis passes a sandboxed domain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from maestro.agents.codegen.blueprint import Blueprint, Operation, Scalar
from maestro.agents.codegen.render import Database
from maestro.domains.package import Domain


@dataclass(frozen=True)
class ToolTest:
    """One call of one tool on a prepared record, and what must come of it."""

    name: str
    operation: str
    arguments: dict[str, Any]
    table: str
    key: str
    #: Fields written onto the record before the call (to meet or break a precondition).
    setup: dict[str, Any]
    expect_ok: bool
    #: Fields the record must hold after the call.
    expect_fields: dict[str, Any] = field(default_factory=dict)


def _sample(ptype: str, name: str, bp: Blueprint, db: Database) -> Any:
    for e in bp.entities:
        if e.key == name and db.get(e.table):
            return sorted(db[e.table])[0]
    return {"str": "test value", "int": 2, "float": 2.5, "bool": True}[ptype]


def _other_value(choices: tuple[str, ...], allowed: list[Scalar]) -> str | None:
    rest = [c for c in choices if c not in allowed]
    return rest[0] if rest else None


def operation_tests(bp: Blueprint, op: Operation, db: Database) -> list[ToolTest]:
    """The tests one operation's code must pass."""
    entity = bp.entity(op.table)
    keys = sorted(db.get(op.table, {}))
    if not keys:
        return []
    key = keys[0]
    args = {p: _sample(t, p, bp, db) for p, t in op.params.items()}
    args[entity.key] = key
    meets = {f: allowed[0] for f, allowed in op.requires.items()}
    effects = {
        f: args[v[1:]] if isinstance(v, str) and v.startswith("$") else v
        for f, v in op.sets.items()
    }
    tests = [
        ToolTest(
            f"{op.name}: succeeds when allowed", op.name, args, op.table, key, meets, True, effects
        )
    ]
    types = entity.field_types()
    for fname, allowed in op.requires.items():
        ftype = types[fname]
        if ftype.base == "enum":
            bad: Any = _other_value(ftype.choices, allowed)
        elif ftype.base == "bool":
            bad = not allowed[0] if len(allowed) == 1 else None
        else:
            bad = None  # no single value is sure to break an open-ended condition
        if bad is None:
            continue
        setup = {**meets, fname: bad}
        tests.append(
            ToolTest(
                f"{op.name}: refuses when {fname} is {bad!r} (allowed: {allowed})",
                op.name,
                args,
                op.table,
                key,
                setup,
                False,
                setup,
            )
        )
    missing = {**args, entity.key: f"{entity.prefix}0000"}
    tests.append(
        ToolTest(
            f"{op.name}: refuses an unknown {entity.key}",
            op.name,
            missing,
            op.table,
            key,
            meets,
            False,
        )
    )
    return tests


def run_tests(domain: Domain, tests: list[ToolTest]) -> list[str]:
    """Run each test on a fresh session; one line per failure, naming what was expected."""
    failures: list[str] = []
    for t in tests:
        session = domain.start_session()
        record = session.get(t.table, t.key)
        if record is None:
            failures.append(f"{t.name}: test record {t.table}/{t.key} is missing")
            continue
        session.put(t.table, {**record, **t.setup})
        out = domain.toolkit.call(session, t.operation, t.arguments)
        call = f"{t.operation}({', '.join(f'{k}={v!r}' for k, v in t.arguments.items())})"
        if t.expect_ok and not out.ok:
            failures.append(f"{t.name}: {call} failed: {out.content}")
            continue
        if not t.expect_ok and out.status != "tool_error":
            got = "succeeded" if out.ok else f"ended with {out.status}: {out.content}"
            failures.append(f"{t.name}: {call} should raise ToolError but {got}")
            continue
        after = session.get(t.table, t.key) or {}
        for fname, want in t.expect_fields.items():
            if after.get(fname) != want:
                failures.append(
                    f"{t.name}: after {call}, {t.table}/{t.key}.{fname} is "
                    f"{after.get(fname)!r}, expected {want!r}"
                )
        if t.expect_ok and not t.expect_fields and t.key not in out.content:
            failures.append(f"{t.name}: {call} returned {out.content[:200]!r}, not the record")
    return failures
