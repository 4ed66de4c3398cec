"""The state store: tables of JSON records keyed by id, and copy-on-write sessions over them.

A :class:`State` is an immutable snapshot (a domain's initial database). A :class:`Session` is one
episode's view of it: reads fall through to the base, writes land in a per-session overlay, so
starting a session costs the same for 1k or 100k records. A session can say exactly what it
changed (:meth:`Session.diff`) and give a state hash (:meth:`Session.state_hash`) that two
sessions share exactly when their final states are equal, whatever base they started from.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel

from maestro.domains.errors import StoreError, ToolError

JSONRecord = dict[str, Any]

_HASH_MOD = 1 << 128


class _Deleted:
    """Overlay marker for a record the session deleted."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<deleted>"


_DELETED = _Deleted()
_ABSENT = object()  # journal marker: the key had no overlay entry before the write


def match_key(value: Any) -> Any:
    """How :meth:`Session.find` compares a value: text with its case folded and its spacing
    collapsed (a customer says "alprazolam" for "Alprazolam", "jane@x.com " for "Jane@x.com"),
    anything else as it is."""
    if isinstance(value, str):
        return " ".join(value.split()).casefold()
    return value


def canonical_json(value: Any) -> str:
    """The one JSON spelling of a value: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


#: How deep a record may nest (db.json's own bound, ``strict_json.MAX_DEPTH``); pydantic's
#: serializer stops near 255 levels with a ``ValueError`` of its own.
MAX_RECORD_DEPTH = 64


def deeper_than(value: Any, depth: int) -> bool:
    """Whether a JSON value nests lists and objects more than ``depth`` levels (no recursion)."""
    stack = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            if level >= depth:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return False


def held_bytes(value: Any) -> int:
    """What a decoded JSON value holds in this process, in bytes (``sys.getsizeof`` over every
    container, key and value it holds; shared small ints and interned strings counted anyway,
    so it errs high). No recursion."""
    total, pending = 0, [value]
    while pending:
        item = pending.pop()
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return total


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value; much cheaper than ``copy.deepcopy``.

    Scalars are copied by reference without a call per leaf: reads copy records on every tool
    call, and most fields of a record are scalars.
    """
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) not in _CONTAINERS else copy_json(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) not in _CONTAINERS else copy_json(v) for v in value]
    return value


_CONTAINERS = (dict, list)


def record_hash(table: str, key: str, record: JSONRecord) -> int:
    """A 128-bit hash of one record at one address, summed into state hashes."""
    digest = hashlib.sha256(f"{table}\x00{key}\x00{canonical_json(record)}".encode()).digest()
    return int.from_bytes(digest[:16], "big")


@dataclass(frozen=True)
class TableSpec:
    """A table: its name, the pydantic record type its rows validate against, its key field."""

    name: str
    model: type[BaseModel] | None = None
    key_field: str = "id"


