"""The tool dependency graph (ASTRA) and state-grounded walks over it (PROVE). No LLM here.

Tools return untyped JSON (``dict``/``list``), so what a tool *produces* is learnt by probing: the
tool is called on a few existing entities and every string in its answer that is a key of a table
marks the tool as producing that table. What a tool *consumes* comes from its signature: a
parameter takes a table's keys when it carries ``Ref``, is named like the table's key field (also
as a suffix, ``new_room_type_id``, or a plural, ``skus``) or like a ``Ref`` field of some record;
a parameter named like an ordinary record field (``email``, ``check_in``) takes that field's values.
An edge ``a -> b`` says a's answers show keys that b takes.

A walk starts from an entity that exists, fills every argument from the records related to it,
and ends in one or two writes, preceded by reads whose answers show the values the next call
needs. It is executed on a fresh session; only walks whose every call succeeds and whose writes
change the state are kept. The same seed gives the same walks.
"""

from __future__ import annotations

import json
import random
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from maestro.domains.package import Domain, replay_calls
from maestro.domains.runtime import ToolSpec
from maestro.domains.sdk import Ref, TextFormat, ToolKind
from maestro.domains.store import Session

#: Free-text values for parameters nothing in the database grounds (a reason, a note).
FREE_TEXT = ("change of plans", "no longer needed", "requested by the customer")


@dataclass(frozen=True)
class ParamSource:
    """Where a tool parameter's values come from."""

    name: str
    required: bool
    default: Any
    #: The table whose keys the parameter takes.
    table: str | None = None
    #: ``(table, field)`` whose values the parameter takes.
    column: tuple[str, str] | None = None
    choices: tuple[Any, ...] = ()
    scalar: str = "str"  # str, int, float, bool, other
    is_list: bool = False
    #: ``date`` or ``datetime`` for a string that holds one (an ``IsoDate`` parameter).
    text_format: str | None = None

    @property
    def grounded(self) -> bool:
        """True when the value is not free text: a correct call must repeat it exactly."""
        return bool(self.table or self.column or self.choices or self.text_format) or (
            self.scalar in ("int", "float", "bool")
        )


@dataclass(frozen=True)
class ToolNode:
    name: str
    kind: ToolKind
    params: tuple[ParamSource, ...]
    produces: frozenset[str]

    @property
    def consumes(self) -> frozenset[str]:
        return frozenset(p.table for p in self.params if p.table)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    table: str


@dataclass
class ToolGraph:
    """Tools as nodes; an edge where one tool's answers show keys another tool takes."""

    nodes: dict[str, ToolNode]
    edges: list[Edge]

    def predecessors(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.target == name]

    def successors(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.source == name]

    def writes(self) -> list[ToolNode]:
        return [n for n in self.nodes.values() if n.kind == "write"]

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": {
                n.name: {
                    "kind": n.kind,
                    "consumes": sorted(n.consumes),
                    "produces": sorted(n.produces),
                }
                for n in self.nodes.values()
            },
            "edges": [[e.source, e.target, e.table] for e in self.edges],
        }


@dataclass(frozen=True)
class WalkStep:
    """One executed call of a walk."""

    name: str
    kind: ToolKind
    arguments: dict[str, Any]
    #: Arguments a correct call must repeat exactly (everything but free text).
    grounded: tuple[str, ...]
    content: str


@dataclass
class Walk:
    """Calls that all succeed on a fresh session, ending in at least one state-changing write."""

    steps: list[WalkStep]
    #: Every (table, key) an argument refers to; all exist when the walk starts.
    entities: list[tuple[str, str]]
    #: Argument values the customer must give: those no earlier answer in the walk shows.
    user_values: dict[str, Any]
    expected_state_hash: str
    changes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def writes(self) -> list[WalkStep]:
        return [s for s in self.steps if s.kind == "write"]

    @property
    def reads(self) -> list[WalkStep]:
        return [s for s in self.steps if s.kind == "read"]

    def signature(self) -> str:
        """The writes with their grounded arguments: two walks with one signature are one task."""
        return json.dumps(
            [[s.name, {k: s.arguments[k] for k in s.grounded}] for s in self.writes],
            sort_keys=True,
            default=str,
        )


