"""A package may not name a tool like maestro's own: serve-mcp lists its session tools beside
the domain's, and a package's ``maestro_open_session`` was listed twice and never reached (the
fourth red team's case 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from maestro.domains import inspect_package, load_domain
from maestro.domains.errors import DomainLoadError
from tests.domains.sandbox_support import TOY_TOOLS, make_package, tool_source


@pytest.mark.parametrize("name", ["maestro_open_session", "maestro_reset_session"])
def test_a_tool_named_like_maestros_own_is_a_located_problem(tmp_path: Path, name: str) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS + tool_source(name, 'return "mine"'))
    domain, problems = inspect_package(root)  # the sandbox, as for any package from outside
    assert domain is None
    assert any(
        p.file == "tools.py" and f"{name}: tool names starting with 'maestro_'" in p.message
        for p in problems
    ), [str(p) for p in problems]
    with pytest.raises(DomainLoadError, match="are maestro's own"):
        load_domain(root, check_gold=False)  # in process too
