"""The tool dependency graph (ASTRA), and arguments filled from live state for one person. No LLM.

Tools return untyped JSON (``dict``/``list``), so what a tool *produces* is learnt by probing: the
tool is called on a few existing entities and every string in its answer that is a key of a table
marks the tool as producing that table. What a tool *consumes* comes from its signature: a
parameter takes a table's keys when it carries ``Ref``, is named like the table's key field (also
as a suffix, ``new_room_type_id``, or a plural, ``skus``) or like a ``Ref`` field of some record;
a parameter named like an ordinary record field (``email``, ``check_in``) takes that field's values.
A :class:`WalkGuide` says what a signature cannot (a synthesized domain's blueprint knows that a
bill dispute's ``reason`` is a bill's ``dispute_reason``, not a SIM order's ``reason``). An edge
``a -> b`` says a's answers show keys that b takes.

Arguments are filled inside a :class:`Scope`: the records one conversation is about, and the one
person they belong to. A record belongs to the people its references lead to (a refund to its
booking's passenger); records of nobody (a plan, a sailing) are shared. A scope never admits a
record of another person: a task is one customer's, by construction (walks in ``walks.py``).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import types
import typing
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from maestro.domains.package import Domain
from maestro.domains.runtime import ToolSpec
from maestro.domains.sdk import Ref, TextFormat, ToolKind
from maestro.domains.store import Session

#: Free-text values for parameters nothing in the database grounds (a reason, a note).
FREE_TEXT = ("change of plans", "no longer needed", "requested by the customer")
#: References followed to find a record's owner (a claim -> its item -> order -> customer).
OWNER_HOPS = 3

#: ``tool -> parameter -> (table, field)``.
Columns = Mapping[str, Mapping[str, tuple[str, str]]]


@dataclass(frozen=True)
class WalkGuide:
    """What a domain's author knows that tool signatures do not say (a synthesized domain's
    blueprint). Every field is optional; an empty guide infers everything from the domain."""

    #: Where each parameter's values come from, for the tools named: a parameter listed takes
    #: that field's values; one not listed takes no field's (it is free, a choice or a date).
    columns: Columns = field(default_factory=dict)
    #: The read that finds the customer by what they know (email and date of birth): every walk
    #: about a person starts with it, called with that person's own values (the policy's
    #: identity check); a walk about nobody is not made.
    identify: str | None = None
    #: Tables whose records are people and own other records; None: tables with contact fields.
    people: frozenset[str] | None = None
    #: Whether the agent must refuse this call on this state (an agent rule applies): an
    #: ordinary walk never makes it, and refusal walks aim at it.
    forbids: Callable[[str, dict[str, Any], Session], bool] | None = None
    #: Whether a call would change nothing that matters (a plan changed to the plan the customer
    #: is on): a walk never makes it.
    pointless: Callable[[str, dict[str, Any], Session], bool] | None = None
    #: ``tool -> parameters`` an effect writes over a record's field (``delivery_address =
    #: $new_address``): drawn from values other than those the conversation's records hold.
    fresh: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: Tables whose keys a customer does not know (a car class, a branch, a charge's internal
    #: id): a walk finds each such key with a read before the call that takes it, or is not
    #: made; the customer names the record by what that read takes (a city, a name).
    desk_keys: frozenset[str] = frozenset()
    #: ``write -> writes`` a customer brings after it in one call (a flight change, then its
    #: payment): a walk's second write is one of the first's; None: any other write.
    flows: Mapping[str, tuple[str, ...]] | None = None


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
    #: An effect writes it over a field: a value the records do not hold there already.
    fresh: bool = False

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
    #: Tables whose records are people (they own the records that refer to them).
    people: frozenset[str] = frozenset()

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


# ----- the graph ---------------------------------------------------------------------------------


def build_tool_graph(
    domain: Domain, *, probes: int = 3, seed: int = 0, guide: WalkGuide | None = None
) -> ToolGraph:
    """The domain's tool graph; what each tool produces is probed on ``probes`` entities."""
    guide = guide or WalkGuide()
    rng = random.Random(seed)
    session = domain.start_session()
    bare = {
        name: _params(domain, spec, guide.columns.get(name), guide.fresh.get(name, frozenset()))
        for name, spec in sorted(domain.toolkit.specs.items())
    }
    nodes: dict[str, ToolNode] = {}
    for name, params in bare.items():
        spec = domain.toolkit.specs[name]
        produced: set[str] = set()
        for _ in range(probes):
            args = _probe_arguments(domain, session, params, rng, guide)
            if args is None:
                continue
            out = domain.toolkit.call(session.fork(), name, args)
            if out.ok:
                produced |= {t for t, _ in keys_in(domain, session, out.content)}
        nodes[name] = ToolNode(name, spec.kind, params, frozenset(produced))
    edges = [
        Edge(a.name, b.name, t)
        for a in nodes.values()
        for b in nodes.values()
        if a.name != b.name
        for t in sorted(a.produces & b.consumes)
    ]
    people = guide.people if guide.people is not None else _people(domain, nodes)
    return ToolGraph(nodes, edges, people)