class State:
    """An immutable database snapshot: ``{table: {key: record}}``.

    The hash and the secondary indexes are computed once, on first use, and shared by every
    session started from this state.
    """

    def __init__(
        self, tables: Mapping[str, Mapping[str, JSONRecord]], specs: Mapping[str, TableSpec]
    ):
        unknown = set(tables) - set(specs)
        if unknown:
            raise StoreError(f"tables without a spec: {sorted(unknown)}")
        self.specs: dict[str, TableSpec] = dict(specs)
        self._tables: dict[str, dict[str, JSONRecord]] = {
            name: dict(tables.get(name, {})) for name in self.specs
        }
        self._hash: int | None = None
        self._indexes: dict[tuple[str, str], dict[Any, list[str]]] = {}

    @property
    def table_names(self) -> list[str]:
        return list(self._tables)

    def count(self, table: str | None = None) -> int:
        """Records in one table, or in all of them."""
        if table is not None:
            return len(self._table(table))
        return sum(len(t) for t in self._tables.values())

    def _table(self, name: str) -> dict[str, JSONRecord]:
        try:
            return self._tables[name]
        except KeyError:
            raise StoreError(f"unknown table {name!r}; tables are {sorted(self._tables)}") from None

    def raw(self, table: str, key: str) -> JSONRecord | None:
        """The stored record itself (not a copy): for the store's own use."""
        return self._table(table).get(key)

    def keys(self, table: str) -> Iterator[str]:
        return iter(self._table(table))

    def hash_value(self) -> int:
        if self._hash is None:
            total = 0
            for name, rows in self._tables.items():
                for key, rec in rows.items():
                    total += record_hash(name, key, rec)
            self._hash = total % _HASH_MOD
        return self._hash

    def state_hash(self) -> str:
        return f"{self.hash_value():032x}"

    def index(self, table: str, field_name: str) -> dict[Any, list[str]] | None:
        """Keys by value of one field; None when the field holds unhashable values."""
        cache_key = (table, field_name)
        if cache_key not in self._indexes:
            idx: dict[Any, list[str]] = {}
            for key, rec in self._table(table).items():
                value = rec.get(field_name)
                if isinstance(value, dict | list):
                    self._indexes[cache_key] = {}
                    return None
                idx.setdefault(value, []).append(key)
            self._indexes[cache_key] = idx
        idx = self._indexes[cache_key]
        return idx if idx or not self._tables[table] else None

    def match_index(self, table: str, field_name: str) -> dict[Any, list[str]] | None:
        """Keys by :func:`match_key` of one field (what ``find`` looks up); None as for
        :meth:`index`."""
        cache_key = (table, "\0match:" + field_name)
        if cache_key not in self._indexes:
            exact = self.index(table, field_name)
            if exact is None:
                return None
            idx: dict[Any, list[str]] = {}
            for value, keys in exact.items():
                idx.setdefault(match_key(value), []).extend(keys)
            self._indexes[cache_key] = idx
        idx = self._indexes[cache_key]
        return idx if idx or not self._tables[table] else None

    def to_dict(self) -> dict[str, dict[str, JSONRecord]]:
        return {name: copy_json(rows) for name, rows in self._tables.items()}

    def tables_view(self) -> Mapping[str, Mapping[str, JSONRecord]]:
        """The state's own tables, not a copy: to serialize (a copy of a large database is one
        more database held), never to change."""
        return dict(self._tables)

    def session(self, clock: datetime | None = None) -> Session:
        """Start a copy-on-write session; O(1) whatever the size of the state."""
        return Session(self, clock=clock)


@dataclass(frozen=True)
class RecordChange:
    """One record a session added, removed or modified."""

    table: str
    key: str
    before: JSONRecord | None
    after: JSONRecord | None

    @property
    def kind(self) -> str:
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        return "modified"

    def field_changes(self) -> list[tuple[str, Any, Any]]:
        """(field, before, after) for each field that differs, sorted by field name."""
        before, after = self.before or {}, self.after or {}
        out = []
        for name in sorted(set(before) | set(after)):
            old, new = before.get(name, _ABSENT), after.get(name, _ABSENT)
            if old is _ABSENT or new is _ABSENT or canonical_json(old) != canonical_json(new):
                out.append((name, None if old is _ABSENT else old, None if new is _ABSENT else new))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "key": self.key, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class StateDiff:
    """A canonical diff: changes sorted by (table, key), no-op writes left out."""

    changes: tuple[RecordChange, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return bool(self.changes)

    def __len__(self) -> int:
        return len(self.changes)

    def render(self, before_label: str = "before", after_label: str = "after") -> str:
        """One readable line per changed field."""
        lines = []
        for ch in self.changes:
            addr = f"{ch.table}/{ch.key}"
            if ch.before is None:
                lines.append(f"{addr}: only in {after_label}: {canonical_json(ch.after)}")
            elif ch.after is None:
                lines.append(f"{addr}: only in {before_label}: {canonical_json(ch.before)}")
            else:
                for name, old, new in ch.field_changes():
                    lines.append(
                        f"{addr}.{name}: {before_label} {json.dumps(old, ensure_ascii=False)},"
                        f" {after_label} {json.dumps(new, ensure_ascii=False)}"
                    )
        return "\n".join(lines)

    def to_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.changes]


