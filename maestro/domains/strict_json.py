"""JSON read strictly, as hostile input: every refusal a :class:`Problem` with its location.

A key twice in one object (the last would silently win), ``NaN`` and ``Infinity``, an integer of
more than :data:`MAX_INT_DIGITS` digits (Python refuses past 4,300 with a bare ValueError), a
float that overflows, nesting deeper than :data:`MAX_DEPTH`, a lone surrogate (``"\\ud800"``
parses, then breaks every UTF-8 writer downstream), and more values than the text's size allows
(:func:`json_nodes`, counted before parsing) are each a problem.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from maestro.domains.errors import Problem

MAX_DEPTH = 64
MAX_INT_DIGITS = 20


class _Refused(ValueError):
    """A value the JSON reader refuses; carries the message of its problem."""


def parse_json(text: str, name: str, problems: list[Problem], where: str = "") -> Any:
    """A JSON value by the rules of this module; None and a problem when it breaks one."""
    found: list[Problem] = []
    nodes, allowed = json_nodes(text), MAX_NODES_FREE + len(text) // BYTES_PER_NODE
    if nodes > allowed:
        if _deeper_than(text, MAX_DEPTH):  # the truer reason, when it is one
            message = f"invalid JSON: nested deeper than {MAX_DEPTH} levels"
        else:
            message = f"holds {nodes} JSON values, over the {allowed} its size allows"
        problems.append(Problem(name, where, message))
        return None

    def at(line: int, col: int, message: str) -> None:
        # A JSONL line is one line: its location is the caller's ``where``, the column is told.
        if where:
            found.append(Problem(name, where, f"{message} at column {col}"))
        else:
            found.append(Problem(name, f"line {line} column {col}", message))

    try:
        value = json.loads(
            text,
            object_pairs_hook=_object,
            parse_int=_int,
            parse_float=_float,
            parse_constant=_constant,
        )
    except json.JSONDecodeError as exc:
        at(exc.lineno, exc.colno, f"invalid JSON: {exc.msg}")
    except RecursionError:
        found.append(Problem(name, where, f"invalid JSON: nested deeper than {MAX_DEPTH} levels"))
    except _Refused as exc:
        at(*_locate(text, str(exc)))
    else:
        path_problem = _check_value(value)
        if path_problem is None:
            return value
        location, message = path_problem
        if len(location) > 60:
            location = location[:57] + "..."
        found.append(Problem(name, f"{where} {location}".strip(), message))
    problems.extend(found)
    return None


#: JSON values a file may hold: this many, and one more per this many bytes (the library's
#: db.json files hold one per 23-26 bytes). A parsed value costs the host some 60 bytes and
#: more downstream: ``[[],[],...]`` is 3 bytes a value (3 MB once took 390 MB and 48 s).
MAX_NODES_FREE = 50_000
BYTES_PER_NODE = 16


def json_nodes(data: bytes | str) -> int:
    """An upper bound on the JSON values in ``data``, counted without parsing it: every value
    is a container's first or follows a comma (strings, and what they hold, are skipped)."""
    # Small data (every call's request and reply): the strings cut out in C, a few us. Large:
    # counted over the whole text, less what each string holds, since ``sub`` builds a list of
    # every piece between strings, about 25x the data (900 MB for a 36 MB database).
    if len(data) <= _CUT_BELOW:
        if isinstance(data, str):
            bare = _STRINGS_TEXT.sub("", data)
            return 1 + bare.count("[") + bare.count("{") + bare.count(",")
        raw_bare = _STRINGS.sub(b"", data)
        return 1 + raw_bare.count(b"[") + raw_bare.count(b"{") + raw_bare.count(b",")
    if isinstance(data, str):
        n = 1 + data.count("[") + data.count("{") + data.count(",")
        for found in _STRINGS_TEXT.finditer(data):
            text = found.group()
            n -= len(text) - len(text.translate(_COUNTED_TEXT))
        return n
    n = 1 + data.count(b"[") + data.count(b"{") + data.count(b",")
    for match in _STRINGS.finditer(data):
        raw = match.group()
        n -= len(raw) - len(raw.translate(None, b"[{,"))
    return n


def _deeper_than(text: str, depth: int) -> bool:
    """Whether brackets outside strings nest deeper than ``depth`` (only asked of a file
    already refused, so its cost matters little)."""
    level = 0
    for bracket in _BRACKETS.findall(_STRINGS_TEXT.sub("", text)):
        level += 1 if bracket in "[{" else -1
        if level > depth:
            return True
    return False


