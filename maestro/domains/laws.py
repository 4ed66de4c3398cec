"""The world's laws: invariants every record of a domain keeps, in the expression language.

A package may declare them in ``laws.json``: a list of ``{"id", "table", "holds", "when",
"says"}``. ``holds`` is a condition over one record of ``table`` (a bare field is the record's,
``rental_id.pickup_at`` follows its references, ``self`` is its key, ``count(returns where
rental_id = self)`` counts the records that point at it); ``when`` (optional) limits the law to
the records it is true of; ``says`` is the law in a sentence. A law is broken by a record for
which ``when`` is true (or absent) and ``holds`` is false; a null read on the way breaks nothing.

The loader checks every law on every record of ``db.json`` and after every gold replay; the
synthesis checks them on generated data, after every derived tool test and under the stateful
property checks. A package without ``laws.json`` has no laws and loads as before.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from maestro.domains.errors import Problem
from maestro.domains.expressions import (
    Aggregate,
    Env,
    ExpressionError,
    Node,
    Path,
    Scope,
    TableShape,
    VType,
    check_condition,
    evaluate,
    parse,
    resolve_path,
    stored,
    unparse,
    walk,
)
from maestro.domains.sdk import Ref
from maestro.domains.store import TableSpec

LAWS_FILE = "laws.json"
MAX_LAWS = 60
#: Examples kept per broken law (each with the values it read).
EXAMPLES = 3
#: Evaluation steps (each part of an expression evaluated, each record a count reads) one check
#: of a package's laws may take: the library's 77 laws take about 0.3M on its databases.
STEP_BUDGET = 10_000_000
_LAW_ID = r"^[a-z][a-z0-9_]{0,59}$"


class LawSpec(BaseModel):
    """One law as ``laws.json`` (and a blueprint) writes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = Field(None, pattern=_LAW_ID)
    table: str = Field(min_length=1, max_length=40)
    holds: str = Field(min_length=1, max_length=4000)
    when: str | None = Field(None, min_length=1, max_length=4000)
    says: str = Field(min_length=1, max_length=300)


@dataclass(frozen=True)
class Law:
    """A parsed, typed law."""

    id: str
    table: str
    holds: Node
    when: Node | None
    says: str
    #: Whether the law reads only its record and what is near it: every count selects the
    #: records that refer to it (``field = self``). A law that is not (a count over the whole
    #: table) may be broken by a change anywhere, so it is checked on every record.
    local: bool = True

    @property
    def text(self) -> str:
        out = unparse(self.holds)
        return f"{out} when {unparse(self.when)}" if self.when is not None else out

    def spec(self) -> LawSpec:
        when = unparse(self.when) if self.when is not None else None
        return LawSpec(
            id=self.id, table=self.table, holds=unparse(self.holds), when=when, says=self.says
        )


# ----- tables as expressions see them -------------------------------------------------------------


def _vtype(ann: Any) -> VType | None:
    """A field annotation's expression type; None for what expressions cannot read (lists,
    nested models)."""
    nullable = False
    ref: str | None = None
    origin = typing.get_origin(ann)
    while True:
        if origin is typing.Annotated:
            for meta in ann.__metadata__:
                if isinstance(meta, Ref):
                    ref = meta.table
            ann = typing.get_args(ann)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            nullable = nullable or len(args) < len(typing.get_args(ann))
            if len(args) != 1:
                return None
            ann = args[0]
        else:
            break
        origin = typing.get_origin(ann)
    if ref is not None:
        return VType("ref", nullable=nullable, ref=ref)
    if origin is typing.Literal:
        choices = typing.get_args(ann)
        if all(isinstance(c, str) for c in choices):
            return VType("enum", nullable=nullable, choices=tuple(choices))
        return None
    simple = {
        bool: "bool",
        int: "int",
        float: "float",
        str: "str",
        datetime: "datetime",
        date: "date",
    }
    for py, base in simple.items():
        if ann is py:
            return VType(base, nullable=nullable)  # type: ignore[arg-type]
    return None