def _people(domain: Domain, nodes: Mapping[str, ToolNode]) -> frozenset[str]:
    """Tables of people: those a read finds by contact details alone (``find_guest(email)``),
    or, with no such read, those with a contact field (an email, a phone, a date of birth)."""
    found = set()
    for node in nodes.values():
        tables = {p.column[0] for p in node.params if p.column}
        if node.kind != "read" or len(tables) != 1 or any(p.table for p in node.params):
            continue
        if any(w in p.name for p in node.params for w in _CONTACT) and tables <= node.produces:
            found |= tables
    return frozenset(found) or people_tables(domain)


def reference_fields(domain: Domain) -> dict[str, dict[str, str]]:
    """``table -> field -> referenced table``: fields marked ``Ref`` or named like a table's key."""
    key_tables = {s.key_field: name for name, s in domain.tables.items()}
    out: dict[str, dict[str, str]] = {}
    for tname, tspec in sorted(domain.tables.items()):
        fields = tspec.model.model_fields if tspec.model else {}
        refs: dict[str, str] = {}
        for fname, finfo in fields.items():
            if fname == tspec.key_field:
                continue
            target = _ref_table(finfo.annotation) or next(
                (m.table for m in finfo.metadata if isinstance(m, Ref)), None
            )
            target = target or key_tables.get(fname)
            if target in domain.tables:
                refs[fname] = target
        out[tname] = refs
    return out


def _params(
    domain: Domain,
    spec: ToolSpec,
    known: Mapping[str, tuple[str, str]] | None = None,
    fresh: frozenset[str] = frozenset(),
) -> tuple[ParamSource, ...]:
    """The tool's parameters; ``known`` (the guide's) says which field each non-key one takes,
    ``fresh`` which ones an effect writes over a field."""
    key_tables = {s.key_field: name for name, s in sorted(domain.tables.items())}
    ref_fields: dict[str, str] = {}
    columns: dict[str, list[tuple[str, str]]] = {}
    refs = reference_fields(domain)
    for tname, tspec in sorted(domain.tables.items()):
        fields = tspec.model.model_fields if tspec.model else {}
        for fname in fields:
            if fname in refs[tname]:
                ref_fields.setdefault(fname, refs[tname][fname])
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
        if table is None and known is not None:
            column = known.get(pname)
        elif table is None:
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
                table is None and pname in fresh,
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


def leaves(value: Any) -> Iterator[Any]:
    """Every value inside a JSON value that is not an object or a list, in order."""
    # A stack, not recursion: a tool's answer may nest as deep as its JSON parses.
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
        else:
            yield node


def strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value."""
    return (node for node in leaves(value) if isinstance(node, str))


def loads(content: str) -> Any:
    """A tool's answer as JSON, or the text itself (any answer: an untrusted package's tool
    may return 100,000 ``[`` in a row)."""
    try:
        return json.loads(content)
    except (ValueError, RecursionError):
        return content


def keys_in(domain: Domain, session: Session, content: str) -> set[tuple[str, str]]:
    """Every (table, key) whose key appears as a string value in a tool's answer."""
    data = loads(content)
    if isinstance(data, str):
        return set()
    return {(t, s) for s in set(strings(data)) for t in domain.tables if session.exists(t, s)}


def _probe_arguments(
    domain: Domain,
    session: Session,
    params: Sequence[ParamSource],
    rng: random.Random,
    guide: WalkGuide,
) -> dict[str, Any] | None:
    scope = Scope.of(domain, session, guide.people)
    anchor = next((p.table for p in params if p.table and p.required), None)
    # A lookup by natural identifiers (email and date of birth) probes with one record's values.
    anchor = anchor or next((p.column[0] for p in params if p.column and p.required), None)
    if anchor:
        scope.anchor(anchor, rng)
    return fill(scope, params, rng, optional_rate=0.0, exact=True)


# ----- one person's records ----------------------------------------------------------------------

Known = list[tuple[str, str, dict[str, Any]]]