class Session:
    """One episode's copy-on-write view of a :class:`State`; what tools receive as ``db``.

    Reads return copies, so a tool cannot change the database by mutating what it read; writes
    are validated against the table's record type.
    """

    def __init__(self, base: State, clock: datetime | None = None) -> None:
        self._base = base
        self._overlay: dict[str, dict[str, JSONRecord | _Deleted]] = {}
        self._journal: list[tuple[str, str, Any]] | None = None
        self._clock = clock
        self.closed = False
        #: Shared by a session and its forks (one episode's): the sandbox serves each lineage
        #: from a fresh worker, so no module state passes from one episode to another.
        self.lineage = object()

    # ----- reads -------------------------------------------------------------------------------

    @property
    def base(self) -> State:
        return self._base

    def _effective(self, table: str, key: str) -> JSONRecord | None:
        layer = self._overlay.get(table)
        if layer is not None and key in layer:
            rec = layer[key]
            return None if rec is _DELETED else rec  # type: ignore[return-value]
        return self._base.raw(table, key)

    def get(self, table: str, key: str) -> JSONRecord | None:
        """A copy of the record, or None when there is none."""
        rec = self._effective(table, key)
        return None if rec is None else copy_json(rec)

    def exists(self, table: str, key: str) -> bool:
        return self._effective(table, key) is not None

    def require(self, table: str, key: str, what: str | None = None) -> JSONRecord:
        """A copy of the record; a :class:`ToolError` naming it when it does not exist."""
        rec = self._effective(table, key)
        if rec is None:
            raise ToolError(f"{what or _singular(table)} {key!r} not found")
        return copy_json(rec)

    def keys(self, table: str) -> list[str]:
        """Every key of a table, sorted."""
        keys = set(self._base.keys(table))
        for key, rec in self._overlay.get(table, {}).items():
            if rec is _DELETED:
                keys.discard(key)
            else:
                keys.add(key)
        return sorted(keys)

    def scan(
        self, table: str, where: Callable[[JSONRecord], bool] | None = None
    ) -> list[JSONRecord]:
        """Copies of every record of a table (those ``where`` accepts), sorted by key."""
        out = []
        for key in self.keys(table):
            rec = self._effective(table, key)
            if rec is not None and (where is None or where(rec)):
                out.append(copy_json(rec))
        return out

    def find(self, table: str, **equals: Any) -> list[JSONRecord]:
        """Copies of the records whose fields equal the given values, sorted by key; text is
        matched with case and spacing ignored (:func:`match_key`).

        The first field is looked up through an index of the base state, built once and shared by
        every session, so finding an order by customer costs the same in a table of 100k rows.
        """
        if not equals:
            return self.scan(table)
        wanted = {k: match_key(v) for k, v in equals.items()}

        def matches(rec: JSONRecord) -> bool:
            return all(match_key(rec.get(k)) == v for k, v in wanted.items())

        first, value = next(iter(wanted.items()))
        idx = self._base.match_index(table, first)
        if idx is None or isinstance(value, dict | list):
            return self.scan(table, matches)
        layer = self._overlay.get(table, {})
        candidates = {k for k in idx.get(value, ()) if k not in layer}
        candidates.update(k for k, r in layer.items() if r is not _DELETED)
        out = []
        for key in sorted(candidates):
            rec = self._effective(table, key)
            if rec is not None and matches(rec):
                out.append(copy_json(rec))
        return out

    def count(self, table: str) -> int:
        return len(self.keys(table))

    def now(self) -> datetime:
        """The domain's clock: a fixed instant, so that episodes replay identically."""
        if self._clock is None:
            raise StoreError("this domain declares no clock in domain.json")
        return self._clock

    def today(self) -> date:
        return self.now().date()

    # ----- writes ------------------------------------------------------------------------------

    def _spec(self, table: str) -> TableSpec:
        try:
            return self._base.specs[table]
        except KeyError:
            raise StoreError(
                f"unknown table {table!r}; tables are {sorted(self._base.specs)}"
            ) from None

    def _normalise(self, table: str, record: JSONRecord | BaseModel) -> tuple[str, JSONRecord]:
        spec = self._spec(table)
        data = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
        if spec.model is not None:
            try:
                data = spec.model.model_validate(data).model_dump(mode="json")
            except (ValueError, TypeError) as exc:
                # ValidationError; pydantic's "Maximum serialization depth exceeded" (a forged
                # write of a sandboxed child nested past 255 levels); what a record type's own
                # code raises, or a constraint that does not fit its type ("Unable to apply
                # constraint").
                raise StoreError(f"invalid {table} record: {exc}") from None
        key = data.get(spec.key_field)
        if not isinstance(key, str) or not key:
            raise StoreError(f"{table} record needs a non-empty string {spec.key_field!r}")
        return key, data

    def _write(self, table: str, key: str, value: JSONRecord | _Deleted) -> None:
        if self.closed:
            raise StoreError("session is closed: a timed-out tool call cannot write")
        layer = self._overlay.setdefault(table, {})
        if self._journal is not None:
            self._journal.append((table, key, layer.get(key, _ABSENT)))
        layer[key] = value

    def insert(self, table: str, record: JSONRecord | BaseModel) -> JSONRecord:
        """Add a new record; a :class:`ToolError` when its key is taken. Returns a copy."""
        key, data = self._normalise(table, record)
        if self.exists(table, key):
            raise ToolError(f"{_singular(table)} {key!r} already exists")
        self._write(table, key, data)
        return copy_json(data)

    def put(self, table: str, record: JSONRecord | BaseModel) -> JSONRecord:
        """Insert or replace a record. Returns a copy."""
        key, data = self._normalise(table, record)
        self._write(table, key, data)
        return copy_json(data)

    def update(self, table: str, key: str, **fields: Any) -> JSONRecord:
        """Change some fields of an existing record; returns a copy of the new record."""
        current = self.require(table, key)
        current.update(fields)
        new_key, data = self._normalise(table, current)
        if new_key != key:
            raise StoreError(f"update cannot change the key of {table}/{key}")
        self._write(table, key, data)
        return copy_json(data)

    def delete(self, table: str, key: str) -> None:
        self.require(table, key)
        self._write(table, key, _DELETED)

    def new_id(self, table: str, prefix: str, width: int = 4) -> str:
        """The next free key ``prefix + number``: one past the largest number in use.

        Deterministic, so replaying the same calls gives the same ids.
        """
        numbers = [
            int(k[len(prefix) :])
            for k in self.keys(table)
            if k[len(prefix) :].isdigit() and k.startswith(prefix)
        ]
        highest = max(numbers, default=0)
        return f"{prefix}{highest + 1:0{width}d}"

    # ----- transactions ------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Writes inside are undone when the block raises (anything, timeouts included)."""
        if self._journal is not None:
            yield  # nested: the outer transaction owns the rollback
            return
        self._journal = []
        try:
            yield
        except BaseException:
            self._rollback()
            raise
        finally:
            self._journal = None

    def _rollback(self) -> None:
        assert self._journal is not None
        for table, key, prior in reversed(self._journal):
            layer = self._overlay[table]
            if prior is _ABSENT:
                layer.pop(key, None)
            else:
                layer[key] = prior
        self._journal = []

    # ----- what changed ------------------------------------------------------------------------

    def touched(self) -> set[tuple[str, str]]:
        """Addresses this session wrote, whether or not the value differs from the base."""
        return {(t, k) for t, layer in self._overlay.items() for k in layer}

    def diff(self) -> StateDiff:
        """What this session changed relative to its base, canonically ordered."""
        return diff_sessions(self._base, self, self.touched())

    def state_hash(self) -> str:
        """Hash of the final state; equal for two sessions exactly when their states are equal."""
        total = self._base.hash_value()
        for table, layer in self._overlay.items():
            for key, rec in layer.items():
                old = self._base.raw(table, key)
                if old is not None:
                    total -= record_hash(table, key, old)
                if rec is not _DELETED:
                    total += record_hash(table, key, rec)  # type: ignore[arg-type]
        return f"{total % _HASH_MOD:032x}"

    def materialise(self) -> dict[str, dict[str, JSONRecord]]:
        """The whole final state as plain dicts (O(size): for export, not for scoring)."""
        return {
            t: {k: copy_json(self._effective(t, k)) for k in self.keys(t)}
            for t in self._base.table_names
        }

    def fork(self) -> Session:
        """A new session starting from this session's current state (copy of the overlay only)."""
        other = Session(self._base, clock=self._clock)
        other._overlay = {t: dict(layer) for t, layer in self._overlay.items()}
        other.lineage = self.lineage
        return other

    # ----- the overlay, for the sandbox's mirror of a session ----------------------------------

    def overlay_entries(self) -> Iterator[tuple[str, str, JSONRecord | None]]:
        """Every address this session wrote, with its record (None: deleted).

        The stored records themselves, not copies: the sandbox compares them by identity to
        send a child only what changed (O(writes) per call). Never mutate them.
        """
        for table, layer in self._overlay.items():
            for key, rec in layer.items():
                yield table, key, None if rec is _DELETED else rec  # type: ignore[misc]

    def override(self, table: str, key: str, record: JSONRecord | None) -> None:
        """Set one address as written (None: deleted), unvalidated, inside the transaction rules.

        For records validated elsewhere: a sandbox child's mirror receiving the host's writes,
        and the host recording a record a call added and deleted again (the address stays
        touched, as in process).
        """
        self._spec(table)
        self._write(table, key, _DELETED if record is None else record)

    def forget(self, table: str, key: str) -> None:
        """Drop this session's write at one address, so reads fall through to the base again."""
        layer = self._overlay.get(table)
        if layer is not None:
            layer.pop(key, None)