# ----- the graph ---------------------------------------------------------------------------------


def build_tool_graph(domain: Domain, *, probes: int = 3, seed: int = 0) -> ToolGraph:
    """The domain's tool graph; what each tool produces is probed on ``probes`` entities."""
    rng = random.Random(seed)
    session = domain.start_session()
    bare = {name: _params(domain, spec) for name, spec in sorted(domain.toolkit.specs.items())}
    nodes: dict[str, ToolNode] = {}
    for name, params in bare.items():
        spec = domain.toolkit.specs[name]
        produced: set[str] = set()
        for _ in range(probes):
            args = _probe_arguments(domain, session, params, rng)
            if args is None:
                continue
            out = domain.toolkit.call(session.fork(), name, args)
            if out.ok:
                produced |= {t for t, _ in _keys_in(domain, session, out.content)}
        nodes[name] = ToolNode(name, spec.kind, params, frozenset(produced))
    edges = [
        Edge(a.name, b.name, t)
        for a in nodes.values()
        for b in nodes.values()
        if a.name != b.name
        for t in sorted(a.produces & b.consumes)
    ]
    return ToolGraph(nodes, edges)


def _params(domain: Domain, spec: ToolSpec) -> tuple[ParamSource, ...]:
    key_tables = {s.key_field: name for name, s in sorted(domain.tables.items())}
    ref_fields: dict[str, str] = {}
    columns: dict[str, list[tuple[str, str]]] = {}
    for tname, tspec in sorted(domain.tables.items()):
        fields = tspec.model.model_fields if tspec.model else {}
        for fname, finfo in fields.items():
            target = _ref_table(finfo.annotation) or next(
                (m.table for m in finfo.metadata if isinstance(m, Ref)), None
            )
            if target:
                ref_fields.setdefault(fname, target)
            elif fname != tspec.key_field:
                columns.setdefault(fname, []).append((tname, fname))
    out = []
    for pname, finfo in spec.params.model_fields.items():
        ann = finfo.annotation
        is_list = typing.get_origin(_unwrap(ann)) is list
        table = _ref_table(ann) or next(
            (m.table for m in finfo.metadata if isinstance(m, Ref)), None
        )
        names = [pname, pname[:-1]] if is_list and pname.endswith("s") else [pname]
        for n in names:
            table = table or key_tables.get(n) or ref_fields.get(n)
            table = table or next((t for k, t in key_tables.items() if n.endswith("_" + k)), None)
        column = None
        if table is None:
            found = columns.get(pname) or next(
                (c for f, c in columns.items() if pname.endswith("_" + f)), []
            )
            column = _pick_column(spec.name, found)
        base = _unwrap(ann)
        choices = typing.get_args(base) if typing.get_origin(base) is typing.Literal else ()
        scalar = base.__name__ if isinstance(base, type) else "other"
        fmt = next(
            (m.kind for m in _metadata(finfo.metadata, ann) if isinstance(m, TextFormat)), None
        )
        out.append(
            ParamSource(
                pname,
                finfo.is_required(),
                None if finfo.is_required() else finfo.default,
                table,
                column,
                tuple(choices),
                scalar if scalar in ("str", "int", "float", "bool") else "other",
                is_list,
                fmt,
            )
        )
    return tuple(out)


def _metadata(metadata: list[Any], ann: Any) -> list[Any]:
    """A parameter's annotation metadata, wherever pydantic left it."""
    found = list(metadata)
    if typing.get_origin(ann) is typing.Annotated:
        found += list(ann.__metadata__)
    return found