#: Words of the fields a person is found by.
_CONTACT = ("email", "phone", "birth")
#: Fields that make a table one of people when no read says which (a reservation's
#: ``folio_emailed_to`` does not).
_CONTACT_FIELDS = ("email", "email_address", "phone", "phone_number", "date_of_birth", "dob")


def people_tables(domain: Domain) -> frozenset[str]:
    """Tables of people (customers, guests, patients): those with a contact field."""
    out = set()
    for name, spec in domain.tables.items():
        fields = spec.model.model_fields if spec.model else {}
        if any(f in _CONTACT_FIELDS for f in fields):
            out.add(name)
    return frozenset(out)


@dataclass
class Scope:
    """The records one conversation is about, and the person they belong to (``owner``, set by
    the first record of somebody's that comes in). Only records of that person or of nobody
    are admitted."""

    domain: Domain
    session: Session
    people: frozenset[str]
    refs: dict[str, dict[str, str]]
    known: Known = field(default_factory=list)
    owner: tuple[str, str] | None = None

    @classmethod
    def of(cls, domain: Domain, session: Session, people: frozenset[str] | None = None) -> Scope:
        """An empty scope; ``people`` as the graph found them (else tables with contacts)."""
        found = people if people is not None else people_tables(domain)
        return cls(domain, session, found, reference_fields(domain))

    def owners(self, table: str, key: str) -> set[tuple[str, str]]:
        """The people a record belongs to: itself for a person, else those its references lead
        to (up to ``OWNER_HOPS``); none for a shared record (a plan, a sailing)."""
        found: set[tuple[str, str]] = set()
        frontier, seen = [(table, key)], set()
        for _ in range(OWNER_HOPS + 1):
            nxt = []
            for t, k in frontier:
                if (t, k) in seen:
                    continue
                seen.add((t, k))
                if t in self.people:
                    found.add((t, k))
                    continue
                record = self.session.get(t, k) or {}
                nxt += [
                    (target, record[f])
                    for f, target in self.refs.get(t, {}).items()
                    if isinstance(record.get(f), str)
                ]
            frontier = nxt
        return found

    def admits(self, table: str, key: str) -> bool:
        """Whether the record is the owner's or nobody's (any one person's, before an owner)."""
        owners = self.owners(table, key)
        if self.owner is None:
            return len(owners) <= 1
        return owners <= {self.owner}

    def holds(self, table: str, key: str) -> bool:
        return any(t == table and k == key for t, k, _ in self.known)

    def add(self, table: str, key: str, hops: int = 1) -> bool:
        """Take a record in (and the records it refers to, ``hops`` levels deep); False when it
        does not exist or belongs to someone else."""
        if self.holds(table, key):
            return True
        if not self.session.exists(table, key) or not self.admits(table, key):
            return False
        self.known.append((table, key, self.session.require(table, key)))
        if self.owner is None:
            owners = self.owners(table, key)
            if owners:
                (self.owner,) = owners
                self.add(*self.owner, hops=1)
        if hops > 0:
            record = self.session.require(table, key)
            for fname, target in sorted(self.refs.get(table, {}).items()):
                value = record.get(fname)
                if isinstance(value, str):
                    self.add(target, value, hops - 1)
        return True

    def anchor(self, table: str, rng: random.Random, key: str | None = None) -> bool:
        """Start from one record of ``table`` (``key``, or a random one of one person's)."""
        if key is None:
            keys = [k for k in self.session.keys(table) if self.admits(table, k)]
            if not keys:
                return False
            key = rng.choice(keys)
        return self.add(table, key, hops=2)


# ----- filling arguments from live state ---------------------------------------------------------


def _related(scope: Scope, p: ParamSource) -> list[Any]:
    """Values for a parameter that belong with the records the scope holds."""
    out: list[Any] = []
    for t, k, rec in scope.known:
        if p.table:
            if t == p.table:
                out.append(k)
        elif p.column:
            if t == p.column[0] and rec.get(p.column[1]) is not None:
                out.append(rec[p.column[1]])
        elif rec.get(p.name) is not None and not isinstance(rec[p.name], dict | list):
            out.append(rec[p.name])
    if p.table:
        # Records of the parameter's table that point at a held record (a guest's cards, a
        # customer's bills), but only the owner's (not a booking on the same sailing by someone
        # else, not another customer on the same plan).
        for t, k, _ in list(scope.known):
            for fname, target in sorted(scope.refs.get(p.table, {}).items()):
                if target != t:
                    continue
                key_field = scope.domain.tables[p.table].key_field
                out += [r[key_field] for r in scope.session.find(p.table, **{fname: k})[:20]]
        out = [v for v in out if isinstance(v, str) and scope.admits(p.table, v)]
    return list(dict.fromkeys(v for v in out if not isinstance(v, dict | list)))


