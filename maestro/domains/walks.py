"""State-grounded walks over the tool graph (PROVE): the calls a task's conversation makes.

A walk is one customer's conversation about their own records. It starts from a record that
exists, fills every argument inside a :class:`~maestro.domains.toolgraph.Scope` (records of one
person, or of nobody), and ends in one or two writes, each of which must change the state, be
allowed (no agent rule of the guide forbids it on the state it runs on) and not be pointless (a
plan changed to the plan the customer is on). Before the writes come the reads a person's
conversation needs: the guide's identity lookup, called with the owner's own identifiers, then
reads whose answers show keys the writes take (a customer's bills before a bill dispute). Every
walk is executed on a fresh session; the same seed gives the same walks.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from maestro.domains.package import Domain, replay_calls
from maestro.domains.sdk import ToolKind
from maestro.domains.store import Session
from maestro.domains.toolgraph import (
    Scope,
    ToolGraph,
    ToolNode,
    WalkGuide,
    fill,
    loads,
    strings,
)

Call = tuple[ToolNode, dict[str, Any]]

#: Reads a walk may add, beyond ``max_reads``, to find keys only the desk knows.
DESK_READS = 2


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
    #: Argument values the customer must give: all but the keys an earlier answer shows.
    user_values: dict[str, Any]
    expected_state_hash: str
    changes: list[dict[str, Any]] = field(default_factory=list)
    #: The person the walk is about (table, key); None when it is about nobody's records.
    owner: tuple[str, str] | None = None
    #: The identity lookup it starts with (the guide's), when it has one.
    identified: bool = False
    #: An information request: it ends in a read whose answer the customer asks for, and
    #: writes nothing.
    asks: bool = False
    #: Keys the calls take that only the desk knows (``WalkGuide.desk_keys``): a read shows
    #: each before it is used, and the customer never says them.
    hidden: tuple[str, ...] = ()
    #: A refusal a tool enforces: its one write is refused by the tool (a ToolError) and
    #: changes nothing; the calls before it succeed.
    refused: bool = False

    @property
    def writes(self) -> list[WalkStep]:
        return [s for s in self.steps if s.kind == "write"]

    @property
    def targets(self) -> list[WalkStep]:
        """What the customer calls for: the writes, or an information request's last read."""
        return [self.steps[-1]] if self.asks else self.writes

    @property
    def reads(self) -> list[WalkStep]:
        return [s for s in self.steps if s.kind == "read"]

    @property
    def required(self) -> list[WalkStep]:
        """The calls a correct conversation must make: the identity lookup and the writes (or
        the read an information request asks for)."""
        lead = [self.steps[0]] if self.identified and self.steps[0] is not self.steps[-1] else []
        return lead + self.targets

    def signature(self) -> str:
        """The writes (or the read asked for) with their grounded arguments: two walks with one
        signature are one task."""
        return json.dumps(
            [[s.name, {k: s.arguments[k] for k in s.grounded}] for s in self.targets],
            sort_keys=True,
            default=str,
        )


@dataclass(frozen=True)
class WalkOptions:
    """What walks to sample: their length, and where they may start."""

    #: Reads that discover the keys the writes take (the identity lookup aside).
    max_reads: int = 2
    #: How likely a key of the customer's own records that no earlier answer shows is found by
    #: a read (else the customer gives it: an order number from their email); keys of shared
    #: records (a plan, a sailing) are always looked up when a read shows them.
    discover: float = 0.7
    max_writes: int = 2
    optional_rate: float = 0.25
    #: Only these write tools start a walk; None: any write.
    tools: tuple[str, ...] | None = None
    #: Records a walk starts from; None: any record of the first write's anchor table.
    anchors: tuple[tuple[str, str], ...] | None = None
    #: Values the first write's parameters are drawn from (a refusal aims at its rule's values).
    pinned: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    guide: WalkGuide = field(default_factory=WalkGuide)
    #: Information requests: walks end in a read (not the identity lookup) and write nothing.
    asks: bool = False
    #: Refusals a tool enforces: the walk's one write is refused by its tool.
    refused: bool = False


