"""The sandbox child's system-call allowlist: a seccomp filter through libseccomp (``_native.c``).

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

import os
from typing import Any

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


#: One comparison of a rule: (argument index, operator, datum, datum), as libseccomp's
#: ``scmp_arg_cmp``.
ArgCmp = tuple[int, int, int, int]


class Allowlist:
    """The filter, built now (libseccomp is opened while files can still be opened) and loaded
    later (a single C call). Through ``_native.c``: the child never loads ctypes."""

    def __init__(self) -> None:
        self.status = "active"
        self._native: Any = None
        rules: list[tuple[str, tuple[ArgCmp, ...]]] = [(name, ()) for name in ALLOWED]
        # Signals to its own threads only (abort() raises one); never to another process.
        rules.append(("tgkill", ((0, _CMP_EQ, os.getpid(), 0),)))
        # Reading its own limits (resource.getrlimit), never setting one.
        rules.append(("prlimit64", ((2, _CMP_EQ, 0, 0),)))
        rules += [("fcntl", ((1, _CMP_EQ, command, 0),)) for command in FCNTL_COMMANDS.values()]
        # fstat of a descriptor it holds: glibc spells it newfstatat(fd, "", AT_EMPTY_PATH).
        # A path cannot be checked here (seccomp sees a pointer), but the directory can:
        # never the current one (AT_FDCWD), only a descriptor it holds (its pipes).
        flag = (3, _CMP_MASKED_EQ, _AT_EMPTY_PATH, _AT_EMPTY_PATH)
        rules.append(("newfstatat", (flag, (0, _CMP_LT, _MAX_FD, 0))))
        try:
            from maestro.domains.sandbox import _native

            _native.prepare_filter(_KILL_PROCESS, _ALLOW, rules)
            self._native = _native
        except (OSError, ImportError, RuntimeError) as exc:
            self.status = f"unavailable: {exc}"

    def load(self) -> str:
        """Apply the filter to this process for good; "active" or "unavailable: why"."""
        if self._native is None or self.status != "active":
            return self.status
        try:
            self._native.load_filter()
        except (OSError, RuntimeError) as exc:
            self.status = f"unavailable: {exc}"
        self._native = None
        return self.status
