"""The sandbox child: runs an untrusted package's models.py and tools.py, answers the host.

Started by the host as ``python -I -B -m maestro.domains.sandbox.child IN_FD OUT_FD HOST_PID``
(the launcher stops the worker when that process dies, ``isolation.fork_worker``). The
launcher reads the host's ``init`` request, imports every module package code may use (the
standard-library allowlist, the SDK, pydantic, and the modules the host vetted), warms up
what those imports load lazily, then sets up the kernel layers and forks the worker
(``isolation.py``). The worker answers ``init`` with the layers' status before any package
code exists in it, installs the audit hook, and serves requests until the host closes the pipe:

- ``describe``: run models.py and tools.py (audit hook in its load phase), and report the
  tables, record schemas, tools and the database normalized by the real record types
  (``describe.py``); then a second, serving audit hook goes in, for good;
- ``begin``: take the host's database (the host's own validation of it) as the base state;
- ``call``: run one tool call on the mirror of a host session, kept in step by the writes the
  host sends; answer the outcome's status and text and the writes the call made.

Every reply echoes the request's ``seq`` and ``nonce``, which only the serving loop holds.
"""

from __future__ import annotations

import _thread
import dataclasses
import decimal
import enum
import importlib
import json
import os
import signal
import sys
import types
import uuid
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta
from typing import Any

from pydantic import ConfigDict, Field, create_model

from maestro.domains import sdk
from maestro.domains.errors import Problem, ToolDeadlineExceeded
from maestro.domains.loader import table_specs, validated_records
from maestro.domains.runtime import Toolkit, ToolSpec, spec_from_function, tool_functions
from maestro.domains.sandbox import describe, isolation, seccomp
from maestro.domains.sandbox.protocol import Frame, encode, read_blocking, write_blocking
from maestro.domains.sandbox.static import STDLIB_ALLOWED
from maestro.domains.store import Session, State, TableSpec

MAX_MIRRORS = 256

#: Audit events package code may raise while its modules load: pydantic reads frames and
#: evaluates string annotations, ``@dataclass`` and ``Enum`` set class attributes. Every other
#: event is refused, ``open`` and ``import`` included. None of these reaches outside the child.
LOAD_EVENTS = frozenset(
    {
        "builtins.id", "time.sleep", "compile", "exec", "sys._getframe", "object.__getattr__",
        "object.__setattr__", "object.__delattr__",
    }
)  # fmt: skip
#: Audit events a tool call may raise; every other event is refused. ``compile`` gives a code
#: object or a syntax tree (``ast.parse``, which a vetted module uses) and grants nothing: running
#: compiled code is ``exec``, refused, and it would meet the same hooks anyway.
SERVE_EVENTS = frozenset({"builtins.id", "time.sleep", "compile"})


class SandboxViolation(BaseException):
    """Raised by the audit hook into the code that tried a refused operation.

    A ``BaseException``, so a tool's ``except Exception`` does not swallow it; a tool that
    catches it anyway is still reported, because the hook records every refusal.
    """


def main(argv: list[str]) -> int:
    """Launch the worker and serve the host; returns the worker's exit status."""
    in_fd, out_fd = int(argv[1]), int(argv[2])
    host_pid = int(argv[3]) if len(argv) > 3 else os.getppid()
    if os.getppid() != host_pid:  # the host is already gone
        return 2
    first = read_blocking(in_fd)
    if first is None:
        return 2
    init = first.meta
    seq, nonce = init.pop("seq", None), init.pop("nonce", None)
    options = init["options"]
    problems = _preload(options["vetted_modules"])
    if problems:
        refusal = {"seq": seq, "nonce": nonce, "ok": False, "problems": problems}
        write_blocking(out_fd, encode(refusal))
        return 1
    _warm_up()
    disabled = options["disable"]
    layers = isolation.enter_namespaces(disabled)
    before = isolation.fork_worker(layers["pid"] == isolation.ACTIVE, (in_fd, out_fd), host_pid)
    # ----- the worker, from here on -----
    worker = _Worker(init)
    layers.update(worker.isolate(disabled, layers["mount"]))
    if before:  # a fresh worker for a new session: the host asks for its layers again
        hello = read_blocking(in_fd)
        if hello is None or hello.meta.get("op") != "hello":
            return 3
        seq, nonce = hello.meta.get("seq"), hello.meta.get("nonce")
    write_blocking(out_fd, encode({"seq": seq, "nonce": nonce, "ok": True, "layers": layers}))
    del first, init, seq, nonce
    return _serve(in_fd, out_fd, worker)


