"""Escapes a second red team proved against the sandbox, each now a test that failed before its
fix: host code run through a link flipped during the library check, calls held past their
deadline by a restarting child, module state passed from one session to the next, a child's
JSON (writes, its database, its schemas) costing the host far more than its bytes, lone
surrogates reaching the host's writers, schema keywords that raised in the host, invalid
defaults stored, a tool's answer that crashed the tool graph.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from maestro.cli.output import printable
from maestro.domains import DomainLoadError, load_domain
from maestro.domains.errors import Problem
from maestro.domains.files import parse_json
from maestro.domains.library import LIBRARY_ROOT
from maestro.domains.loader import inspect_package
from maestro.domains.sandbox.schema import Budget, SchemaError, record_model
from maestro.domains.toolgraph import build_tool_graph
from tests.domains.sandbox_support import (
    LIMITS,
    TOY_MODELS,
    TOY_TOOLS,
    Host,
    make_package,
    rss_mb,
    tool_source,
    unchecked,
)

# ----- trust by location is decided on what is loaded -------------------------------------------

#: Flips a link between two folders (rename of a fresh link: atomic) until killed.
FLIPPER = """
import os, sys, time
link, a, b = sys.argv[1:4]
i = 0
while True:
    i += 1
    os.symlink(a if i % 2 else b, link + ".tmp")
    os.rename(link + ".tmp", link)
    time.sleep(0.0005)
"""


def test_a_link_flipped_during_the_library_check_never_runs_its_code_in_the_host(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "host-ran-it"
    evil = tmp_path / "evil"
    shutil.copytree(LIBRARY_ROOT / "hotel", evil, ignore=shutil.ignore_patterns("__pycache__"))
    models = (evil / "models.py").read_text()
    (evil / "models.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n" + models)
    link = tmp_path / "package"
    link.symlink_to(LIBRARY_ROOT / "hotel")
    # What the check approved is what is loaded: the resolved library folder.
    domain, problems = inspect_package(link, check_gold=False)
    assert domain is not None and not problems
    assert domain.path == LIBRARY_ROOT / "hotel"
    flipper = subprocess.Popen(
        [sys.executable, "-c", FLIPPER, str(link), str(evil), str(LIBRARY_ROOT / "hotel")]
    )
    loads = 0
    try:
        ends = time.monotonic() + 6.0  # before the fix, the host ran it within the first second
        while time.monotonic() < ends and not marker.exists():
            # The evil folder is refused in the sandbox, or the link is mid-flip.
            with contextlib.suppress(DomainLoadError, OSError):
                load_domain(link, check_gold=False).close()
            loads += 1
    finally:
        flipper.kill()
        flipper.wait(timeout=10)
    assert not marker.exists(), f"the host ran the other folder's models.py ({loads} loads)"
    assert loads > 0


# ----- a restarting child never holds a call past its deadline ----------------------------------

#: Only the first child gets db.json with its describe request: every later one hangs there.
HANG_ON_RESTART = """
import sys as _sys
import time as _time

_main = _sys.modules["__main__"]
_describe = _sys.modules["maestro.domains.sandbox.describe"]
_first = {"seen": False}
_records, _tables = _main.validated_records, _describe.describe_tables


def _seen(raw, tables, problems):
    _first["seen"] = True
    return _records(raw, tables, problems)


def _hang(tables):
    if not _first["seen"]:
        _time.sleep(3600)
    return _tables(tables)


_main.validated_records = _seen
_describe.describe_tables = _hang
"""


def test_a_call_never_waits_for_a_restart_past_its_deadline(tmp_path: Path) -> None:
    tools = TOY_TOOLS + HANG_ON_RESTART + tool_source("stop_runner", "raise SystemExit(0)")
    root = make_package(tmp_path, "toy", tools)
    with unchecked(root) as domain:
        session = domain.start_session()
        assert domain.toolkit.call(session, "stop_runner", {}).status == "sandbox"
        started = time.monotonic()
        out = domain.toolkit.call(session, "get_order", {"order_id": "O1"}, deadline_s=1.0)
        waited = time.monotonic() - started
        assert out.status == "sandbox" and "restarting" in out.content, out.content
        assert waited < 1.0 + 1.5, f"the call took {waited:.1f} s for a 1 s deadline"
        # A fresh session, now: another worker would hang too, and its start is bounded alike.
        started = time.monotonic()
        out = domain.toolkit.call(
            domain.start_session(), "get_order", {"order_id": "O1"}, deadline_s=1.0
        )
        assert time.monotonic() - started < 1.0 + 1.5, out.content


# ----- sessions never share module state --------------------------------------------------------

REMEMBERS = (
    """
