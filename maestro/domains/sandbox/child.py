"""The sandbox child: loads an untrusted package's tools and runs calls the host sends.

Started by the host as ``python -I -m maestro.domains.sandbox.child IN_FD OUT_FD``. In order:
leave the network namespace (while still single-threaded), load the package, warm up, lower the
resource limits, install the audit hook (deny by default), then serve calls until the host closes
the pipe. Each call runs on a mirror of the host's session, kept in step by the writes the host
sends; the reply carries the outcome and the writes the call made.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import threading
import traceback
from collections import OrderedDict
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from types import CodeType
from typing import Any

from maestro.domains import loader, store, watchdog
from maestro.domains.errors import Problem
from maestro.domains.runtime import Toolkit, ToolOutcome
from maestro.domains.sandbox.protocol import read_blocking, write_blocking
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

    def __init__(self, toolkit: Toolkit, state: State, clock: datetime | None) -> None:
        self.toolkit = toolkit
        self.state = state
        self.clock = clock
        self.mirrors: OrderedDict[int, Session] = OrderedDict()
        self.violations: list[str] = []
        self.memory_mb = 0
        self.schemas: list[dict[str, Any]] = []


def main(argv: list[str]) -> int:
    """Serve one host; returns the exit status."""
    in_fd, out_fd = int(argv[1]), int(argv[2])
    init = read_blocking(in_fd)
    if init is None:
        return 2
    network = _leave_network()
    problems: list[Problem] = []
    runtime = _load(init, problems)
    if runtime is None:
        write_blocking(
            out_fd, {"ok": False, "problems": [[p.file, p.location, p.message] for p in problems]}
        )
        return 1
    limits = init["limits"]
    runtime.memory_mb = int(limits["memory_mb"])
    _warm_up(runtime)
    # From here on untrusted code may run: nothing it prints reaches the host's terminal.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    _lower_limits(limits)
    _install_audit_hook(runtime.violations)
    write_blocking(
        out_fd,
        {
            "ok": True,
            "schemas": runtime.schemas,
            "state_hash": runtime.state.state_hash(),
            "network": network,
            "cpu_s": _cpu_used(),
        },
    )
    while True:
        request = read_blocking(in_fd)
        if request is None or request.get("op") == "exit":
            return 0
        write_blocking(out_fd, _serve(runtime, request))


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


def _load(init: dict[str, Any], problems: list[Problem]) -> _Runtime | None:
    root = Path(init["root"])
    try:
        # The loader's own steps, so the child's tools are exactly the in-process ones.
        package = loader._make_package(root, init["domain_id"])
        specs = loader._load_models(root, package, problems)
        toolkit = loader._load_tools(root, package, problems)
        if specs is None or toolkit is None:
            return None
        tables = {
            name: {key: dict(rec) for key, rec in rows.items()}
            for name, rows in init["tables"].items()
        }
        state = State(tables, {n: TableSpec(n, s.model, s.key_field) for n, s in specs.items()})
    except Exception as exc:
        problems.append(Problem("tools.py", "", f"sandbox load failed: {exc!r}"))
        return None
    clock = datetime.fromisoformat(init["clock"]) if init.get("clock") else None
    return _Runtime(toolkit, state, clock)


def _warm_up(runtime: _Runtime) -> None:
    """Run the trusted paths once, so lazy imports and caches happen before the hook."""
    session = runtime.state.session(clock=runtime.clock)
    name = runtime.toolkit.names[0]
    runtime.toolkit.call(session, name, "{not json")
    runtime.toolkit.call(session, name, {"__no_such_argument__": 1})
    runtime.state.state_hash()
    runtime.schemas = runtime.toolkit.schemas()
    token = watchdog.default_watchdog().arm(3600.0)  # starts the watchdog thread now
    watchdog.default_watchdog().disarm(token)
    watchdog._set_async_exc(0, None)  # resolves the C symbol now; thread 0 does not exist
    threading.current_thread()
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


def _install_audit_hook(violations: list[str]) -> None:
    """Refuse every audited operation but a few harmless ones (deny by default)."""
    trusted_ctypes: CodeType = watchdog._set_async_exc.__code__
    inside = threading.local()

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in ALLOWED_EVENTS or getattr(inside, "active", False):
            return
        inside.active = True
        try:
            # The watchdog interrupts a tool past its deadline through ctypes; nothing else may.
            if event == "ctypes.call_function" and sys._getframe(1).f_code is trusted_ctypes:
                return
        finally:
            inside.active = False
        message = f"the sandbox refused {_describe(event, args)}"
        violations.append(message)
        raise SandboxViolation(message)

    sys.addaudithook(hook)


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
    if runtime.violations:
        # The tool may have caught the refusal; its writes are dropped all the same.
        return {"violation": runtime.violations[0], "cpu_s": _cpu_used()}
    assert outcome is not None
    reply = asdict(outcome)
    if outcome.status == "exception" and f"{name} failed: MemoryError" in outcome.content:
        reply["status"] = "sandbox"
        reply["content"] = (
            f"Error: {name} ran out of memory (the sandbox allows {runtime.memory_mb} MiB);"
            " nothing was changed."
        )
    return {"outcome": reply, "writes": _writes_since(mirror, before), "cpu_s": _cpu_used()}


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
