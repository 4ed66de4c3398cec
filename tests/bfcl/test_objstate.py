"""The object-graph codec that keeps outside code's state in a session's records."""

from __future__ import annotations

import json
import math
import random
from datetime import datetime
from typing import Any, ClassVar

import pytest

from maestro.domains.importers.objstate import (
    StateCodecError,
    decode_attributes,
    encode_attributes,
    restore,
)
from maestro.domains.store import canonical_json


class Folder:
    def __init__(self, name: str, parent: Folder | None = None) -> None:
        self.name = name
        self.parent = parent
        self.contents: dict[str, Any] = {}
        self._touched = datetime.now()  # private and wall-clock: not state


class Drive:
    def __init__(self) -> None:
        self.root = Folder("/")
        self._cwd = self.root
        self.counters: dict[Any, int] = {}
        self.tags: set[str] = set()


class Classes:
    """The test's object classes, written under their bare names."""

    known: ClassVar[dict[str, type]] = {"Folder": Folder, "Drive": Drive}

    def allowed(self, cls: type) -> bool:
        return cls in self.known.values()

    def name(self, cls: type) -> str:
        return cls.__name__

    def resolve(self, name: str) -> type:
        if name not in self.known:
            raise StateCodecError(f"unknown class {name}")
        return self.known[name]


CLASSES = Classes()


def mkdir(parent: Folder, name: str) -> Folder:
    child = Folder(name, parent)
    parent.contents[name] = child
    return child


def roundtrip(drive: Drive) -> Drive:
    # Through JSON text, as the records travel between host and child.
    encoded = json.loads(json.dumps(encode_attributes(drive, CLASSES)))
    out: Drive = restore(Drive, encoded, CLASSES)
    return out


def test_a_tree_with_parent_pointers_and_a_working_directory_comes_back_shared() -> None:
    drive = Drive()
    docs = mkdir(drive.root, "docs")
    deep = mkdir(docs, "deep")
    drive._cwd = deep
    back = roundtrip(drive)
    back_docs = back.root.contents["docs"]
    assert back._cwd is back_docs.contents["deep"]  # one object, not a copy
    assert back._cwd.parent is back_docs and back_docs.parent is back.root
    assert back.root.parent is None
    # the nested object's private attribute is not state; the instance's own are
    assert not hasattr(back_docs, "_touched") and hasattr(back, "_cwd")


def test_a_dict_two_objects_share_stays_shared() -> None:
    # BFCL's mv of a folder: the new folder takes the old one's contents dict itself.
    drive = Drive()
    old = mkdir(drive.root, "old")
    mkdir(old, "inner")
    new = mkdir(drive.root, "new")
    new.contents = old.contents
    del drive.root.contents["old"]
    drive._cwd = new.contents["inner"]  # whose parent is the orphaned old folder
    back = roundtrip(drive)
    assert back.root.contents["new"].contents is back._cwd.parent.contents
    assert back._cwd.parent.name == "old" and "old" not in back.root.contents


def test_key_types_sets_randomness_and_odd_floats_survive() -> None:
    drive = Drive()
    drive.counters = {3: 1, "3": 2, (1, "a"): 3, True: 4}
    drive.tags = {"b", "a"}
    drive.root.contents["rng"] = random.Random(7)
    drive.root.contents["odd"] = [math.inf, -0.5, 10**20]
    back = roundtrip(drive)
    assert back.counters == drive.counters and set(map(type, back.counters)) == {
        int,
        str,
        tuple,
        bool,
    }
    assert back.tags == {"a", "b"}
    assert back.root.contents["rng"].random() == random.Random(7).random()
    assert back.root.contents["odd"] == [math.inf, -0.5, 10**20]


def test_equal_states_encode_equally_whatever_order_they_were_built_in() -> None:
    one, two = Drive(), Drive()
    for name in ("a", "b", "c"):
        mkdir(one.root, name)
    for name in ("c", "a", "b"):
        mkdir(two.root, name)
    one._cwd, two._cwd = one.root.contents["b"], two.root.contents["b"]
    one.counters, two.counters = {1: 1, 2: 2}, {2: 2, 1: 1}
    a, b = encode_attributes(one, CLASSES), encode_attributes(two, CLASSES)
    assert canonical_json(a) == canonical_json(b)
    # ... while each keeps its own order, which a listing shows
    assert list(roundtrip(two).root.contents) == ["c", "a", "b"]


def test_what_cannot_be_kept_faithfully_is_refused() -> None:
    drive = Drive()
    drive.root.contents["t"] = ([1, 2],)  # a tuple holding a list: identity would be lost
    with pytest.raises(StateCodecError, match="tuples and frozensets may hold only immutable"):
        encode_attributes(drive, CLASSES)
    drive.root.contents["t"] = object()
    with pytest.raises(StateCodecError, match=r"builtins\.object cannot be stored"):
        encode_attributes(drive, CLASSES)


def test_decoding_builds_only_classes_the_caller_resolves() -> None:
    encoded = {"x": {"$obj": "os:system"}}
    with pytest.raises(StateCodecError, match="unknown class os:system"):
        decode_attributes(encoded, CLASSES)