def _pick_column(tool: str, found: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The one table a field-named parameter draws from: the only one, or the one the tool is
    named after (``add_pet``'s ``name`` is a pet's); ambiguous names stay free text."""
    if len(found) == 1:
        return found[0]
    named = [c for c in found if c[0].rstrip("s") in tool]
    return named[0] if len(named) == 1 else None


def _unwrap(ann: Any) -> Any:
    """The annotation without Annotated and without None in a union."""
    if typing.get_origin(ann) is typing.Annotated:
        return _unwrap(typing.get_args(ann)[0])
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return _unwrap(args[0])
    return ann


def _ref_table(ann: Any) -> str | None:
    if typing.get_origin(ann) is typing.Annotated:
        for meta in ann.__metadata__:
            if isinstance(meta, Ref):
                return meta.table
        return _ref_table(typing.get_args(ann)[0])
    if typing.get_origin(ann) in (typing.Union, types.UnionType, list):
        for arg in typing.get_args(ann):
            found = _ref_table(arg)
            if found:
                return found
    return None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _keys_in(domain: Domain, session: Session, content: str) -> set[tuple[str, str]]:
    """Every (table, key) whose key appears as a string value in a tool's answer."""
    try:
        data = json.loads(content)
    except json.JSONDecodeError:
        return set()
    return {(t, s) for s in set(_strings(data)) for t in domain.tables if session.exists(t, s)}


def _probe_arguments(
    domain: Domain, session: Session, params: Sequence[ParamSource], rng: random.Random
) -> dict[str, Any] | None:
    anchor = next((p.table for p in params if p.table and p.required), None)
    # A lookup by natural identifiers (email and date of birth) probes with one record's values.
    anchor = anchor or next((p.column[0] for p in params if p.column and p.required), None)
    known = _anchor_context(domain, session, anchor, rng) if anchor else []
    return _fill(domain, session, params, known, rng, optional_rate=0.0)


# ----- filling arguments from live state ---------------------------------------------------------

Known = list[tuple[str, str, dict[str, Any]]]


def _anchor_context(
    domain: Domain, session: Session, table: str, rng: random.Random, key: str | None = None
) -> Known:
    keys = session.keys(table)
    if not keys:
        return []
    key = key or rng.choice(keys)
    known: Known = [(table, key, session.require(table, key))]
    _extend_forward(domain, session, known, hops=2)
    return known


def _extend_forward(domain: Domain, session: Session, known: Known, hops: int) -> None:
    """Add the records the known ones refer to, ``hops`` levels deep."""
    key_tables = {s.key_field: n for n, s in domain.tables.items()}
    frontier = list(known)
    for _ in range(hops):
        nxt: Known = []
        for _t, _k, rec in frontier:
            for fname, value in sorted(rec.items()):
                target = key_tables.get(fname)
                if not target or not isinstance(value, str) or not session.exists(target, value):
                    continue
                if any(t == target and k == value for t, k, _ in known):
                    continue
                entry = (target, value, session.require(target, value))
                known.append(entry)
                nxt.append(entry)
        frontier = nxt


def _related(domain: Domain, session: Session, p: ParamSource, known: Known) -> list[Any]:
    """Values for a parameter that belong with the records already in the walk."""
    out: list[Any] = []
    for t, k, rec in known:
        if p.table and t == p.table:
            out.append(k)
        if p.column and t == p.column[0] and rec.get(p.column[1]) is not None:
            out.append(rec[p.column[1]])
        if p.name in rec and not isinstance(rec[p.name], dict | list) and rec[p.name] is not None:
            out.append(rec[p.name])
    if p.table:
        # Records of the parameter's table that point at a known record (a guest's cards), but
        # not another person's (a booking on the same sailing made by someone else).
        spec = domain.tables[p.table]
        for t, k, _ in known:
            fk = domain.tables[t].key_field
            fields = spec.model.model_fields if spec.model else {}
            if fk in fields and fk != spec.key_field:
                out.extend(
                    r[spec.key_field]
                    for r in session.find(p.table, **{fk: k})[:20]
                    if _consistent(domain, session, p.table, r[spec.key_field], known)
                )
    return list(dict.fromkeys(v for v in out if not isinstance(v, dict | list)))


def _value(
    domain: Domain,
    session: Session,
    p: ParamSource,
    known: Known,
    rng: random.Random,
    *,
    exact: bool = False,
) -> Any:
    related = _related(domain, session, p, known)
    if p.choices:
        pool = [v for v in related if v in p.choices] or list(p.choices)
        return rng.choice(pool)
    if related and (exact or rng.random() < 0.85 or not (p.table or p.column)):
        return rng.choice(related)
    if p.text_format and not p.column:
        return _when(domain, p.text_format, rng)
    if p.table:
        # Another record of the table, but never one that belongs to someone else in the walk:
        # a task is one customer's (a random order of another customer would mix two people).
        keys = [k for k in session.keys(p.table) if _consistent(domain, session, p.table, k, known)]
        return rng.choice(keys) if keys else None
    if p.column:
        values = [
            r[p.column[1]] for r in session.scan(p.column[0]) if r.get(p.column[1]) is not None
        ]
        return rng.choice(values) if values else None
    if p.scalar == "bool":
        return rng.random() < 0.5
    if p.scalar in ("int", "float"):
        return rng.randint(1, 3) if p.scalar == "int" else float(rng.randint(1, 3))
    if p.scalar == "str":
        return rng.choice(FREE_TEXT)
    return None


def _when(domain: Domain, kind: str, rng: random.Random) -> str:
    """A date or datetime a customer might ask for: the coming two weeks, from the clock."""
    now = domain.manifest.clock or datetime(2026, 1, 5, 9, 0)
    when = now + timedelta(days=rng.randint(1, 14))
    if kind == "date":
        return when.date().isoformat()
    return when.replace(hour=rng.choice((9, 10, 11, 14, 15, 16)), minute=0, second=0).isoformat()


def _people(domain: Domain) -> set[str]:
    """Tables of people (customers, guests, patients): those holding contact details."""
    out = set()
    for name, spec in domain.tables.items():
        fields = spec.model.model_fields if spec.model else {}
        if any(w in f for f in fields for w in ("email", "phone", "birth")):
            out.add(name)
    return out


def _consistent(domain: Domain, session: Session, table: str, key: str, known: Known) -> bool:
    """Whether a record belongs to nobody else: it points at no other person than the ones the
    walk already holds (a task is one customer's)."""
    record = session.get(table, key) or {}
    key_tables = {s.key_field: n for n, s in domain.tables.items()}
    held = {t for t, _, _ in known} & _people(domain)
    for fname, value in record.items():
        target = key_tables.get(fname)
        if target is None or target == table or target not in held or not isinstance(value, str):
            continue
        if not any(t == target and k == value for t, k, _ in known):
            return False
    return True


def _fill(
    domain: Domain,
    session: Session,
    params: Sequence[ParamSource],
    known: Known,
    rng: random.Random,
    *,
    optional_rate: float,
    exact: bool = False,
) -> dict[str, Any] | None:
    """Arguments for a call, each related to the known records where possible (always, when
    ``exact``: a read in a chain asks about the walk's own records); None when a required one
    cannot be found."""
    args: dict[str, Any] = {}
    for p in params:
        if not p.required:
            # Optional arguments stay at their default unless drawn; a drawn bool flips it.
            if rng.random() >= optional_rate or not (p.grounded or p.scalar == "str"):
                continue
            if p.scalar == "bool" and not p.choices and isinstance(p.default, bool):
                args[p.name] = not p.default
                continue
        value = _value(domain, session, p, known, rng, exact=exact)
        if value is None:
            if p.required:
                return None
            continue
        args[p.name] = [value] if p.is_list and not isinstance(value, list) else value
        new = not any(t == p.table and k == value for t, k, _ in known)
        if p.table and isinstance(value, str) and new and session.exists(p.table, value):
            known.append((p.table, value, session.require(p.table, value)))
            _extend_forward(domain, session, known, hops=1)
    return args


# ----- walks -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WalkOptions:
    """What walks to sample: their length, and where they may start."""

    max_reads: int = 2
    #: Reads to chain before the first write when the graph has them (a lookup first).
    min_reads: int = 0
    max_writes: int = 2
    optional_rate: float = 0.25
    #: Only these write tools start a walk; None: any write.
    tools: tuple[str, ...] | None = None
    #: Records a walk starts from; None: any record of the first write's anchor table.
    anchors: tuple[tuple[str, str], ...] | None = None


def sample_walks(
    domain: Domain,
    graph: ToolGraph,
    n: int,
    *,
    seed: int = 0,
    max_reads: int = 2,
    min_reads: int = 0,
    max_writes: int = 2,
    optional_rate: float = 0.25,
    attempts_per_walk: int = 40,
    exclude: Sequence[str] = (),
    tools: Sequence[str] | None = None,
    anchors: Sequence[tuple[str, str]] | None = None,
    keep: Callable[[Walk], bool] | None = None,
) -> list[Walk]:
    """Up to ``n`` distinct walks (by :meth:`Walk.signature`), each grounded and executed.

    ``exclude`` holds signatures already taken (the domain's existing tasks). ``tools`` and
    ``anchors`` restrict where walks start (a refusal's operation, records its rule applies
    to); ``keep`` drops walks it refuses. Fewer than ``n`` come back when the attempts run out:
    the domain's state allows no more.
    """
    options = WalkOptions(
        max_reads=max_reads,
        min_reads=min(min_reads, max_reads),
        max_writes=max_writes,
        optional_rate=optional_rate,
        tools=tuple(tools) if tools is not None else None,
        anchors=tuple(anchors) if anchors is not None else None,
    )
    rng = random.Random(seed)
    writes = sorted(graph.writes(), key=lambda w: w.name)
    starts = [w for w in writes if options.tools is None or w.name in options.tools]
    taken = set(exclude)
    walks: list[Walk] = []
    if not starts or options.anchors == ():
        return walks
    for _ in range(n * attempts_per_walk):
        if len(walks) >= n:
            break
        n_writes = 1 if max_writes < 2 or rng.random() < 0.7 else 2
        walk = _try_walk(domain, graph, writes, starts, rng, n_writes, options)
        if walk is None or walk.signature() in taken or (keep is not None and not keep(walk)):
            continue
        taken.add(walk.signature())
        walks.append(walk)
    return walks


def _try_walk(
    domain: Domain,
    graph: ToolGraph,
    writes: Sequence[ToolNode],
    starts: Sequence[ToolNode],
    rng: random.Random,
    n_writes: int,
    options: WalkOptions,
) -> Walk | None:
    first = rng.choice(starts)
    tables = [p.table for p in first.params if p.table and p.required]
    session = domain.start_session()
    known: Known = []
    pool = [a for a in options.anchors or () if a[0] in tables]
    if options.anchors is not None:
        if not pool:
            return None
        table, key = rng.choice(pool)
        known = _anchor_context(domain, session, table, rng, key=key)
    elif tables:
        known = _anchor_context(domain, session, tables[0], rng)
    calls: list[tuple[ToolNode, dict[str, Any]]] = []
    for i in range(n_writes):
        node = first if i == 0 else rng.choice(writes)
        args = _fill(domain, session, node.params, known, rng, optional_rate=options.optional_rate)
        if args is None:
            return None
        out = domain.toolkit.call(session, node.name, args)
        if not out.ok or not session.diff():
            return None
        calls.append((node, args))
    reads = _reads_before(domain, graph, calls[0], known, rng, options)
    return _execute(domain, graph, reads + calls)


def _reads_before(
    domain: Domain,
    graph: ToolGraph,
    target: tuple[ToolNode, dict[str, Any]],
    known: Known,
    rng: random.Random,
    options: WalkOptions,
) -> list[tuple[ToolNode, dict[str, Any]]]:
    """Reads, latest first built, whose answers show a value the next call takes."""
    chain: list[tuple[ToolNode, dict[str, Any]]] = []
    node, args = target
    session = domain.start_session()
    wanted = rng.randint(options.min_reads, options.max_reads)
    for i in range(options.max_reads + 1):
        # With min_reads, the chain goes on until its first call takes only what a person
        # knows (an email, a name), not a record's key: a customer does not know their id.
        natural = not any(p.table for p in node.params if p.name in args)
        if i >= wanted and (natural or options.min_reads == 0 or i >= options.max_reads):
            break
        needed = {str(args[p.name]) for p in node.params if p.table and p.name in args}
        found = []
        for edge in graph.predecessors(node.name):
            prev = graph.nodes[edge.source]
            if prev.kind != "read" or any(prev.name == c[0].name for c in chain):
                continue
            prev_args = _fill(
                domain,
                session,
                prev.params,
                list(known),
                rng,
                optional_rate=0.0,
                exact=options.min_reads > 0,
            )
            if prev_args is None:
                continue
            out = domain.toolkit.call(session.fork(), prev.name, prev_args)
            shown = {k for _, k in _keys_in(domain, session, out.content)} if out.ok else set()
            # Prefer a read that discovers the value over one that is handed it, and one that
            # takes what a person knows (an email, a name) over one that takes a record's key.
            given = {str(v) for v in prev_args.values()}
            natural = not any(p.table for p in prev.params)
            if needed & shown:
                found.append((bool(needed & shown - given), natural, prev.name, prev, prev_args))
        if not found:
            break
        best = [o for o in found if o[0]] or found
        best = [o for o in best if o[1]] or best
        _, _, _, node, args = rng.choice(sorted(best, key=lambda o: o[2]))
        chain.insert(0, (node, args))
    return chain


def _execute(
    domain: Domain, graph: ToolGraph, calls: Sequence[tuple[ToolNode, dict[str, Any]]]
) -> Walk | None:
    result = replay_calls(domain, None, [(n.name, a) for n, a in calls])
    if not result.ok or not result.session.diff():
        return None
    start = domain.start_session()
    steps: list[WalkStep] = []
    entities: list[tuple[str, str]] = []
    user_values: dict[str, Any] = {}
    shown: set[str] = set()
    for (node, args), out in zip(calls, result.outcomes, strict=True):
        grounded = tuple(p.name for p in node.params if p.name in args and p.grounded)
        steps.append(WalkStep(node.name, node.kind, dict(args), grounded, out.content))
        for p in node.params:
            if p.name not in args:
                continue
            values = args[p.name] if isinstance(args[p.name], list) else [args[p.name]]
            if p.table:
                entities.extend((p.table, v) for v in values if start.exists(p.table, str(v)))
            if any(str(v) not in shown for v in values) and p.name not in user_values:
                user_values[p.name] = args[p.name]
        shown |= {str(s) for s in _strings(_loads(out.content))}
    return Walk(
        steps,
        list(dict.fromkeys(entities)),
        user_values,
        result.session.state_hash(),
        result.session.diff().to_json(),
    )


def _loads(content: str) -> Any:
    try:
        return json.loads(content)
    except json.JSONDecodeError:
        return content


def related_records(
    domain: Domain, session: Session, entities: Sequence[tuple[str, str]], hops: int = 1
) -> list[tuple[str, str]]:
    """The given records and those they refer to, ``hops`` levels deep (an order and its
    customer): what a person calling about the entities knows of."""
    known: Known = [(t, k, session.require(t, k)) for t, k in entities if session.exists(t, k)]
    _extend_forward(domain, session, known, hops=hops)
    return list(dict.fromkeys((t, k) for t, k, _ in known))