_BRACKETS = re.compile(r"[\[\]{}]")
# Possessive: linear on any input, a string that never ends included.
_STRINGS = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
_STRINGS_TEXT = re.compile(r'"(?:[^"\\]++|\\.)*+"')
_COUNTED_TEXT = str.maketrans("", "", "[{,")
#: Data up to this size is counted the quick way (its temporary is at most ~25x: 1.6 MB).
_CUT_BELOW = 64 * 1024


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Refused("duplicate")
    return out


def _int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused("bignum")
    return int(digits)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused("overflow")
    return value


def _constant(text: str) -> Any:
    raise _Refused("constant")


def _check_value(value: Any) -> tuple[str, str] | None:
    """(location, message) of the first string with a lone surrogate or of nesting too deep."""
    # A path is built only for the node that fails: one string per node would cost the host
    # far more than the file (``[[],[],...]``: 3 MB once took 390 MB and 48 s).
    stack: list[tuple[Any, _Where, int]] = [(value, None, 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            return _path(where), f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(node, str):
            if _has_surrogate(node):
                return _path(where), f"a lone surrogate in {node[:40]!a}: not encodable text"
        elif isinstance(node, dict):
            for key, child in node.items():
                if _has_surrogate(key):
                    return _path(where), f"a lone surrogate in the key {key[:40]!a}"
                stack.append((child, (where, key), depth + 1))
        elif isinstance(node, list):
            stack.extend((child, (where, i), depth + 1) for i, child in enumerate(node))
    return None


#: Where a value is: its parent's place and its key or index (None: the top).
_Where = tuple[Any, str | int] | None


def _path(where: _Where) -> str:
    steps: list[str | int] = []
    while where is not None:
        where, step = where
        steps.append(step)
    path = ""
    for step in reversed(steps):
        path = f"{path}[{step}]" if isinstance(step, int) else (f"{path}.{step}" if path else step)
    return path or "(top)"


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# ----- where a refused value is --------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|([{}\[\]:,])|([^\s{}\[\]:,"]+))', re.S)


def _locate(text: str, kind: str) -> tuple[int, int, str]:
    """Line, column and message of the first value of the refused ``kind`` (only run once a
    value was refused, so its cost does not matter)."""
    objects: list[dict[str, int] | None] = []  # per open container: its keys' offsets, or None
    expect_key = False
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            break
        pos = match.end()
        string, punct, word = match.groups()
        start = match.start(1) if string else match.start(2) if punct else match.start(3)
        if punct in ("{", "["):
            objects.append({} if punct == "{" else None)
            expect_key = punct == "{"
        elif punct in ("}", "]"):
            if objects:
                objects.pop()
            expect_key = False
        elif punct == ",":
            expect_key = bool(objects) and objects[-1] is not None
        elif string is not None and expect_key and objects and objects[-1] is not None:
            expect_key = False
            key = json.loads(string)
            keys = objects[-1]
            if kind == "duplicate" and key in keys:
                first_line, first_col = _line_col(text, keys[key])
                line, col = _line_col(text, start)
                return (
                    line,
                    col,
                    f"duplicate key {key!r} (first at line {first_line} column {first_col})",
                )
            keys[key] = start
        elif word is not None:
            message = _word_problem(word, kind)
            if message:
                return (*_line_col(text, start), message)
    return (
        1,
        1,
        {
            "duplicate": "a key appears twice in one object",
            "bignum": f"an integer has more than {MAX_INT_DIGITS} digits",
            "overflow": "a number is too large for a float",
            "constant": "NaN and Infinity are not JSON",
        }.get(kind, kind),
    )


def _word_problem(word: str, kind: str) -> str | None:
    if kind == "bignum" and re.fullmatch(r"-?\d+", word) and len(word.lstrip("-")) > MAX_INT_DIGITS:
        return f"an integer of {len(word.lstrip('-')):,} digits; at most {MAX_INT_DIGITS}"
    if kind == "overflow" and re.fullmatch(r"-?[\d.]+[eE][+-]?\d+|-?[\d.]+", word):
        try:
            if not math.isfinite(float(word)):
                return f"{word[:30]} is too large for a float"
        except ValueError:
            return None
    if kind == "constant" and word in ("NaN", "Infinity", "-Infinity"):
        return f"{word} is not JSON"
    return None


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
