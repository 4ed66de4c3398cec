"""The host's handle on one sandbox child process: start, request with a deadline, kill.

The child is a fresh interpreter (``subprocess`` with exec, never a bare fork: the host may hold
threads of deltalake's tokio runtime, which do not survive a fork). Anything that goes wrong with
it (it dies, hangs, answers garbage or too much) becomes a :class:`ChildFailure` with a reason,
and the process is killed; the next request starts a new one.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import select
import signal
import subprocess
import sys
import time
from typing import Any

from maestro.domains.sandbox.limits import SandboxLimits
from maestro.domains.sandbox.protocol import ChannelError, read_until, write_until

STDERR_TAIL_BYTES = 4000


class ChildFailure(Exception):
    """The child did not answer: ``kind`` is "timeout", "crash", "limit", "protocol" or "start"."""

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


class SandboxProcess:
    """One running child; :meth:`request` is the only way to talk to it."""

    def __init__(self, limits: SandboxLimits, init: dict[str, Any]) -> None:
        self.limits = limits
        self._init = init
        self._proc: subprocess.Popen[bytes] | None = None
        self._to_child = -1
        self._from_child = -1
        self.ready: dict[str, Any] = {}
        self.cpu_s = 0.0
        self._cpu_soft = -1

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> dict[str, Any]:
        """Start the child and wait for it to load the package; returns its ready message."""
        self._spawn()
        deadline = time.monotonic() + self.limits.startup_timeout_s
        try:
            write_until(self._to_child, self._init, deadline)
            ready = read_until(self._from_child, deadline, self.limits.max_reply_bytes)
        except ChannelError as exc:
            tail = self._stderr_tail()
            self.kill()
            raise SandboxStartError(
                f"the sandbox child did not start: {exc.reason}{tail}"
            ) from None
        self._close_stderr()
        if not ready.get("ok"):
            self.kill()
            raise SandboxStartError(
                "the sandbox child could not load the package", ready.get("problems")
            )
        self.ready = ready
        self.cpu_s = float(ready.get("cpu_s", 0.0))
        return ready

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
                    "-B",  # no .pyc writes: writing files is refused in the child
                    "-m",
                    "maestro.domains.sandbox.child",
                    str(child_in),
                    str(child_out),
                ],
                pass_fds=(child_in, child_out),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,  # read only when the start fails
                start_new_session=True,  # the host's Ctrl-C and job control do not reach it
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

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request and wait for its reply; ChildFailure (child killed) otherwise."""
        if not self.alive:
            raise ChildFailure("crash", "the sandbox child is not running")
        self._bound_cpu()
        deadline = time.monotonic() + timeout_s
        try:
            write_until(self._to_child, message, deadline)
            reply = read_until(self._from_child, deadline, self.limits.max_reply_bytes)
        except ChannelError as exc:
            raise self._failure(exc) from None
        self.cpu_s = float(reply.get("cpu_s", self.cpu_s))
        return reply

    def _bound_cpu(self) -> None:
        """The child's soft CPU limit: what it used so far plus one call's allowance."""
        assert self._proc is not None
        soft = math.ceil(self.cpu_s + self.limits.cpu_s)
        if soft == self._cpu_soft:
            return  # RLIMIT_CPU counts whole seconds: most calls leave it where it is
        self._cpu_soft = soft
        with contextlib.suppress(OSError, ValueError):  # it just exited: the request says so
            resource.prlimit(self._proc.pid, resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))

    def _failure(self, exc: ChannelError) -> ChildFailure:
        if exc.kind == "timeout":
            self.kill()
            return ChildFailure("timeout", exc.reason)
        if exc.kind == "protocol":
            self.kill()
            return ChildFailure("protocol", f"the sandbox child broke the protocol: {exc.reason}")
        code = self._wait_exit()
        self.kill()
        return ChildFailure(*_exit_reason(code, self.limits))

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
            proc.kill()

    def kill(self) -> None:
        """Stop the child now (SIGKILL) and release its pipes. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            # An unkillable child (uninterruptible sleep) is reaped by the kernel later.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
            if proc.stderr is not None:
                proc.stderr.close()
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to_child = self._from_child = -1

    def _stderr_tail(self) -> str:
        """What the child printed before it failed to start (bounded, without blocking)."""
        if self._proc is None or self._proc.stderr is None:
            return ""
        self._wait_exit()
        fd = self._proc.stderr.fileno()
        os.set_blocking(fd, False)
        data = b""
        while len(data) < 1 << 20 and select.select([fd], [], [], 0)[0]:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        text = data[-STDERR_TAIL_BYTES:].decode("utf-8", "replace").strip()
        return f"\n{text}" if text else ""

    def _close_stderr(self) -> None:
        if self._proc is not None and self._proc.stderr is not None:
            self._proc.stderr.close()
            self._proc.stderr = None


def _exit_reason(code: int | None, limits: SandboxLimits) -> tuple[str, str]:
    """(kind, reason) for a child that exited: "limit" when a resource limit killed it."""
    if code is None:
        return "crash", "the sandbox child stopped answering"
    if code >= 0:
        return "crash", f"the sandbox child exited with status {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return "crash", f"the sandbox child died of signal {-code}"
    if sig == signal.SIGXCPU:
        return "limit", f"the call used more than its {limits.cpu_s:g} s of CPU (RLIMIT_CPU)"
    if sig == signal.SIGXFSZ:
        return "limit", "the call tried to write a file (RLIMIT_FSIZE is 0)"
    if sig == signal.SIGSEGV:
        return "crash", "the sandbox child crashed (segmentation fault)"
    return "crash", f"the sandbox child died of {sig.name}"
