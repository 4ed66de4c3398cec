"""The sandbox child: loads an untrusted package's tools and runs calls the host sends.

Started by the host as ``python -I -B -m maestro.domains.sandbox.child IN_FD OUT_FD``. In order:
leave the network namespace (while still single-threaded); load models.py, the base state and
tools.py's compiled code; warm up; lower the resource limits; load the first seccomp filter and
the audit hook (load phase); run tools.py's module code; move the hook to serving (deny by
default) and load the second filter; then serve calls until the host closes the pipe. Each call runs on a mirror of the host's session, kept in step by the writes the host
sends; the reply carries the outcome and the writes the call made.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import resource
import sys
import threading
import traceback
import types
import typing
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict
from datetime import date, datetime
from pathlib import Path
from types import CodeType
from typing import Any

from pydantic import create_model

from maestro.domains import loader, store, watchdog
from maestro.domains.errors import Problem
from maestro.domains.runtime import Toolkit, ToolOutcome, spec_from_function, tool_functions
from maestro.domains.sandbox import seccomp
from maestro.domains.sandbox.protocol import read_blocking, write_blocking
from maestro.domains.sandbox.static import STDLIB_ALLOWED
from maestro.domains.store import Session, State, TableSpec

CLONE_NEWNET = 0x40000000
MAX_MIRRORS = 256

#: Audit events tools legitimately raise; every other event is refused once the hook is in.
ALLOWED_EVENTS = frozenset({"builtins.id", "time.sleep"})


class SandboxViolation(BaseException):
    """Raised by the audit hook into the code that tried a refused operation.

    A ``BaseException``, so a tool's ``except Exception`` does not swallow it; a tool that
    catches it anyway is still reported, because the hook records every refusal.
    """


class _Runtime:
    """What the child serves: the toolkit, the base state, and one mirror per host session."""

    def __init__(
        self,
        toolkit: Toolkit,
        state: State,
        clock: datetime | None,
        package: str,
        code: CodeType,
    ) -> None:
        self.toolkit = toolkit
        self.package = package
        self.code = code
        self.state = state
        self.clock = clock
        self.mirrors: OrderedDict[int, Session] = OrderedDict()
        self.violations: list[str] = []
        self.memory_mb = 0
        self.schemas: list[dict[str, Any]] = []
        self.threads = 0


def main(argv: list[str]) -> int:
    """Serve one host; returns the exit status."""
    in_fd, out_fd = int(argv[1]), int(argv[2])
    init = read_blocking(in_fd)
    if init is None:
        return 2
    network = _leave_network()
    problems: list[Problem] = []
    runtime = _load_trusted(init, problems)
    if runtime is None:
        return _refuse_start(out_fd, problems)
    limits = init["limits"]
    runtime.memory_mb = int(limits["memory_mb"])
    _warm_up()
    # From here on untrusted code may run: nothing it prints reaches the host's terminal.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    _lower_limits(limits)
    serving_filter = seccomp.Filter("serve")
    kernel = seccomp.Filter("load").load()
    serve = _install_audit_hook(
        runtime.violations, [init["root"], *sys.path], serving_filter.load.__code__
    )
    toolkit = _load_tools(init, runtime, problems)
    if toolkit is None or runtime.violations:
        problems += [Problem("tools.py", "loading", v) for v in runtime.violations]
        return _refuse_start(out_fd, problems)
    runtime.toolkit = toolkit
    _warm_up_toolkit(runtime)
    serve()
    if kernel == "seccomp":
        kernel = serving_filter.load()
    # With the serving filter in, the kernel refuses new threads; without it they are counted.
    runtime.threads = -1 if kernel == "seccomp" else _thread_count()
    write_blocking(
        out_fd,
        {
            "ok": True,
            "schemas": runtime.schemas,
            "state_hash": runtime.state.state_hash(),
            "network": network,
            "seccomp": kernel,
            "cpu_s": _cpu_used(),
        },
    )
    while True:
        request = read_blocking(in_fd)
        if request is None or request.get("op") == "exit":
            return 0
        write_blocking(out_fd, _serve(runtime, request))


def _refuse_start(out_fd: int, problems: list[Problem]) -> int:
    found = [[p.file, p.location, p.message] for p in problems]
    write_blocking(out_fd, {"ok": False, "problems": found})
    return 1


# ----- before untrusted code ---------------------------------------------------------------------


def _leave_network() -> str:
    """Move into a fresh network namespace (only a downed loopback); say how it went."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) == 0:
            return "namespace"
        return f"unavailable: unshare: {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as exc:
        return f"unavailable: {exc}"


