"""What the host holds of a sandboxed domain's answers and writes is bounded per call, per
session (a replay, an episode) and across every live session, counted as Python holds it.

Before, the caps counted bytes on the wire: a tool answering 16 MB of text with one emoji in it
(CPython then stores every character in 4 bytes) grew ``domains validate`` by 766 MB over four
gold actions, and nothing bounded a replay or a server's sessions.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from maestro.domains import Domain
from maestro.domains.files import json_nodes
from maestro.domains.sandbox import SandboxLimits
from maestro.domains.sandbox.package import _database_nodes
from maestro.domains.sandbox.toolkit import held_bytes
from tests.domains.sandbox_support import TOY_TOOLS, make_package, rss_mb, tool_source, unchecked

TOOLS = (
    TOY_TOOLS
    # 4.5 M characters: 4.5 MB on the wire, 18 MB held once one character is an emoji.
    + tool_source("wide", 'return "\\U0001f600" + "x" * (4_500_000 - 1)')
    + tool_source("answer", 'return "x" * 300_000')
)


def _call(domain: Domain, session: object, name: str) -> tuple[str, str]:
    out = domain.toolkit.call(session, name, {})  # type: ignore[arg-type]
    return out.status, out.content


def test_an_answer_is_capped_by_what_its_text_holds_not_by_its_wire_size(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOOLS)
    with unchecked(root) as domain:
        before = rss_mb()
        status, content = _call(domain, domain.start_session(), "wide")
        assert status == "sandbox", content[:200]
        assert "answer of 4,500,000 characters holds" in content
        assert "the sandbox allows 16,777,216 a call" in content
        assert rss_mb() - before < 64
        assert _call(domain, domain.start_session(), "answer")[0] == "ok"


def test_a_session_and_all_live_sessions_hold_at_most_their_budgets(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOOLS)
    limits = SandboxLimits(max_session_held_bytes=1_000_000, max_held_bytes=2_000_000)
    with unchecked(root, limits) as domain:
        first = domain.start_session()
        assert [_call(domain, first, "answer")[0] for _ in range(3)] == ["ok"] * 3
        status, content = _call(domain, first, "answer")  # a fourth would hold 1.2 MB
        assert status == "sandbox"
        assert "the session's answers and writes would hold" in content
        assert "the sandbox allows 1,000,000 a session" in content
        second = domain.start_session()
        assert [_call(domain, second, "answer")[0] for _ in range(3)] == ["ok"] * 3
        third = domain.start_session()
        status, content = _call(domain, third, "answer")  # 6 answers live: 1.8 MB, and 0.3 more
        assert status == "sandbox"
        assert "this domain's live sessions would hold" in content
        assert "allows 2,000,000 in all" in content
        del first
        gc.collect()  # a session that ends gives its budget back
        assert _call(domain, third, "answer")[0] == "ok"


def test_held_bytes_counts_what_python_holds() -> None:
    ascii_text, wide_text = "x" * 1000, "\U0001f600" + "x" * 999
    assert 1000 < held_bytes(ascii_text) < 1100 < 4000 < held_bytes(wide_text) < 4100
    record = {"key": "k1", "tags": ["a", "b"], "n": 3}
    assert held_bytes(record) > held_bytes({}) + held_bytes("key") + held_bytes(["a", "b"])


def test_the_database_bound_counts_the_parsed_value_as_json_nodes_counts_its_dump() -> None:
    """The child's database is bounded by db.json's own values; counted without dumping
    db.json again, the bound must stay what the dump gave."""
    values = [
        {},
        [],
        {"t": {"k1": {"a": 1, "b": [1, 2, {}], "c": "x,y[{"}, "k2": {"d": None}}},
        [[[]], [1], {"a": []}],
        "text, with [brackets]",
    ]
    for value in values:
        dumped = json.dumps(value).encode()
        assert _database_nodes(value) == 8 * json_nodes(dumped) + 100_000, value


def test_json_nodes_counts_values_without_a_copy_of_its_input() -> None:
    """json_nodes runs on db.json and on every reply of a child: it had built a list of every
    piece between strings, about 25x its input (900 MB for a 36 MB database)."""
    import tracemalloc

    record = '{"a": "x", "b": [1, 2], "c": {"d": "e,[{"}, "f": "ab\\\\"}'
    data = ('{"t": {' + ", ".join(f'"k{i}": {record}' for i in range(100_000)) + "}}").encode()
    # 3 opening braces, and per record 3 containers and 4 commas inside, 1 comma after it.
    assert json_nodes(data) == json_nodes(data.decode()) == 1 + 2 + 100_000 * 8 - 1
    tracemalloc.start()
    try:
        json_nodes(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(data) // 4, (peak, len(data))


def test_json_nodes_counts_small_and_large_data_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call's request and reply is counted the quick way (small data); the large way
    must give the same count on the same text, strings holding brackets and commas included."""
    import json
    import random

    from maestro.domains import strict_json

    rng = random.Random(7)

    def value(depth: int = 0) -> object:
        r = rng.random()
        if depth > 4 or r < 0.3:
            return rng.choice(["a,b", "[{x", "plain", 'q"u\\"o,te', 1, 2.5, None, True, ""])
        if r < 0.65:
            return [value(depth + 1) for _ in range(rng.randint(0, 5))]
        return {f"k{i},[": value(depth + 1) for i in range(rng.randint(0, 5))}

    texts = [json.dumps(value()) for _ in range(300)]
    quick = [(json_nodes(t), json_nodes(t.encode())) for t in texts]
    monkeypatch.setattr(strict_json, "_CUT_BELOW", -1)
    assert quick == [(json_nodes(t), json_nodes(t.encode())) for t in texts]
    assert all(a == b for a, b in quick)
