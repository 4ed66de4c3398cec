"""An object graph as JSON records, and back: how outside code's state lives in a session.

A benchmark's API class keeps its state in instance attributes (dicts, lists, sets, nested
objects pointing at each other). Stored as one JSON record per attribute, that state gets what
every maestro domain has: the state hash, the canonical diff, copy-on-write sessions, replay.

The encoding is faithful, so that decoding then calling a method behaves as on the original:

- JSON scalars stay themselves; a non-finite float is ``{"$float": "nan"}``.
- A dict whose keys are strings (none starting with ``$``) is a JSON object, in its own order;
  any other dict is ``{"$dict": {KEY: value}}`` where KEY is the canonical JSON of the encoded
  key (``3`` and ``"3"`` stay different keys). Lists are arrays; tuples ``{"$tuple": [...]}``;
  sets ``{"$set": [...]}`` (sorted); ``datetime``/``date`` and ``Decimal`` are tagged strings;
  a ``random.Random`` is its state (``{"$random": [...]}``), so replays draw the same numbers.
- An object of an allowed class is ``{"$obj": "module:Class", attribute: value, ...}``. Its
  private (``_``) attributes are not kept: in the benchmark classes this serves, the only one
  is a file's wall-clock modification time, which no method reads and which would make two
  replays of the same calls differ.
- A container or object reached a second time (a parent pointer, a working directory inside a
  tree, a dict two directories share) is ``{"$ref": [step, ...]}``: the path of its one full
  copy, from the instance. Which occurrence is the full copy is chosen by a walk in sorted
  order (public attributes first), so equal states encode equally whatever order their dicts
  were filled in; the copy itself keeps the dict's own order (``ls`` lists in insertion order).

Which classes are objects, and the names they are written under, are the caller's
(:class:`ObjectClasses`). Decoding resolves names only through it: nothing else is
instantiated, and no ``__init__``, ``__setstate__`` or other code of the class runs.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Protocol

JSON = Any
Step = Any  # an attribute name, an encoded dict key, or a list index
Path = tuple[Step, ...]


class ObjectClasses(Protocol):
    """The classes whose instances are stored as objects, and their names in the encoding."""

    def allowed(self, cls: type) -> bool: ...

    def name(self, cls: type) -> str: ...

    def resolve(self, name: str) -> type: ...


_TRACKED = (dict, list, set)


class StateCodecError(TypeError):
    """A value that cannot be stored faithfully, or an encoded value that does not decode."""


def canonical(value: JSON) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _attributes(obj: Any, top: bool) -> list[tuple[str, Any]]:
    items = list(vars(obj).items())
    if top:
        return items
    return [(k, v) for k, v in items if not k.startswith("_")]


def _key(key: Any) -> JSON:
    """A dict key as a JSON value (a step of a path)."""
    if key is None or isinstance(key, str | bool | int):
        return key
    if isinstance(key, tuple):
        return {"$tuple": [_key(k) for k in key]}
    raise StateCodecError(f"a dict key of type {type(key).__name__} cannot be stored")


def _unkey(step: JSON) -> Any:
    if isinstance(step, dict):
        return tuple(_unkey(k) for k in step["$tuple"])
    return step


def _plain_keys(d: dict[Any, Any]) -> bool:
    return all(isinstance(k, str) and not k.startswith("$") for k in d)


class _Encoder:
    """Two walks: the first picks where each shared value is written in full, the second writes."""

    def __init__(self, classes: ObjectClasses) -> None:
        self.classes = classes
        self.home: dict[int, Path] = {}
        self.keep: list[Any] = []  # holds what ids refer to for the encoder's lifetime

    def children(self, value: Any) -> Iterator[tuple[Step, Any]]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield _key(k), v
        elif isinstance(value, list):
            yield from enumerate(value)
        elif self.classes.allowed(type(value)):
            yield from _attributes(value, top=False)

    def tracked(self, value: Any) -> bool:
        return isinstance(value, _TRACKED) or self.classes.allowed(type(value))

    def place(self, value: Any, path: Path) -> None:
        """First walk, in sorted order: the path where each tracked value is written in full."""
        stack = [(value, path)]
        while stack:
            node, where = stack.pop()
            if not self.tracked(node) or id(node) in self.home:
                continue
            self.home[id(node)] = where
            self.keep.append(node)
            kids = sorted(self.children(node), key=lambda kv: canonical(kv[0]))
            stack.extend((child, (*where, step)) for step, child in reversed(kids))

    def encode(self, value: Any, path: Path) -> JSON:
        if value is None or isinstance(value, str | bool | int):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"$float": repr(value)}
        if self.tracked(value):
            home = self.home.get(id(value))
            if home is not None and home != path:
                return {"$ref": list(home)}
            return self.container(value, path)
        return self.leaf(value)

    def container(self, value: Any, path: Path) -> JSON:
        if isinstance(value, set):
            return {"$set": sorted((self.leaf_or_scalar(v) for v in value), key=canonical)}
        if isinstance(value, list):
            return [self.encode(v, (*path, i)) for i, v in enumerate(value)]
        if isinstance(value, dict):
            if _plain_keys(value):
                return {k: self.encode(v, (*path, k)) for k, v in value.items()}
            return {
                "$dict": {
                    canonical(_key(k)): self.encode(v, (*path, _key(k))) for k, v in value.items()
                }
            }
        out: dict[str, JSON] = {"$obj": self.classes.name(type(value))}
        for name, v in _attributes(value, top=False):
            out[name] = self.encode(v, (*path, name))
        return out

    def leaf_or_scalar(self, value: Any) -> JSON:
        if value is None or isinstance(value, str | bool | int | float):
            return self.encode(value, ())
        return self.leaf(value)

    def leaf(self, value: Any) -> JSON:
        if isinstance(value, tuple):
            return {"$tuple": [self.leaf_or_scalar(v) for v in value]}
        if isinstance(value, frozenset):
            return {"$frozenset": sorted((self.leaf_or_scalar(v) for v in value), key=canonical)}
        if isinstance(value, datetime):
            return {"$datetime": value.isoformat()}
        if isinstance(value, date):
            return {"$date": value.isoformat()}
        if isinstance(value, Decimal):
            return {"$decimal": str(value)}
        if isinstance(value, random.Random):
            version, internal, gauss = value.getstate()
            return {"$random": [version, list(internal), gauss]}
        raise StateCodecError(
            f"a value of type {type(value).__module__}.{type(value).__qualname__} cannot be"
            " stored (tuples and frozensets may hold only immutable values)"
        )


def encode_attributes(obj: Any, classes: ObjectClasses) -> dict[str, JSON]:
    """Every attribute of ``obj`` (private ones included) as JSON, keyed by name."""
    attrs = _attributes(obj, top=True)
    encoder = _Encoder(classes)
    ordered = sorted(attrs, key=lambda kv: (kv[0].startswith("_"), kv[0]))
    for name, value in ordered:
        encoder.place(value, (name,))
    return {name: encoder.encode(value, (name,)) for name, value in attrs}


class _Decoder:
    def __init__(self, classes: ObjectClasses) -> None:
        self.classes = classes
        self.pending: list[tuple[Any, Any, list[Step]]] = []

    def value(self, enc: JSON, holder: Any = None, slot: Any = None) -> Any:
        if enc is None or isinstance(enc, str | bool | int | float):
            return enc
        if isinstance(enc, list):
            out: list[Any] = []
            for i, item in enumerate(enc):
                out.append(None)
                out[i] = self.value(item, out, i)
            return out
        if not isinstance(enc, dict):
            raise StateCodecError(f"cannot decode a {type(enc).__name__}")
        tag = next((k for k in enc if k.startswith("$")), None)
        if tag is None:
            d: dict[Any, Any] = {}
            for k, v in enc.items():
                d[k] = None
                d[k] = self.value(v, d, k)
            return d
        return self.tagged(tag, enc, holder, slot)

    def tagged(self, tag: str, enc: dict[str, Any], holder: Any, slot: Any) -> Any:
        body = enc[tag]
        if tag == "$ref":
            self.pending.append((holder, slot, list(body)))
            return None
        if tag == "$dict":
            d: dict[Any, Any] = {}
            for text, v in body.items():
                key = _unkey(json.loads(text))
                d[key] = None
                d[key] = self.value(v, d, key)
            return d
        if tag == "$obj":
            obj: Any = object.__new__(self.classes.resolve(body))
            attrs = vars(obj)
            for name, v in enc.items():
                if name != "$obj":
                    attrs[name] = None
                    attrs[name] = self.value(v, attrs, name)
            return obj
        return leaf(tag, body)

    def resolve(self, top: dict[str, Any]) -> None:
        for holder, slot, path in self.pending:
            holder[slot] = walk(top, path)


def leaf(tag: str, body: Any) -> Any:
    if tag == "$float":
        return float(body)
    if tag in ("$tuple", "$set", "$frozenset"):
        items = [leaf_value(v) for v in body]
        return {"$tuple": tuple, "$set": set, "$frozenset": frozenset}[tag](items)
    if tag == "$datetime":
        return datetime.fromisoformat(body)
    if tag == "$date":
        return date.fromisoformat(body)
    if tag == "$decimal":
        return Decimal(body)
    if tag == "$random":
        version, internal, gauss = body
        rng = random.Random()
        rng.setstate((version, tuple(internal), gauss))
        return rng
    raise StateCodecError(f"unknown tag {tag!r}")


def leaf_value(enc: JSON) -> Any:
    if isinstance(enc, dict):
        tag = next(iter(enc))
        return leaf(tag, enc[tag])
    return enc


def walk(top: dict[str, Any], path: list[Step]) -> Any:
    """The value at a path from the instance's attributes."""
    node: Any = top[path[0]]
    for step in path[1:]:
        if isinstance(node, dict):
            node = node[_unkey(step)]
        elif isinstance(node, list):
            node = node[step]
        else:
            node = vars(node)[step]
    return node


def decode_attributes(encoded: dict[str, JSON], classes: ObjectClasses) -> dict[str, Any]:
    """The attributes ``encode_attributes`` wrote, with every shared value shared again."""
    decoder = _Decoder(classes)
    top: dict[str, Any] = {}
    for name, enc in encoded.items():
        top[name] = None
        top[name] = decoder.value(enc, top, name)
    decoder.resolve(top)
    return top


def restore(cls: type, encoded: dict[str, JSON], classes: ObjectClasses) -> Any:
    """An instance of ``cls`` with the encoded attributes; no method of ``cls`` runs."""
    obj: Any = object.__new__(cls)
    vars(obj).update(decode_attributes(encoded, classes))
    return obj