def _serve(in_fd: int, out_fd: int, worker: _Worker) -> int:
    while True:
        frame = read_blocking(in_fd)
        if frame is None or frame.meta.get("op") == "exit":
            return 0
        seq, nonce = frame.meta.pop("seq", None), frame.meta.pop("nonce", None)
        if frame.meta.get("op") == "recycle":  # the forking process starts a fresh worker
            write_blocking(out_fd, encode({"seq": seq, "nonce": nonce, "recycled": True}))
            os._exit(isolation.RECYCLE_STATUS)
        try:
            meta, text, data = worker.handle(frame)
            reply = encode({**meta, "seq": seq, "nonce": nonce}, text, data)
        except MemoryError:
            reply = encode({"seq": seq, "nonce": nonce, "limit": "memory"})
        except SandboxViolation as exc:  # raised around the call (rendering its answer)
            reply = encode({"seq": seq, "nonce": nonce, "refused": str(exc)[:1000]})
        except BaseException as exc:  # SystemExit from a tool, a hostile object's error
            reply = encode({"seq": seq, "nonce": nonce, "failure": repr(exc)[:1000]})
        del frame
        write_blocking(out_fd, reply)


# ----- the launcher: before any package code -----------------------------------------------------


def _preload(vetted: list[str]) -> list[list[str]]:
    """Import what package code may import: nothing is imported once the sandbox is closed."""
    for module in [*sorted(STDLIB_ALLOWED), "_strptime"]:
        importlib.import_module(module)
    problems = []
    for module in vetted:
        try:
            importlib.import_module(module)
        except Exception as exc:
            problems.append(["tools.py", "", f"vetted module {module!r} does not import: {exc!r}"])
    # Once _ctypes is in a process its types are reachable from object.__subclasses__(), and a
    # pointer type made from them reads and writes any address with no audit event: nothing the
    # child imports may load it (the kernel calls go through _native.c).
    if "_ctypes" in sys.modules:
        problems.append(["tools.py", "", "ctypes was loaded in the sandbox child; refusing to run"])
    return problems


class _WarmUp(sdk.Record):
    """Exercises pydantic's paths for the types a record uses, so their lazy imports happen
    here, before the audit hook refuses imports."""

    model_config = ConfigDict(str_strip_whitespace=False)
    key: str = Field("k", min_length=1, pattern="^k$")
    day: date = date(2026, 1, 1)
    at: datetime | None = None
    n: int = Field(0, ge=0)
    ratio: float = 0.5
    tags: list[str] = []  # noqa: RUF012 (pydantic copies defaults)
    counts: dict[str, int] = {}  # noqa: RUF012
    kind: sdk.ToolKind = "read"


@dataclasses.dataclass
class _WarmUpPart:
    start: str
    days: int = 7


class _WarmUpColour(enum.Enum):
    RED = "red"


