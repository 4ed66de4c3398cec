"""A host killed while its sandbox child runs package code leaves nothing behind (red-team
finding 14: the child, re-parented to init, ran on, for up to its hour of CPU)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.domains.sandbox_support import TOY_TOOLS, make_package

#: tools.py whose module code never ends: the child hangs while the package loads.
HANGING = TOY_TOOLS + '\nimport re\nHANG = re.match("(a+)+$", "a" * 64 + "b")\n'


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _tree(pid: int) -> list[int]:
    out, stack = [], _children(pid)
    while stack:
        child = stack.pop()
        out.append(child)
        stack.extend(_children(child))
    return out


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_host_killed_mid_load_takes_its_sandbox_child_with_it(
    tmp_path: Path, how: signal.Signals
) -> None:
    package = make_package(tmp_path, "hang", HANGING)
    host = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from maestro.domains import inspect_package; "
            "inspect_package(sys.argv[1], check_gold=False)",
            str(package),
        ],
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        # The launcher, its init and the worker: three processes once package code runs.
        while len(_tree(host.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        sandbox = _tree(host.pid)
        assert len(sandbox) >= 2, f"the sandbox child never reached package code: {sandbox}"
        time.sleep(1.0)  # the worker is inside the regex now
        sandbox = _tree(host.pid)
    finally:
        os.kill(host.pid, how)
        host.wait(timeout=30)
    deadline = time.monotonic() + 10
    while any(_running(pid) for pid in sandbox) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in sandbox if _running(pid)]
    for pid in left:  # do not leave them to the next test either
        os.kill(pid, signal.SIGKILL)
    assert left == [], "sandbox processes outlived their host"