def table_shapes(tables: Mapping[str, TableSpec]) -> dict[str, TableShape]:
    """Every table's key and readable fields, from its record type."""
    out: dict[str, TableShape] = {}
    for name, spec in tables.items():
        fields: dict[str, VType] = {}
        if spec.model is not None:
            for fname, info in spec.model.model_fields.items():
                if fname == spec.key_field:
                    continue
                ann: Any = info.annotation
                if info.metadata:
                    ann = typing.Annotated[(ann, *info.metadata)]
                vt = _vtype(ann)
                if vt is not None:
                    fields[fname] = vt
        out[name] = TableShape(name, spec.key_field, fields)
    return out


def law_scope(shapes: Mapping[str, TableShape], table: str) -> Scope:
    """Names in a law about ``table``: its fields bare, its key, ``self``."""
    key = shapes[table].key
    return Scope(shapes, records={"self": table, key: table}, own="self")


# ----- parsing ------------------------------------------------------------------------------------


def compile_law(spec: LawSpec, shapes: Mapping[str, TableShape], index: int) -> Law:
    """A law typed against the tables; ExpressionError naming what does not fit."""
    if spec.table not in shapes:
        raise ExpressionError(f"no table {spec.table!r}; tables are {sorted(shapes)}")
    scope = law_scope(shapes, spec.table)
    holds = parse(spec.holds)
    check_condition(holds, scope)
    when = None
    if spec.when is not None:
        when = parse(spec.when)
        check_condition(when, scope)
    law_id = spec.id or f"{spec.table}_{index + 1}"
    nodes = [holds] + ([when] if when is not None else [])
    local = all(
        _selects_by_self(a, scope) for n in nodes for a in walk(n) if isinstance(a, Aggregate)
    )
    return Law(law_id, spec.table, holds, when, spec.says, local)


def _selects_by_self(node: Aggregate, scope: Scope) -> bool:
    """Whether a count's where ties the counted records to the law's record (``field =
    self``, ``field = self.ref``...)."""
    from dataclasses import replace as with_row

    from maestro.domains.expressions import Compare, conjuncts

    if node.where is None:
        return False
    inner = with_row(scope, row=node.table)
    for part in conjuncts(node.where):
        if not isinstance(part, Compare) or part.op != "=":
            continue
        for side in (part.left, part.right):
            if isinstance(side, Path):
                try:
                    if resolve_path(side, inner).root == "self":
                        return True
                except ExpressionError:
                    continue
    return False


def parse_laws(
    raw: Any, shapes: Mapping[str, TableShape], file: str = LAWS_FILE
) -> tuple[list[Law], list[Problem]]:
    """The laws of a ``laws.json`` value, and one located problem per law that does not parse
    or type (the others are kept)."""
    if not isinstance(raw, list):
        return [], [Problem(file, "", "must be a list of laws")]
    if len(raw) > MAX_LAWS:
        return [], [Problem(file, "", f"holds {len(raw)} laws; at most {MAX_LAWS}")]
    laws: list[Law] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"laws[{i}]"
        try:
            spec = LawSpec.model_validate(item)
            law = compile_law(spec, shapes, i)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            problems.append(Problem(file, f"{where}.{loc}" if loc else where, err["msg"]))
            continue
        except ExpressionError as exc:
            problems.append(Problem(file, where, str(exc)))
            continue
        if law.id in seen:
            problems.append(Problem(file, f"{where}.id", f"the law id {law.id!r} repeats"))
            continue
        seen.add(law.id)
        laws.append(law)
    return laws, problems


# ----- checking -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Breach:
    """One record breaking one law, with the values the law read on it."""

    law: str
    table: str
    key: str
    values: str

    def __str__(self) -> str:
        return f"{self.table}/{self.key} ({self.values})"


#: A law broken by every one of at least this many records may be one no record can keep.
UNMET_AT = 3


def unmet_laws(lines: list[str]) -> set[str]:
    """The ids of the laws that ``lines`` (of :meth:`LawCheck.lines`) say every record breaks."""
    return {
        line.split(" ", 2)[1]
        for line in lines
        if line.startswith("law ") and ") is broken by every one of the " in line
    }


