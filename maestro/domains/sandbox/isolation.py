"""The kernel layers between the sandbox child and everything else, set up before package code.

The host starts ``python -m maestro.domains.sandbox.child`` (the *launcher*). The launcher
imports what the package may use, then leaves the host's network, IPC, mount and PID
namespaces (``unshare``) and forks: in a new PID namespace a small init (PID 1) forks the
*worker*, so the worker sees no process but itself and its init, and the host's PIDs mean
nothing to it. The worker, still root, puts an empty read-only root under itself (a private
tmpfs, ``chroot``), drops to an unprivileged uid/gid with no capabilities, lowers its resource
limits, and loads the seccomp allowlist; only then does it read package code. Each layer that
cannot be set up says ``unavailable: why`` and the others still hold; ``maestro sandbox check``
prints them. The launcher and init only wait and pass the worker's exit status up (a death by
signal ``s`` as status ``128 + s``).
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import signal
import time
from collections.abc import Iterable
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_REC, MS_PRIVATE = 32, 0x4000, 1 << 18

#: Every layer, in the order ``maestro sandbox check`` reports them.
LAYERS = ("network", "ipc", "pid", "mount", "user", "limits", "seccomp", "audit")
#: The layers a test may turn off (SandboxOptions.disable), to exercise the degraded path.
SWITCHABLE = frozenset({"network", "ipc", "pid", "mount", "user", "seccomp"})
OFF = "unavailable: turned off by the host (test switch)"
ACTIVE = "active"

_NAMESPACES = (("network", CLONE_NEWNET), ("ipc", CLONE_NEWIPC), ("mount", CLONE_NEWNS))


def _native() -> Any:
    """The C calls (``_native.c``); never ctypes, which would put raw memory in reach of the
    package code this process runs (through ``object.__subclasses__()``, with no audit event)."""
    from maestro.domains.sandbox import _native

    return _native


def _failed(call: str, exc: OSError) -> str:
    return f"unavailable: {call}: {exc.strerror or exc}"


def enter_namespaces(disabled: Iterable[str]) -> dict[str, str]:
    """Leave the host's network, IPC, mount and PID namespaces; one status per layer.

    The PID namespace takes effect for the children forked after it (:func:`fork_worker`).
    """
    off = set(disabled)
    layers: dict[str, str] = {}
    try:
        native = _native()
    except ImportError as exc:
        why = f"unavailable: maestro's native helper is not built ({exc}); reinstall maestro"
        return {name: why for name in ("network", "ipc", "mount", "pid")}
    for name, flag in (*_NAMESPACES, ("pid", CLONE_NEWPID)):
        if name in off:
            layers[name] = OFF
            continue
        try:
            native.unshare(flag)
        except OSError as exc:
            layers[name] = _failed("unshare", exc)
            continue
        try:
            if name == "mount":
                # Mounts made from here on must never propagate back to the host's namespace.
                native.mount("none", "/", None, MS_REC | MS_PRIVATE, None)
        except OSError as exc:
            layers[name] = _failed("mount --make-rprivate /", exc)
        else:
            layers[name] = ACTIVE
    return layers


#: The exit status of a worker the host asked to make way for a fresh one (``recycle``).
RECYCLE_STATUS = 75


def fork_worker(
    pid_namespace: bool, close_in_parents: Iterable[int], host_pid: int | None = None
) -> int:
    """Fork the worker; returns only in the worker: how many workers came before it. The
    parents wait and exit with its status.

    With a PID namespace the first child is its init (PID 1), which forks the worker: an init
    with no signal handlers ignores signals the kernel sends it (RLIMIT_CPU's SIGXCPU), a
    worker does not. The process that forks the worker holds no package code (the launcher
    imported only what package code may use), so when a worker exits with
    :data:`RECYCLE_STATUS` it forks a fresh one from that pristine state: a new session
    meets none of the last one's module state. The launcher, while it waits, watches
    ``host_pid``: a host killed without a chance to stop its child (SIGTERM, SIGKILL) must
    not leave package code running.
    """
    fds = tuple(close_in_parents)
    watch = host_pid
    if pid_namespace:
        init = os.fork()
        if init:
            _wait_and_exit(init, fds, watch)
        _die_with_parent()
        watch = None  # the init dies with the launcher, the worker with the init
    before = 0
    while True:
        worker = os.fork()
        if not worker:
            return before
        status = _wait(worker, watch)
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == RECYCLE_STATUS):
            _exit_as(status, fds)
        before += 1


#: How often the launcher looks whether the host still runs.
HOST_WATCH_S = 0.2


def _wait_and_exit(pid: int, fds: tuple[int, ...], host_pid: int | None = None) -> None:
    # The pipes belong to the worker: the host sees end of file as soon as it dies.
    for fd in fds:
        os.close(fd)
    _exit_as(_wait(pid, host_pid), ())


def _wait(pid: int, host_pid: int | None = None) -> int:
    if host_pid is not None:
        _stop_if_host_dies(pid, host_pid)
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(3)


def _exit_as(status: int, fds: tuple[int, ...]) -> None:
    for fd in fds:
        os.close(fd)
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


def _stop_if_host_dies(child: int, host_pid: int) -> None:
    """Return when ``child`` has ended; SIGKILL it first if the host dies (this process is
    then re-parented, its parent pid changes). Killing the init ends the whole PID namespace.

    Not PR_SET_PDEATHSIG: it fires when the host *thread* that started the launcher ends, and
    the host starts successors from short-lived background threads.
    """
    while True:
        if os.getppid() != host_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
            return
        try:
            # WNOWAIT: only look; the caller reaps the child and passes its status up.
            if os.waitid(os.P_PID, child, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        except InterruptedError:
            continue
        time.sleep(HOST_WATCH_S)


def _die_with_parent() -> None:
    """SIGKILL this process when its parent dies (so nothing outlives a killed launcher)."""
    with contextlib.suppress(OSError, ImportError):  # the host kills the process group anyway
        _native().set_pdeathsig(signal.SIGKILL)


def empty_root(mount_status: str) -> str:
    """In the private mount namespace, make an empty read-only tmpfs the worker's ``/``."""
    if mount_status != ACTIVE:
        return mount_status
    target = next((d for d in ("/mnt", "/tmp", "/proc") if os.path.isdir(d)), None)
    if target is None:
        return "unavailable: no directory to mount the empty root on"
    native = _native()
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    try:
        native.mount("maestro-sandbox", target, "tmpfs", flags, "size=4k,mode=0555")
    except OSError as exc:
        return _failed("mount tmpfs", exc)
    try:
        os.chroot(target)
        os.chdir("/")
    except OSError as exc:
        return f"unavailable: chroot: {exc}"
    try:
        native.mount("none", "/", None, MS_REMOUNT | MS_RDONLY | flags, None)
    except OSError as exc:
        return _failed("remount / read-only", exc)
    return ACTIVE


def drop_privileges(uid: int, gid: int, disabled: Iterable[str]) -> str:
    """Become ``uid``/``gid`` with no supplementary groups and no capabilities."""
    if "user" in set(disabled):
        return OFF
    if os.geteuid() != 0:
        return (
            "unavailable: the host does not run as root, so the child keeps its uid "
            f"({os.geteuid()}) and can reach the host's processes as that user"
        )
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        return f"unavailable: {exc}"
    # Changing uid cleared the parent-death signal; set it again.
    _die_with_parent()
    return ACTIVE


#: CPU seconds one worker may use in its whole life (calls are bounded one by one by a CPU
#: timer, ``cpu_s``): past it, SIGXCPU ends the worker and the next call starts a fresh one.
LIFETIME_CPU_S = 3600


def lower_limits(limits: dict[str, Any], startup_s: float) -> str:
    """Memory, file size, core, processes, and CPU over the worker's life."""
    memory = int(limits["memory_mb"]) * 1024 * 1024
    nproc = int(limits["max_processes"])
    cpu = math.ceil(cpu_used() + startup_s + LIFETIME_CPU_S)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    except (OSError, ValueError) as exc:
        return f"unavailable: setrlimit: {exc}"
    return ACTIVE


def cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