def sample_walks(
    domain: Domain,
    graph: ToolGraph,
    n: int,
    *,
    seed: int = 0,
    max_reads: int = 2,
    max_writes: int = 2,
    optional_rate: float = 0.25,
    attempts_per_walk: int = 40,
    exclude: Sequence[str] = (),
    tools: Sequence[str] | None = None,
    anchors: Sequence[tuple[str, str]] | None = None,
    keep: Callable[[Walk], bool] | None = None,
    guide: WalkGuide | None = None,
    pinned: Mapping[str, Sequence[Any]] | None = None,
    discover: float = 0.7,
    asks: bool = False,
    refused: bool = False,
) -> list[Walk]:
    """Up to ``n`` distinct walks (by :meth:`Walk.signature`), each grounded and executed.

    ``exclude`` holds signatures already taken (the domain's existing tasks). ``tools`` and
    ``anchors`` restrict where walks start (a refusal's operation, records its rule applies
    to); ``keep`` drops walks it refuses. ``guide`` says what the tool signatures cannot (the
    identity lookup, the fields parameters take, the calls an agent rule forbids: a refusal
    walk passes a guide without ``forbids``). Fewer than ``n`` come back when the attempts run
    out: the domain's state allows no more. ``asks``: information requests instead, each
    ending in a read about the customer's records whose answer they ask for (a quote, a status).
    ``refused``: one write each, which its tool refuses (no refills left), after the reads that
    lead to it.
    """
    options = WalkOptions(
        max_reads=max_reads,
        discover=discover,
        max_writes=max_writes,
        optional_rate=optional_rate,
        tools=tuple(tools) if tools is not None else None,
        anchors=tuple(anchors) if anchors is not None else None,
        pinned=dict(pinned or {}),
        guide=guide or WalkGuide(),
        asks=asks,
        refused=refused,
    )
    rng = random.Random(seed)
    writes = sorted(graph.writes(), key=lambda w: w.name)
    if asks:
        reads = [n for n in graph.nodes.values() if n.kind == "read"]
        # A read about a record (it takes a key): the identity lookup and searches aside.
        ends = [
            n
            for n in sorted(reads, key=lambda n: n.name)
            if n.name != options.guide.identify and any(p.table and p.required for p in n.params)
        ]
    else:
        ends = writes
    starts = [w for w in ends if options.tools is None or w.name in options.tools]
    taken = set(exclude)
    walks: list[Walk] = []
    if not starts or options.anchors == ():
        return walks
    # Each walk starts with the write that has the fewest walks so far (a second write counts
    # too), so the tasks cover what the desk does rather than what is easiest to walk. Failed
    # attempts count as a tenth of a walk, and as a fortieth while a write has none yet: a write
    # few records accept (a booking confirmed, departing after tomorrow and under its bag
    # limit: one try in five) gets its ``attempts_per_walk`` tries before the easy writes
    # repeat; one no record accepts gives way after them.
    made = dict.fromkeys((w.name for w in starts), 0.0)
    walked: set[str] = set()

    def failed(name: str) -> None:
        made[name] += 0.1 if name in walked else 1 / max(1, attempts_per_walk)

    # A request made already by another customer (the same promo code, a lost SIM again) waits
    # in reserve: it is taken only when ``attempts_per_walk`` attempts find no new request.
    requests: set[str] = set()
    reserve: list[Walk] = []
    dry = 0
    for _ in range(n * attempts_per_walk):
        if len(walks) >= n:
            break
        if dry >= attempts_per_walk and reserve:
            again = reserve.pop(0)
            walks.append(again)
            taken.add(again.signature())
            dry = 0
            continue
        dry += 1
        first = min(starts, key=lambda w: (made[w.name], rng.random()))
        n_writes = 1 if asks or refused or max_writes < 2 or rng.random() < 0.7 else 2
        walk = _try_walk(domain, graph, writes, first, rng, n_writes, options)
        if walk is None or walk.signature() in taken or (keep is not None and not keep(walk)):
            failed(first.name)
            continue
        request = walk_request(domain, graph, walk)
        if request in requests:
            failed(first.name)
            if all(w.signature() != walk.signature() for w in reserve):
                reserve.append(walk)
            continue
        for step in walk.targets:
            made[step.name] = made.get(step.name, 0.0) + 1
            walked.add(step.name)
        requests.add(request)
        taken.add(walk.signature())
        walks.append(walk)
        dry = 0
    return walks + reserve[: max(0, n - len(walks))]


