"""The kernel layers around the sandbox child: each is active where the machine allows it and
confirmed from the host's side, ``maestro sandbox check`` reports them, and each one's degraded
path (turned off by the tests' switch) is reported and still leaves the host unharmed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from maestro.domains import Domain
from maestro.domains.sandbox import SandboxToolkit, check_layers
from maestro.domains.sandbox.isolation import LAYERS, OFF, SWITCHABLE
from tests.domains.sandbox_support import (
    LIMITS,
    TOY_TOOLS,
    Host,
    make_package,
    tool_source,
    unchecked,
)

MAESTRO = str(Path(sys.executable).with_name("maestro"))

#: What a child would do to the host, through calls the audit hook does not see, and through
#: calls it does (with the static check bypassed).
ATTACKS = {
    "affinity_host": 'import os\nos.sched_setaffinity(int(target), {0})\nreturn "ok"',
    "priority_host": 'import os\nos.setpriority(os.PRIO_PROCESS, int(target), 19)\nreturn "ok"',
    "pidfd_kill_host": (
        'import os, signal\nsignal.pidfd_send_signal(os.pidfd_open(int(target)), 9)\nreturn "ok"'
    ),
    "kill_host": 'import os\nos.kill(int(target), 9)\nreturn "ok"',
    "read_passwd": 'return open("/etc/passwd").read()',
    "connect_out": (
        'import socket\nsocket.create_connection(("127.0.0.1", 9), timeout=1)\nreturn "ok"'
    ),
}
KERNEL_ONLY = ("affinity_host", "priority_host", "pidfd_kill_host")


@pytest.fixture(scope="module")
def attacks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tools = TOY_TOOLS + "".join(tool_source(name, body) for name, body in ATTACKS.items())
    return make_package(tmp_path_factory.mktemp("attacks"), "toy", tools)


@pytest.fixture(scope="module")
def sandboxed(attacks: Path) -> Iterator[Domain]:
    with unchecked(attacks) as domain:
        yield domain


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


# ----- every layer, from the host's side --------------------------------------------------------


def test_every_layer_is_reported_and_a_call_is_served() -> None:
    report = check_layers()
    assert list(report.layers) == list(LAYERS)
    for name, status in report.layers.items():
        assert status == "active" or status.startswith("unavailable: "), (name, status)
    assert report.served
    assert report.ok == all(s == "active" for s in report.layers.values())


def test_the_worker_is_isolated_as_it_says(sandboxed: Domain) -> None:
    toolkit = sandboxed.toolkit
    assert isinstance(toolkit, SandboxToolkit)
    layers = toolkit.start()
    pid = toolkit.child_pid
    assert pid is not None and pid != os.getpid()
    status = _status(pid)
    for layer, kind in (("network", "net"), ("ipc", "ipc"), ("pid", "pid"), ("mount", "mnt")):
        if layers[layer] == "active":
            assert os.readlink(f"/proc/{pid}/ns/{kind}") != os.readlink(f"/proc/self/ns/{kind}")
    if layers["pid"] == "active":
        assert status["NSpid"].split()[-1] == "2", "its init is 1; it is 2; the host is nothing"
    if layers["mount"] == "active":
        assert os.listdir(f"/proc/{pid}/root") == [], "its root is empty"
    if layers["user"] == "active":
        assert status["Uid"].split() == [str(LIMITS.uid)] * 4
        assert status["Gid"].split() == [str(LIMITS.gid)] * 4
        assert int(status["CapEff"], 16) == 0 and status["Groups"].strip() == ""
    if layers["seccomp"] == "active":
        assert status["Seccomp"].strip() == "2" and status["NoNewPrivs"].strip() == "1"
    limits = Path(f"/proc/{pid}/limits").read_text()
    assert layers["limits"] == "active"
    assert f"Max address space         {LIMITS.memory_mb * 2**20}" in limits
    for line in ("Max file size             0", "Max core file size        0"):
        assert line in limits
    assert "Max processes             0" in limits


# ----- degraded paths ---------------------------------------------------------------------------


@pytest.mark.parametrize("layer", sorted(SWITCHABLE))
def test_a_layer_turned_off_is_reported_and_the_others_still_hold(
    layer: str, attacks: Path, tmp_path: Path
) -> None:
    with unchecked(attacks, disable=[layer]) as domain:
        assert isinstance(domain.toolkit, SandboxToolkit)
        assert domain.toolkit.start()[layer] == OFF
        session = domain.start_session()
        host = Host([])
        for name in ATTACKS:
            out = domain.toolkit.call(session, name, {"target": str(os.getpid())})
            assert out.status != "ok", (layer, name, out.content)
            assert "root:" not in out.content
        host.assert_unharmed(session, domain.initial.state_hash())


@pytest.mark.parametrize(
    ("kept", "status", "why"),
    [
        ("seccomp", "sandbox", "seccomp killed it"),
        ("pid", "exception", "No such process"),
        ("user", "exception", "Operation not permitted"),
    ],
)
def test_each_kernel_layer_alone_stops_the_child_acting_on_the_host(
    kept: str, status: str, why: str, attacks: Path
) -> None:
    disable = sorted({"seccomp", "pid", "user"} - {kept})
    with unchecked(attacks, disable=disable) as domain:
        session = domain.start_session()
        host = Host([])
        for name in KERNEL_ONLY:
            out = domain.toolkit.call(session, name, {"target": str(os.getpid())})
            assert (out.status, why in out.content) == (status, True), (kept, name, out.content)
        host.assert_unharmed(session)


def test_the_check_reports_a_layer_turned_off() -> None:
    report = check_layers(disable=["network"])
    assert report.layers["network"] == OFF and not report.ok
    assert report.to_json()["layers"][0] == {
        "layer": "network",
        "what": "network namespace: no interface but a downed loopback",
        "status": OFF,
    }


# ----- maestro sandbox check -------------------------------------------------------------------


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([MAESTRO, *args], capture_output=True, text=True, timeout=300, env=env)


def test_the_check_command_prints_each_layer_and_exits_by_them() -> None:
    proc = _run("sandbox", "check", "--json")
    data = json.loads(proc.stdout)
    assert [row["layer"] for row in data["layers"]] == list(LAYERS)
    assert proc.returncode == (0 if data["ok"] else 1), proc.stderr
    off = _run("sandbox", "check", "--turn-off", "seccomp", "--turn-off", "pid")
    assert off.returncode == 1, off.stdout + off.stderr
    assert f"seccomp  {OFF}" in off.stdout and f"pid      {OFF}" in off.stdout
    bad = _run("sandbox", "check", "--turn-off", "audit")
    assert bad.returncode == 2 and "layers are" in bad.stdout