SEEN = []
"""
    + tool_source("remember", "SEEN.append(target)\nreturn 'ok'", "write")
    + tool_source("recall", "return ','.join(SEEN)")
)


def test_module_state_never_passes_from_one_session_to_the_next(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS + REMEMBERS)
    with unchecked(root) as domain:
        toolkit = domain.toolkit
        first = domain.start_session()
        assert toolkit.call(first, "remember", {"target": "private-A"}).ok
        # The same episode, forks included, is one lineage: one worker.
        assert toolkit.call(first.fork(), "recall", {}).content == "private-A"
        worker = toolkit.child_pid  # type: ignore[attr-defined]
        second = domain.start_session()
        assert toolkit.call(second, "recall", {}).content == ""
        assert toolkit.child_pid != worker  # type: ignore[attr-defined]
        assert toolkit.recycles == 1 and toolkit.restarts == 0  # type: ignore[attr-defined]
        # Back to the first: its writes come back to the fresh worker, its module state does not.
        assert toolkit.call(first, "get_order", {"order_id": "O1"}).ok
        assert toolkit.call(first, "recall", {}).content == ""


# ----- what a child's JSON may cost the host ----------------------------------------------------

TAGGED_MODELS = TOY_MODELS.replace("    stock: int\n", "    stock: int\n    tags: dict = {}\n")


def _tagging(n: int) -> str:
    body = (
        'db.update("products", "P1", tags={"t": [[]] * %d})\nreturn "ok"' % n  # noqa: UP031
    )
    return TOY_TOOLS + tool_source("tag", body, "write")


def test_a_calls_writes_are_bounded_in_json_values_not_only_bytes(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", _tagging(340_000), TAGGED_MODELS)
    # Each refusal restarts the child: the next call's deadline covers that wait too.
    with unchecked(root, LIMITS.model_copy(update={"call_timeout_s": 30.0})) as domain:
        session = domain.start_session()
        domain.toolkit.start()  # type: ignore[attr-defined]
        host = Host([])
        for _ in range(5):  # 1 MiB of [] a call: 26 MB of host memory each, before
            out = domain.toolkit.call(session, "tag", {})
            assert out.status == "sandbox" and "JSON values" in out.content, out.content
        host.assert_unharmed(session, domain.initial.state_hash())


def test_a_sessions_writes_are_bounded_in_total(tmp_path: Path) -> None:
    limits = LIMITS.model_copy(update={"max_write_nodes": 1_000, "max_session_write_nodes": 2_000})
    root = make_package(tmp_path, "toy", _tagging(400), TAGGED_MODELS)
    with unchecked(root, limits) as domain:
        session = domain.start_session()
        statuses = [domain.toolkit.call(session, "tag", {}).status for _ in range(3)]
        assert statuses == ["ok", "ok", "sandbox"]
        out = domain.toolkit.call(session, "tag", {})
        assert "per session" in out.content, out.content
        # Another session has its own allowance.
        assert domain.toolkit.call(domain.start_session(), "tag", {}).ok


INFLATE = """
import sys as _sys

_main = _sys.modules["__main__"]


def _inflated(raw, tables, problems):
    out = _records(raw, tables, problems)
    out["products"]["P1"]["tags"] = {"t": [[]] * 1_000_000}
    return out