def _warm_up() -> None:
    """Run the trusted paths once, so lazy imports and caches happen before the hooks: every
    kind of field a record or a tool parameter commonly has."""
    kinds: dict[str, Any] = {
        "inner": (_WarmUp, ...),
        "part": (_WarmUpPart | None, None),
        "colour": (_WarmUpColour, _WarmUpColour.RED),
        "money": (decimal.Decimal, decimal.Decimal("1.5")),
        "uid": (uuid.UUID | None, None),
        "at": (time | None, None),
        "span": (timedelta | None, None),
        "ids": (set[int], set()),
        "pair": (tuple[int, int], (0, 0)),
    }
    nested = create_model("Nested", **kinds)
    strict = create_model("Strict", __config__=ConfigDict(strict=True, extra="forbid"), **kinds)
    for model in (_WarmUp, nested, strict):
        model.model_json_schema()
        dumped = model.model_validate_json(
            '{"inner": {"key": "k", "day": "2026-01-01", "at": "2026-01-01T10:00:00"},'
            ' "part": {"start": "x"}}'
            if model is not _WarmUp
            else '{"key": "k", "day": "2026-01-01", "at": "2026-01-01T10:00:00"}'
        ).model_dump(mode="json")
        model.model_validate_json(json.dumps(dumped))
    datetime.strptime("2026-01-01", "%Y-%m-%d")
    Toolkit([spec_from_function(_warm_up_tool)]).schemas()


@sdk.tool("read")
def _warm_up_tool(db: sdk.Database, day: str, part: _WarmUpPart, limit: int = 1) -> str:
    """A tool whose spec the warm-up builds.

    Args:
        day: A day.
        part: A dataclass.
        limit: How many.
    """
    return day


# ----- the worker ---------------------------------------------------------------------------------


class _Alarm:
    """The deadline of a call as a timer signal: the child may not call C through ctypes, as
    the in-process watchdog does, and it runs one call at a time on its main thread."""

    def __init__(self) -> None:
        self.armed = False
        self.fired = False
        signal.signal(signal.SIGALRM, self._ring)

    def _ring(self, signum: int, frame: object) -> None:
        if self.armed:
            self.armed, self.fired = False, True
            raise ToolDeadlineExceeded()

    def arm(self, seconds: float) -> int:
        self.fired, self.armed = False, True
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
        return 0

    def disarm(self, token: int) -> bool:
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.armed = False
        return self.fired


@dataclass
class _Flags:
    """What the tool wrappers saw during a call."""

    memory: bool = False


