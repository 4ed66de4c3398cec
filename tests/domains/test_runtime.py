from __future__ import annotations

import json
import threading
import time
from datetime import date
from typing import Literal

import pytest

from maestro.domains import Domain, State, TableSpec, ToolError, Toolkit
from maestro.domains.runtime import ToolDefinitionError, parse_docstring, spec_from_function
from maestro.domains.sdk import Database, tool


def test_schemas_come_from_signatures_and_docstrings(toy: Domain) -> None:
    schema = {s["function"]["name"]: s for s in toy.toolkit.schemas()}["cancel_order"]
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["description"] == "Cancel a pending order and put its items back in stock."
    params = fn["parameters"]
    assert params["required"] == ["order_id"]
    assert params["additionalProperties"] is False
    assert params["properties"]["order_id"] == {"type": "string", "description": "The order's id."}
    assert params["properties"]["reason"]["default"] == ""
    assert "db" not in params["properties"]
    assert "title" not in json.dumps(schema)


@tool("read")
def find_events_by_title(db: Database, title: str) -> list[str]:
    """Find events by their title.

    Args:
        title: The event's title.
    """
    return [title]


def test_a_parameter_named_title_keeps_its_property() -> None:
    # Found by a capable-model check: stripping pydantic's "title" keywords also dropped the
    # property named title, and the schema's "required" named a property it no longer had.
    params = spec_from_function(find_events_by_title).openai_schema()["function"]["parameters"]
    assert params["required"] == ["title"]
    assert params["properties"] == {
        "title": {"type": "string", "description": "The event's title."}
    }


@tool("read")
def plan_visit(
    db: Database,
    when: date,
    kind: Literal["checkup", "vaccine"],
    pets: list[str],
    urgent: bool = False,
) -> str:
    """Plan a visit.

    Args:
        when: The day, as YYYY-MM-DD.
        kind: What the visit is for.
        pets: The pets' ids,
            one per pet.
        urgent: Whether it cannot wait.
    """
    return f"{when.isoformat()} {kind} {','.join(pets)} urgent={urgent}"


def _kit(*fns: object, **kw: object) -> Toolkit:
    return Toolkit([spec_from_function(f) for f in fns], **kw)  # type: ignore[arg-type]


def _session() -> Database:
    return State({}, {"t": TableSpec("t")}).session()


def test_types_in_schema_and_validation() -> None:
    kit = _kit(plan_visit)
    params = kit.schemas()[0]["function"]["parameters"]
    assert params["properties"]["when"]["format"] == "date"
    assert params["properties"]["kind"]["enum"] == ["checkup", "vaccine"]
    assert params["properties"]["pets"]["description"] == "The pets' ids, one per pet."
    out = kit.call(
        _session(), "plan_visit", '{"when": "2026-05-01", "kind": "vaccine", "pets": ["P1"]}'
    )
    assert out.ok, out.content
    assert out.content == "2026-05-01 vaccine P1 urgent=False"


@tool("write")
def open_ticket(db: Database, title: str, description: str = "") -> str:
    """Open a ticket.

    Args:
        title: The ticket's title.
        description: What is wrong.
    """
    return title


def test_a_parameter_named_title_stays_in_the_schema() -> None:
    """pydantic's ``title`` keywords go; a parameter called ``title`` (BFCL's create_ticket
    has one) is a property like any other."""
    params = _kit(open_ticket).schemas()[0]["function"]["parameters"]
    assert params["properties"]["title"] == {"type": "string", "description": "The ticket's title."}
    assert params["required"] == ["title"] and "Title" not in json.dumps(params)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"kind": "vaccine", "pets": []}, "missing required argument 'when'"),
        (
            {"when": "2026-05-01", "kind": "vaccine", "pets": [], "vet": "V1"},
            "unexpected argument 'vet'",
        ),
        ({"when": "2026-05-01", "kind": "surgery", "pets": []}, "argument 'kind'"),
        ({"when": "next tuesday", "kind": "vaccine", "pets": []}, "argument 'when'"),
        ({"when": "2026-05-01", "kind": "vaccine", "pets": "P1"}, "argument 'pets'"),
        (
            {"when": "2026-05-01", "kind": "vaccine", "pets": [], "urgent": "yes"},
            "argument 'urgent'",
        ),
        ('{"when": "2026-05-01", ', "arguments are not valid JSON"),
        ("[1, 2]", "arguments must be a JSON object"),
    ],
)
def test_bad_arguments_answer_the_assistant_instead_of_raising(
    arguments: object, expected: str
) -> None:
    out = _kit(plan_visit).call(_session(), "plan_visit", arguments)  # type: ignore[arg-type]
    assert out.status == "invalid_call"
    assert expected in out.content
    assert "Expected plan_visit(when: date" in out.content


def test_unknown_tool_lists_the_available_ones(toy: Domain) -> None:
    out = toy.toolkit.call(toy.start_session(), "refund_everything", {})
    assert out.status == "unknown_tool"
    assert "get_order, list_orders, cancel_order, place_order" in out.content