def walk_request(domain: Domain, graph: ToolGraph, walk: Walk) -> str:
    """What a walk's writes ask for, whoever asks: the operations and their grounded arguments
    but the customer's own records and dates (two customers applying WELCOME10 ask the same)."""
    scope = Scope.of(domain, domain.start_session(), graph.people)
    parts = []
    for step in walk.targets:
        asked: dict[str, Any] = {}
        for p in graph.nodes[step.name].params:
            if p.name not in step.grounded or p.text_format:
                continue
            value = step.arguments[p.name]
            values = value if isinstance(value, list) else [value]
            if p.table and any(scope.owners(p.table, str(v)) for v in values):
                continue
            asked[p.name] = value
        parts.append([step.name, asked])
    return json.dumps(parts, sort_keys=True, default=str)


def without_rules(guide: WalkGuide | None) -> WalkGuide:
    """The guide for refusal walks: everything but the agent rules, which they aim at."""
    return replace(guide or WalkGuide(), forbids=None)


def _try_walk(
    domain: Domain,
    graph: ToolGraph,
    writes: Sequence[ToolNode],
    first: ToolNode,
    rng: random.Random,
    n_writes: int,
    options: WalkOptions,
) -> Walk | None:
    guide = options.guide
    tables = [p.table for p in first.params if p.table and p.required]
    session = domain.start_session()
    scope = Scope.of(domain, session, graph.people)
    if options.anchors is not None:
        pool = [a for a in options.anchors if a[0] in tables]
        if not pool:
            return None
        table, key = rng.choice(pool)
        if not scope.anchor(table, rng, key=key):
            return None
    elif tables and not scope.anchor(tables[0], rng):
        return None
    calls: list[Call] = []
    if guide.flows is not None and not guide.flows.get(first.name):
        n_writes = 1  # nothing a customer brings after this write
    for i in range(n_writes):
        # A second write is another kind of request (two SIM orders in one call read oddly),
        # and, where the guide says which, one a customer brings after the first.
        others = [w for w in writes if all(w.name != c[0].name for c in calls)]
        if i > 0 and guide.flows is not None:
            follows = guide.flows.get(calls[-1][0].name, ())
            others = [w for w in others if w.name in follows]
        if i > 0 and not others:
            return None
        node = first if i == 0 else rng.choice(others)
        pinned = options.pinned if i == 0 else None
        args = fill(scope, node.params, rng, optional_rate=options.optional_rate, pinned=pinned)
        if args is None or not _allowed(guide, node, args, scope):
            return None
        before = session.state_hash()
        out = domain.toolkit.call(session, node.name, args)
        if options.refused:
            if out.status != "tool_error" or session.state_hash() != before:
                return None  # the tool itself refuses it, and nothing changes
        elif options.asks:
            if not out.ok or session.state_hash() != before or not _tells(out.content):
                return None  # an information request is answered, and changes nothing
        elif not out.ok or session.state_hash() == before:
            return None  # refused, or it changed nothing: not a step of a conversation
        calls.append((node, args))
    if guide.identify and scope.owner is None:
        return None  # a desk conversation is about a customer's records
    lead = _lead_in(domain, graph, calls, scope, rng, options)
    if lead is None:
        return None
    return _execute(
        domain,
        lead + calls,
        scope.owner,
        identified=bool(guide.identify),
        asks=options.asks,
        desk=guide.desk_keys,
        refused=options.refused,
    )


def _tells(content: str) -> bool:
    """Whether a read's answer holds something to tell (not empty, not a bare null)."""
    value = loads(content)
    return bool(value) and any(True for _ in strings(value))


def _allowed(guide: WalkGuide, node: ToolNode, args: dict[str, Any], scope: Scope) -> bool:
    """Whether a write may be a step: no agent rule forbids it on this state, and it is not a
    change to what already holds."""
    session = scope.session
    if guide.forbids is not None and guide.forbids(node.name, args, session):
        return False
    if guide.pointless is not None and guide.pointless(node.name, args, session):
        return False
    return not _repeats_a_reference(node, args, scope)