def _value(
    scope: Scope,
    p: ParamSource,
    rng: random.Random,
    *,
    exact: bool = False,
    pinned: Any = None,
    about: Mapping[str, str] | None = None,
) -> Any:
    """A value for one parameter. ``about`` holds the records the call's other arguments
    name (``table -> key``): a text is drawn for them, not for another record."""
    if pinned:
        return rng.choice(list(pinned))
    about = about or {}
    related = _related(scope, p)
    # The customer's dispute of a Home Depot charge gave its reason to the dispute of their
    # Target charge (the bank's reviewer caught it): a text is told of the call's own record.
    foreign = _told_of_others(scope, p, about) if p.column and not p.table else set()
    related = [v for v in related if not (isinstance(v, str) and v in foreign)]
    if p.fresh:
        # What the conversation's records hold there is what the write would change nothing to.
        column = _column_values(scope, p)
        if p.text_format and not p.choices:
            # A new date or time is the record's own moved by whole days (an extension by
            # three days); varied digit by digit, a return time was moved by 24 min 4 s.
            own = next((v for v in related if isinstance(v, str)), None)
            moved = _moved(own, p.text_format, rng) if own is not None else None
            if moved is not None:
                return moved
        elif not p.choices and _identifying(column):
            # An email, a phone, a member number: another person's is no new value of one's own
            # (a capable reviewer flagged a customer "changing" their email to a neighbour's).
            own = next((v for v in related if isinstance(v, str)), None)
            street = any(w in p.name for w in _STREET)
            made = _fresh_variant(own, set(column), rng, street) if own is not None else None
            if made is not None:
                return made
        pool = [
            v
            for v in (list(p.choices) or _own_story(scope, column))
            if v not in related and not (isinstance(v, str) and v in foreign)
        ]
        if pool:
            return rng.choice(pool)
    if p.table and p.name != scope.domain.tables[p.table].key_field:
        # new_plan_id, new_slot_id: another record than those the conversation holds already.
        related = [v for v in related if not scope.holds(p.table, v)]
    if p.choices:
        pool = [v for v in related if v in p.choices] or list(p.choices)
        return rng.choice(pool)
    if related and (exact or rng.random() < 0.85 or not (p.table or p.column)):
        return rng.choice(related)
    if p.text_format and not p.column:
        return _when(scope.domain, p.text_format, rng)
    tracked = _tracked(scope, p, about, rng)
    if tracked is not None:
        return tracked
    session = scope.session
    if p.table:
        # Another record of the table, but never one that belongs to someone else.
        keys = [k for k in session.keys(p.table) if scope.admits(p.table, k)]
        return rng.choice(keys) if keys else None
    if p.column:
        values = [
            v
            for v in _own_story(scope, _column_values(scope, p))
            if not (isinstance(v, str) and v in foreign)
        ]
        if values:
            return rng.choice(values)
        retold = _retold(scope, p, about=about)
        if retold:
            return rng.choice(retold)
        if p.scalar == "str" and not p.text_format:
            return None  # every text there tells another record's story
        if p.text_format:
            return _when(scope.domain, p.text_format, rng)
    if p.scalar == "bool":
        return rng.random() < 0.5
    if p.scalar in ("int", "float"):
        return rng.randint(1, 3) if p.scalar == "int" else float(rng.randint(1, 3))
    if p.scalar == "str":
        return rng.choice(FREE_TEXT)
    return None


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


#: A field tracks a field of the record it refers to when 80% of its records lie within a
#: tenth of that field's spread of it (a return's mileage of its rental's mileage out).
_TRACKS_WITHIN = 0.1
_TRACKS_SHARE = 0.8
#: Records read to tell (a walk draws many values; a table may hold 10,000 records).
_TRACKS_SAMPLE = 500


