"""Matching a conversation's calls to a task's gold actions, in time near linear in both.

Calls are indexed once by the values an action compares (``compare_args``), so each action's
candidates are a lookup, and the matching itself keeps its own stack: a task of 3,000 gold
actions once raised ``RecursionError`` here (issue 23), one level of recursion per action.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence
from typing import Any

from maestro.conversation import ToolCall
from maestro.domains.models import Action


def same_value(expected: Any, actual: Any) -> bool:
    """JSON equality where 1 == 1.0 but True != 1."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            same_value(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            same_value(a, b) for a, b in zip(expected, actual, strict=True)
        )
    return bool(expected == actual)


def matches(action: Action, call: ToolCall) -> bool:
    """The call has the action's name and equal values for its compared arguments."""
    if call.name != action.name or not isinstance(call.arguments, dict):
        return False
    return all(
        k in call.arguments and same_value(v, call.arguments[k])
        for k, v in action.compared().items()
    )


class _Unindexable(Exception):
    """A value outside JSON (or nested too deep to index): its action scans every call."""


_MAX_KEY_DEPTH = 64


def _key(value: Any, depth: int = 0) -> Hashable:
    """A hashable stand-in equal for two values exactly when :func:`same_value` holds."""
    if depth > _MAX_KEY_DEPTH:
        raise _Unindexable
    kind = type(value)
    if value is None or kind is str:
        return value
    if kind is bool:
        return ("b", value)
    if kind is int or kind is float:
        # NaN equals nothing, itself included: a fresh object keeps it so.
        return ("n", value) if value == value else object()
    if kind is list:
        return ("l", tuple(_key(v, depth + 1) for v in value))
    if kind is dict:
        if not all(type(k) is str for k in value):
            raise _Unindexable
        return ("d", frozenset((k, _key(v, depth + 1)) for k, v in value.items()))
    raise _Unindexable


def _candidates(actions: Sequence[Action], calls: Sequence[ToolCall]) -> list[list[int]]:
    """For each action, the indexes of the calls that match it, ascending. Actions comparing
    the same arguments of the same tool with the same values share one list."""
    indexes: dict[tuple[str, tuple[str, ...]], dict[Hashable, list[int]]] = {}
    out: list[list[int]] = []
    for action in actions:
        compared = action.compared()
        names = tuple(sorted(compared))
        try:
            want = tuple(_key(compared[n]) for n in names)
            index = indexes.get((action.name, names))
            if index is None:
                index = indexes[(action.name, names)] = _index(calls, action.name, names)
        except _Unindexable:
            out.append([j for j, call in enumerate(calls) if matches(action, call)])
            continue
        out.append(index.setdefault(want, []))
    return out


def _index(
    calls: Sequence[ToolCall], name: str, names: tuple[str, ...]
) -> dict[Hashable, list[int]]:
    index: dict[Hashable, list[int]] = {}
    for j, call in enumerate(calls):
        args = call.arguments
        if call.name != name or not isinstance(args, dict) or any(n not in args for n in names):
            continue
        try:
            got = tuple(_key(args[n]) for n in names)
        except _Unindexable:
            continue  # a value no action's (JSON) value can equal
        index.setdefault(got, []).append(j)
    return index


def match_actions(
    actions: Sequence[Action], calls: Sequence[ToolCall], ordered: bool
) -> list[int | None]:
    """For each action, the index of the call matched to it (each call used once), or None.

    Unordered: a maximum bipartite matching, so a loose action cannot steal the only call that
    fits a stricter one. Ordered: the earliest subsequence.
    """
    fits = _candidates(actions, calls)
    if ordered:
        out: list[int | None] = []
        pos = 0
        for mine in fits:
            at = bisect.bisect_left(mine, pos)
            hit = mine[at] if at < len(mine) else None
            out.append(hit)
            if hit is not None:
                pos = hit + 1
        return out
    owner: dict[int, int] = {}  # call index -> action index
    for i in range(len(actions)):
        _augment(i, fits, owner)
    by_action = {i: j for j, i in owner.items()}
    return [by_action.get(i) for i in range(len(actions))]


def _augment(start: int, fits: list[list[int]], owner: dict[int, int]) -> bool:
    """Kuhn's augmenting search from action ``start``, depth first, calls in index order (the
    order the recursive matcher took, so the same assignment), on an explicit stack.

    A call is tried once per search; actions sharing a candidate list share one cursor in it,
    since every call before the cursor has been tried (an action reached again through a list
    already walked costs nothing)."""
    cursor: dict[int, int] = {}  # id of a candidate list -> next position to try
    seen: set[int] = set()
    stack: list[tuple[int, int]] = []  # (action, the call it is trying), the path so far
    action = start
    while True:
        mine = fits[action]
        at = cursor.get(id(mine), 0)
        while at < len(mine) and mine[at] in seen:
            at += 1
        if at == len(mine):
            cursor[id(mine)] = at
            if not stack:
                return False
            action, _ = stack.pop()  # this action's call cannot be freed: try its next one
            continue
        call = mine[at]
        cursor[id(mine)] = at + 1
        seen.add(call)
        if call in owner:
            stack.append((action, call))
            action = owner[call]
            continue
        # A free call: each action on the path takes the call it was trying.
        owner[call] = action
        while stack:
            up, tried = stack.pop()
            owner[tried] = up
        return True