def _load_trusted(init: dict[str, Any], problems: list[Problem]) -> _Runtime | None:
    """models.py (declarations only, checked), the base state, and tools.py compiled."""
    root = Path(init["root"])
    # tools.py's imports find these loaded (no import event); _strptime is what
    # datetime.strptime imports on its first call.
    for module in [*sorted(STDLIB_ALLOWED), "_strptime"]:
        importlib.import_module(module)
    try:
        package = loader._make_package(root, init["domain_id"])
        specs = loader._load_models(root, package, problems)
        if specs is None:
            return None
        tables = {name: dict(rows) for name, rows in init["tables"].items()}
        state = State(tables, {n: TableSpec(n, s.model, s.key_field) for n, s in specs.items()})
        path = root / "tools.py"
        code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
    except SyntaxError as exc:
        problems.append(Problem("tools.py", f"line {exc.lineno}", f"syntax error: {exc.msg}"))
        return None
    except Exception as exc:
        problems.append(Problem("tools.py", "", f"sandbox load failed: {exc!r}"))
        return None
    clock = datetime.fromisoformat(init["clock"]) if init.get("clock") else None
    return _Runtime(Toolkit([]), state, clock, package, code)


def _warm_up() -> None:
    """Run the trusted paths once, so lazy imports and caches happen before the hook."""
    probe = create_model("probe", day=(date, ...), n=(int, 0))
    probe.model_json_schema()
    probe.model_validate_json('{"day": "2026-01-01"}')
    token = watchdog.default_watchdog().arm(3600.0)  # starts the watchdog thread now
    watchdog.default_watchdog().disarm(token)
    watchdog._set_async_exc(0, None)  # resolves the C symbol now; thread 0 does not exist
    _cpu_used()


def _lower_limits(limits: dict[str, Any]) -> None:
    memory = int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # The host raises the soft CPU limit before each call (prlimit): CPU of one call is bounded.
    cpu = int(_cpu_used() + float(limits["cpu_s"])) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.RLIM_INFINITY))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    nproc = int(limits["max_processes"])
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


# ----- untrusted code, under the hook ------------------------------------------------------------


def _load_tools(init: dict[str, Any], runtime: _Runtime, problems: list[Problem]) -> Toolkit | None:
    """Run tools.py's module code and collect its tools (in the hook's load phase)."""
    name = f"{runtime.package}.tools"
    module = types.ModuleType(name)
    module.__file__ = str(Path(init["root"]) / "tools.py")
    module.__package__ = runtime.package
    sys.modules[name] = module
    try:
        _exec_tools(runtime.code, module)
        specs = [spec_from_function(fn) for fn in tool_functions(module)]
        return Toolkit(specs)
    except SandboxViolation:
        return None
    except Exception as exc:
        problems.append(Problem("tools.py", "", f"import failed: {type(exc).__name__}: {exc}"))
        return None


def _exec_tools(code: CodeType, module: types.ModuleType) -> None:
    exec(code, module.__dict__)


def _warm_up_toolkit(runtime: _Runtime) -> None:
    session = runtime.state.session(clock=runtime.clock)
    name = runtime.toolkit.names[0]
    runtime.toolkit.call(session, name, "{not json")
    runtime.toolkit.call(session, name, {"no_such_argument": 1})
    runtime.schemas = runtime.toolkit.schemas()
    runtime.state.state_hash()