def _tracked(
    scope: Scope, p: ParamSource, about: Mapping[str, str], rng: random.Random
) -> int | float | None:
    """A number for a field of records that refer to the call's record (a return's mileage,
    of the rental the call names), when the field tracks a number of the record referred to
    (the rental's mileage out): another such record's offset from its own, applied to the
    call's record. Drawn from another record as it stands, a return was recorded 58,000 miles
    after its pickup two days before (another car's reading). None when no field tracks."""
    if p.scalar not in ("int", "float") or not p.column:
        return None
    table, fname = p.column
    for ref_field, target in sorted(scope.refs.get(table, {}).items()):
        key = about.get(target)
        mine = scope.session.get(target, key) if key is not None else None
        if mine is None:
            continue
        pairs = []
        for r in itertools.islice(scope.session.scan(table), _TRACKS_SAMPLE):
            parent_key = r.get(ref_field)
            parent = scope.session.get(target, parent_key) if isinstance(parent_key, str) else None
            if parent is not None and _number(r.get(fname)):
                pairs.append((r[fname], parent))
        if len(pairs) < 5:
            continue
        best: tuple[float, str, list[Any]] | None = None
        for g in sorted(f for f, v in mine.items() if _number(v)):
            sample = itertools.islice(scope.session.scan(target), _TRACKS_SAMPLE)
            values = [r[g] for r in sample if _number(r.get(g))]
            spread = max(values) - min(values) if values else 0
            deltas = [v - parent[g] for v, parent in pairs if _number(parent.get(g))]
            if spread <= 0 or len(deltas) < 5:
                continue
            near = sum(abs(d) <= _TRACKS_WITHIN * spread for d in deltas)
            if near < _TRACKS_SHARE * len(deltas):
                continue
            # The field it follows closest (a payment's invoice total, not its amount paid).
            mean = sum(abs(d) for d in deltas) / len(deltas)
            if best is None or mean < best[0]:
                best = (mean, g, deltas)
        if best is not None:
            value = mine[best[1]] + rng.choice(best[2])
            return round(value) if p.scalar == "int" else round(float(value), 2)
    return None


def _identifying(values: list[Any]) -> bool:
    """Whether a field's values name their records (nearly all distinct texts)."""
    texts = [v for v in values if isinstance(v, str)]
    return len(texts) >= 5 and len(set(texts)) >= 0.9 * len(texts)


#: An address or street line: varied in its house number, the first number in it (its last
#: digits are the ZIP code of a whole address: "San Jose, CA 95112" became "CA 96225").
_STREET = ("address", "street")


def _fresh_variant(
    own: str, taken: set[Any], rng: random.Random, street: bool = False
) -> str | None:
    """A value of the same shape as the customer's own that nobody holds: an email with a
    number added to its name, a number with its last digits changed, a ``street`` line with
    another house number."""
    house = re.match(r"\D*?(\d+)", own) if street else None
    for _ in range(20):
        if house is not None:
            digits = house.group(1)
            other = str(
                rng.randint(
                    10 ** (len(digits) - 1) if len(digits) > 1 else 1, 10 ** len(digits) - 1
                )
            )
            made = own[: house.start(1)] + other + own[house.end(1) :]
        elif "@" in own:
            local, _, host = own.partition("@")
            local = re.sub(r"[0-9]+$", "", local)
            made = f"{local}{rng.randint(2, 98)}@{host}"
        elif any(ch.isdigit() for ch in own):
            chars = list(own)
            digits = [i for i, ch in enumerate(chars) if ch.isdigit()][-4:]
            for n, i in enumerate(digits):
                # never a leading zero: "0563 Cedar Lane" is no house number
                chars[i] = str(rng.randint(1 if n == 0 and i == 0 else 0, 9))
            made = "".join(chars)
        else:
            return None
        if made not in taken and made != own:
            return made
    return None


#: Parts of a name that say a new value is one of a place's (a street line, a phone): drawn
#: from another record, it is varied so that nobody holds it (another house on its street, a
#: number of its area code); any other value naming its person (an email, a licence number)
#: is varied from the customer's own.
_PLACE = ("address", "street", "line", "phone", "mobile")
#: Fields of the place itself, kept as the record drawn holds them.
_AREA = ("city", "state", "zip", "postal", "postcode", "country", "region", "county", "town")


