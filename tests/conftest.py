from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.agents.settings import RoleSettings
from maestro.domains import Domain, load_domain

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def toy() -> Domain:
    return load_domain(FIXTURES / "toy", trusted=True)


@pytest.fixture
def toy_copy(tmp_path: Path) -> Path:
    """A writable copy of the toy package, for tests that break it."""
    dest = tmp_path / "toy"
    shutil.copytree(FIXTURES / "toy", dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    """A scripted OpenAI-compatible server; the test fails if a call had no script or a
    scripted reply was never used."""
    with ScriptedServer(ServerConfig(mode="script")) as server:
        yield server
        server.assert_done()


def role_settings(**overrides: object) -> RoleSettings:
    """Fast retries for tests: the behaviour is the same, the waits are short."""
    base: dict[str, object] = {
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "timeout_s": 5.0,
        "deadline_s": 30.0,
    }
    base.update(overrides)
    return RoleSettings.model_validate(base)
