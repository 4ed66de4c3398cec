"""Hostile code, with the static check bypassed: every class of attack on the host is stopped by
the sandbox's run-time layers, and each test proves nothing reached the host (no marker file;
the host's pid, CPU affinity, priority and session unchanged; no host memory; no exception).

Classes (issue 11): the host executing package code (annotations, defaults, decorator
arguments, class bodies, regexes); the child acting on the host (signals, pidfd, affinity,
priority, files, network); the host believing the child (forged, stale, extra or oversized
frames, made-up statuses, writes from READ tools, undeclared tables, int keys, invalid
records, bulk writes); inputs that raised in the host (a lone surrogate); the audit hook's
trusted-caller check (borrowed through functools.partial); memory errors told by their text.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from maestro.domains import Domain, DomainLoadError, Toolkit
from maestro.domains.sandbox import SandboxLimits, SandboxToolkit, check_tools_source
from tests.domains.sandbox_support import (
    TOY_MODELS,
    TOY_TOOLS,
    Host,
    make_package,
    tool_source,
    unchecked,
)


@dataclass(frozen=True)
class Hostile:
    """One attack: its body, what the static check says, what the sandbox does at run time."""

    name: str
    body: str
    static_rule: str | None  # text in a static problem; None when only run time stops it
    status: str  # outcome status with the static check bypassed
    reason: str  # text in the outcome's content
    kind: str = "read"


HOSTILE = [
    # files, processes, network, the interpreter
    Hostile("read_passwd", 'return open("/etc/passwd").read()', "open() is not allowed", "sandbox", "refused open('/etc/passwd'"),
    Hostile("write_file", 'open(target, "w").write("pwned")\nreturn "ok"', "open() is not allowed", "sandbox", "refused open("),
    Hostile("pathlib_write", 'import pathlib\npathlib.Path(target).write_text("pwned")\nreturn "ok"', "import of 'pathlib'", "sandbox", "refused"),
    Hostile("os_system", 'import os\nos.system("touch " + target)\nreturn "ok"', "import of 'os'", "sandbox", "refused os.system"),
    Hostile("subprocess_run", 'import subprocess\nsubprocess.run(["touch", target])\nreturn "ok"', "import of 'subprocess'", "sandbox", "refused"),
    Hostile("socket_connect", 'import socket\nsocket.create_connection(("127.0.0.1", int(target)), timeout=1)\nreturn "ok"', "import of 'socket'", "sandbox", "refused"),
    Hostile("fork_bomb", 'import os\nwhile True:\n    os.fork()', "import of 'os'", "sandbox", "refused os.fork"),
    Hostile("thread_spawn", 'import threading\nthreading.Thread(target=threading.Event().wait).start()\nreturn "ok"', "import of 'threading'", "sandbox", "thread"),
    Hostile("dunder_import", 'return str(__import__("os").system("touch " + target))', "__import__() is not allowed", "sandbox", "refused os.system"),
    Hostile("importlib_os", 'import importlib\nimportlib.import_module("os").system("touch " + target)\nreturn "ok"', "import of 'importlib'", "sandbox", "refused os.system"),
    Hostile("builtins_open", 'import builtins\nreturn builtins.open("/etc/passwd").read()', "import of 'builtins'", "sandbox", "refused open"),
    Hostile("eval_code", 'return str(eval("1 + 1"))', "eval() is not allowed", "sandbox", "refused exec"),
    Hostile(
        "subclass_walk",
        'for cls in ().__class__.__bases__[0].__subclasses__():\n'
        '    if cls.__name__ == "_wrap_close":\n'
        '        cls.__init__.__globals__["system"]("touch " + target)\n'
        'return "ok"',
        "attribute '__class__' is not allowed",
        "sandbox",
        "refused os.system",
    ),
    Hostile("frame_escape", "g = (x for x in [1])\nreturn str(sorted(g.gi_frame.f_back.f_globals))", "attribute 'gi_frame' is not allowed", "sandbox", "refused object.__getattr__"),
    Hostile("getattr_computed", 'return str(getattr(db, "_" + "_class__"))', "getattr() needs a literal attribute name", "ok", "Session"),
    Hostile("ctypes_call", 'import ctypes\nreturn str(ctypes.CDLL(None).getpid())', "import of 'ctypes'", "sandbox", "refused import('ctypes'"),
    Hostile("kill_host", 'import os\nos.kill(int(target), 9)\nreturn "ok"', "import of 'os'", "sandbox", "refused os.kill"),
    Hostile("raise_limits", 'import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))\nreturn "ok"', "import of 'resource'", "sandbox", "refused resource.setrlimit"),
    Hostile("gc_objects", 'import gc\nreturn str(len(gc.get_objects()))', "import of 'gc'", "sandbox", "refused"),
    Hostile("swallow_refusal", 'try:\n    open("/etc/passwd")\nexcept BaseException:\n    pass\nreturn "caught it"', "open() is not allowed", "sandbox", "refused open"),
    # the child acting on the host through calls no audit event covers: the kernel stops them
    Hostile("pidfd_kill_host", 'import os, signal\nfd = os.pidfd_open(int(target))\nsignal.pidfd_send_signal(fd, 9)\nreturn "ok"', "import of 'os'", "sandbox", "seccomp"),
    Hostile("affinity_host", 'import os\nos.sched_setaffinity(int(target), {0})\nreturn "ok"', "import of 'os'", "sandbox", "seccomp"),
    Hostile("priority_host", 'import os\nos.setpriority(os.PRIO_PROCESS, int(target), 19)\nreturn "ok"', "import of 'os'", "sandbox", "seccomp"),
    Hostile("new_session", 'import os\nos.setsid()\nreturn "ok"', "import of 'os'", "sandbox", "seccomp"),
    # the audit hook trusts no caller: neither a trusted function's nor a partial over C
    Hostile("borrow_watchdog", 'from maestro.domains import watchdog\nwatchdog._set_async_exc(0, None)\nreturn "ok"', "private", "sandbox", "refused import('ctypes'"),
    Hostile("borrow_partial", 'import ctypes, functools\nf = functools.partial(ctypes.pythonapi.PyThreadState_SetAsyncExc, 0, None)\nreturn str(f())', "import of 'ctypes'", "sandbox", "refused import('ctypes'"),
    # raw memory: ctypes' types, found by walking the class tree, make a pointer that reads and
    # writes any address with no audit event; the child never loads ctypes, so none is found
    Hostile(
        "ctypes_pointer",
        "seen, todo = set(), [object]\n"
        "while todo:\n"
        "    for sub in type.__subclasses__(todo.pop()):\n"
        "        if sub not in seen:\n"
        "            seen.add(sub)\n"
        "            todo.append(sub)\n"
        'found = {c.__name__: c for c in seen if c.__module__ == "_ctypes"}\n'
        "if not found:\n"
        '    return "no ctypes type in reach"\n'
        "class Byte(found['_SimpleCData']):\n"
        "    _type_ = 'B'\n"
        "class Pointer(found['_Pointer']):\n"
        "    _type_ = Byte\n"
        "cell = Byte(65)\n"
        "Pointer(cell)[0] = 66\n"
        'return f"wrote memory: {cell.value} {Pointer(cell)[4096]}"',
        "attribute '__subclasses__' is not allowed",
        "ok",
        "no ctypes type in reach",
    ),
    # limits
    Hostile("infinite_loop", "while True:\n    pass", None, "timeout", "did not finish within 1.5 s"),
    Hostile("regex_in_c", 'import re\nreturn str(re.match("(a+)+$", "a" * 64 + "b"))', None, "timeout", "did not finish within 1.5 s"),
    Hostile("memory_bomb", 'return str(len("x" * (8 * 1024 ** 3)))', None, "sandbox", "ran out of memory (the sandbox allows 1024 MiB)"),
    Hostile("huge_reply", 'return "x" * (40 * 1024 * 1024)', None, "sandbox", "over the 16777216-byte limit"),
    Hostile("exit_child", "raise SystemExit(0)", None, "sandbox", "SystemExit"),
    # memory errors are told by a typed signal, not by text
    Hostile("says_memory_error", 'return "Error: says_memory_error failed: MemoryError: no"', None, "ok", "MemoryError"),
    # what the host must not believe
    Hostile("read_tool_writes", 'db.update("orders", "O1", status="cancelled")\nreturn "ok"', None, "sandbox", "a READ tool's call wrote records"),
    Hostile(
        "many_writes",
        'for i in range(1001):\n    db.insert("products", {"sku": f"M{i}", "title": "t", "price": 1.0, "stock": 1})\nreturn "ok"',
        None, "sandbox", "wrote 1001 records; the sandbox allows 1000", kind="write",
    ),
    Hostile(
        "forged_frame",
        'import os, sys\nfrom maestro.domains.sandbox.protocol import encode\n'
        'os.write(int(sys.argv[2]), encode({"seq": 1, "nonce": "0" * 32, "status": "ok"}, "forged"))\nreturn "real"',
        "import of 'os'", "sandbox", "a reply to another request",
    ),
    Hostile("garbage_bytes", 'import os, sys\nos.write(int(sys.argv[2]), b"garbage!" * 4)\nreturn "real"', "import of 'os'", "sandbox", "not a frame"),
    Hostile("lone_surrogate", 'return "\\ud800"', None, "ok", "\ufffd"),
]  # fmt: skip


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Domain]:
    """The toy domain plus every hostile tool, loaded with the static check bypassed."""
    tools = TOY_TOOLS + "".join(tool_source(h.name, h.body, h.kind) for h in HOSTILE)
    root = make_package(tmp_path_factory.mktemp("hostile"), "toy", tools)
    with unchecked(root) as domain:
        yield domain


def _argument(h: Hostile, tmp_path: Path, listener: socket.socket) -> str:
    if h.name == "socket_connect":
        return str(listener.getsockname()[1])
    if h.name in ("kill_host", "pidfd_kill_host", "affinity_host", "priority_host"):
        return str(os.getpid())
    return str(tmp_path / "pwned")


# ----- the static layer: a linter with good messages --------------------------------------------


@pytest.mark.parametrize("h", [h for h in HOSTILE if h.static_rule], ids=lambda h: h.name)
def test_the_static_check_names_the_rule_and_the_place(h: Hostile) -> None:
    source = "from maestro.domains.sdk import Database, tool\n" + tool_source(h.name, h.body)
    problems = check_tools_source(source)
    assert problems, f"{h.name} passed the static check"
    assert all(p.location.startswith("line ") and " col " in p.location for p in problems)
    assert all(p.message.startswith("[") for p in problems), "each problem names its rule"
    assert any(h.static_rule in p.message for p in problems), [str(p) for p in problems]


# ----- the run-time layers ----------------------------------------------------------------------


@pytest.mark.parametrize("h", HOSTILE, ids=lambda h: h.name)
def test_the_sandbox_stops_it_and_nothing_reaches_the_host(
    h: Hostile, hostile: Domain, tmp_path: Path
) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    session = hostile.start_session()
    host = Host([tmp_path / "pwned"])

    out = hostile.toolkit.call(session, h.name, {"target": _argument(h, tmp_path, listener)})

    assert (out.status, h.name) == (h.status, h.name), out.content
    assert h.reason in out.content, out.content
    assert out.arguments == {"target": _argument(h, tmp_path, listener)}, "the host's record"
    host.assert_unharmed(session, hostile.initial.state_hash())
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):
        listener.accept()  # no connection reached the host's listener
    listener.close()
    after = hostile.toolkit.call(session, "get_order", {"order_id": "O1"})
    assert after.ok and '"order_id": "O1"' in after.content, after.content


def test_a_forged_frame_never_answers_another_sessions_call(hostile: Domain) -> None:
    first, second = hostile.start_session(), hostile.start_session()
    assert hostile.toolkit.call(first, "forged_frame", {}).status == "sandbox"
    out = hostile.toolkit.call(second, "get_order", {"order_id": "O2"})
    assert out.ok and '"order_id": "O2"' in out.content, "no stale or forged reply"


def test_a_frame_sent_after_the_reply_fails_the_next_call(tmp_path: Path) -> None:
    # The tool leaves a signal handler behind that writes to the pipe; the test rings it while
    # the child waits for its next request (a finalizer or a timer would do the same).
    late = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGUSR1, lambda *_: os.write(int(sys.argv[2]), b'late frame'))\n"
        'return "ok"'
    )
    root = make_package(tmp_path, "toy", TOY_TOOLS + tool_source("late", late))
    with unchecked(root) as domain:
        session = domain.start_session()
        toolkit = domain.toolkit
        assert isinstance(toolkit, SandboxToolkit)
        assert toolkit.call(session, "late", {}).ok
        assert toolkit.child_pid is not None
        os.kill(toolkit.child_pid, signal.SIGUSR1)
        time.sleep(0.5)
        host = Host([])
        out = toolkit.call(session, "get_order", {"order_id": "O1"})
        assert out.status == "sandbox" and "a frame nobody asked for" in out.content, out.content
        host.assert_unharmed(session)
        assert toolkit.call(session, "get_order", {"order_id": "O1"}).ok


def test_arguments_that_raised_in_the_host_are_typed_outcomes(hostile: Domain) -> None:
    session = hostile.start_session()
    host = Host([])
    for arguments, status in [
        ({"order_id": "\ud800"}, "invalid_call"),
        ('{"order_id": "\\ud800"}', "invalid_call"),
        ({"order_id": {1, 2}}, "invalid_call"),
        ({"order_id": float("nan")}, "invalid_call"),
        ("[1, 2]", "invalid_call"),
        ("{not json", "invalid_call"),
        ({"order_id": "O1", "extra": object()}, "invalid_call"),
    ]:
        out = hostile.toolkit.call(session, "get_order", arguments)  # type: ignore[arg-type]
        assert out.status == status, (arguments, out.content)
    for name in ("no_such_tool", "\ud800", ""):
        assert hostile.toolkit.call(session, name, {}).status == "unknown_tool"
    host.assert_unharmed(session)


# ----- a compromised child: its replies are checked, field by field ------------------------------

#: tools.py module code that, at load time (when frames are still readable), finds the worker
#: and makes it lie in well-framed replies, the strongest position a child can be in.
LIAR = """
import sys as _sys

