"""The host's handle on one sandbox child: start it, exchange checked frames, bound it, kill it.

The child is a fresh interpreter (``subprocess`` with exec, never a bare fork: the host may hold
threads of deltalake's tokio runtime, which do not survive a fork) in its own session, so the
host kills its whole process group (launcher, init, worker) at once. Every request carries a
sequence number and a fresh random nonce; a reply must echo both, and nothing may arrive that
was not asked for: anything else (a forged, stale, extra or oversized frame, garbage, silence
past the deadline, an exit) becomes a :class:`ChildFailure` and the child is killed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maestro.domains.sandbox.limits import SandboxLimits
from maestro.domains.sandbox.protocol import (
    Caps,
    ChannelError,
    Frame,
    encode,
    pending,
    read_until,
    write_until,
)

STDERR_TAIL_BYTES = 4000

HELLO_CAPS = Caps(meta=64 * 1024, text=0, data=0)
BEGIN_CAPS = Caps(meta=4 * 1024, text=0, data=0)


class ChildFailure(Exception):
    """The child did not answer as asked.

    ``kind``: "timeout", "crash", "limit" (a resource limit killed it), "seccomp" (it made a
    system call outside the allowlist), "protocol" (it broke the protocol), "start", "closed".
    """

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class SandboxStartError(Exception):
    """The child could not start or load the package; ``problems`` when it said why."""

    def __init__(self, reason: str, problems: list[list[str]] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.problems = problems or []


@dataclass(frozen=True)
class Launch:
    """What every child of one package starts with: limits, the package's sources and clock,
    and the host's own options (never read from the package)."""

    limits: SandboxLimits
    domain_id: str
    clock: str | None
    models_source: str
    tools_source: str
    vetted_modules: tuple[str, ...] = ()  # imported by the launcher, before package code
    disable: frozenset[str] = frozenset()  # layers a test turns off

    def init(self) -> dict[str, Any]:
        return {
            "op": "init",
            "domain_id": self.domain_id,
            "clock": self.clock,
            "models_source": self.models_source,
            "tools_source": self.tools_source,
            "limits": self.limits.model_dump(),
            "options": {
                "vetted_modules": list(self.vetted_modules),
                "disable": sorted(self.disable),
            },
        }


