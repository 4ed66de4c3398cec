"""The sandbox for untrusted (LLM-written) domain code.

Two layers. :func:`check_tools_source` and :func:`check_models_source` validate the source
statically (an import allowlist, no dunder names, no ``exec``/``eval``/``open``/...), and
:func:`load_sandboxed_domain` runs a package's tools only inside a child process with CPU,
memory, process-count and wall-time limits and no network; the host never imports tools.py.
The domain it yields is a drop-in for :func:`maestro.domains.load_domain`'s: simulation, gold
replay and scoring work on it unchanged. See docs/sandbox.md.
"""

from maestro.domains.sandbox.limits import SandboxLimits
from maestro.domains.sandbox.package import load_sandboxed_domain
from maestro.domains.sandbox.static import check_models_source, check_tools_source
from maestro.domains.sandbox.toolkit import SandboxToolkit

__all__ = [
    "SandboxLimits",
    "SandboxToolkit",
    "check_models_source",
    "check_tools_source",
    "load_sandboxed_domain",
]