@dataclass
class LawCheck:
    """Every law checked on a state: the records each breaks (or could not evaluate)."""

    laws: list[Law]
    checked: dict[str, int] = field(default_factory=dict)
    broken: dict[str, list[Breach]] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.broken.values()) and not any(self.errors.values())

    def count(self) -> int:
        return sum(len(b) for b in self.broken.values())

    def keys(self) -> set[tuple[str, str, str]]:
        return {(b.law, b.table, b.key) for bs in self.broken.values() for b in bs}

    def lines(
        self, examples: int = EXAMPLES, only: set[tuple[str, str, str]] | None = None
    ) -> list[str]:
        """One line per broken law: how many records break it, and a few of them."""
        out = []
        for law in self.laws:
            found = [
                b
                for b in self.broken.get(law.id, [])
                if only is None or (b.law, b.table, b.key) in only
            ]
            if found:
                shown = "; ".join(str(b) for b in found[:examples])
                checked = self.checked.get(law.id, 0)
                share = (
                    f"every one of the {checked}"
                    if len(found) == checked >= UNMET_AT
                    else f"{len(found)} of {checked}"
                )
                out.append(
                    f"law {law.id} ({law.says}: {law.text}) is broken by {share} "
                    f"{law.table} record(s), such as {shown}"
                )
            for err in self.errors.get(law.id, [])[:examples]:
                out.append(f"law {law.id} ({law.text}) cannot be evaluated: {err}")
        return out

    def report(self) -> list[dict[str, Any]]:
        """Per law: its text, records checked and broken, examples (``domains validate --json``)."""
        return [
            {
                "id": law.id,
                "table": law.table,
                "says": law.says,
                "law": law.text,
                "checked": self.checked.get(law.id, 0),
                "broken": len(self.broken.get(law.id, [])),
                "examples": [str(b) for b in self.broken.get(law.id, [])[:EXAMPLES]],
                "errors": self.errors.get(law.id, [])[:EXAMPLES],
            }
            for law in self.laws
        ]


def _shown(value: Any) -> str:
    text = repr(stored(value))
    return text if len(text) <= 60 else text[:57] + "..."


def _read_parts(node: Node) -> list[Node]:
    """The paths and aggregates a condition reads, outside any aggregate's ``where``."""
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Path | Aggregate):
            out.append(n)
            continue
        stack.extend(reversed(n.children()))
    return out


def _values(law: Law, env: Env) -> str:
    """The values the law reads on a record, as ``path = value`` pairs."""
    seen: dict[str, str] = {}
    nodes = _read_parts(law.holds) + (_read_parts(law.when) if law.when is not None else [])
    for node in nodes:
        text = unparse(node)
        if text in seen or text == "self":
            continue
        try:
            seen[text] = _shown(evaluate(node, env))
        except ExpressionError:
            continue
    return ", ".join(f"{k} = {v}" for k, v in list(seen.items())[:6])


def new_budget(checks: int = 1) -> list[int]:
    """A budget of evaluation steps (each part of an expression evaluated, each record a count
    reads) for ``checks`` checks' worth, shared by the checks that draw on it."""
    return [STEP_BUDGET * checks]


