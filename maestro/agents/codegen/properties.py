"""Property-based checking of the tools with Hypothesis's stateful testing: random sequences of
calls on the generated world keep every law, and a refused call changes nothing.

The calls are the tools written so far, their arguments drawn from the world (keys of the
records a parameter names, the values of the field a parameter is written into or compared
with) and from the derived tests' own arguments (the boundary values). Hypothesis shrinks a
failing sequence to the fewest calls that still fail; that sequence, ending with the call at
fault, goes back to that tool's stage like a failed derived test.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from maestro.agents.codegen.blueprint import Blueprint, Operation
from maestro.agents.codegen.checks import ToolTest
from maestro.agents.codegen.conditions import all_hold, record_params, rooted_at
from maestro.agents.codegen.data import Database
from maestro.agents.codegen.fixtures import samples
from maestro.agents.codegen.guide import parameter_fields
from maestro.domains.package import Domain

#: Sequences tried, and calls in each, per check.
EXAMPLES = 25
STEPS = 6
#: Values of one parameter kept in its pool.
POOL = 24


class PropertyFailure(AssertionError):
    """A sequence of calls that breaks a law or changes the state on a refusal."""

    def __init__(self, operation: str, message: str, calls: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        #: The tool whose call broke the property (the sequence's last).
        self.operation = operation
        #: The tools the shrunk sequence called, in order.
        self.calls = calls or (operation,)


@dataclass(frozen=True)
class CallPlan:
    """The tools a check calls, and each one's argument pools."""

    operations: tuple[str, ...]
    pools: dict[str, dict[str, list[Any]]]
    #: The tool just written: half the calls are its own.
    focus: str | None = None

    def choices(self) -> list[str]:
        others = [o for o in self.operations if o != self.focus]
        if self.focus is None or not others:
            return list(self.operations)
        return [self.focus] * len(others) + others


def argument_pools(
    bp: Blueprint,
    ops: Iterable[Operation],
    db: Database,
    tests: Iterable[ToolTest],
    focus: str | None = None,
) -> CallPlan:
    """Per operation and parameter, the values worth calling with."""
    tests = list(tests)
    pools: dict[str, dict[str, list[Any]]] = {}
    for op in ops:
        named = record_params(bp, op)
        columns = parameter_fields(bp, op)
        by_param: dict[str, list[Any]] = {}
        # (the derived tests' arguments come first: the boundary values)
        for p, ptype in op.param_types().items():
            values: list[Any] = []
            for t in tests:
                if t.operation == op.name and p in t.arguments:
                    values.append(t.arguments[p])
            if p in named:
                # Records the call's own checks accept first: most calls should go through.
                own = rooted_at(bp, op, op.requires, p)
                keys = sorted(db.get(named[p], {}))
                meeting = [k for k in keys if all_hold(bp, op, own, {p: k}, db, bp.clock)]
                values += meeting[: POOL * 2 // 3] + keys[: POOL // 3]
            elif p in columns:
                table, field = columns[p]
                values += [r.get(field) for r in list(db.get(table, {}).values())[:POOL]]
            values += samples(ptype, bp.clock, db)
            kept = [v for v in _unique(values) if v is not None or ptype.nullable]
            by_param[p] = kept[:POOL] or samples(ptype, bp.clock, db)
        pools[op.name] = by_param
    return CallPlan(tuple(pools), pools, focus if focus in pools else None)


def _unique(values: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for v in values:
        key = json.dumps(v, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def check_properties(
    domain: Domain, plan: CallPlan, *, examples: int = EXAMPLES, steps: int = STEPS
) -> PropertyFailure | None:
    """Run the stateful check; the shrunk failure, or None when every sequence holds."""
    if not plan.operations:
        return None

    class Calls(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.session = domain.start_session()
            self.done: list[str] = []
            self.names: list[str] = []

        @rule(data=st.data())
        def call(self, data: st.DataObject) -> None:
            name = data.draw(st.sampled_from(plan.choices()), label="tool")
            args = {
                p: data.draw(st.sampled_from(values), label=p)
                for p, values in plan.pools[name].items()
            }
            before = self.session.state_hash()
            out = domain.toolkit.call(self.session, name, args)
            shown = f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
            self.done.append(f"{shown} -> {out.status}")
            self.names.append(name)
            calls = tuple(self.names)
            where = "after " + "; ".join(self.done)
            if out.status == "tool_error" and self.session.state_hash() != before:
                raise PropertyFailure(
                    name, f"{where}: {name} raised ToolError but changed the database", calls
                )
            if out.status in ("exception", "crash"):
                raise PropertyFailure(
                    name,
                    f"{where}: {name} ended with {out.status} instead of a ToolError: {out.content[:200]}",
                    calls,
                )
            if out.ok and domain.laws:
                check = domain.check_laws(self.session, changed=True)
                if not check.ok:
                    raise PropertyFailure(name, f"{where}: " + "; ".join(check.lines()), calls)

    try:
        run_state_machine_as_test(
            Calls,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                database=None,
                derandomize=True,
                report_multiple_bugs=False,
                phases=(Phase.generate, Phase.shrink),
                suppress_health_check=list(HealthCheck),
            ),
        )
    except PropertyFailure as failure:
        return failure
    return None
