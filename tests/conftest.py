from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from maestro.domains import Domain, load_domain

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def toy() -> Domain:
    return load_domain(FIXTURES / "toy")


@pytest.fixture
def toy_copy(tmp_path: Path) -> Path:
    """A writable copy of the toy package, for tests that break it."""
    dest = tmp_path / "toy"
    shutil.copytree(FIXTURES / "toy", dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest
