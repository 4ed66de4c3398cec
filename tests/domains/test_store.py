from __future__ import annotations

from typing import Annotated, ClassVar

import pytest
from pydantic import Field

from maestro.domains import State, StoreError, TableSpec, ToolError, compare_sessions
from maestro.domains.sdk import Record, Ref


class Owner(Record):
    key_field: ClassVar[str] = "owner_id"
    owner_id: str
    name: str
    city: str


class Pet(Record):
    key_field: ClassVar[str] = "pet_id"
    pet_id: str
    owner_id: Annotated[str, Ref("owners")]
    species: str
    tags: list[str] = Field(default_factory=list)


SPECS = {
    "owners": TableSpec("owners", Owner, "owner_id"),
    "pets": TableSpec("pets", Pet, "pet_id"),
}


def make_state(n_owners: int = 3) -> State:
    owners = {
        f"O{i}": {"owner_id": f"O{i}", "name": f"Owner {i}", "city": "Oslo" if i % 2 else "Rome"}
        for i in range(1, n_owners + 1)
    }
    pets = {"P1": {"pet_id": "P1", "owner_id": "O1", "species": "cat", "tags": []}}
    return State({"owners": owners, "pets": pets}, SPECS)


def test_session_reads_fall_through_and_writes_stay_in_the_session() -> None:
    state = make_state()
    s1, s2 = state.session(), state.session()
    s1.update("owners", "O1", city="Paris")
    assert s1.get("owners", "O1")["city"] == "Paris"
    assert s2.get("owners", "O1")["city"] == "Oslo"
    assert state.raw("owners", "O1")["city"] == "Oslo"


def test_reads_are_copies_so_mutating_them_changes_nothing() -> None:
    state = make_state()
    s = state.session()
    pet = s.get("pets", "P1")
    pet["tags"].append("lost")
    assert s.get("pets", "P1")["tags"] == []
    assert s.diff().changes == ()


def test_session_start_does_not_copy_the_base() -> None:
    state = make_state(1000)
    s = state.session()
    assert s.base is state
    assert s.touched() == set()


def test_writes_are_validated_against_the_record_type() -> None:
    s = make_state().session()
    with pytest.raises(StoreError, match="invalid pets record"):
        s.insert("pets", {"pet_id": "P2", "owner_id": "O1", "species": "dog", "colour": "brown"})
    with pytest.raises(StoreError, match="unknown table"):
        s.insert("vets", {"id": "V1"})
    with pytest.raises(ToolError, match="already exists"):
        s.insert("pets", {"pet_id": "P1", "owner_id": "O1", "species": "dog"})


def test_require_names_the_missing_record() -> None:
    s = make_state().session()
    with pytest.raises(ToolError, match="owner 'O99' not found"):
        s.require("owners", "O99")


def test_diff_is_canonical_and_skips_writes_that_restore_the_original() -> None:
    s = make_state().session()
    s.update("owners", "O2", city="Paris")
    s.update("owners", "O1", city="Lima")
    s.update("owners", "O1", city="Oslo")  # back to the base value
    s.insert("pets", {"pet_id": "P2", "owner_id": "O2", "species": "dog"})
    s.delete("pets", "P1")
    diff = s.diff()
    assert [(c.table, c.key, c.kind) for c in diff.changes] == [
        ("owners", "O2", "modified"),
        ("pets", "P1", "removed"),
        ("pets", "P2", "added"),
    ]
    assert diff.changes[0].field_changes() == [("city", "Rome", "Paris")]
    assert 'owners/O2.city: before "Rome", after "Paris"' in diff.render()


def test_state_hash_equal_exactly_when_final_states_are_equal() -> None:
    state = make_state()
    a, b, c = state.session(), state.session(), state.session()
    assert a.state_hash() == state.state_hash()
    # Same final state reached in a different order.
    a.update("owners", "O1", city="Paris")
    a.update("owners", "O2", city="Paris")
    b.update("owners", "O2", city="Paris")
    b.update("owners", "O1", city="Paris")
    assert a.state_hash() == b.state_hash()
    c.update("owners", "O1", city="Paris")
    assert c.state_hash() != a.state_hash()
    # A write that restores the base value leaves the hash where it was.
    d = state.session()
    d.update("owners", "O3", city="Lima")
    d.update("owners", "O3", city="Oslo")
    assert d.state_hash() == state.state_hash()