def _drawn_together(
    scope: Scope,
    params: Sequence[ParamSource],
    rng: random.Random,
    pinned: Mapping[str, Any],
    exact: bool = False,
) -> dict[str, list[Any]]:
    """New values of several fields of one table (a street, a city, a state, a ZIP code) taken
    from one record of it, so they agree (drawn field by field, a Raleigh address got a
    Virginia ZIP code); a street line or a phone is then varied so nobody holds it (another
    house on that street), and a value naming its person (an email, a licence) is the
    customer's own varied. Then the names drawn together (``_named_together``)."""
    groups: dict[str, list[ParamSource]] = {}
    for p in params:
        # A choice of the field too (a city one of five towns): drawn alone, a Lakeside
        # address got Fairview's ZIP code.
        if p.fresh and p.column and not p.table and p.name not in pinned:
            groups.setdefault(p.column[0], []).append(p)
    out: dict[str, list[Any]] = {}
    for table, group in groups.items():
        if len(group) < 2:
            continue
        held = {k for t, k, _ in scope.known if t == table}
        rows = [
            r
            for r in scope.session.scan(table)
            if all(r.get(p.column[1]) is not None for p in group if p.column)
            and all(r.get(p.column[1]) in p.choices for p in group if p.column and p.choices)
            and r.get(scope.domain.tables[table].key_field) not in held
        ]
        if not rows:
            continue
        source = rng.choice(rows)
        for p in group:
            assert p.column is not None
            value = source[p.column[1]]
            column = _column_values(scope, p)
            shared = any(w in p.name for w in _AREA)  # a ZIP code is its place's, not one's own
            if isinstance(value, str) and _identifying(column) and not (shared or p.text_format):
                # Another person's licence or email is no new one of the customer's (the car
                # rental's renewed licence was another customer's, name encoded and all).
                own = next((v for v in _related(scope, p) if isinstance(v, str)), None)
                base = value if own is None or any(w in p.name for w in _PLACE) else own
                street = any(w in p.name for w in _STREET)
                value = _fresh_variant(base, set(column), rng, street) or base
            out[p.name] = [value]
    out.update(_named_together(scope, params, rng, {**pinned, **out}, exact))
    return out


def _named_together(
    scope: Scope,
    params: Sequence[ParamSource],
    rng: random.Random,
    pinned: Mapping[str, Any],
    exact: bool,
) -> dict[str, list[Any]]:
    """Several names of one table's record (a pharmacy and its phone, a prescriber and a
    prescription number) taken from one record, the conversation's own where it holds one:
    drawn field by field, a transferred prescription came from one pharmacy with another's
    phone number. Stories (texts of several words) are left to ``_value``, which tells them
    of the call's record."""
    groups: dict[str, list[ParamSource]] = {}
    dates: dict[str, list[ParamSource]] = {}
    for p in params:
        if (
            p.column
            and not (p.fresh or p.table or p.is_list)
            and p.scalar == "str"
            and p.name not in pinned
        ):
            (dates if p.text_format else groups).setdefault(p.column[0], []).append(p)
    out: dict[str, list[Any]] = {}
    for table, group in groups.items():
        if len(group) < 2:
            continue
        group = [p for p in group if not _prose_field(scope, p)]
        if len(group) < 2:
            continue
        # The dates of the named record come with its names (an extra driver's birth date
        # with his name and licence: drawn alone, a licence on file for a driver born in 1990
        # was given to one born in 1957); dates alone are no record's (a new booking's).
        group += dates.get(table, [])
        fields = [p.column[1] for p in group if p.column]
        if len(set(fields)) < len(fields):
            continue  # one field twice (from a branch's name to another's): not one record

        def whole(r: Mapping[str, Any], group: list[ParamSource] = group) -> bool:
            return all(
                isinstance(r.get(p.column[1]), str)
                and (not p.choices or r.get(p.column[1]) in p.choices)
                for p in group
                if p.column
            )

        own = [rec for t, _, rec in scope.known if t == table and whole(rec)]
        if own and (exact or rng.random() < 0.85):
            rows = own
        elif exact:
            continue
        else:
            key_field = scope.domain.tables[table].key_field
            rows = [
                r
                for r in scope.session.scan(table)
                if whole(r) and scope.admits(table, r[key_field])
            ] or [r for r in scope.session.scan(table) if whole(r)]
        if not rows:
            continue
        source = rng.choice(rows)
        for p in group:
            assert p.column is not None
            out[p.name] = [source[p.column[1]]]
    return out


def _prose_field(scope: Scope, p: ParamSource) -> bool:
    """Whether most of the parameter's field's values are stories (several words)."""
    texts = [v for v in _column_values(scope, p) if isinstance(v, str)]
    return bool(texts) and sum(len(v.split()) >= _PROSE_WORDS for v in texts) * 2 > len(texts)


#: Words in a text that make it a story rather than a value (a damage description, a note).
_PROSE_WORDS = 3
#: A database value this long or shorter (in words) is a name a text can mention.
_NAME_WORDS = 4
_NAMES: dict[int, tuple[weakref.ref[Domain], frozenset[str], frozenset[float]]] = {}
#: A sum of money in a text: a currency sign before it, or cents after a point ("$321.00").
_MONEY = re.compile(r"(?:[$£€]\s?(\d[\d,]*(?:\.\d+)?)|\b(\d[\d,]*\.\d\d)\b)")
_TOKEN = re.compile(r"[^\W_][\w'.&/-]*", re.UNICODE)
_EDGE = ".,;:'/&-"


