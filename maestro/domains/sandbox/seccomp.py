"""Kernel-level refusals for the sandbox child: seccomp filters through libseccomp (ctypes).

The audit hook refuses operations at the Python level; a filter refuses the system calls
themselves, so an escape from Python (through ctypes, a C extension bug or an interpreter
escape) still cannot start a process, open a socket or touch another process. Two stages:
``LOAD`` before tools.py runs (imports still open files), ``SERVE`` once it has loaded (no file
is opened, no thread is started). Each stage narrows the one before; none can be undone.
Where libseccomp or seccomp is missing, the filter says so and the sandbox goes on with its
other layers.
"""

from __future__ import annotations

import ctypes
import errno
import os

_ALLOW = 0x7FFF0000
_CMP_NE = 1
_CMP_MASKED_EQ = 7


def _errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


#: Refused from before tools.py runs: processes, network, other processes, the file system's
#: shape, privileges, kernel facilities an escape would use.
LOAD = (
    "execve", "execveat", "fork", "vfork", "socket", "socketpair", "connect", "bind", "listen",
    "accept", "accept4", "ptrace", "process_vm_readv", "process_vm_writev", "kill", "tkill",
    "mount", "umount2", "unshare", "setns", "chroot", "pivot_root", "reboot", "kexec_load",
    "init_module", "finit_module", "delete_module", "bpf", "perf_event_open", "keyctl",
    "add_key", "request_key", "userfaultfd", "io_uring_setup", "mknod", "mknodat", "unlink",
    "unlinkat", "rename", "renameat", "renameat2", "rmdir", "mkdir", "mkdirat", "link", "linkat",
    "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
    "fchownat", "truncate", "ftruncate", "setrlimit", "prlimit64", "setuid", "setgid",
    "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "personality", "creat",
)  # fmt: skip

#: Refused once tools.py has loaded: opening any file, and new threads or processes.
SERVE = ("open", "openat", "openat2", "clone", "clone3", "name_to_handle_at", "open_by_handle_at")

_WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)


class Filter:
    """One stage's filter, built now and loaded later (loading is a single C call)."""

    def __init__(self, stage: str) -> None:
        self.status = "seccomp"
        self._lib: ctypes.CDLL | None = None
        self._ctx: int | None = None
        try:
            self._lib = _libseccomp()
            self._ctx = self._lib.seccomp_init(_ALLOW)
            if not self._ctx:
                raise OSError("seccomp_init failed")
            for syscall in LOAD if stage == "load" else SERVE:
                self._deny(syscall, errno.ENOSYS if syscall == "clone3" else errno.EPERM)
            if stage == "load":
                # A thread may signal threads of its own process only (abort() does).
                self._deny("tgkill", errno.EPERM, _ArgCmp(0, _CMP_NE, os.getpid(), 0))
                for flag in _WRITE_FLAGS:  # files open for reading only, while imports run
                    self._deny("openat", errno.EPERM, _ArgCmp(2, _CMP_MASKED_EQ, flag, flag))
                    self._deny("open", errno.EPERM, _ArgCmp(1, _CMP_MASKED_EQ, flag, flag))
        except (OSError, AttributeError) as exc:
            self.status = f"unavailable: {exc}"

    def _deny(self, syscall: str, code: int, *cmp: _ArgCmp) -> None:
        assert self._lib is not None
        number = self._lib.seccomp_syscall_resolve_name(syscall.encode())
        if number < 0:
            return  # not a system call on this architecture (open on arm64, ...)
        array = (_ArgCmp * len(cmp))(*cmp) if cmp else None
        rc = self._lib.seccomp_rule_add_array(self._ctx, _errno(code), number, len(cmp), array)
        if rc != 0:
            raise OSError(-rc, f"seccomp rule for {syscall}: {os.strerror(-rc)}")

    def load(self) -> str:
        """Apply the filter to this process for good; "seccomp" or "unavailable: why"."""
        if self._lib is None or not self._ctx or self.status != "seccomp":
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