class SandboxProcess:
    """One running child; :meth:`exchange` is the only way to talk to it."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.limits = launch.limits
        self._proc: subprocess.Popen[bytes] | None = None
        self._to_child = -1
        self._from_child = -1
        self._seq = 0
        self.layers: dict[str, str] = {}
        self.worker_pid: int | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> dict[str, str]:
        """Start the child; returns the status of each layer, as the worker reported it
        before any package code existed in it."""
        self._spawn()
        try:
            hello = self.exchange(
                self.launch.init(), timeout_s=self.limits.startup_timeout_s, caps=HELLO_CAPS
            )
        except ChildFailure as exc:
            tail = self._stderr_tail()
            self.kill()
            raise SandboxStartError(
                f"the sandbox child did not start: {exc.reason}{tail}"
            ) from None
        self._close_stderr()
        if hello.meta.get("ok") is not True or not isinstance(hello.meta.get("layers"), dict):
            problems = hello.meta.get("problems")
            self.kill()
            raise SandboxStartError(
                "the sandbox child could not start",
                problems if isinstance(problems, list) else None,
            )
        self.layers = {str(k): str(v)[:500] for k, v in hello.meta["layers"].items()}
        self.worker_pid = _leaf(self._proc.pid) if self._proc else None
        return self.layers

    def recycle(self, timeout_s: float) -> None:
        """Replace the worker by a fresh one forked from the process that holds no package
        code (the next session meets nothing the last one left in module state); the caller
        loads the package into it. ChildFailure (child killed) when the old worker does not
        make way or the new one does not answer."""
        old = self.worker_pid
        reply = self.exchange({"op": "recycle"}, timeout_s=timeout_s, caps=BEGIN_CAPS)
        if reply.meta.get("recycled") is not True:
            raise self._breach("it did not make way for a fresh worker")
        hello = self.exchange({"op": "hello"}, timeout_s=timeout_s, caps=HELLO_CAPS)
        new = _leaf(self._proc.pid) if self._proc else None
        # A worker cannot fork (seccomp, RLIMIT_NPROC): another pid, with the old one gone, is
        # a fresh process, whatever the old one would have had the host believe.
        if new is None or new == old or (old is not None and not stopped(old)):
            raise self._breach("the same worker answered for a fresh one")
        if hello.meta.get("ok") is not True or not isinstance(hello.meta.get("layers"), dict):
            raise self._breach("the fresh worker did not start")
        self.layers = {str(k): str(v)[:500] for k, v in hello.meta["layers"].items()}
        self.worker_pid = new

    def _spawn(self) -> None:
        """A fresh interpreter running the child, with a pipe each way."""
        try:
            child_in, host_out = os.pipe()
            host_in, child_out = os.pipe()
        except OSError as exc:
            raise SandboxStartError(f"the sandbox child did not start: {exc}") from None
        try:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-I",  # no user site, no PYTHON* variables, no cwd on sys.path
                    "-B",  # no .pyc writes
                    "-m",
                    "maestro.domains.sandbox.child",
                    str(child_in),
                    str(child_out),
                    str(os.getpid()),  # the launcher stops the worker if this process dies
                ],
                pass_fds=(child_in, child_out),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,  # read only when the start fails
                start_new_session=True,  # its own process group: killed as one
                env={"PYTHONHASHSEED": "0", "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
                cwd="/",
            )
        except OSError as exc:
            for fd in (host_out, host_in):
                os.close(fd)
            raise SandboxStartError(f"the sandbox child did not start: {exc}") from None
        finally:
            os.close(child_in)
            os.close(child_out)
        self._to_child, self._from_child = host_out, host_in
        os.set_blocking(host_out, False)
        os.set_blocking(host_in, False)

    def exchange(
        self, meta: dict[str, Any], data: Any = None, *, timeout_s: float, caps: Caps
    ) -> Frame:
        """Send one request and read its reply, checked; ChildFailure (child killed) otherwise."""
        if not self.alive:
            raise ChildFailure("crash", "the sandbox child is not running")
        waiting = pending(self._from_child)
        if waiting is not False:
            raise self._breach("it sent a frame nobody asked for") if waiting else self._exited()
        self._seq += 1
        seq, nonce = self._seq, secrets.token_hex(16)
        deadline = time.monotonic() + timeout_s
        try:
            frame = encode({**meta, "seq": seq, "nonce": nonce}, "", data)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ChildFailure("protocol", f"the request cannot be sent: {exc}") from None
        try:
            write_until(self._to_child, frame, deadline)
            reply = read_until(self._from_child, deadline, caps)
        except ChannelError as exc:
            raise self._failure(exc) from None
        if reply.meta.get("seq") != seq or reply.meta.get("nonce") != nonce:
            raise self._breach("a reply to another request (wrong sequence number or nonce)")
        if pending(self._from_child):
            raise self._breach("it sent more than its reply")
        return reply

    def _breach(self, what: str) -> ChildFailure:
        self.kill()
        return ChildFailure("protocol", f"the sandbox child broke the protocol: {what}")

    def _exited(self) -> ChildFailure:
        code = self._wait_exit()
        self.kill()
        return ChildFailure(*_exit_reason(code, self.limits))

    def _failure(self, exc: ChannelError) -> ChildFailure:
        if exc.kind == "timeout":
            self.kill()
            return ChildFailure("timeout", exc.reason)
        if exc.kind == "protocol":
            return self._breach(exc.reason)
        return self._exited()

    def _wait_exit(self) -> int | None:
        assert self._proc is not None
        try:
            return self._proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return None

    def interrupt(self) -> None:
        """SIGKILL the child but leave its pipes: a thread waiting on them sees it exit."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            _kill_group(proc.pid)

    def kill(self) -> None:
        """Stop the child's whole process group now (SIGKILL), release its pipes. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            _kill_group(proc.pid)
            # An unkillable child (uninterruptible sleep) is reaped by the kernel later.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
            if proc.stderr is not None:
                proc.stderr.close()
            if self.worker_pid is not None:
                _wait_stopped(self.worker_pid, deadline=time.monotonic() + 2.0)
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to_child = self._from_child = -1

    def _stderr_tail(self) -> str:
        """What the child printed before it failed to start (bounded, without blocking)."""
        if self._proc is None or self._proc.stderr is None:
            return ""
        if self._proc.poll() is None:
            _kill_group(self._proc.pid)
        self._wait_exit()
        fd = self._proc.stderr.fileno()
        os.set_blocking(fd, False)
        data = b""
        with contextlib.suppress(BlockingIOError, OSError):
            while len(data) < 1 << 20:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
        text = data[-STDERR_TAIL_BYTES:].decode("utf-8", "replace").strip()
        return f"\n{text}" if text else ""

    def _close_stderr(self) -> None:
        if self._proc is not None and self._proc.stderr is not None:
            self._proc.stderr.close()
            self._proc.stderr = None


def _kill_group(pid: int) -> None:
    # start_new_session made the launcher the leader of its own group: pgid == its pid.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def stopped(pid: int) -> bool:
    """Whether a process no longer runs (gone, or a zombie its new parent has yet to reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _wait_stopped(pid: int, deadline: float) -> None:
    # The worker is a grandchild: SIGKILL reaches it a moment after the launcher's wait ends.
    while not stopped(pid) and time.monotonic() < deadline:
        time.sleep(0.005)


def _leaf(pid: int) -> int | None:
    """The worker: the launcher's only descendant without children (it cannot fork)."""
    for _ in range(4):
        children = _children(pid)
        if not children:
            return pid
        if len(children) != 1:
            return None
        pid = children[0]
    return None


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return _children_by_scan(pid)
    return [int(p) for p in text.split()]


def _children_by_scan(pid: int) -> list[int]:
    """Without /proc/PID/task/PID/children (CONFIG_PROC_CHILDREN), scan every process."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(entry.name))
    return out


def _exit_reason(code: int | None, limits: SandboxLimits) -> tuple[str, str]:
    """(kind, reason) for a child that exited. The launcher passes the worker's death by
    signal ``s`` up as status ``128 + s``."""
    if code is None:
        return "crash", "the sandbox child stopped answering"
    if 128 < code <= 128 + 64:
        code = -(code - 128)
    if code >= 0:
        return "crash", f"the sandbox child exited with status {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return "crash", f"the sandbox child died of signal {-code}"
    if sig == signal.SIGSYS:
        return "seccomp", "it made a system call the sandbox does not allow (seccomp killed it)"
    if sig == signal.SIGPROF:
        return "limit", f"the call used more than its {limits.cpu_s:g} s of CPU"
    if sig == signal.SIGXCPU:
        return "limit", "the sandbox child used up its CPU allowance (RLIMIT_CPU)"
    if sig == signal.SIGXFSZ:
        return "limit", "the call tried to write a file (RLIMIT_FSIZE is 0)"
    if sig == signal.SIGSEGV:
        return "crash", "the sandbox child crashed (segmentation fault)"
    return "crash", f"the sandbox child died of {sig.name}"
