"""Where each role's requests go for one run: configured endpoints, or the embedded model."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from maestro.agents.embedded import EmbeddedServer
from maestro.agents.settings import ROLES, LLMSettings, Role


@contextlib.contextmanager
def model_endpoints(
    settings: LLMSettings, run_dir: Path
) -> Iterator[tuple[LLMSettings, dict[Role, str]]]:
    """Settings and base URLs for every role, starting the embedded model (and stopping it on
    exit) when some role has no endpoint.

    Roles on the embedded model get its limits: one request at a time (one small model answers
    every role in turn), its completion-token cap, and deadlines long enough for CPU inference.
    """
    if not settings.uses_embedded():
        yield settings, {r: settings.role(r).base_url or "" for r in ROLES}
        return
    with EmbeddedServer(settings.embedded, run_dir) as server:
        assert server.base_url is not None
        local = settings.model_copy(deep=True)
        for r in ROLES:
            rs = local.role(r)
            if rs.base_url is None:
                rs.model = rs.model or local.embedded.model_name
                rs.max_concurrency = 1
                cap = (
                    local.embedded.codegen_max_tokens
                    if r == "codegen"
                    else local.embedded.max_tokens
                )
                rs.max_tokens = min(rs.max_tokens, cap)
                rs.timeout_s = max(rs.timeout_s, 600.0)
                rs.deadline_s = max(rs.deadline_s, 1800.0)
        yield local, {r: local.role(r).base_url or server.base_url for r in ROLES}


def model_name(settings: LLMSettings, role: Role) -> str:
    """The model a role's calls go to, as recorded in the lake."""
    rs = settings.role(role)
    return rs.model or (settings.embedded.model_name if rs.base_url is None else "default")
