"""The sandbox: hostile snippets are stopped by the static check and, with that check bypassed,
by the sandbox process itself; the host stays unharmed; library domains replay identically."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from maestro.domains import (
    Domain,
    DomainLoadError,
    Toolkit,
    library_path,
    load_domain,
    replay_calls,
    replay_gold,
)
from maestro.domains.sandbox import (
    SandboxLimits,
    SandboxToolkit,
    check_models_source,
    check_tools_source,
    load_sandboxed_domain,
)
from maestro.domains.sandbox.package import _open

FIXTURES = Path(__file__).parent.parent / "fixtures"
TOY_TOOLS = (FIXTURES / "toy" / "tools.py").read_text()

# Short limits keep the hanging snippets quick; generous memory keeps the child's own use out of
# the way of the memory bomb's.
LIMITS = SandboxLimits(call_timeout_s=1.5, kill_grace_s=0.5, memory_mb=1024)


@dataclass(frozen=True)
class Hostile:
    """One attack: its body, what the static check says, what the sandbox does at run time."""

    name: str
    body: str
    static_rule: str | None  # text in the first static problem; None when only run time stops it
    status: str  # outcome status with the static check bypassed
    reason: str  # text in the outcome's content


HOSTILE = [
    Hostile("read_passwd", 'return open("/etc/passwd").read()', "open() is not allowed", "sandbox", "refused open('/etc/passwd'"),
    Hostile("write_file", 'open(target, "w").write("pwned")\nreturn "ok"', "open() is not allowed", "sandbox", "refused open("),
    Hostile("pathlib_write", 'import pathlib\npathlib.Path(target).write_text("pwned")\nreturn "ok"', "import of 'pathlib'", "sandbox", "refused"),
    Hostile("os_system", 'import os\nos.system("touch " + target)\nreturn "ok"', "import of 'os'", "sandbox", "refused os.system"),
    Hostile("subprocess_run", 'import subprocess\nsubprocess.run(["touch", target])\nreturn "ok"', "import of 'subprocess'", "sandbox", "refused"),
    Hostile("socket_connect", 'import socket\nsocket.create_connection(("127.0.0.1", int(target)), timeout=1)\nreturn "ok"', "import of 'socket'", "sandbox", "refused"),
    Hostile("fork_bomb", 'import os\nwhile True:\n    os.fork()', "import of 'os'", "sandbox", "refused os.fork"),
    Hostile("thread_spawn", 'import threading\nthreading.Thread(target=threading.Event().wait).start()\nreturn "ok"', "import of 'threading'", "sandbox", "thread"),
    Hostile("infinite_loop", "while True:\n    pass", None, "timeout", "did not finish within 1.5 s"),
    Hostile("regex_in_c", 'import re\nreturn str(re.match("(a+)+$", "a" * 64 + "b"))', None, "timeout", "did not finish within 1.5 s"),
    Hostile("memory_bomb", 'return str(len("x" * (8 * 1024 ** 3)))', None, "sandbox", "ran out of memory"),
    Hostile("huge_reply", 'return "x" * (40 * 1024 * 1024)', None, "sandbox", "over the 16777216-byte limit"),
    Hostile("exit_child", "raise SystemExit(0)", None, "sandbox", "SystemExit"),
    Hostile("dunder_import", 'return str(__import__("os").system("touch " + target))', "__import__() is not allowed", "sandbox", "refused os.system"),
    Hostile("importlib_os", 'import importlib\nimportlib.import_module("os").system("touch " + target)\nreturn "ok"', "import of 'importlib'", "sandbox", "refused os.system"),
    Hostile("builtins_open", 'import builtins\nreturn builtins.open("/etc/passwd").read()', "import of 'builtins'", "sandbox", "refused open"),
    Hostile("eval_code", 'return str(eval("1 + 1"))', "eval() is not allowed", "sandbox", "refused compile"),
    Hostile(
        "subclass_walk",
        'for cls in ().__class__.__bases__[0].__subclasses__():\n'
        '    if cls.__name__ == "_wrap_close":\n'
        '        cls.__init__.__globals__["system"]("touch " + target)\n'
        'return "ok"',
        "attribute '__class__' is not allowed",
        "sandbox",
        "refused",
    ),
    Hostile("frame_escape", "g = (x for x in [1])\nreturn str(sorted(g.gi_frame.f_back.f_globals))", "attribute 'gi_frame' is not allowed", "sandbox", "refused object.__getattr__"),
    Hostile("format_escape", 'return "{0.__class__.__init__.__globals__}".format(db)', "string literals may not contain '__'", "sandbox", "refused"),
    Hostile("getattr_computed", 'return str(getattr(db, "_" + "_class__"))', "getattr() needs a literal attribute name", "ok", "Session"),
    Hostile("ctypes_call", 'import ctypes\nreturn str(ctypes.CDLL(None).getpid())', "import of 'ctypes'", "sandbox", "refused ctypes.dlopen"),
    Hostile("kill_host", 'import os\nos.kill(int(target), 9)\nreturn "ok"', "import of 'os'", "sandbox", "refused os.kill"),
    Hostile("raise_limits", 'import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))\nreturn "ok"', "import of 'resource'", "sandbox", "refused resource.setrlimit"),
    Hostile("gc_objects", 'import gc\nreturn str(len(gc.get_objects()))', "import of 'gc'", "sandbox", "refused import('gc'"),
    Hostile("swallow_refusal", 'try:\n    open("/etc/passwd")\nexcept BaseException:\n    pass\nreturn "caught it"', "open() is not allowed", "sandbox", "refused open"),
]  # fmt: skip


ADD_AND_REMOVE = '''

@tool("read")
def everyday_stdlib(db: Database, day: str) -> str:
    """Ordinary standard-library work a generated tool does.

    Args:
        day: A day, written YYYY-MM-DD.
    """
    import calendar, json, re, statistics
    from datetime import datetime
    from decimal import Decimal
    parsed = datetime.strptime(day, "%Y-%m-%d")
    fee = Decimal("12.345").quantize(Decimal("0.01"))
    mean = statistics.mean([1, 2, 3])
    return json.dumps([calendar.day_name[parsed.weekday()], str(fee), mean, re.sub("-", "", day)])

@tool("write")
def add_and_remove(db: Database, sku: str) -> str:
    """Add a product and remove it again.

    Args:
        sku: The new product's sku.
    """
    db.insert("products", {"sku": sku, "title": "t", "price": 1.0, "stock": 1})
    db.delete("products", sku)
    return "ok"
'''


def hostile_tool(h: Hostile) -> str:
    body = textwrap.indent(h.body, "    ")
    return (
        f'\n\n@tool("read")\ndef {h.name}(db: Database, target: str = "") -> str:\n'
        f'    """A hostile tool.\n\n    Args:\n        target: A path, port or pid.\n    """\n'
        f"{body}\n"
    )


def make_package(tmp: Path, name: str, tools: str, models: str | None = None) -> Path:
    root = tmp / name
    shutil.copytree(FIXTURES / "toy", root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tools.py").write_text(tools)
    if models is not None:
        (root / "models.py").write_text(models)
    return root


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Domain]:
    """The toy domain plus every hostile tool, loaded with the static check bypassed."""
    tools = TOY_TOOLS + ADD_AND_REMOVE + "".join(hostile_tool(h) for h in HOSTILE)
    root = make_package(tmp_path_factory.mktemp("hostile"), "toy", tools)
    with unchecked(root) as domain:
        yield domain


@contextmanager
def unchecked(root: Path, limits: SandboxLimits = LIMITS) -> Iterator[Domain]:
    """A sandboxed domain loaded with the static check of tools.py bypassed (tests only)."""
    domain = _open(root, limits, check_gold=False, check_tools=False)
    try:
        yield domain
    finally:
        assert isinstance(domain.toolkit, SandboxToolkit)
        domain.toolkit.close()


def rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


# ----- static layer -----------------------------------------------------------------------------


@pytest.mark.parametrize("h", HOSTILE, ids=lambda h: h.name)
def test_static_check_names_the_rule_and_the_place(h: Hostile) -> None:
    source = "from maestro.domains.sdk import Database, tool\n" + hostile_tool(h)
    problems = check_tools_source(source)
    if h.static_rule is None:
        # Loops, memory and C-level hangs look like ordinary code; the run-time layer stops them.
        assert problems == []
        return
    assert problems, f"{h.name} passed the static check"
    assert all(p.file == "tools.py" for p in problems)
    assert all(p.location.startswith("line ") and " col " in p.location for p in problems)
    assert all(p.message.startswith("[") for p in problems), "each problem names its rule"
    assert any(h.static_rule in p.message for p in problems), [str(p) for p in problems]


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("from os import *", "import *"),
        ("from .models import Order\nfrom ..secrets import key", "relative import"),
        ("import json\nx = json.loads.__globals__", "'__globals__'"),
        ("def f(x):\n    return type('X', (), {})", "type() with three arguments"),
        ("class C(metaclass=type):\n    pass", "class keyword 'metaclass'"),
        ("async def f():\n    pass", "async def"),
        ("import typing\nt = typing.get_type_hints", "'get_type_hints'"),
        ("x = 'a {0[k]}'.format({'k': 1})", "format fields may not access"),
        ("def f(s):\n    return s.format(1)", ".format() is allowed only on a string literal"),
        ("x = (", "syntax error"),
        ("x = 1\n" * 100_000, "the limit is"),
    ],
)
def test_static_check_more_rules(source: str, rule: str) -> None:
    problems = check_tools_source(source, filename="gen/tools.py")
    assert any(rule in p.message for p in problems), [str(p) for p in problems]
    assert all(p.file == "gen/tools.py" for p in problems)


def test_library_and_fixture_sources_pass_the_static_check() -> None:
    folders = [library_path(d) for d in ("vetclinic", "energy", "hotel")] + [FIXTURES / "toy"]
    for folder in folders:
        assert check_tools_source((folder / "tools.py").read_text()) == [], folder
        assert check_models_source((folder / "models.py").read_text()) == [], folder


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("    def clean(self) -> str:\n        return 'x'", "fields only, not FunctionDef"),
        ("    name: str = make_default()", "may be called in a declaration"),
        ("    name: 'exec(\"1\")' = ''", "string annotation"),
        ("    name: str = 'a' * 10", "BinOp is not allowed"),
        ("    name: Annotated[str, Ref(lookup())]", "may be called"),
        # pydantic runs these in the host: a callable, or Python's backtracking regex engine
        ("    name: str = Field(json_schema_extra=print)", "Field(json_schema_extra=...)"),
        ("    model_config = ConfigDict(regex_engine='python-re')", "ConfigDict(regex_engine"),
        ("    model_config = {'regex_engine': 'python-re'}", "model_config keys must be"),
        ("    model_config = make_config", "model_config must be ConfigDict"),
    ],
)
def test_models_may_only_declare(line: str, rule: str) -> None:
    source = (
        "from typing import Annotated\nfrom pydantic import ConfigDict, Field\n"
        "from maestro.domains.sdk import Record, Ref\n\n"
        f"class Customer(Record):\n    customer_id: str\n{line}\n"
    )
    problems = check_models_source(source)
    assert any(rule in p.message for p in problems), [str(p) for p in problems]


def test_models_statements_outside_classes_are_refused() -> None:
    problems = check_models_source("import json\nprint('hi')\nfor i in []:\n    pass\n")
    assert [p.location for p in problems] == ["line 2 col 1", "line 3 col 1"]


# ----- run-time layer ---------------------------------------------------------------------------


@pytest.mark.parametrize("h", HOSTILE, ids=lambda h: h.name)
def test_sandbox_stops_it_at_run_time(h: Hostile, hostile: Domain, tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    argument = {
        "socket_connect": str(listener.getsockname()[1]),
        "kill_host": str(os.getpid()),
    }.get(h.name, str(target))
    session = hostile.start_session()
    rss_before = rss_mb()

    out = hostile.toolkit.call(session, h.name, {"target": argument})

    assert (out.status, h.name) == (h.status, h.name), out.content
    assert h.reason in out.content, out.content
    # The host is unharmed: no file, no connection, no memory, its state untouched, still served.
    assert not target.exists()
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()
    assert rss_mb() - rss_before < 64
    assert session.diff().changes == ()
    after = hostile.toolkit.call(session, "get_order", {"order_id": "O1"})
    assert after.ok and '"order_id": "O1"' in after.content


def test_cpu_limit_kills_a_call_that_burns_cpu_in_c(tmp_path: Path) -> None:
    burn = Hostile(
        "burn", 'import re\nreturn str(re.match("(a+)+$", "a" * 64 + "b"))', None, "", ""
    )
    root = make_package(tmp_path, "toy", TOY_TOOLS + hostile_tool(burn))
    limits = SandboxLimits(cpu_s=1, call_timeout_s=30)
    with unchecked(root, limits) as domain:
        started = time.monotonic()
        out = domain.toolkit.call(domain.start_session(), "burn", {})
        assert out.status == "sandbox" and "RLIMIT_CPU" in out.content, out.content
        assert time.monotonic() - started < 10
        assert domain.toolkit.call(domain.start_session(), "get_order", {"order_id": "O1"}).ok


def test_import_time_attacks_fail_the_load(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    tools = f'import os\nos.system("touch {target}")\n' + TOY_TOOLS
    root = make_package(tmp_path, "toy", tools)
    with pytest.raises(DomainLoadError) as static:
        _open(root, LIMITS, check_gold=False, check_tools=True)
    assert "tools.py:line 1 col 1: [import] import of 'os' is not allowed" in str(static.value)
    with pytest.raises(DomainLoadError) as runtime:
        _open(root, LIMITS, check_gold=False, check_tools=False)
    assert "the sandbox refused os.system" in str(runtime.value)
    assert not target.exists()


def test_a_hostile_models_file_is_never_imported_in_the_host(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    models = (FIXTURES / "toy" / "models.py").read_text() + f'\nopen("{target}", "w")\n'
    root = make_package(tmp_path, "toy", TOY_TOOLS, models=models)
    with pytest.raises(DomainLoadError) as err:
        _open(root, LIMITS, check_gold=False, check_tools=False)
    assert "models.py:line" in str(err.value) and "open() is not allowed" in str(err.value)
    assert not target.exists()


def test_a_crashed_child_is_restarted_and_the_session_survives(tmp_path: Path) -> None:
    crash = Hostile("crash", "import os\nos._exit(3)", None, "", "")
    root = make_package(tmp_path, "toy", TOY_TOOLS + hostile_tool(crash))
    with unchecked(root) as domain:
        toolkit = domain.toolkit
        assert isinstance(toolkit, SandboxToolkit)
        session = domain.start_session()
        assert toolkit.call(session, "cancel_order", {"order_id": "O1"}).ok
        first_pid = toolkit.child_pid
        out = toolkit.call(session, "crash", {})
        assert out.status == "crash" and "exited with status 3" in out.content
        order = toolkit.call(session, "get_order", {"order_id": "O1"})
        assert '"status": "cancelled"' in order.content, "the new child sees the earlier write"
        assert toolkit.child_pid not in (None, first_pid) and toolkit.restarts == 1
        pid = toolkit.child_pid
    assert pid is not None and not Path(f"/proc/{pid}").exists(), "close stops the child"


# ----- drop-in for the in-process runtime -------------------------------------------------------


@pytest.mark.parametrize("domain_id", ["vetclinic", "energy", "hotel"])
def test_library_domains_replay_identically_in_the_sandbox(domain_id: str) -> None:
    reference = load_domain(library_path(domain_id), check_gold=False)
    with load_sandboxed_domain(library_path(domain_id), check_gold=False) as domain:
        assert isinstance(domain.toolkit, Toolkit)
        assert domain.toolkit.schemas() == reference.toolkit.schemas()
        for name, spec in reference.toolkit.specs.items():
            mine = domain.toolkit.specs[name].params.model_fields
            theirs = spec.params.model_fields
            assert {k: (f.annotation, f.metadata, f.default) for k, f in mine.items()} == {
                k: (f.annotation, f.metadata, f.default) for k, f in theirs.items()
            }
        for task in reference.tasks[::10]:  # three tasks per domain keep the test short
            sandboxed, in_process = replay_gold(domain, task), replay_gold(reference, task)
            assert sandboxed.ok, sandboxed.failures
            assert sandboxed.session.state_hash() == in_process.session.state_hash()
            assert [o.content for o in sandboxed.outcomes] == [
                o.content for o in in_process.outcomes
            ]
        first = reference.toolkit.names[0]
        bad = replay_calls(domain, None, [(first, {"no_such_argument": 5}), ("nope", {})])
        assert [o.status for o in bad.outcomes] == ["invalid_call", "unknown_tool"]


def test_the_host_never_imports_tools_py(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS)
    with load_sandboxed_domain(root) as domain:
        loaded = [
            m
            for m in list(sys.modules.values())
            if getattr(m, "__file__", None) == str(root / "tools.py")
        ]
        assert loaded == []
        assert len(domain.tasks) > 0
        with pytest.raises(RuntimeError, match="runs only in the sandbox"):
            domain.toolkit.specs["get_order"].fn(None, order_id="O1")


def test_session_writes_flow_both_ways(hostile: Domain, toy: Domain) -> None:
    toolkit = hostile.toolkit
    session = hostile.start_session()
    # A host-side write (a task's initialization data does this) reaches the child.
    session.update("orders", "O1", status="shipped")
    out = toolkit.call(session, "cancel_order", {"order_id": "O1"})
    assert out.status == "tool_error" and "shipped" in out.content
    session.update("orders", "O1", status="pending")
    assert toolkit.call(session, "cancel_order", {"order_id": "O1"}).ok
    # A fork carries the sandbox's writes; each branch then goes its own way.
    branch = session.fork()
    assert toolkit.call(branch, "place_order", {"customer_id": "C1", "skus": ["P1"]}).ok
    assert branch.state_hash() != session.state_hash()
    # A host-side rollback undoes a sandboxed write, and the child follows.
    before = session.state_hash()
    with pytest.raises(KeyError), session.transaction():
        assert toolkit.call(session, "place_order", {"customer_id": "C1", "skus": ["P1"]}).ok
        raise KeyError("abandon")
    assert session.state_hash() == before
    again = toolkit.call(session, "place_order", {"customer_id": "C1", "skus": ["P1"]})
    assert again.ok
    # The same calls in process give the same state.
    reference = toy.start_session()
    for name, args in [
        ("cancel_order", {"order_id": "O1"}),
        ("place_order", {"customer_id": "C1", "skus": ["P1"]}),
    ]:
        assert toy.toolkit.call(reference, name, args).ok
    assert reference.state_hash() == session.state_hash()


def test_a_closed_session_refuses_writes_as_in_process(hostile: Domain, toy: Domain) -> None:
    mine, theirs = hostile.start_session(), toy.start_session()
    mine.closed = theirs.closed = True
    a = hostile.toolkit.call(mine, "cancel_order", {"order_id": "O1"})
    b = toy.toolkit.call(theirs, "cancel_order", {"order_id": "O1"})
    assert (a.status, a.content) == (b.status, b.content)


def test_future_annotations_and_aliases_resolve_in_the_host(tmp_path: Path) -> None:
    tools = (
        "from __future__ import annotations\nfrom typing import Literal\n"
        + TOY_TOOLS
        + '\n\nStatus = Literal["pending", "shipped"]\n\n'
        + '@tool("read")\ndef by_status(db: Database, status: Status) -> list:\n'
        + '    """Orders with a status.\n\n    Args:\n        status: The status.\n    """\n'
        + '    return db.find("orders", status=status)\n'
    )
    root = make_package(tmp_path, "toy", tools)
    with load_sandboxed_domain(root, check_gold=False) as domain:
        schema = next(s for s in domain.toolkit.schemas() if s["function"]["name"] == "by_status")
        assert schema["function"]["parameters"]["properties"]["status"]["enum"] == [
            "pending",
            "shipped",
        ]
        out = domain.toolkit.call(domain.start_session(), "by_status", {"status": "pending"})
        assert out.ok and "O1" in out.content


def test_tools_the_source_does_not_declare_fail_the_load(tmp_path: Path) -> None:
    hidden = textwrap.indent(hostile_tool(Hostile("hidden", 'return "x"', None, "", "")), "    ")
    root = make_package(tmp_path, "toy", TOY_TOOLS + "\n\nif True:\n" + hidden)
    with pytest.raises(DomainLoadError, match="other tools than the source declares"):
        _open(root, LIMITS, check_gold=False, check_tools=True)


def test_the_child_runs_with_its_limits_filters_and_own_network(hostile: Domain) -> None:
    toolkit = hostile.toolkit
    assert isinstance(toolkit, SandboxToolkit)
    ready = toolkit.start()
    pid = toolkit.child_pid
    limits = Path(f"/proc/{pid}/limits").read_text()
    assert f"Max address space         {LIMITS.memory_mb * 2**20}" in limits
    assert "Max file size             0" in limits
    assert "Max processes             0" in limits
    status = Path(f"/proc/{pid}/status").read_text()
    if ready["seccomp"] == "seccomp":
        assert "Seccomp:\t2" in status and "Seccomp_filters:\t2" in status
    else:
        assert ready["seccomp"].startswith("unavailable: ")
    if ready["network"] == "namespace":
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    else:
        assert ready["network"].startswith("unavailable: ")


def test_a_record_added_and_deleted_in_one_call_leaves_what_it_does_in_process(
    hostile: Domain,
) -> None:
    session = hostile.start_session()
    for _ in range(2):  # the second call finds the mirror in step with the host
        out = hostile.toolkit.call(session, "add_and_remove", {"sku": "P9"})
        assert out.ok, out.content
    expected = hostile.start_session()
    expected.insert("products", {"sku": "P9", "title": "t", "price": 1.0, "stock": 1})
    expected.delete("products", "P9")
    assert session.touched() == expected.touched() == {("products", "P9")}
    assert session.state_hash() == expected.state_hash() == hostile.initial.state_hash()


def test_an_import_error_in_tools_is_a_load_problem(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS + '\nraise ValueError("half-written")\n')
    with pytest.raises(DomainLoadError, match=r"import failed: ValueError: half-written"):
        _open(root, LIMITS, check_gold=False, check_tools=True)


def test_a_closed_toolkit_answers_and_does_not_restart(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS)
    with load_sandboxed_domain(root, LIMITS, check_gold=False) as domain:
        toolkit = domain.toolkit
        assert isinstance(toolkit, SandboxToolkit)
    out = toolkit.call(domain.start_session(), "get_order", {"order_id": "O1"})
    assert out.status == "sandbox" and "closed" in out.content
    assert toolkit.child_pid is None


def test_a_killed_child_has_its_successor_started_in_the_background(hostile: Domain) -> None:
    toolkit = hostile.toolkit
    assert isinstance(toolkit, SandboxToolkit)
    session = hostile.start_session()
    assert toolkit.call(session, "read_passwd", {}).status == "sandbox"
    spare = toolkit._spare
    assert spare is not None, "the successor starts right after the kill"
    spare.thread.join(30)
    assert spare.error is None and spare.process.alive
    assert toolkit.call(session, "get_order", {"order_id": "O1"}).ok
    assert toolkit.child_pid == spare.process.pid


def test_everyday_standard_library_work_runs_in_the_sandbox(hostile: Domain) -> None:
    out = hostile.toolkit.call(hostile.start_session(), "everyday_stdlib", {"day": "2026-03-15"})
    assert out.ok, out.content
    assert out.content == '["Sunday", "12.34", 2, "20260315"]'


def test_a_parameter_type_defined_in_tools_py_is_a_load_problem(tmp_path: Path) -> None:
    tools = TOY_TOOLS + (
        "\n\nclass Window:\n    pass\n\n\n"
        '@tool("read")\ndef in_window(db: Database, window: Window) -> str:\n'
        '    """Orders in a window.\n\n    Args:\n        window: The window.\n    """\n'
        '    return ""\n'
    )
    root = make_package(tmp_path, "toy", tools)
    with pytest.raises(DomainLoadError) as err:
        _open(root, LIMITS, check_gold=False, check_tools=True)
    at = tools.index("Window) -> str")
    line, col = tools[:at].count("\n") + 1, at - tools.rindex("\n", 0, at)
    assert f"tools.py:line {line} col {col}: in_window: the type of 'window'" in str(err.value)
