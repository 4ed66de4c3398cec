"""The placeholder gate: values no real business would hold (``"name 4"``, ``"email 4"``,
``"book title 6"``, lorem ipsum, ``"string"``, ``"example"``, ``<...>``, one value repeated for
every record). The data stage's answer is refused with every value found, so the next attempt can
replace them; the grown database is checked again before it is kept."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

#: Whole values (lower case, punctuation as spaces) that are placeholders, not data.
PLACEHOLDER_WORDS = frozenset(
    {
        "string",
        "str",
        "text",
        "example",
        "sample",
        "test",
        "testing",
        "placeholder",
        "value",
        "foo",
        "bar",
        "baz",
        "qux",
        "tbd",
        "todo",
        "n a",
        "na",
        "none",
        "null",
        "nil",
        "xxx",
        "xx",
        "x",
        "abc",
        "asdf",
        "dummy",
        "unknown",
        "lorem ipsum",
        "description",
        "name",
        "email",
        "title",
        "address",
        "phone",
        "notes",
        "note",
    }
)
_EXAMPLE_DOMAIN = re.compile(
    r"@(?:[a-z0-9-]+\.)*(?:example|test|domain|email|sample|mail)\.(?:com|org|net)$"
)
_WORD = re.compile(r"[a-z]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def placeholder_reason(value: str, field: str, table: str) -> str | None:
    """Why a text value looks like a placeholder, or None when it looks like data."""
    stripped = value.strip()
    if not stripped:
        return "empty"
    low = stripped.lower()
    if "lorem" in low or "ipsum" in low:
        return "lorem ipsum"
    if (stripped.startswith("<") and stripped.endswith(">")) or "..." in stripped or "…" in low:
        return "a placeholder to replace"
    plain = " ".join(re.sub(r"[^a-z0-9]+", " ", low).split())
    if plain in PLACEHOLDER_WORDS:
        return "a placeholder word"
    if _EXAMPLE_DOMAIN.search(low):
        return "an example email domain"
    # "name 4", "book title 6", "start time 4", "customer 3": the field's or table's words and
    # a number, which is what filling a column mechanically gives.
    words = _words(plain)
    own = set(_words(field.replace("_", " "))) | set(_words(table.replace("_", " ")))
    own |= {w.rstrip("s") for w in own}
    if words and re.fullmatch(r"[a-z ]+ ?\d+", plain) and all(w in own for w in words):
        return "the field's name and a number"
    if plain.replace(" ", "") in {field.replace("_", ""), table.rstrip("s")}:
        return "the field's own name"
    return None


def placeholder_problems(
    table: str, field: str, values: Iterable[tuple[str, str]], *, limit: int = 4
) -> list[str]:
    """One line per placeholder among ``(where, value)`` pairs (at most ``limit``)."""
    out = []
    for where, value in values:
        reason = placeholder_reason(value, field, table)
        if reason:
            out.append(f"{where} {value!r} is {reason}")
            if len(out) >= limit:
                break
    return out


def repeated_problem(table: str, field: str, values: list[str], *, at_least: int = 3) -> str | None:
    """A text field holding one value in most records: a filler, not data."""
    if len(values) < at_least:
        return None
    value, count = Counter(values).most_common(1)[0]
    if count * 2 > len(values) and count >= at_least:
        return (
            f"{table}.{field} is {value!r} in {count} of {len(values)} records: give each record "
            "its own realistic value"
        )
    return None
