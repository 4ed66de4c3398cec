"""Fixtures for the BFCL tests: categories imported once per session into tmp folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from maestro.domains import Domain, load_domain
from maestro.domains.importers.bfcl import ImportResult, import_category


@pytest.fixture(scope="session")
def base_import(tmp_path_factory: pytest.TempPathFactory) -> ImportResult:
    """All of multi_turn_base, as packages (not yet loaded)."""
    return import_category("multi_turn_base", tmp_path_factory.mktemp("bfcl") / "base")


@pytest.fixture(scope="session")
def packages(base_import: ImportResult) -> dict[str, Path]:
    return {p.name: p for p in base_import.packages}


@pytest.fixture(scope="session")
def gorilla(packages: dict[str, Path]) -> Iterator[Domain]:
    """The file-system package, loaded as every command loads it (gold replay included)."""
    domain = load_domain(packages["bfcl_gorilla"])
    yield domain
    domain.close()


@pytest.fixture(scope="session")
def travel(packages: dict[str, Path]) -> Iterator[Domain]:
    domain = load_domain(packages["bfcl_travel"], check_gold=False)
    yield domain
    domain.close()


@pytest.fixture(scope="session")
def miss_func(tmp_path_factory: pytest.TempPathFactory) -> ImportResult:
    return import_category(
        "multi_turn_miss_func", tmp_path_factory.mktemp("bfcl") / "miss_func", limit=6
    )
