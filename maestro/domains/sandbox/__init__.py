"""The sandbox for untrusted (LLM-written or outside) domain code.

:func:`load_sandboxed_domain` loads a package whose models.py and tools.py run only in a child
process behind kernel layers (namespaces, an unprivileged user, resource limits, a seccomp
allowlist) and an audit hook; the host never imports or evaluates them, and validates every
JSON answer with models of its own. :func:`check_tools_source` and :func:`check_models_source`
are a linter with messages an LLM can act on; the process boundary is the security boundary.
The domain it yields is a drop-in for :func:`maestro.domains.load_domain`'s. See
docs/sandbox.md; ``maestro sandbox check`` reports each layer.
"""

from maestro.domains.sandbox.check import LayerReport, check_layers
from maestro.domains.sandbox.limits import SandboxLimits
from maestro.domains.sandbox.package import SandboxOptions, load_sandboxed_domain, open_untrusted
from maestro.domains.sandbox.static import check_models_source, check_tools_source
from maestro.domains.sandbox.toolkit import SandboxToolkit

__all__ = [
    "LayerReport",
    "SandboxLimits",
    "SandboxOptions",
    "SandboxToolkit",
    "check_layers",
    "check_models_source",
    "check_tools_source",
    "load_sandboxed_domain",
    "open_untrusted",
]
