"""Where each role's requests go for one command: configured endpoints, or the embedded model,
started only when a role the command calls has no endpoint."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from pathlib import Path

from maestro.agents.embedded import EmbeddedServer
from maestro.agents.settings import ROLES, LLMSettings, Role
from maestro.settings import RunSettings

#: The roles a synthesis calls.
CODEGEN: tuple[Role, ...] = ("codegen",)


@contextlib.contextmanager
def model_endpoints(
    settings: LLMSettings, roles: Collection[Role], run_dir: Path | None = None
) -> Iterator[LLMSettings]:
    """The settings resolved for the roles a command calls: every one of ``roles`` has its
    endpoint. Roles without one are served by the embedded model, started here (its log in
    ``run_dir``, the run folder by default) and stopped on exit; when every role called has an
    endpoint, nothing is started. Roles not called are left as configured.

    Roles on the embedded model get its limits: one request at a time (one small model answers
    every role in turn), its completion-token cap, and deadlines long enough for CPU inference.
    """
    unknown = set(roles) - set(ROLES)
    if unknown:
        raise ValueError(f"no role(s) {sorted(unknown)}; roles are {list(ROLES)}")
    local = settings.model_copy(deep=True)
    embedded = [r for r in ROLES if r in roles and local.role(r).base_url is None]
    if not embedded:
        yield local
        return
    with EmbeddedServer(local.embedded, run_dir or RunSettings().dir) as server:
        assert server.base_url is not None
        for r in embedded:
            rs = local.role(r)
            rs.base_url = server.base_url
            rs.model = rs.model or local.embedded.model_name
            rs.max_concurrency = 1
            cap = local.embedded.codegen_max_tokens if r == "codegen" else local.embedded.max_tokens
            rs.max_tokens = min(rs.max_tokens, cap)
            rs.timeout_s = max(rs.timeout_s, 600.0)
            rs.deadline_s = max(rs.deadline_s, 1800.0)
        yield local


def model_name(settings: LLMSettings, role: Role) -> str:
    """The model a role's calls go to, as recorded in the lake."""
    rs = settings.role(role)
    return rs.model or (settings.embedded.model_name if rs.base_url is None else "default")


def roles_called(*, judge: bool, synthesize: bool = False) -> tuple[Role, ...]:
    """The roles a simulating command calls: the assistant and the user, the judge when NL
    assertions are judged, codegen when it synthesizes."""
    roles: list[Role] = ["assistant", "user"]
    if judge:
        roles.append("judge")
    if synthesize:
        roles.append("codegen")
    return tuple(roles)
