"""A Toolkit whose tools run in a sandbox child process instead of the host."""

from __future__ import annotations

from maestro.domains.runtime import Toolkit


class SandboxToolkit(Toolkit):
    """Same surface as :class:`~maestro.domains.runtime.Toolkit`; calls run in the sandbox.

    ``names``, ``kind``, ``schemas`` and ``validate_arguments`` are answered in the host from
    specs built without importing tools.py; ``call`` ships the call to the child and applies the
    writes it made to the host's session. A crash, limit hit or refused operation in the child
    comes back as a ToolOutcome (status ``"sandbox"``, ``"crash"`` or ``"timeout"``), never as an
    exception, and the child is restarted for the next call. ``close`` stops the child.
    """