class _Reader:
    """Effective records of either a State or a Session, for diffing."""

    def __init__(self, source: State | Session) -> None:
        self._source = source

    def get(self, table: str, key: str) -> JSONRecord | None:
        if isinstance(self._source, Session):
            return self._source._effective(table, key)
        return self._source.raw(table, key)


def diff_sessions(
    before: State | Session, after: State | Session, addresses: set[tuple[str, str]]
) -> StateDiff:
    """The canonical diff between two views of the same base, over the addresses either touched."""
    a, b = _Reader(before), _Reader(after)
    changes = []
    for table, key in sorted(addresses):
        old, new = a.get(table, key), b.get(table, key)
        if old is None and new is None:
            continue
        if old is not None and new is not None and canonical_json(old) == canonical_json(new):
            continue
        changes.append(RecordChange(table, key, copy_json(old), copy_json(new)))
    return StateDiff(tuple(changes))


def compare_sessions(expected: Session, actual: Session) -> StateDiff:
    """How ``actual`` differs from ``expected``; empty when their final states are equal.

    Both must share a base (two episodes of the same task), so only what either wrote can differ.
    """
    if expected.base is not actual.base:
        raise StoreError("compare_sessions needs two sessions of the same base state")
    return diff_sessions(expected, actual, expected.touched() | actual.touched())


def _singular(table: str) -> str:
    name = table.replace("_", " ")
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith(("ses", "xes")):
        return name[:-2]
    return name[:-1] if name.endswith("s") else name
