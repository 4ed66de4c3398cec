"""The domain SDK: everything a domain's ``models.py`` and ``tools.py`` may import.

A tool is a plain typed function whose first parameter is the session's database (hidden from
the assistant); its JSON schema comes from the rest of the signature and from the docstring::

    @tool("write")
    def cancel_booking(db: Database, booking_id: str, reason: str) -> dict:
        \"\"\"Cancel a booking that has not started yet.

        Args:
            booking_id: The booking's id, such as "B1001".
            reason: Why the guest cancels, in their words.
        \"\"\"
        booking = db.require("bookings", booking_id)
        if booking["status"] != "confirmed":
            raise ToolError(f"booking {booking_id} is {booking['status']}, not confirmed")
        return db.update("bookings", booking_id, status="cancelled")

A business-rule violation raises :class:`ToolError`; the assistant sees its message as the
tool's answer and the call's writes are rolled back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, StringConstraints

from maestro.domains.errors import ToolError
from maestro.domains.store import Session

__all__ = [
    "Database",
    "IsoDate",
    "IsoDateTime",
    "Record",
    "Ref",
    "TextFormat",
    "ToolError",
    "ToolKind",
    "tool",
]

ToolKind = Literal["read", "write"]

#: What a tool receives as its hidden first argument: the episode's copy-on-write session.
Database = Session

F = TypeVar("F", bound=Callable[..., Any])

_TOOL_KIND_ATTR = "__maestro_tool_kind__"


class Record(BaseModel):
    """Base of every record type in a domain's ``models.py``.

    ``key_field`` names the field that holds the record's key in ``db.json``.
    """

    model_config = ConfigDict(extra="forbid")
    key_field: ClassVar[str] = "id"


@dataclass(frozen=True)
class Ref:
    """Marks a field as a reference to a key of another table, for referential checks.

    Use it as ``Annotated[str, Ref("customers")]``; it also works inside ``Optional`` and ``list``.
    """

    table: str


@dataclass(frozen=True)
class TextFormat:
    """Marks a ``str`` parameter that holds a date (``"date"``) or a datetime (``"datetime"``),
    so that tools that build calls (the tool graph's walks) can write one."""

    kind: Literal["date", "datetime"]


#: A parameter holding an ISO date, ``2026-01-05``: checked before the tool runs.
#: ASCII digits ([0-9]): a pattern's \d also takes other scripts' digits ("２０２４-01-01").
IsoDate = Annotated[
    str, StringConstraints(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"), TextFormat("date")
]
#: A parameter holding an ISO datetime without a zone, ``2026-01-05T09:30:00``.
IsoDateTime = Annotated[
    str,
    StringConstraints(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?$"),
    TextFormat("datetime"),
]


def tool(kind: ToolKind) -> Callable[[F], F]:
    """Register a function as a tool of the given kind (``"read"`` or ``"write"``)."""
    if kind not in ("read", "write"):
        raise ValueError(f"tool kind must be 'read' or 'write', not {kind!r}")

    def mark(fn: F) -> F:
        setattr(fn, _TOOL_KIND_ATTR, kind)
        return fn

    return mark


def tool_kind(fn: object) -> ToolKind | None:
    """The kind a function was registered with, or None when it is not a tool."""
    kind = getattr(fn, _TOOL_KIND_ATTR, None)
    return kind if kind in ("read", "write") else None