def _repeats_a_reference(node: ToolNode, args: dict[str, Any], scope: Scope) -> bool:
    """A "new" record that is already the current one: ``change_plan(customer_id, new_plan_id)``
    when the customer's ``plan_id`` is ``new_plan_id``. Only a parameter named otherwise than
    its table's key (``new_plan_id``) says "another one"; one named like the key may select the
    record referred to (``return_item(order_id, product_id)``)."""
    for p in node.params:
        value = args.get(p.name)
        if not p.table or not isinstance(value, str):
            continue
        if p.name == scope.domain.tables[p.table].key_field:
            continue
        for q in node.params:
            other = args.get(q.name)
            if q is p or not q.table or not isinstance(other, str):
                continue
            record = scope.session.get(q.table, other) or {}
            refs = scope.refs.get(q.table, {})
            if any(t == p.table and record.get(f) == value for f, t in refs.items()):
                return True
    return False


def _lead_in(
    domain: Domain,
    graph: ToolGraph,
    calls: Sequence[Call],
    scope: Scope,
    rng: random.Random,
    options: WalkOptions,
) -> list[Call] | None:
    """The reads before the writes: the identity lookup with the owner's own values, then reads
    whose answers show keys the writes take. None when the lookup does not find the owner."""
    session = domain.start_session()
    lead: list[Call] = []
    shown: set[str] = set()
    identify = options.guide.identify
    skip = {identify} if identify else set()
    if identify and scope.owner is not None:
        call = _identify(graph.nodes[identify], session, scope.owner)
        out = domain.toolkit.call(session.fork(), identify, call[1]) if call else None
        answer = set(strings(loads(out.content))) if out and out.ok else set()
        if call is None or scope.owner[1] not in answer:
            return None
        lead.append(call)
        shown |= answer
    budget = options.max_reads
    desk = options.guide.desk_keys
    # A key only the desk knows is always found, with up to DESK_READS reads beyond the budget.
    extra = DESK_READS if desk else 0
    for node, args in calls:
        for p in node.params:
            if not p.table or p.name not in args:
                continue
            hidden = p.table in desk
            values = args[p.name] if isinstance(args[p.name], list) else [args[p.name]]
            for v in values:
                allowed = budget + extra if hidden else budget
                if str(v) in shown:
                    continue
                if allowed <= 0:
                    if hidden:
                        return None  # the customer cannot give it, and no read is left
                    continue
                # A customer may know their order number, not a catalog's key (a plan's PL1003):
                # shared records are always looked up when a read shows them.
                if (
                    not hidden
                    and scope.owners(p.table, str(v))
                    and rng.random() >= options.discover
                ):
                    continue
                found = _discover(
                    domain, graph, session, scope, str(v), shown, rng, allowed, skip, desk
                )
                if hidden and not found:
                    return None  # no read shows it: no customer could ask for this call
                lead += found
                spent = min(len(found), budget)
                budget -= spent
                extra -= len(found) - spent
    return lead


def _identify(node: ToolNode, session: Session, owner: tuple[str, str]) -> Call | None:
    """The identity lookup called with the owner's own identifiers (from their record)."""
    record = session.get(*owner) or {}
    args: dict[str, Any] = {}
    for p in node.params:
        if p.column and p.column[0] == owner[0] and record.get(p.column[1]) is not None:
            args[p.name] = record[p.column[1]]
        elif p.required:
            return None
    return node, args


