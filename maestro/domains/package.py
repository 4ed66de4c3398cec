"""A loaded domain: manifest, tables, initial state, tools, policy and tasks, in one object."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from maestro.domains.errors import StoreError
from maestro.domains.laws import (
    Law,
    LawCheck,
    check_laws,
    near,
    new_budget,
    session_view,
    table_shapes,
)
from maestro.domains.models import Action, DomainManifest, Task
from maestro.domains.runtime import Toolkit, ToolOutcome
from maestro.domains.store import Session, State, TableSpec

#: A law that reads the clock in a domain without one reads this instant.
_NO_CLOCK = datetime(2000, 1, 1)

#: The most characters of a tool's failure a report keeps. A call's answer may hold 16 MB (the
#: sandbox's cap on one call), and a report is read, not replayed: 36 failures kept whole, and
#: copied into each summary, took ``domains validate`` to 1,997 MB.
MAX_FAILURE_CHARS = 2_000
#: The failures of one replay a report names; the rest are counted.
MAX_FAILURES_NAMED = 5


class TaskStateError(Exception):
    """A task's initial state cannot be built (bad patch, failing initialization action)."""


@dataclass
class Domain:
    """An executable customer-service world."""

    manifest: DomainManifest
    path: Path | None
    tables: dict[str, TableSpec]
    initial: State
    toolkit: Toolkit
    policy: str
    tasks: list[Task] = field(default_factory=list)
    #: The world's laws (``laws.json``); none for a package that declares none.
    laws: list[Law] = field(default_factory=list)
    #: The laws checked on the domain's own database, once (the loader's).
    law_check: LawCheck | None = None
    #: Evaluation steps every check of this domain's laws draws on together (the database's
    #: and every gold replay's): a package whose laws cost more is reported, not run for hours.
    law_budget: list[int] = field(default_factory=lambda: new_budget(3))

    @property
    def id(self) -> str:
        return self.manifest.id

    def close(self) -> None:
        """Release what the domain holds: a sandboxed domain's child process; nothing for a
        domain whose tools run in this process."""
        self.toolkit.close()

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(f"domain {self.id} has no task {task_id!r}")

    def check_laws(self, session: Session | None = None, *, changed: bool = False) -> LawCheck:
        """Every law on the domain's database, or on a session of it (``changed``: only on the
        records the session changed and those within two references of them)."""
        if session is None and self.law_check is not None:
            return self.law_check
        shapes = table_shapes(self.tables)
        view = session if session is not None else self.initial
        get, rows = session_view(view)
        only = None
        if changed and session is not None:
            only = near(shapes, rows, session.touched(), hops=3)
        clock = self.manifest.clock or _NO_CLOCK
        found = check_laws(self.laws, shapes, get, rows, clock, only=only, budget=self.law_budget)
        if session is None:
            self.law_check = found
        return found

    def start_session(self, task: Task | None = None) -> Session:
        """A fresh session at the task's initial state (the domain's database when no task)."""
        session = self.initial.session(clock=self.manifest.clock)
        if task is None or task.initial_state is None:
            return session
        try:
            for table, rows in task.initial_state.initialization_data.items():
                for key, rec in rows.items():
                    if rec is None:
                        session.delete(table, key)
                    else:
                        spec = self.tables.get(table)
                        if spec is None:
                            raise StoreError(f"unknown table {table!r}")
                        rec = {**(session.get(table, key) or {}), **rec, spec.key_field: key}
                        session.put(table, rec)
        except Exception as exc:
            raise TaskStateError(
                f"task {task.id}: initialization_data: {failure_text(str(exc))}"
            ) from None
        for action in task.initial_state.initialization_actions:
            out = self.toolkit.call(session, action.name, action.arguments)
            if not out.ok:
                raise TaskStateError(
                    f"task {task.id}: initialization action {action.action_id} ({action.name}): "
                    f"{failure_text(out.content)}"
                )
        return session


@dataclass
class ReplayResult:
    """A replay of tool calls on a fresh session of a task."""

    session: Session
    outcomes: list[ToolOutcome]

    @property
    def failures(self) -> list[tuple[int, ToolOutcome]]:
        return [(i, o) for i, o in enumerate(self.outcomes) if not o.ok]

    @property
    def ok(self) -> bool:
        return not self.failures


def replay_calls(
    domain: Domain, task: Task | None, calls: Iterable[tuple[str, dict[str, Any] | str]]
) -> ReplayResult:
    """Apply tool calls, in order, to a fresh session at the task's initial state."""
    session = domain.start_session(task)
    outcomes = [domain.toolkit.call(session, name, args) for name, args in calls]
    return ReplayResult(session, outcomes)


def replay_gold(domain: Domain, task: Task) -> ReplayResult:
    """Apply a task's gold actions to a fresh session; any failure is reported, not raised."""
    return replay_calls(domain, task, ((a.name, a.arguments) for a in task.gold_actions))


def failure_text(content: str) -> str:
    """A tool's failure as a report keeps it: whole when short, else its first
    :data:`MAX_FAILURE_CHARS` characters and how long it was."""
    if len(content) <= MAX_FAILURE_CHARS:
        return content
    return f"{content[:MAX_FAILURE_CHARS]}... (cut; {len(content):,} characters in all)"


def describe_failures(actions: Sequence[Action], result: ReplayResult) -> list[str]:
    """One line per gold action that did not succeed, for the first :data:`MAX_FAILURES_NAMED`
    of them, each with its text cut by :func:`failure_text`; then how many more failed. A
    report holds a few KB a replay, whatever the tools answered."""
    failures = result.failures
    lines = [
        f"gold action {actions[i].action_id} ({out.name}) failed: {failure_text(out.content)}"
        for i, out in failures[:MAX_FAILURES_NAMED]
    ]
    if len(failures) > MAX_FAILURES_NAMED:
        lines.append(f"and {len(failures) - MAX_FAILURES_NAMED} more gold action(s) failed")
    return lines