def _worker():
    frame = _sys._getframe()
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if type(candidate).__name__ == "_Worker":
            return candidate
        frame = frame.f_back

_w = _worker()
_real = _w.handle
_LIES = {
    "lie_status": lambda m, t, d: ({"status": "unknown_tool"}, t, d),
    "lie_no_status": lambda m, t, d: ({}, t, d),
    "lie_arguments": lambda m, t, d: ({**m, "arguments": {"forged": True}}, t, d),
    "lie_int_key": lambda m, t, d: (m, t, [["orders", 5, {"order_id": "O9"}]]),
    "lie_table": lambda m, t, d: (m, t, [["secrets", "k", {"k": "v"}]]),
    "lie_record": lambda m, t, d: (m, t, [["orders", "O1", {"order_id": "O1", "status": "x"}]]),
    "lie_key_field": lambda m, t, d: (m, t, [["customers", "C1", {"customer_id": "C2", "name": "n", "email": "e"}]]),
    "lie_failed_write": lambda m, t, d: ({"status": "tool_error"}, t, [["customers", "C1", None]]),
}

def _handle(frame):
    meta, text, data = _real(frame)
    lie = _LIES.get(frame.meta.get("name"))
    return lie(meta, text, data) if lie else (meta, text, data)

_w.handle = _handle
"""


@pytest.fixture(scope="module")
def liar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Domain]:
    names = ["lie_status", "lie_no_status", "lie_arguments", "lie_int_key", "lie_table"]
    names += ["lie_record", "lie_key_field", "lie_failed_write"]
    tools = TOY_TOOLS + LIAR + "".join(tool_source(n, 'return "ok"', "write") for n in names)
    root = make_package(tmp_path_factory.mktemp("liar"), "toy", tools)
    with unchecked(root) as domain:
        yield domain


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("lie_status", "invalid reply"),
        ("lie_no_status", "without a status"),
        ("lie_arguments", "invalid reply"),
        ("lie_int_key", "key that is not a non-empty string"),
        ("lie_table", "which models.py does not declare"),
        ("lie_record", "refused the call's writes"),
        ("lie_key_field", "another key"),
        ("lie_failed_write", "cannot write"),
    ],
)
def test_a_lying_child_is_not_believed(liar: Domain, name: str, reason: str) -> None:
    session = liar.start_session()
    host = Host([])
    out = liar.toolkit.call(session, name, {"target": "x"})
    assert out.status == "sandbox" and reason in out.content, out.content
    assert out.arguments == {"target": "x"} and out.kind == "write"
    host.assert_unharmed(session, liar.initial.state_hash())
    assert liar.toolkit.call(session, "get_order", {"order_id": "O1"}).ok


# ----- the host never executes package code -----------------------------------------------------

#: Each rebinds a name the host once evaluated (Field, Ref, a default, a decorator argument,
#: a class body) to something reachable through an allowed module.
LOAD_TIME = [
    pytest.param(
        "models.py",
        "import dataclasses\n\nclass Evil:\n    x = dataclasses.builtins.exec(\"open(MARKER, 'w')\")\n",
        id="class_body_exec",
    ),
    pytest.param(
        "tools.py",
        "import dataclasses\nfrom typing import Annotated\nRef = dataclasses.inspect.os.system\n"
        + tool_source("t", 'return ""', params='x: Annotated[str, Ref("touch " + MARKER)] = ""'),
        id="annotation_ref_rebound",
    ),
    pytest.param(
        "tools.py",
        "import dataclasses\n"
        + tool_source(
            "t", 'return ""', params="x: str = dataclasses.builtins.open(MARKER, 'w').name"
        ),
        id="default_opens_a_file",
    ),
    pytest.param(
        "tools.py",
        "import dataclasses\n\n\n@tool(dataclasses.inspect.os.system('touch ' + MARKER) and 'read')\n"
        'def t(db: Database) -> str:\n    """T."""\n    return \'\'\n',
        id="decorator_argument",
    ),
    pytest.param(
        "models.py",
        "from pydantic import Field\n\nclass Leak(Record):\n"
        "    leak: str = Field('', description=open('/etc/passwd').readline())\n",
        id="passwd_into_a_schema",
    ),
    pytest.param(
        "models.py",
        "import dataclasses\nField = dataclasses.builtins.exec\nx = Field(\"open(MARKER, 'w')\")\n",
        id="field_rebound_to_exec",
    ),
]


@pytest.mark.parametrize(("file", "code"), LOAD_TIME)
def test_load_time_attacks_run_only_in_the_child(file: str, code: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    code = code.replace("MARKER", repr(str(marker)))
    models = TOY_MODELS + "\n" + code if file == "models.py" else TOY_MODELS
    tools = TOY_TOOLS + "\n" + code if file == "tools.py" else TOY_TOOLS
    root = make_package(tmp_path, "toy", tools, models)
    host = Host([marker])
    with pytest.raises(DomainLoadError) as err, unchecked(root):
        pass
    assert "the sandbox refused" in str(err.value), str(err.value)
    assert "root:" not in str(err.value)
    host.assert_unharmed()


def test_a_regex_that_hangs_at_load_time_stops_at_the_startup_deadline(tmp_path: Path) -> None:
    tools = TOY_TOOLS + '\nimport re\nHANG = re.match("(a+)+$", "a" * 64 + "b")\n'
    root = make_package(tmp_path, "toy", tools)
    host = Host([])
    started = time.monotonic()
    limits = SandboxLimits(startup_timeout_s=3)
    with (
        pytest.raises(DomainLoadError, match="no answer from the sandbox child"),
        unchecked(root, limits),
    ):
        pass
    assert time.monotonic() - started < 20
    host.assert_unharmed()


def test_the_host_holds_no_package_code(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS)
    with unchecked(root) as domain:
        files = {getattr(m, "__file__", None) for m in list(__import__("sys").modules.values())}
        assert str(root / "tools.py") not in files and str(root / "models.py") not in files
        assert isinstance(domain.toolkit, SandboxToolkit) and isinstance(domain.toolkit, Toolkit)
        model = domain.tables["orders"].model
        assert model is not None and "maestro_domain" not in model.__module__  # the host's own
        with pytest.raises(RuntimeError, match="runs only in the sandbox"):
            domain.toolkit.specs["get_order"].fn(None, order_id="O1")


def test_a_file_looked_up_at_load_time_is_stopped_by_the_kernel(tmp_path: Path) -> None:
    # linecache stats the file before opening it, and the stat raises no audit event: the
    # seccomp allowlist (no path lookups) kills the child, and the load fails.
    models = TOY_MODELS + (
        "\nimport linecache\nfrom pydantic import Field\n\n\nclass Leak(Record):\n"
        '    key_field: ClassVar[str] = "sku"\n    sku: str\n'
        "    leak: str = Field('', description=linecache.getline('/etc/passwd', 1))\n\n\n"
        'TABLES["leaks"] = Leak\n'
    )
    root = make_package(tmp_path, "toy", TOY_TOOLS, models)
    host = Host([])
    with pytest.raises(DomainLoadError, match="seccomp killed it") as err, unchecked(root):
        pass
    assert "root:" not in str(err.value)
    host.assert_unharmed()


def test_250k_inserts_in_one_call_do_not_grow_the_host(tmp_path: Path) -> None:
    bulk = (
        "for i in range(250_000):\n"
        '    db.insert("products", {"sku": f"B{i}", "title": "t", "price": 1.0, "stock": 1})\n'
        'return "ok"'
    )
    root = make_package(tmp_path, "toy", TOY_TOOLS + tool_source("bulk", bulk, "write"))
    limits = SandboxLimits(call_timeout_s=120, memory_mb=2048)
    with unchecked(root, limits) as domain:
        session = domain.start_session()
        domain.toolkit.start()
        host = Host([])
        out = domain.toolkit.call(session, "bulk", {})
        assert out.status == "sandbox" and "over the 1048576-byte limit" in out.content, out.content
        host.assert_unharmed(session, domain.initial.state_hash())