def _discover(
    domain: Domain,
    graph: ToolGraph,
    session: Session,
    scope: Scope,
    value: str,
    shown: set[str],
    rng: random.Random,
    budget: int,
    skip: set[str],
    desk: frozenset[str] = frozenset(),
) -> list[Call]:
    """The shortest reads (at most ``budget``) whose last answer shows ``value`` and whose
    keys an earlier answer shows (or the customer knows: not their own record's key); the
    answers join ``shown``. Empty when none does."""
    found: list[tuple[list[Call], set[str]]] = []
    # The record the key is of: a search by its fields is called with its own values (the
    # customer names a sailing by its route, a branch by its city).
    target = next((t for t in sorted(domain.tables) if session.exists(t, value)), None)
    record = session.get(target, value) if target else None
    for node in sorted(graph.nodes.values(), key=lambda n: n.name):
        if budget <= 0 or node.kind != "read" or node.name in skip:
            continue
        args = fill(scope, node.params, rng, optional_rate=0.0, exact=True)
        if args is None or value in {str(a) for a in args.values()}:
            continue  # a read handed the value does not discover it
        for p in node.params:
            own = record.get(p.column[1]) if record and p.column and p.column[0] == target else None
            if own is not None and p.name in args:
                args[p.name] = own
        seen = set(shown)
        chain = _keys_known(
            domain, graph, session, scope, node, args, seen, rng, budget - 1, skip, desk
        )
        if chain is None:
            continue
        out = domain.toolkit.call(session.fork(), node.name, args)
        answer = set(strings(loads(out.content))) if out.ok else set()
        if value in answer:
            found.append(([*chain, (node, args)], seen | answer))
    if not found:
        return []
    shortest = min(len(c) for c, _ in found)
    chain, now_shown = rng.choice([f for f in found if len(f[0]) == shortest])
    shown |= now_shown
    return chain


def _keys_known(
    domain: Domain,
    graph: ToolGraph,
    session: Session,
    scope: Scope,
    node: ToolNode,
    args: dict[str, Any],
    seen: set[str],
    rng: random.Random,
    budget: int,
    skip: set[str],
    desk: frozenset[str] = frozenset(),
) -> list[Call] | None:
    """Reads that show the keys a read takes and no answer showed yet; None when one of them is
    the customer's own key or a key only the desk knows, and no read shows it (a customer does
    not know their id, nor a branch's)."""
    chain: list[Call] = []
    for p in node.params:
        key = args.get(p.name)
        if not p.table or not isinstance(key, str) or key in seen:
            continue
        more = _discover(
            domain,
            graph,
            session,
            scope,
            key,
            seen,
            rng,
            budget - len(chain),
            skip | {node.name},
            desk,
        )
        if not more and ((p.table, key) == scope.owner or p.table in desk):
            return None
        chain += more
    return chain


def _execute(
    domain: Domain,
    calls: Sequence[Call],
    owner: tuple[str, str] | None,
    *,
    identified: bool,
    asks: bool = False,
    desk: frozenset[str] = frozenset(),
    refused: bool = False,
) -> Walk | None:
    result = replay_calls(domain, None, [(n.name, a) for n, a in calls])
    if refused:
        last = result.outcomes[-1] if result.outcomes else None
        if last is None or last.status != "tool_error" or result.failures[:-1]:
            return None
        if result.session.diff():
            return None
    elif not result.ok or bool(result.session.diff()) == asks:
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
            # A key an answer showed is known; any other value (a date, a reason, an email) is
            # the customer's to give, even where an answer happens to hold the same text.
            told = p.table is not None and all(str(v) in shown for v in values)
            if not told and p.name not in user_values:
                user_values[p.name] = args[p.name]
        shown |= set(strings(loads(out.content)))
    hidden = tuple(dict.fromkeys(k for t, k in entities if t in desk))
    given = {str(x) for v in user_values.values() for x in (v if isinstance(v, list) else [v])}
    if given & set(hidden):
        return None  # the customer would have to say a key only the desk knows
    return Walk(
        steps,
        list(dict.fromkeys(entities)),
        user_values,
        result.session.state_hash(),
        result.session.diff().to_json(),
        owner,
        identified and bool(owner),
        asks,
        hidden,
        refused,
    )


def related_records(
    domain: Domain, session: Session, entities: Sequence[tuple[str, str]], hops: int = 1
) -> list[tuple[str, str]]:
    """The given records and those they refer to, ``hops`` levels deep (an order and its
    customer): what a person calling about the entities knows of."""
    scope = Scope.of(domain, session)
    for t, k in entities:
        if session.exists(t, k):
            _take(scope, t, k, hops)
    return list(dict.fromkeys((t, k) for t, k, _ in scope.known))


def _take(scope: Scope, table: str, key: str, hops: int) -> None:
    if scope.holds(table, key) or not scope.session.exists(table, key):
        return
    record = scope.session.require(table, key)
    scope.known.append((table, key, record))
    if hops > 0:
        for fname, target in sorted(scope.refs.get(table, {}).items()):
            if isinstance(record.get(fname), str):
                _take(scope, target, record[fname], hops - 1)