@dataclass
class _Worker:
    """The package as loaded here, and one mirror per host session."""

    init: dict[str, Any]
    tables: dict[str, TableSpec] = field(default_factory=dict)
    toolkit: Toolkit = field(default_factory=lambda: Toolkit([]))
    state: State | None = None
    mirrors: OrderedDict[int, Session] = field(default_factory=OrderedDict)
    violations: list[str] = field(default_factory=list)
    flags: _Flags = field(default_factory=_Flags)
    threads: int = 0

    def isolate(self, disabled: list[str], mount: str) -> dict[str, str]:
        """The worker's own layers, in order, before anything of the package exists here."""
        limits = self.init["limits"]
        # Opened while files can still be opened: /dev/null, and libseccomp to build the filter.
        devnull = os.open(os.devnull, os.O_WRONLY)
        filters = seccomp.Allowlist()
        layers = {"mount": isolation.empty_root(mount)}
        layers["user"] = isolation.drop_privileges(limits["uid"], limits["gid"], disabled)
        layers["limits"] = isolation.lower_limits(limits, float(limits["startup_timeout_s"]))
        # Nothing package code prints reaches the host's terminal; no warning is formatted
        # (that reads source files).
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        warnings.simplefilter("ignore")
        self.alarm = _Alarm()
        self.threads = _thread._count()
        layers["seccomp"] = isolation.OFF if "seccomp" in disabled else filters.load()
        _install_hook(LOAD_EVENTS, self.violations, adds=1)
        layers["audit"] = isolation.ACTIVE
        return layers

    # ----- requests ---------------------------------------------------------------------------

    def handle(self, frame: Frame) -> tuple[dict[str, Any], str, Any]:
        op = frame.meta.get("op")
        if op == "describe":
            return self._describe_package(frame.decoded_data())
        if op == "begin":
            return self._begin(frame.decoded_data())
        if op == "call":
            return self._call(frame.meta, frame.decoded_data())
        return {"failure": f"unknown request {op!r}"}, "", None

    def _describe_package(self, raw_db: Any) -> tuple[dict[str, Any], str, Any]:
        problems: list[Problem] = []
        try:
            loaded = self._load(problems)
        except SandboxViolation:
            loaded = False
        problems += [Problem("tools.py", "loading", v) for v in self.violations]
        db, db_problems = None, list[Problem]()
        if loaded and not problems:
            if isinstance(raw_db, dict):
                db = validated_records(raw_db, self.tables, db_problems)
            tables = describe.describe_tables(self.tables)
            tools = describe.describe_tools(self.toolkit)
        # The serving hook goes in whatever happened, for good; if package code took its slot,
        # this worker cannot be made safe to serve: it stops.
        try:
            _install_hook(SERVE_EVENTS, self.violations)
        except SandboxViolation:
            os._exit(4)
        if problems or not loaded:
            return {"ok": False, "problems": _rows(problems)}, "", None
        # Invalid records are reported, and the rest of the database is still checked.
        reply = {"ok": True, "tables": tables, "tools": tools, "problems": _rows(db_problems)}
        return reply, "", db

    def _load(self, problems: list[Problem]) -> bool:
        """Run models.py then tools.py as the package's modules; collect tables and tools."""
        package = f"maestro_domain_{self.init['domain_id']}"
        root = types.ModuleType(package)
        root.__path__ = []
        sys.modules[package] = root
        models = _module_from_source(package, "models", self.init["models_source"], problems)
        if models is None:
            return False
        root.models = models  # type: ignore[attr-defined]
        tables = table_specs(models, problems)
        if tables is None:
            return False
        self.tables = tables
        tools = _module_from_source(package, "tools", self.init["tools_source"], problems)
        if tools is None:
            return False
        specs = []
        for fn in tool_functions(tools):
            try:
                specs.append(self._guarded(spec_from_function(fn)))
            except Exception as exc:  # ToolDefinitionError, or what a hostile object raises
                problems.append(Problem("tools.py", "", str(exc)[:2000]))
        if not specs:
            problems.append(
                Problem("tools.py", "", "defines no tool (functions marked with @tool)")
            )
            return False
        self.toolkit = Toolkit(specs, watchdog=self.alarm)
        return True

    def _guarded(self, spec: ToolSpec) -> ToolSpec:
        """The spec with its function wrapped to note a MemoryError: the typed signal that a
        call hit the memory limit (the outcome itself only carries the message)."""
        fn, flags = spec.fn, self.flags

        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except MemoryError:
                flags.memory = True
                raise

        return replace(spec, fn=run)

    def _begin(self, tables: Any) -> tuple[dict[str, Any], str, Any]:
        rows = {name: dict(rows) for name, rows in tables.items()}
        self.state = State(rows, self.tables)
        self.mirrors.clear()
        return {"state_hash": self.state.state_hash()}, "", None

    def _call(self, meta: dict[str, Any], sync: Any) -> tuple[dict[str, Any], str, Any]:
        assert self.state is not None
        for sid in meta.get("forget", ()):
            self.mirrors.pop(sid, None)
        sid = int(meta["sid"])
        mirror = self.mirrors.get(sid)
        if meta.get("full"):
            mirror = self.state.session(clock=_clock(self.init))
            self.mirrors[sid] = mirror
            while len(self.mirrors) > MAX_MIRRORS:
                self.mirrors.popitem(last=False)
        elif mirror is None:
            return {"need_full": True}, "", None
        self.mirrors.move_to_end(sid)
        for table, key, op, record in sync or ():
            if op == "revert":
                mirror.forget(table, key)
            else:
                mirror.override(table, key, record if op == "put" else None)
        mirror.closed = bool(meta.get("closed"))
        before = {(t, k): v for t, k, v in mirror.overlay_entries()}
        self.flags.memory = False
        # The call's CPU: past cpu_s, SIGPROF (left to its default action) ends the worker,
        # even inside C code. A host cannot set this limit on a worker of another uid without
        # CAP_SYS_RESOURCE; the worker's own timer needs no privilege.
        signal.setitimer(signal.ITIMER_PROF, float(self.init["limits"]["cpu_s"]))
        try:
            outcome = self.toolkit.call(
                mirror, str(meta["name"]), meta["arguments"], deadline_s=float(meta["deadline_s"])
            )
        except SandboxViolation:
            outcome = None
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        started = _thread._count() - self.threads
        if started > 0:
            self.violations.append(f"the sandbox refused the {started} thread(s) the call started")
        if self.violations:
            # The tool may have caught the refusal; its writes are dropped all the same.
            return {"refused": self.violations[0][:1000]}, "", None
        assert outcome is not None
        if self.flags.memory:
            return {"limit": "memory"}, "", None
        writes = [
            [t, k, v] for t, k, v in mirror.overlay_entries() if before.get((t, k), 0) is not v
        ]
        return {"status": outcome.status}, outcome.content, writes


