"""The sandbox child's system-call allowlist: a seccomp filter through libseccomp (ctypes).

Deny by default: once loaded (before any package code runs), the kernel kills the child
(SIGSYS) at the first system call not listed here, whatever Python or C made it. The list is
what a loaded interpreter needs to compute and answer on its pipes: memory, its own signals and
timers, clocks, reading and writing descriptors it already holds. Not on it, among others:
``open``/``openat`` (no file can be opened), ``clone``/``fork``/``execve`` (no thread, no
process), ``socket``, ``kill`` (``tgkill`` only to itself), ``pidfd_*``, ``ptrace``,
``sched_setaffinity``, ``setpriority``, ``setrlimit``/``prlimit64`` with a new limit,
``unshare``/``setns``/``mount``, ``ioctl``. The audit hook refuses most of these earlier, at the
Python level, with a clearer message; this filter is what holds when Python is bypassed.
"""

from __future__ import annotations

import ctypes
import os

_KILL_PROCESS = 0x80000000
_ALLOW = 0x7FFF0000
_CMP_LT = 2
_CMP_EQ = 4
_CMP_MASKED_EQ = 7
_AT_EMPTY_PATH = 0x1000
#: fcntl commands on a descriptor it holds: its flags (blocking, close-on-exec) and a copy.
#: Not F_SETOWN/F_SETSIG/F_SETOWN_EX (with O_ASYNC the kernel would signal any process on the
#: next I/O: a ``kill`` by another name), leases, locks or notifications.
FCNTL_COMMANDS = {
    "F_DUPFD": 0,
    "F_GETFD": 1,
    "F_SETFD": 2,
    "F_GETFL": 3,
    "F_SETFL": 4,
    "F_DUPFD_CLOEXEC": 1030,
}
#: Descriptors are small numbers; AT_FDCWD (-100) is not one, as unsigned.
_MAX_FD = 1 << 20

#: Allowed whatever their arguments.
ALLOWED = (
    # descriptors it holds: its pipes, /dev/null
    "read", "write", "readv", "writev", "pread64", "close", "lseek", "fstat",
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise",
    # its own signals and timers (the deadline is a timer signal)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "setitimer", "getitimer",
    "alarm", "restart_syscall",
    # time, waiting, randomness, identity, accounting
    "clock_gettime", "clock_getres", "gettimeofday", "time", "clock_nanosleep", "nanosleep",
    "select", "pselect6", "poll", "ppoll", "futex", "sched_yield", "getrandom", "getpid",
    "gettid", "getuid", "geteuid", "getgid", "getegid", "getrusage", "sched_getaffinity",
    # ending
    "exit", "exit_group",
)  # fmt: skip


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


class Allowlist:
    """The filter, built now and loaded later (loading is a single C call)."""

    def __init__(self) -> None:
        self.status = "active"
        self._lib: ctypes.CDLL | None = None
        self._ctx: int | None = None
        try:
            self._lib = _libseccomp()
            self._ctx = self._lib.seccomp_init(_KILL_PROCESS)
            if not self._ctx:
                raise OSError("seccomp_init failed")
            for syscall in ALLOWED:
                self._allow(syscall)
            # Signals to its own threads only (abort() raises one); never to another process.
            self._allow("tgkill", _ArgCmp(0, _CMP_EQ, os.getpid(), 0))
            # Reading its own limits (resource.getrlimit), never setting one.
            self._allow("prlimit64", _ArgCmp(2, _CMP_EQ, 0, 0))
            for command in FCNTL_COMMANDS.values():
                self._allow("fcntl", _ArgCmp(1, _CMP_EQ, command, 0))
            # fstat of a descriptor it holds: glibc spells it newfstatat(fd, "", AT_EMPTY_PATH).
            # A path cannot be checked here (seccomp sees a pointer), but the directory can:
            # never the current one (AT_FDCWD), only a descriptor it holds (its pipes).
            flag = _ArgCmp(3, _CMP_MASKED_EQ, _AT_EMPTY_PATH, _AT_EMPTY_PATH)
            self._allow("newfstatat", flag, _ArgCmp(0, _CMP_LT, _MAX_FD, 0))
        except (OSError, AttributeError) as exc:
            self.status = f"unavailable: {exc}"

    def _allow(self, syscall: str, *cmp: _ArgCmp) -> None:
        assert self._lib is not None
        number = self._lib.seccomp_syscall_resolve_name(syscall.encode())
        if number < 0:
            return  # not a system call on this architecture (alarm, select on arm64, ...)
        array = (_ArgCmp * len(cmp))(*cmp) if cmp else None
        rc = self._lib.seccomp_rule_add_array(self._ctx, _ALLOW, number, len(cmp), array)
        if rc != 0:
            raise OSError(-rc, f"seccomp rule for {syscall}: {os.strerror(-rc)}")

    def load(self) -> str:
        """Apply the filter to this process for good; "active" or "unavailable: why"."""
        if self._lib is None or not self._ctx or self.status != "active":
            return self.status
        rc = self._lib.seccomp_load(self._ctx)
        self._lib.seccomp_release(self._ctx)
        self._ctx = None
        if rc != 0:
            self.status = f"unavailable: seccomp_load: {os.strerror(-rc)}"
        return self.status


def _libseccomp() -> ctypes.CDLL:
    # By soname: ctypes.util.find_library would start ldconfig in a subprocess.
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    )
    lib.seccomp_load.argtypes = (ctypes.c_void_p,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    return lib