def check_laws(
    laws: list[Law],
    shapes: Mapping[str, TableShape],
    get: Any,
    rows: Any,
    clock: datetime,
    *,
    only: Iterable[tuple[str, str]] | None = None,
    budget: list[int] | None = None,
) -> LawCheck:
    """Every law on every record of its table (or, with ``only``, on those records: a law whose
    counts do not select by the record itself is checked on every record all the same).

    ``get(table, key)`` returns a record or None; ``rows(table)`` yields ``(key, record)``.
    ``budget`` (a fresh one when None) bounds the work: once it is spent, the law being checked
    and every law after it are reported as not checked, once each.
    """
    out = LawCheck(laws)
    budget = budget if budget is not None else new_budget()
    targets: dict[str, list[str]] | None = None
    if only is not None:
        targets = {}
        for table, key in only:
            targets.setdefault(table, []).append(key)
    index: dict[tuple[str, str], dict[Any, list[str]]] = {}
    for law in laws:
        if budget[0] < 0:
            out.errors.setdefault(law.id, []).append(
                f"not checked: the laws cost more than {STEP_BUDGET:,} evaluation steps"
            )
            continue
        scope = law_scope(shapes, law.table)
        if targets is None or not law.local:
            keys = [k for k, _ in rows(law.table)]
        else:
            keys = targets.get(law.table, [])
        checked = 0
        for key in keys:
            if get(law.table, key) is None:
                continue
            checked += 1
            env = Env(
                scope,
                get,
                rows,
                clock,
                roots={"self": key, shapes[law.table].key: key},
                _index=index,
                budget=budget,
            )
            try:
                if law.when is not None and evaluate(law.when, env) is not True:
                    continue
                if evaluate(law.holds, env) is False:
                    out.broken.setdefault(law.id, []).append(
                        Breach(law.id, law.table, key, _values(law, env))
                    )
            except ExpressionError as exc:
                out.errors.setdefault(law.id, []).append(f"{law.table}/{key}: {exc}")
                if budget[0] < 0:
                    break  # the laws cost too much: said once, not once per record
        out.checked[law.id] = checked
    return out


def session_view(session: Any) -> tuple[Any, Any]:
    """``get`` and ``rows`` over a store session or state (what :func:`check_laws` reads)."""

    def rows(table: str) -> Iterable[tuple[str, Any]]:
        for key in session.keys(table):
            rec = session.get(table, key) if hasattr(session, "get") else session.raw(table, key)
            if rec is not None:
                yield key, rec

    get = session.get if hasattr(session, "get") else session.raw
    return get, rows


def mapping_view(db: Mapping[str, Mapping[str, Any]]) -> tuple[Any, Any]:
    """``get`` and ``rows`` over a ``{table: {key: record}}`` mapping."""

    def get(table: str, key: str) -> Any:
        return db.get(table, {}).get(key)

    def rows(table: str) -> Iterable[tuple[str, Any]]:
        return list(db.get(table, {}).items())

    return get, rows


def near(
    shapes: Mapping[str, TableShape],
    rows: Any,
    touched: Iterable[tuple[str, str]],
    hops: int = 2,
) -> set[tuple[str, str]]:
    """The touched records and those within ``hops`` references of them, either way: the
    records whose laws a change can break (a law reads its own record, what it points at, and
    counts what points at it)."""
    refs: list[tuple[str, str, str]] = [
        (t, f, vt.ref) for t, s in shapes.items() for f, vt in s.fields.items() if vt.ref
    ]
    if not refs:
        return set(touched)
    out = set(touched)
    frontier = set(touched)
    pointing: dict[str, list[tuple[str, str, str]]] = {}
    for table, fname, target in refs:
        pointing.setdefault(target, []).append((table, fname, target))
    cache: dict[str, list[tuple[str, Any]]] = {}

    def all_rows(table: str) -> list[tuple[str, Any]]:
        if table not in cache:
            cache[table] = list(rows(table))
        return cache[table]

    for _ in range(hops):
        nxt: set[tuple[str, str]] = set()
        by_table: dict[str, set[str]] = {}
        for table, key in frontier:
            by_table.setdefault(table, set()).add(key)
        for table, keys in by_table.items():
            own = {k: r for k, r in all_rows(table) if k in keys}
            for fname, vt in shapes[table].fields.items():
                if vt.ref:
                    nxt.update(
                        (vt.ref, r[fname]) for r in own.values() if isinstance(r.get(fname), str)
                    )
            for src, fname, _ in pointing.get(table, []):
                nxt.update((src, k) for k, r in all_rows(src) if r.get(fname) in keys)
        frontier = nxt - out
        out |= nxt
        if not frontier:
            break
    return out


def law_problems(check: LawCheck, file: str = "db.json", prefix: str = "") -> list[Problem]:
    """The broken laws as load problems (one per law, with a few of its records)."""
    out = []
    for line in check.lines():
        match = re.match(r"law (\S+) ", line)
        where = f"laws.{match.group(1)}" if match else "laws"
        out.append(Problem(file, where, prefix + line))
    return out