def test_state_hash_does_not_depend_on_the_base_it_started_from() -> None:
    first = make_state()
    s = first.session()
    s.update("owners", "O1", city="Paris")
    second = State({"owners": s.materialise()["owners"], "pets": s.materialise()["pets"]}, SPECS)
    assert second.state_hash() == s.state_hash()


def test_deleting_and_reinserting_the_same_record_is_no_change() -> None:
    state = make_state()
    s = state.session()
    rec = s.get("pets", "P1")
    s.delete("pets", "P1")
    assert s.state_hash() != state.state_hash()
    s.insert("pets", rec)
    assert s.state_hash() == state.state_hash()
    assert not s.diff()


def test_find_uses_the_index_and_sees_the_overlay() -> None:
    state = make_state(6)
    s = state.session()
    assert [r["owner_id"] for r in s.find("owners", city="Oslo")] == ["O1", "O3", "O5"]
    s.update("owners", "O1", city="Rome")
    s.insert("owners", {"owner_id": "O7", "name": "New", "city": "Oslo"})
    s.delete("owners", "O5")
    assert [r["owner_id"] for r in s.find("owners", city="Oslo")] == ["O3", "O7"]
    assert [r["owner_id"] for r in s.find("owners", city="Rome", name="Owner 1")] == ["O1"]
    assert s.find("pets", tags=[]) == [s.get("pets", "P1")]  # unhashable value: scanned


def test_find_matches_text_with_case_and_spacing_ignored() -> None:
    """A customer says "oslo" or "owner  2" for what is stored as "Oslo" and "Owner 2": the
    indexed first field, a later field and an overlay record are all matched so; the exact
    index the expressions' counts read is left as it was."""
    state = make_state(6)
    s = state.session()
    assert [r["owner_id"] for r in s.find("owners", city=" oSLO ")] == ["O1", "O3", "O5"]
    assert [r["owner_id"] for r in s.find("owners", city="oslo", name="OWNER  3")] == ["O3"]
    s.insert("owners", {"owner_id": "O7", "name": "Ada Byron", "city": "São Paulo"})
    assert [r["owner_id"] for r in s.find("owners", city="SÃO PAULO")] == ["O7"]
    assert s.find("owners", city="Osl") == []  # still whole values, not prefixes
    assert "oslo" not in (state.index("owners", "city") or {})


def test_transaction_rolls_back_every_write_of_a_failed_block() -> None:
    state = make_state()
    s = state.session()
    s.update("owners", "O1", city="Paris")
    before = s.state_hash()
    with pytest.raises(ToolError), s.transaction():
        s.update("owners", "O1", city="Lima")
        s.insert("pets", {"pet_id": "P9", "owner_id": "O1", "species": "eel"})
        s.delete("owners", "O2")
        raise ToolError("business rule")
    assert s.state_hash() == before
    assert s.get("owners", "O1")["city"] == "Paris"
    assert not s.exists("pets", "P9")


def test_new_id_is_deterministic_and_past_the_highest() -> None:
    s = make_state(12).session()
    assert s.new_id("owners", "O", width=1) == "O13"
    assert s.new_id("pets", "P", width=3) == "P002"
    assert s.new_id("pets", "X") == "X0001"


def test_compare_sessions_reports_expected_against_got() -> None:
    state = make_state()
    expected, got = state.session(), state.session()
    expected.update("owners", "O1", city="Paris")
    got.update("owners", "O1", city="Lima")
    got.insert("pets", {"pet_id": "P2", "owner_id": "O1", "species": "dog"})
    text = compare_sessions(expected, got).render("expected", "got")
    assert 'owners/O1.city: expected "Paris", got "Lima"' in text
    assert "pets/P2: only in got" in text
    with pytest.raises(StoreError):
        compare_sessions(expected, make_state().session())


def test_closed_session_refuses_writes() -> None:
    s = make_state().session()
    s.closed = True
    with pytest.raises(StoreError, match="closed"):
        s.update("owners", "O1", city="Paris")