#: While tools.py loads, these kinds of operation are refused (everything else is allowed, so
#: imports, pydantic and typing work); once it has loaded, everything is refused but a few.
_LOAD_REFUSED = (
    "_thread.", "ctypes.", "ftplib.", "gc.", "http.", "imaplib.", "mmap.", "os.", "pickle.",
    "poplib.", "pty.", "resource.", "shutil.", "signal.", "smtplib.", "socket.", "sqlite3.",
    "subprocess.", "sys.addaudithook", "sys.settrace", "sys.setprofile", "telnetlib.",
    "urllib.", "webbrowser.", "winreg.",
)  # fmt: skip
_LOAD_ALLOWED_OS = frozenset({"os.listdir", "os.scandir"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _install_audit_hook(
    violations: list[str], read_roots: list[str], seccomp_load: CodeType
) -> Callable[[], None]:
    """Install the hook in its load phase; returns the function that moves it to serving."""
    trusted: dict[str, frozenset[CodeType]] = {
        # The watchdog interrupts a tool past its deadline through ctypes, and the serving
        # seccomp filter is loaded through it; nothing else may call C.
        "ctypes.call_function": frozenset({watchdog._set_async_exc.__code__, seccomp_load}),
        # typing evaluates string annotations (``from __future__ import annotations``).
        "compile": frozenset({typing.ForwardRef.__init__.__code__}),
        "exec": frozenset({typing.ForwardRef._evaluate.__code__, _exec_tools.__code__}),
        # Counting the process's threads after each call.
        "os.listdir": frozenset({_thread_count.__code__}),
    }
    roots = tuple(os.path.realpath(r) + os.sep for r in read_roots if r)
    loading = [True]
    inside = threading.local()

    def allowed(event: str, args: tuple[Any, ...]) -> bool:
        if event in ALLOWED_EVENTS:
            return True
        codes = trusted.get(event)
        if codes is not None and sys._getframe(2).f_code in codes:
            return True
        if not loading[0]:
            return False
        if event == "open":
            return _readonly_under(args, roots)
        return event in _LOAD_ALLOWED_OS or not event.startswith(_LOAD_REFUSED)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if getattr(inside, "active", False):
            return  # sys._getframe inside the hook raises its own event
        inside.active = True
        try:
            if allowed(event, args):
                return
        finally:
            inside.active = False
        message = f"the sandbox refused {_describe(event, args)}"
        violations.append(message)
        raise SandboxViolation(message)

    def serve() -> None:
        loading[0] = False

    sys.addaudithook(hook)
    return serve


def _thread_count() -> int:
    """Threads of this process, as the kernel sees them (raw ``_thread`` ones included)."""
    return len(os.listdir("/proc/self/task"))


def _readonly_under(args: tuple[Any, ...], roots: tuple[str, ...]) -> bool:
    path, mode, flags = (*args, None, None, 0)[:3]
    if not isinstance(path, str):
        return False
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return False
    if isinstance(flags, int) and flags & _WRITE_FLAGS:
        return False
    return (os.path.realpath(path) + os.sep).startswith(roots) or os.path.realpath(path).startswith(
        roots
    )


def _describe(event: str, args: tuple[Any, ...]) -> str:
    shown = [repr(a)[:120] if isinstance(a, str | bytes | int) else type(a).__name__ for a in args]
    return f"{event}({', '.join(shown[:3])})"


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ----- serving calls ----------------------------------------------------------------------------


def _serve(runtime: _Runtime, request: dict[str, Any]) -> dict[str, Any]:
    for sid in request.get("forget", ()):
        runtime.mirrors.pop(sid, None)
    sid = int(request["sid"])
    mirror = runtime.mirrors.get(sid)
    if request.get("full"):
        mirror = runtime.state.session(clock=runtime.clock)
        runtime.mirrors[sid] = mirror
        while len(runtime.mirrors) > MAX_MIRRORS:
            runtime.mirrors.popitem(last=False)
    elif mirror is None:
        return {"need_full": True}
    runtime.mirrors.move_to_end(sid)
    _apply_sync(mirror, request.get("sync", ()))
    mirror.closed = bool(request.get("closed"))
    before = _snapshot(mirror)
    name = str(request["name"])
    try:
        outcome: ToolOutcome | None = runtime.toolkit.call(
            mirror, name, request["arguments"], deadline_s=float(request["deadline_s"])
        )
    except SandboxViolation:
        outcome = None
    except BaseException as exc:  # MemoryError or worse outside the tool's own try
        return {"failure": f"{type(exc).__name__}: {exc}"[:500], "cpu_s": _cpu_used()}
    started = _thread_count() - runtime.threads if runtime.threads >= 0 else 0
    if started > 0:
        runtime.violations.append(f"the sandbox refused the {started} thread(s) the call started")
    if runtime.violations:
        # The tool may have caught the refusal; its writes are dropped all the same.
        return {"violation": runtime.violations[0], "cpu_s": _cpu_used()}
    assert outcome is not None
    reply = asdict(outcome)
    limit_hit = _limit_hit(runtime, outcome) if outcome.status == "exception" else None
    if limit_hit:
        reply["status"], reply["content"] = (
            "sandbox",
            f"Error: {name} {limit_hit}; nothing was changed.",
        )
    return {"outcome": reply, "writes": _writes_since(mirror, before), "cpu_s": _cpu_used()}


def _limit_hit(runtime: _Runtime, outcome: ToolOutcome) -> str | None:
    """The limit behind a tool's exception, when one of the sandbox's limits caused it."""
    # Toolkit.call renders the exception as "Error: NAME failed: TYPE: message".
    if f"{outcome.name} failed: MemoryError" in outcome.content:
        return f"ran out of memory (the sandbox allows {runtime.memory_mb} MiB)"
    if runtime.threads < 0 and "RuntimeError: can't start new thread" in outcome.content:
        return "tried to start a thread; the sandbox refused it (seccomp)"
    return None


def _overlay(session: Session) -> dict[str, dict[str, Any]]:
    # The child owns these mirrors; it works on the overlay directly, as the store does.
    return session._overlay


def _apply_sync(mirror: Session, sync: Any) -> None:
    overlay = _overlay(mirror)
    for table, key, op, record in sync:
        layer = overlay.setdefault(table, {})
        if op == "put":
            layer[key] = record
        elif op == "delete":
            layer[key] = _deleted_marker()
        else:  # "revert": the host's session no longer overrides this address
            layer.pop(key, None)


def _deleted_marker() -> Any:
    return store._DELETED


def _snapshot(mirror: Session) -> dict[tuple[str, str], Any]:
    return {(t, k): v for t, layer in _overlay(mirror).items() for k, v in layer.items()}


def _writes_since(mirror: Session, before: dict[tuple[str, str], Any]) -> list[list[Any]]:
    deleted = _deleted_marker()
    out: list[list[Any]] = []
    for table, layer in _overlay(mirror).items():
        for key, value in layer.items():
            if before.get((table, key)) is not value:
                out.append([table, key, None if value is deleted else value])
    return out


def _entry() -> int:
    try:
        return main(sys.argv)
    except BaseException:
        traceback.print_exc()
        return 3


if __name__ == "__main__":
    sys.exit(_entry())