def _module_from_source(
    package: str, stem: str, source: str, problems: list[Problem]
) -> types.ModuleType | None:
    """Run a package file's source as ``package.stem``; its problems located at its lines."""
    name = f"{package}.{stem}"
    module = types.ModuleType(name)
    module.__file__ = f"{stem}.py"
    module.__package__ = package
    sys.modules[name] = module
    try:
        code = compile(source, f"{stem}.py", "exec")
    except SyntaxError as exc:
        problems.append(Problem(f"{stem}.py", f"line {exc.lineno}", f"syntax error: {exc.msg}"))
        return None
    except (ValueError, RecursionError, MemoryError) as exc:
        problems.append(Problem(f"{stem}.py", "", f"cannot be compiled: {exc!r}"[:2000]))
        return None
    try:
        exec(code, module.__dict__)
    except SandboxViolation:
        raise
    except BaseException as exc:  # SystemExit and the like are the module's problem too
        # The traceback's second entry is the module's own frame: its line is the statement
        # that failed (read without touching frames, which the audit hook guards).
        tb = exc.__traceback__
        line = tb.tb_next.tb_lineno if tb is not None and tb.tb_next is not None else None
        where = f"line {line}" if line else ""
        text = f"import failed: {type(exc).__name__}: {exc}"
        problems.append(Problem(f"{stem}.py", where, text[:2000]))
        return None
    return module


def _install_hook(allowed: frozenset[str], violations: list[str], *, adds: int = 0) -> None:
    """Add an audit hook refusing every event outside ``allowed``; hooks cannot be removed.

    The hook's state lives only in its closure, which nothing but the interpreter references:
    no caller is trusted by identity (a check by caller can be borrowed), and the serving phase
    adds a second, narrower hook rather than changing this one. ``adds``: how many more hooks
    this one lets be added (the serving hook); package code that adds one first takes the
    slot, and the worker, refused, stops.
    """
    remaining = adds

    def hook(event: str, args: tuple[Any, ...]) -> None:
        nonlocal remaining
        if event in allowed:
            return
        if event == "sys.addaudithook" and remaining > 0:
            remaining -= 1
            return
        message = f"the sandbox refused {_event_text(event, args)}"
        violations.append(message)
        raise SandboxViolation(message)

    sys.addaudithook(hook)


def _event_text(event: str, args: tuple[Any, ...]) -> str:
    # Exact types only: a subclass's __repr__ would run package code inside the hook.
    shown = [repr(a)[:120] if type(a) in (str, bytes, int) else type(a).__name__ for a in args]
    return f"{event}({', '.join(shown[:3])})"


def _rows(problems: list[Problem]) -> list[list[str]]:
    return [[p.file, p.location, p.message] for p in problems]


def _clock(init: dict[str, Any]) -> datetime | None:
    return datetime.fromisoformat(init["clock"]) if init.get("clock") else None


def _entry() -> int:
    try:
        return main(sys.argv)
    except BaseException as exc:  # no traceback: formatting one reads source files
        os.write(2, f"sandbox child failed: {exc!r}\n".encode(errors="replace"))
        return 3


if __name__ == "__main__":
    sys.exit(_entry())