def test_tool_error_is_the_answer_and_the_call_writes_nothing(toy: Domain) -> None:
    s = toy.start_session()
    out = toy.toolkit.call(s, "place_order", {"customer_id": "C1", "skus": ["P1", "P2"]})
    assert out.status == "tool_error"
    assert out.content == "Error: product P2 is out of stock"
    assert not s.diff()  # P1's stock decrement was rolled back


def test_a_crash_inside_a_tool_is_an_outcome_not_an_exception() -> None:
    @tool("write")
    def broken(db: Database, key: str) -> dict:
        """Write, then crash.

        Args:
            key: A key.
        """
        db.put("t", {"id": key})
        return {"value": 1 / 0}

    s = _session()
    out = _kit(broken).call(s, "broken", {"key": "k"})
    assert out.status == "exception"
    assert "ZeroDivisionError" in out.content
    assert not s.diff()


@tool("write")
def spin(db: Database, key: str) -> str:
    """Write, then loop forever.

    Args:
        key: A key.
    """
    db.put("t", {"id": key})
    while True:
        pass


def test_a_tool_past_its_deadline_is_interrupted_and_rolled_back() -> None:
    s = _session()
    started = time.monotonic()
    out = _kit(spin, deadline_s=0.2).call(s, "spin", {"key": "k"})
    assert out.status == "timeout"
    assert "did not finish within 0.2 s" in out.content
    assert time.monotonic() - started < 5
    assert not s.diff()


def test_deadlines_work_in_worker_threads_and_do_not_leak_into_later_calls(toy: Domain) -> None:
    results: list[str] = []

    def worker() -> None:
        s = _session()
        results.append(_kit(spin, deadline_s=0.1).call(s, "spin", {"key": "k"}).status)
        # The next calls in the same thread run normally.
        for _ in range(200):
            results.append(
                toy.toolkit.call(toy.start_session(), "get_order", {"order_id": "O1"}).status
            )

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results.count("timeout") == 3
    assert results.count("ok") == 600


def test_a_tool_that_blocks_in_c_past_its_deadline_still_counts_as_timed_out() -> None:
    @tool("write")
    def slow(db: Database, key: str) -> str:
        """Write, then sleep.

        Args:
            key: A key.
        """
        db.put("t", {"id": key})
        time.sleep(0.3)
        return "done"

    s = _session()
    out = _kit(slow, deadline_s=0.05).call(s, "slow", {"key": "k"})
    assert out.status == "timeout"
    assert not s.diff()


def test_tool_definitions_are_checked() -> None:
    def no_kind(db: Database, x: int) -> int:
        """Doc.

        Args:
            x: X.
        """
        return x

    @tool("read")
    def no_doc(db: Database, x: int) -> int:
        return x

    @tool("read")
    def undocumented_arg(db: Database, x: int) -> int:
        """Doc without args."""
        return x

    @tool("read")
    def no_hint(db: Database, x) -> int:  # type: ignore[no-untyped-def]
        """Doc.

        Args:
            x: X.
        """
        return 1

    for fn, msg in [
        (no_kind, "not registered"),
        (no_doc, "needs a docstring"),
        (undocumented_arg, "not described under Args"),
        (no_hint, "has no type hint"),
    ]:
        with pytest.raises(ToolDefinitionError, match=msg):
            spec_from_function(fn)
    with pytest.raises(ValueError, match="tool kind"):
        tool("delete")  # type: ignore[arg-type]


def test_parse_docstring_reads_google_style() -> None:
    summary, args = parse_docstring(
        "Find things.\n\nMore detail here.\n\nArgs:\n    a (str): First\n        continued.\n    b: Second.\n\nReturns:\n    A list."
    )
    assert summary == "Find things. More detail here."
    assert args == {"a": "First continued.", "b": "Second."}


def test_tool_reads_the_domain_clock(toy: Domain) -> None:
    assert toy.start_session().today() == date(2026, 3, 15)


def test_toolkit_refuses_two_tools_with_one_name() -> None:
    with pytest.raises(ToolDefinitionError, match="two tools"):
        _kit(plan_visit, plan_visit)


def test_tool_error_type_is_the_sdk_one() -> None:
    from maestro.domains import sdk

    assert sdk.ToolError is ToolError


def test_an_iso_date_parameter_takes_ascii_digits_only() -> None:
    from pydantic import TypeAdapter, ValidationError

    from maestro.domains.sdk import IsoDate, IsoDateTime

    assert TypeAdapter(IsoDate).validate_python("2026-01-05") == "2026-01-05"
    assert TypeAdapter(IsoDateTime).validate_python("2026-01-05T09:30") == "2026-01-05T09:30"
    for bad in ("２０２６-01-05", "٢٠٢٦-01-05"):  # fullwidth, Arabic-Indic
        with pytest.raises(ValidationError):
            TypeAdapter(IsoDate).validate_python(bad)
