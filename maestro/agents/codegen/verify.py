"""Running derived unit tests (``checks.py``) against a domain's tools, wherever the domain
runs them (the synthesis passes a sandboxed domain): each test on a fresh session, prepared as
it says; one line per failure, naming the call, the prepared records and what was expected."""

from __future__ import annotations

import json
from typing import Any

from maestro.agents.codegen.checks import ToolTest
from maestro.agents.codegen.conditions import as_when
from maestro.domains.package import Domain


def _same(want: Any, got: Any, base: str) -> bool:
    if base in ("date", "datetime") and want is not None and got is not None:
        return as_when(want, base) == as_when(got, base)
    if (
        isinstance(want, int | float)
        and isinstance(got, int | float)
        and not isinstance(want, bool)
    ):
        return abs(want - got) < 0.005
    return bool(want == got)


def run_tests(domain: Domain, tests: list[ToolTest]) -> list[str]:
    """Run each test on a fresh session; one line per failure, naming what was expected."""
    failures: list[str] = []
    for t in tests:
        failures += _run_one(domain, t)
    return failures


def _run_one(domain: Domain, t: ToolTest) -> list[str]:
    session = domain.start_session()
    for table, key, fields in t.setup:
        record = session.get(table, key)
        if record is None:
            return [f"{t.name}: test record {table}/{key} is missing"]
        session.put(table, {**record, **fields})
    before_keys = set(session.keys(t.creates)) if t.creates else set()
    before = session.state_hash()
    out = domain.toolkit.call(session, t.operation, t.arguments)
    call = f"{t.operation}({', '.join(f'{k}={v!r}' for k, v in t.arguments.items())})"
    prepared = "; ".join(f"{tb}/{k} with {json.dumps(f, default=str)}" for tb, k, f in t.setup)
    on = f" on {prepared}" if prepared else ""
    if t.expect_ok and not out.ok:
        return [f"{t.name}: {call}{on} failed: {out.content[:300]}"]
    if not t.expect_ok:
        if out.status != "tool_error":
            got = "succeeded" if out.ok else f"ended with {out.status}: {out.content[:200]}"
            return [f"{t.name}: {call}{on} should raise ToolError but {got}"]
        if session.state_hash() != before:
            return [f"{t.name}: {call}{on} raised ToolError but changed the database"]
        return []
    failures = [
        f"{t.name}: {call} returned {out.content[:200]!r}, which does not show {s!r}"
        for s in t.shows
        if s not in out.content
    ]
    new_key = None
    if t.creates:
        added = sorted(set(session.keys(t.creates)) - before_keys)
        if len(added) != 1:
            return [
                *failures,
                f"{t.name}: {call} added {len(added)} {t.creates} record(s), expected 1",
            ]
        new_key = added[0]
        if (
            not new_key.startswith(t.creates_prefix)
            or not new_key[len(t.creates_prefix) :].isdigit()
        ):
            failures.append(
                f"{t.name}: the new key {new_key!r} is not {t.creates_prefix} and digits (db.new_id)"
            )
        if new_key not in out.content:
            failures.append(
                f"{t.name}: {call} returned {out.content[:200]!r}, which does not show the new key {new_key!r}"
            )
    for e in t.expect:
        where = e.key if e.key is not None else new_key
        after = session.get(e.table, str(where)) or {}
        if not _same(e.value, after.get(e.field), e.base):
            failures.append(
                f"{t.name}: after {call}{on}, {e.table}/{where}.{e.field} is {after.get(e.field)!r}, expected {e.value!r}"
            )
    return failures
