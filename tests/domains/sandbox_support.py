"""Shared pieces of the sandbox tests: packages with hostile code, the loader with the static
check bypassed (so the run-time layers are shown on their own), and the check that nothing
reached the host."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from maestro.domains import Domain, Session
from maestro.domains.sandbox import SandboxLimits, SandboxOptions, SandboxToolkit
from maestro.domains.sandbox.package import _open, frozen_vetted

FIXTURES = Path(__file__).parent.parent / "fixtures"
TOY_TOOLS = (FIXTURES / "toy" / "tools.py").read_text()
TOY_MODELS = (FIXTURES / "toy" / "models.py").read_text()

# Short limits keep the hanging snippets quick; generous memory keeps the child's own use out of
# the way of the memory bomb's.
LIMITS = SandboxLimits(call_timeout_s=1.5, kill_grace_s=0.5, memory_mb=1024)


def tool_source(name: str, body: str, kind: str = "read", params: str = 'target: str = ""') -> str:
    """A tool named ``name`` running ``body`` (which may use ``target``)."""
    return (
        f'\n\n@tool("{kind}")\ndef {name}(db: Database, {params}) -> str:\n'
        f'    """A tool under test.\n\n    Args:\n        target: A path, pid or port.\n    """\n'
        f"{textwrap.indent(body, '    ')}\n"
    )


def make_package(tmp: Path, name: str, tools: str, models: str | None = None) -> Path:
    """The toy package with other tools.py (and models.py)."""
    root = tmp / name
    shutil.copytree(FIXTURES / "toy", root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tools.py").write_text(tools)
    if models is not None:
        (root / "models.py").write_text(models)
    return root


@contextmanager
def unchecked(
    root: Path,
    limits: SandboxLimits = LIMITS,
    *,
    disable: Sequence[str] = (),
    vetted: dict[str, tuple[str, ...]] | None = None,
) -> Iterator[Domain]:
    """A sandboxed domain loaded with the static check bypassed and, optionally, isolation
    layers turned off (the tests' switch)."""
    options = SandboxOptions(
        limits, frozen_vetted(vetted), check_static=False, disable=frozenset(disable)
    )
    domain = _open(root, options, check_gold=False)
    try:
        assert isinstance(domain.toolkit, SandboxToolkit)
        yield domain
    finally:
        domain.close()


def rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


@dataclass
class Host:
    """The host process as it was before an attack: what no attack may change."""

    markers: list[Path]
    pid: int = field(default_factory=os.getpid)
    affinity: set[int] = field(default_factory=lambda: os.sched_getaffinity(0))
    priority: int = field(default_factory=lambda: os.getpriority(os.PRIO_PROCESS, 0))
    sid: int = field(default_factory=lambda: os.getsid(0))
    rss: float = field(default_factory=rss_mb)
    modules: set[str] = field(default_factory=lambda: set(sys.modules))

    def assert_unharmed(self, session: Session | None = None, state_hash: str = "") -> None:
        for marker in self.markers:
            assert not marker.exists(), f"{marker} was written"
        assert os.getpid() == self.pid
        os.kill(self.pid, 0)  # alive, and still ours
        assert os.sched_getaffinity(0) == self.affinity, "the host's CPU affinity changed"
        assert os.getpriority(os.PRIO_PROCESS, 0) == self.priority, "the host's priority changed"
        assert os.getsid(0) == self.sid, "the host's session changed"
        assert rss_mb() - self.rss < 64, "the host grew by 64 MiB or more"
        new = {m for m in set(sys.modules) - self.modules if m.startswith("maestro_domain_")}
        assert not new, f"package modules in the host: {new}"
        if session is not None:
            assert session.diff().changes == (), session.diff().render()
            assert not state_hash or session.state_hash() == state_hash