def _grams(text: str) -> set[str]:
    """The runs of up to ``_NAME_WORDS`` words in a text, case-folded, edge punctuation cut."""
    words = [w.rstrip(_EDGE) for w in _TOKEN.findall(text.casefold())]
    words = [w for w in words if w]
    return {
        " ".join(words[i : i + n])
        for n in range(1, _NAME_WORDS + 1)
        for i in range(len(words) - n + 1)
    }


def _is_name(value: str) -> bool:
    """A value that names one thing: a city, a car model or a person (short, every word
    capitalised), a plate, a code or a date (one word holding a digit); not an ordinary word
    (a status) nor a phrase ("Near the elevator")."""
    words = value.split()
    if not 0 < len(words) <= _NAME_WORDS or len(value) < 3:
        return False
    if len(words) == 1 and any(ch.isdigit() for ch in value):
        return True
    lettered = [w for w in words if w[0].isalpha()]
    return bool(lettered) and all(w[0].isupper() for w in lettered)


def numbers(value: Any) -> Iterator[float]:
    """Every number inside a JSON value (booleans aside), to the cent."""
    return (
        round(float(node), 2)
        for node in leaves(value)
        if isinstance(node, int | float) and not isinstance(node, bool)
    )


def _money(text: str) -> set[float]:
    """The sums of money a text names."""
    out = set()
    for m in _MONEY.finditer(text):
        digits = (m.group(1) or m.group(2)).replace(",", "")
        try:
            out.add(round(float(digits), 2))
        except ValueError:
            continue
    return out


def _db_names(domain: Domain) -> tuple[frozenset[str], frozenset[float]]:
    """Every name and every number the domain's database holds, names case-folded (computed
    once per domain)."""
    got = _NAMES.get(id(domain))
    if got is not None and got[0]() is domain:
        return got[1], got[2]
    session = domain.start_session()
    found: set[str] = set()
    amounts: set[float] = set()
    for table in domain.tables:
        for record in session.scan(table):
            found |= {
                " ".join(w.rstrip(_EDGE) for w in _TOKEN.findall(v.casefold()))
                for v in strings(record)
                if _is_name(v)
            }
            amounts.update(numbers(record))
    names, sums = frozenset(n for n in found if n), frozenset(amounts)
    if len(_NAMES) >= 32:
        _NAMES.pop(next(iter(_NAMES)))
    _NAMES[id(domain)] = (weakref.ref(domain), names, sums)
    return names, sums


def _own_story(scope: Scope, values: list[Any]) -> list[Any]:
    """The values that fit the conversation: a text of several words (a description, a note,
    a dispute's reason) drawn from another record may name that record's things (a Honda CR-V
    in Los Angeles for a Mazda3 returned in Washington; "this $321.00 charge" for a charge of
    $339.70); those are left out. Other values are kept as they are."""
    prose = [v for v in values if isinstance(v, str) and len(v.split()) >= _PROSE_WORDS]
    if not prose:
        return values
    names, amounts = _db_names(scope.domain)
    held: set[str] = set()
    held_amounts: set[float] = set()
    for _, _, record in scope.known:
        for v in strings(record):
            held |= _grams(v)
        held_amounts.update(numbers(record))
    foreign = names - held
    foreign_amounts = amounts - held_amounts

    def fits(v: Any) -> bool:
        if not (isinstance(v, str) and len(v.split()) >= _PROSE_WORDS):
            return True
        return not _grams(v) & foreign and not _money(v) & foreign_amounts

    return [v for v in values if fits(v)]


def _told_of_others(scope: Scope, p: ParamSource, about: Mapping[str, str]) -> set[str]:
    """Texts of the parameter's field that name things of a record other than the one the
    call is about (``about``: a dispute's reason naming the merchant and sum of another of the
    customer's charges, while the call disputes this one). Texts naming nothing of their
    records (\"I did not authorise this charge\") are not among them."""
    if p.column is None or not about:
        return set()
    table, name = p.column
    refs = [(f, t) for f, t in sorted(scope.refs.get(table, {}).items()) if t in about]
    if not refs:
        return set()
    out: set[str] = set()
    owns = {t: scope.session.get(t, about[t]) for _, t in refs}
    for record in scope.session.scan(table):
        text = record.get(name)
        if not isinstance(text, str) or len(text.split()) < _PROSE_WORDS or text in out:
            continue
        for fname, target in refs:
            key, own = record.get(fname), owns[target]
            if not isinstance(key, str) or key == about[target] or own is None:
                continue
            source = scope.session.get(target, key)
            if source is not None and _retell(text, source, own) != text:
                out.add(text)
                break
    return out


