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
            spec = domain.tables.get(table)
            if spec is None or fields.get(spec.key_field) != key:
                return [f"{t.name}: test record {table}/{key} is missing"]
            record = {}
        session.put(table, {**record, **fields})
    before_keys = {a.table: set(session.keys(a.table)) for a in t.creates}
    before = session.state_hash()
    broken_before = domain.check_laws(session).keys() if domain.laws else set()
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
    new_keys: dict[str, str] = {}
    for added in t.creates:
        made = sorted(set(session.keys(added.table)) - before_keys[added.table])
        if len(made) != 1:
            failures.append(
                f"{t.name}: {call} added {len(made)} {added.table} record(s), expected 1"
            )
            continue
        new_key = new_keys[added.name] = made[0]
        if not new_key.startswith(added.prefix) or not new_key[len(added.prefix) :].isdigit():
            failures.append(
                f"{t.name}: the new key {new_key!r} is not {added.prefix} and digits (db.new_id)"
            )
        if added.name == "new" and new_key not in out.content:
            failures.append(
                f"{t.name}: {call} returned {out.content[:200]!r}, which does not show the new key {new_key!r}"
            )
    if any(f.endswith("expected 1") for f in failures):
        return failures
    for e in t.expect:
        where = e.key if e.key is not None else new_keys.get(e.new)
        after = session.get(e.table, str(where)) or {}
        if not _same(e.value, after.get(e.field), e.base):
            failures.append(
                f"{t.name}: after {call}{on}, {e.table}/{where}.{e.field} is {after.get(e.field)!r}, expected {e.value!r}"
            )
    failures += _returned(t, call, out.content)
    if domain.laws and t.keeps_laws and not failures:
        check = domain.check_laws(session, changed=True)
        new = check.keys() - broken_before
        failures += [f"{t.name}: after {call}{on}, {line}" for line in check.lines(only=new)]
    return failures


def _returned(t: ToolTest, call: str, content: str) -> list[str]:
    """What a quote answered against what it must: each value under its name."""
    if not t.returns:
        return []
    try:
        answer = json.loads(content)
    except json.JSONDecodeError:
        return [f"{t.name}: {call} returned {content[:200]!r}, not a JSON object"]
    if not isinstance(answer, dict):
        return [f"{t.name}: {call} returned {content[:200]!r}, not an object of its values"]
    out = []
    for r in t.returns:
        if r.name not in answer:
            out.append(f"{t.name}: {call} returned {content[:200]!r}, which has no {r.name!r}")
        elif not _same(r.value, answer[r.name], r.base):
            out.append(
                f"{t.name}: {call} answered {r.name} = {answer[r.name]!r}, expected {r.value!r}"
            )
    return out