_records = _main.validated_records
_main.validated_records = _inflated
"""


def test_the_database_a_child_sends_is_bounded_by_db_json(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS + INFLATE, TAGGED_MODELS)
    host = Host([])
    with pytest.raises(DomainLoadError) as err, unchecked(root):
        pass
    assert "JSON values" in str(err.value)
    host.assert_unharmed()


def test_a_db_json_of_empty_lists_is_refused_before_it_is_parsed() -> None:
    problems: list[Problem] = []
    text = '{"t": [' + ",".join(["[]"] * 1_000_000) + "]}"
    before, started = rss_mb(), time.monotonic()
    assert parse_json(text, "db.json", problems) is None
    assert "JSON values" in problems[0].message
    assert time.monotonic() - started < 5 and rss_mb() - before < 64
    library = (LIBRARY_ROOT / "hotel" / "db.json").read_text()
    assert parse_json(library, "db.json", []) is not None


# ----- lone surrogates from a child -------------------------------------------------------------

SURROGATES = tool_source("odd_answer", 'return "x" + chr(0xD800) + "y"') + tool_source(
    "odd_write",
    'db.update("products", "P1", tags={"t": "x" + chr(0xD800)})\nreturn "ok"',
    "write",
)


def test_lone_surrogates_from_a_child_never_reach_the_hosts_writers(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS + SURROGATES, TAGGED_MODELS)
    with unchecked(root) as domain:
        session = domain.start_session()
        out = domain.toolkit.call(session, "odd_answer", {})
        assert out.ok and out.content == "x\ufffdy"
        out.content.encode("utf-8")
        json.dumps(out.content, ensure_ascii=False).encode("utf-8")
        out = domain.toolkit.call(session, "odd_write", {})
        assert out.status == "sandbox" and "lone surrogate" in out.content, out.content
        assert session.state_hash() == domain.initial.state_hash()


def test_a_lone_surrogate_in_a_parameter_description_is_a_load_problem(tmp_path: Path) -> None:
    doc = tool_source("odd_doc", 'return ""').replace("A path, pid or port.", "A \\ud800 path.")
    root = make_package(tmp_path, "toy", TOY_TOOLS + doc)
    with pytest.raises(DomainLoadError) as err:
        load_domain(root, check_gold=False)
    assert "lone surrogate" in str(err.value)


# ----- the host's models from a child's schemas -------------------------------------------------


def _schema(**text: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"k": {"type": "string"}, "text": {"type": "string", **text}},
        "required": ["k"],
    }


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({**_schema(), "required": [["k"]]}, "required: must list properties"),
        (_schema(type=["string", "null"]), "is not supported"),
        (_schema(format=["date"]), "is not supported"),
        (_schema(pattern=r"\w{60}"), "counted repetitions"),
        (_schema(pattern="a{1000}"), "repeats more than"),
        (_schema(type="integer", default="not-a-number"), "default 'not-a-number' is invalid"),
    ],
)
def test_a_schema_the_host_cannot_use_is_a_schema_error_never_a_crash(
    schema: dict[str, Any], message: str
) -> None:
    with pytest.raises(SchemaError, match=message):
        record_model("Note", "k", schema)


def test_distinct_patterns_are_bounded_across_a_package() -> None:
    budget = Budget()
    before = rss_mb()
    with pytest.raises(SchemaError, match="distinct patterns"):
        for i in range(40):  # each table a few; 40 cost the host 150 MB and more, before
            record_model(f"T{i}", "k", _schema(pattern=rf"^\w{{{20 + i % 10}}}-{i}$"), budget)
    assert rss_mb() - before < 64


def test_fields_sharing_one_pattern_are_bounded_too() -> None:
    """pydantic compiles a pattern once per field: 420 fields of one pattern grew the host by
    483 MB, while the budget counted one distinct pattern."""
    budget = Budget()
    before = rss_mb()
    properties = {f"f{i}": {"type": "string", "pattern": r"^\w{20}$"} for i in range(420)}
    schema = {"type": "object", "properties": {"k": {"type": "string"}, **properties}}
    with pytest.raises(
        SchemaError, match="over 64 fields of the package's schemas carry a pattern"
    ):
        record_model("Wide", "k", schema, budget)
    assert rss_mb() - before < 64
    few = {
        "type": "object",
        "properties": {"k": {"type": "string"}, **dict(list(properties.items())[:30])},
    }
    record_model("Narrow", "k", few, Budget())  # a table of 30 such fields is fine


INVALID_DEFAULT = TOY_MODELS.replace(
    "    stock: int\n", '    stock: int\n    stars: int = "many"\n'
)


def test_a_default_the_host_would_store_invalid_is_a_load_problem(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS, INVALID_DEFAULT)
    with pytest.raises(DomainLoadError) as err, unchecked(root):
        pass
    assert "properties.stars: its default 'many' is invalid" in str(err.value)


# ----- the tool graph reads any answer ----------------------------------------------------------


def test_the_tool_graph_survives_an_answer_nested_past_the_recursion_limit(
    tmp_path: Path,
) -> None:
    deep = tool_source("deep", 'return "[" * 100_000 + "]" * 100_000')
    root = make_package(tmp_path, "toy", TOY_TOOLS + deep)
    domain = load_domain(root, check_gold=False, trusted=True)
    graph = build_tool_graph(domain)  # raised RecursionError, before
    assert "deep" in graph.nodes


# ----- the operator's terminal ------------------------------------------------------------------

ESCAPES = "\x1b]52;c;cm0gLXJmIH4=\x1b\\\x1b]0;all good\x07\x1b[2K\x1b[1A\x1b[32mok\x1b[0m \u202e"


def test_a_packages_text_never_drives_the_operators_terminal(tmp_path: Path) -> None:
    tools = TOY_TOOLS + f"\nraise ValueError({ESCAPES!r})\n"
    root = make_package(tmp_path, "toy", tools)
    run = subprocess.run(
        [str(Path(sys.executable).parent / "maestro"), "domains", "validate", str(root)],
        capture_output=True,
        timeout=300,
        env={**os.environ, "TERM": "xterm-256color", "FORCE_COLOR": "1"},
    )
    shown = run.stdout + run.stderr
    assert run.returncode != 0 and b"import failed: ValueError" in shown, shown[-2000:]
    for sequence in (b"\x1b]52", b"\x1b]0;", b"\x1b[2K", b"\x1b[1A", "\u202e".encode()):
        assert sequence not in shown
    assert b"\\x1b]52;c;" in shown  # shown, escaped, for the operator to read
    assert printable("a\tb\nc\x1b[0m\x9b") == "a\tb\nc\\x1b[0m\\x9b"


# ----- the seccomp allowlist, on its own --------------------------------------------------------

#: Loads the worker's filter in a fresh process (no audit hook, no other layer) and makes one
#: system call; exits 0 when the call was allowed, and dies of SIGSYS when it was not.
UNDER_FILTER = """
import ctypes, fcntl, os, signal, sys
from maestro.domains.sandbox.seccomp import Allowlist
r, w = os.pipe()
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(256)
assert Allowlist().load() == "active"
what = sys.argv[1]
if what == "setown":
    fcntl.fcntl(r, fcntl.F_SETOWN, int(sys.argv[2]))
elif what == "setsig":
    fcntl.fcntl(r, 10, signal.SIGUSR1)
elif what == "stat_path":
    libc.syscall(262, -100, sys.argv[2].encode(), buf, 0x1000)  # AT_FDCWD, AT_EMPTY_PATH
elif what == "held":
    os.fstat(r)
    fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_NONBLOCK)
    fcntl.fcntl(r, fcntl.F_SETFD, fcntl.fcntl(r, fcntl.F_GETFD))
os._exit(0)
"""


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="x86-64")
@pytest.mark.parametrize(
    ("what", "killed"),
    [("setown", True), ("setsig", True), ("stat_path", True), ("held", False)],
)
def test_the_allowlist_refuses_signals_by_fcntl_and_stat_by_path(
    what: str, killed: bool, tmp_path: Path
) -> None:
    victim = subprocess.Popen(["sleep", "30"])
    argument = str(victim.pid) if what == "setown" else str(tmp_path)
    try:
        run = subprocess.run(
            [sys.executable, "-c", UNDER_FILTER, what, argument], capture_output=True, timeout=60
        )
    finally:
        victim.kill()
        victim.wait()
    expected = -signal.SIGSYS if killed else 0
    assert run.returncode == expected, run.stderr.decode()[-2000:]