def _retold(
    scope: Scope, p: ParamSource, limit: int = 20, about: Mapping[str, str] | None = None
) -> list[str]:
    """Texts of the parameter's field told again of the conversation's own record: a dispute's
    reason names its transaction's merchant and amount ("Did not dine at Starbucks; this $17.59
    charge is unauthorized"); for the customer's own transaction those become its own (every
    bank dispute reason named another charge, so no dispute could be walked). Only texts that
    then name nothing of another record's are kept."""
    if p.column is None:
        return []
    table, name = p.column
    out: list[str] = []
    for fname, target in sorted(scope.refs.get(table, {}).items()):
        if about and target in about:
            own = scope.session.get(target, about[target])  # the call's own record
        else:
            own = next((rec for t, _, rec in reversed(scope.known) if t == target), None)
        if own is None:
            continue
        for record in scope.session.scan(table):
            text, source_key = record.get(name), record.get(fname)
            if not isinstance(text, str) or len(text.split()) < _PROSE_WORDS:
                continue
            source = scope.session.get(target, source_key) if isinstance(source_key, str) else None
            if source is None or source == own:
                continue
            told = _retell(text, source, own)
            if told != text:
                out.append(told)
            if len(out) >= limit:
                break
    return _own_story(scope, list(dict.fromkeys(out)))


def _retell(text: str, source: Mapping[str, Any], own: Mapping[str, Any]) -> str:
    """``text`` with each value of ``source`` it names replaced by ``own``'s value of that field
    (a name of three characters or more; a sum written with cents)."""
    for fname, was in source.items():
        now = own.get(fname)
        if isinstance(was, str) and isinstance(now, str) and len(was) >= 3 and was != now:
            text = text.replace(was, now)
        elif (
            isinstance(was, int | float)
            and isinstance(now, int | float)
            and not isinstance(was, bool)
            and not isinstance(now, bool)
            and was != now
        ):
            for form in ("{:,.2f}", "{:.2f}"):
                text = text.replace(form.format(was), form.format(now))
    return text


def _column_values(scope: Scope, p: ParamSource) -> list[Any]:
    """Every value the parameter's field holds in the database."""
    if p.column is None:
        return []
    table, name = p.column
    return [r[name] for r in scope.session.scan(table) if r.get(name) is not None]


def _moved(own: str, kind: str, rng: random.Random) -> str | None:
    """``own`` (a date, or a datetime) moved by one to seven days, earlier or later; None when
    it is neither."""
    days = rng.choice([d for d in range(-3, 8) if d])
    try:
        if kind == "date":
            return (date.fromisoformat(own) + timedelta(days=days)).isoformat()
        return (datetime.fromisoformat(own) + timedelta(days=days)).isoformat()
    except ValueError:
        return None


def _when(domain: Domain, kind: str, rng: random.Random) -> str:
    """A date or datetime a customer might ask for: the coming two weeks, from the clock."""
    now = domain.manifest.clock or datetime(2026, 1, 5, 9, 0)
    when = now + timedelta(days=rng.randint(1, 14))
    if kind == "date":
        return when.date().isoformat()
    return when.replace(hour=rng.choice((9, 10, 11, 14, 15, 16)), minute=0, second=0).isoformat()


def fill(
    scope: Scope,
    params: Sequence[ParamSource],
    rng: random.Random,
    *,
    optional_rate: float,
    exact: bool = False,
    pinned: Mapping[str, Sequence[Any]] | None = None,
) -> dict[str, Any] | None:
    """Arguments for a call, each related to the scope's records where possible (always, when
    ``exact``: a read in a chain asks about the walk's own records); ``pinned`` values are
    drawn from as given. None when a required one cannot be found."""
    args: dict[str, Any] = {}
    about: dict[str, str] = {}  # the records the arguments drawn so far name
    pinned = {**_drawn_together(scope, params, rng, pinned or {}, exact), **(pinned or {})}
    for p in params:
        if not p.required:
            # Optional arguments stay at their default unless drawn; a drawn bool flips it.
            if rng.random() >= optional_rate or not (p.grounded or p.scalar == "str"):
                continue
            if p.scalar == "bool" and not p.choices and isinstance(p.default, bool):
                args[p.name] = not p.default
                continue
        value = _value(scope, p, rng, exact=exact, pinned=pinned.get(p.name), about=about)
        if value is None:
            if p.required:
                return None
            continue
        args[p.name] = [value] if p.is_list and not isinstance(value, list) else value
        if p.table and isinstance(value, str):
            about[p.table] = value
        if p.table and isinstance(value, str) and not scope.add(p.table, value):
            return None  # another person's record: never part of this conversation
    return args
