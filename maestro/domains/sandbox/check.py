"""``maestro sandbox check``: start a sandbox child on a tiny package and report each layer.

A layer is ``active`` only when the worker set it up (its report, sent before any package code
existed in it) and, where the host can see it from ``/proc``, the host confirms it: the worker's
namespaces differ from the host's, it runs with another uid and no capabilities, it has a
seccomp filter, its limits are set. Otherwise the layer reads ``unavailable: why``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from maestro.domains.sandbox.isolation import LAYERS
from maestro.domains.sandbox.limits import SandboxLimits
from maestro.domains.sandbox.package import SandboxOptions, _open
from maestro.domains.sandbox.toolkit import SandboxToolkit

WHAT = {
    "network": "network namespace: no interface but a downed loopback",
    "ipc": "IPC namespace: no System V or POSIX queues of the host",
    "pid": "PID namespace: no process of the host can be named",
    "mount": "mount namespace: an empty read-only root (private tmpfs)",
    "user": "unprivileged uid/gid, no capabilities",
    "limits": "memory, file size, core, processes, CPU (rlimits)",
    "seccomp": "system-call allowlist (kill on anything else)",
    "audit": "audit hook: deny by default at the Python level",
}

_PROBE = {
    "domain.json": json.dumps(
        {
            "id": "sandbox_probe",
            "name": "Sandbox probe",
            "version": "1.0.0",
            "description": "The package maestro sandbox check loads.",
            "industry": "none",
            "provenance": {"source": "hand-built", "authors": ["maestro"]},
        }
    ),
    "models.py": (
        "from typing import ClassVar\n\nfrom maestro.domains.sdk import Record\n\n\n"
        'class Note(Record):\n    key_field: ClassVar[str] = "note_id"\n    note_id: str\n'
        '    text: str\n\n\nTABLES = {"notes": Note}\n'
    ),
    "tools.py": (
        "from maestro.domains.sdk import Database, tool\n\n\n"
        '@tool("read")\ndef get_note(db: Database, note_id: str) -> dict:\n'
        '    """A note.\n\n    Args:\n        note_id: Its id.\n    """\n'
        '    return db.require("notes", note_id)\n'
    ),
    "db.json": json.dumps({"notes": {"N1": {"note_id": "N1", "text": "hello"}}}),
    "policy.md": "Answer with the note.\n",
    "tasks.jsonl": "",
}


@dataclass(frozen=True)
class LayerReport:
    """Each layer's status ("active" or "unavailable: why"), and whether a call ran."""

    layers: dict[str, str]
    served: bool

    @property
    def ok(self) -> bool:
        return self.served and all(v == "active" for v in self.layers.values())

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "served": self.served,
            "layers": [
                {"layer": name, "what": WHAT[name], "status": status}
                for name, status in self.layers.items()
            ],
        }


def check_layers(
    limits: SandboxLimits | None = None, *, disable: Iterable[str] = ()
) -> LayerReport:
    """Start a child on a probe package, confirm each layer, and make one call."""
    options = SandboxOptions(limits or SandboxLimits(), disable=frozenset(disable))
    with tempfile.TemporaryDirectory(prefix="maestro-sandbox-check-") as folder:
        root = Path(folder)
        for name, text in _PROBE.items():
            (root / name).write_text(text, encoding="utf-8")
        domain = _open(root, options, check_gold=False)
        try:
            toolkit = domain.toolkit
            assert isinstance(toolkit, SandboxToolkit)
            reported = toolkit.start()
            layers = confirm(toolkit.child_pid, reported)
            out = toolkit.call(domain.start_session(), "get_note", {"note_id": "N1"})
            return LayerReport(layers, out.ok and "hello" in out.content)
        finally:
            domain.close()


def confirm(pid: int | None, reported: dict[str, str]) -> dict[str, str]:
    """The worker's report, each ``active`` checked from the host's side where it can be."""
    out = {}
    for name in LAYERS:
        status = reported.get(name, "unavailable: not reported")
        if status == "active" and pid is not None:
            doubt = _CHECKS.get(name, _no_check)(pid)
            if doubt:
                status = f"unavailable: reported active, but {doubt}"
        out[name] = status
    return out


def _no_check(pid: int) -> str | None:
    return None


def _namespace(kind: str) -> Callable[[int], str | None]:
    def check(pid: int) -> str | None:
        try:
            if os.readlink(f"/proc/{pid}/ns/{kind}") == os.readlink(f"/proc/self/ns/{kind}"):
                return f"the child shares the host's {kind} namespace"
        except OSError as exc:
            return f"/proc/{pid}/ns/{kind}: {exc.strerror}"
        return None

    return check


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def _user(pid: int) -> str | None:
    try:
        status = _status(pid)
    except OSError as exc:
        return f"/proc/{pid}/status: {exc.strerror}"
    if status.get("Uid", "").split()[:1] == ["0"] or int(status.get("CapEff", "0"), 16) != 0:
        return "the child runs as root or with capabilities"
    return None


def _seccomp(pid: int) -> str | None:
    try:
        status = _status(pid)
    except OSError as exc:
        return f"/proc/{pid}/status: {exc.strerror}"
    return None if status.get("Seccomp", "").strip() == "2" else "the child has no seccomp filter"


def _limits(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/limits").read_text()
    except OSError as exc:
        return f"/proc/{pid}/limits: {exc.strerror}"
    for line in ("Max file size             0", "Max core file size        0"):
        if line not in text:
            return f"its limits lack {line.split('  ')[0]!r} 0"
    return None


_CHECKS: dict[str, Callable[[int], str | None]] = {
    "network": _namespace("net"),
    "ipc": _namespace("ipc"),
    "pid": _namespace("pid"),
    "mount": _namespace("mnt"),
    "user": _user,
    "seccomp": _seccomp,
    "limits": _limits,
}
