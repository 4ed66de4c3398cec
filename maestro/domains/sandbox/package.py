"""Load a domain package whose tools run in the sandbox."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from maestro.domains import loader
from maestro.domains.errors import DomainLoadError, Problem
from maestro.domains.package import Domain
from maestro.domains.runtime import ToolSpec
from maestro.domains.sandbox.limits import SandboxLimits
from maestro.domains.sandbox.process import ChildFailure
from maestro.domains.sandbox.signatures import specs_from_source
from maestro.domains.sandbox.static import check_models_source, check_tools_source
from maestro.domains.sandbox.toolkit import SandboxToolkit


@contextmanager
def load_sandboxed_domain(
    path: str | Path, limits: SandboxLimits | None = None, *, check_gold: bool = True
) -> Iterator[Domain]:
    """Load an untrusted domain package; its tools run only in a sandbox child process.

    Usage: ``with load_sandboxed_domain(path) as domain: ...``; ``domain.toolkit`` is a
    :class:`SandboxToolkit`. tools.py and models.py are checked statically first; models.py
    (declarations only) is imported in the host, tools.py only in the child. Raises
    :class:`~maestro.domains.errors.DomainLoadError` listing every problem (static ones
    included). The child is stopped when the block exits.
    """
    domain = _open(path, limits or SandboxLimits(), check_gold=check_gold, check_tools=True)
    try:
        yield domain
    finally:
        assert isinstance(domain.toolkit, SandboxToolkit)
        domain.toolkit.close()


def open_untrusted(
    path: str | Path, limits: SandboxLimits | None = None, *, check_gold: bool = True
) -> Domain:
    """Like :func:`load_sandboxed_domain`, for callers that hold the domain beyond one block
    (the loader, for synthesized packages): ``domain.close()`` stops the child, and so does
    this process's end."""
    return _open(path, limits or SandboxLimits(), check_gold=check_gold, check_tools=True)


def _open(
    path: str | Path, limits: SandboxLimits, *, check_gold: bool, check_tools: bool
) -> Domain:
    """The loader's steps with tools.py kept out of the host.

    ``check_tools=False`` skips the static check of tools.py: tests use it to show what the
    run-time layer stops on its own. models.py is always checked, since the host imports it.
    """
    root = Path(path)
    if not root.is_dir():
        raise DomainLoadError(str(root), [Problem(str(root), "", "not a folder")])
    problems: list[Problem] = []
    tools_source = _read(root, "tools.py", problems)
    models_source = _read(root, "models.py", problems)
    if models_source is not None:
        problems += check_models_source(models_source)
    if tools_source is not None and check_tools:
        problems += check_tools_source(tools_source)
    if problems or tools_source is None:
        raise DomainLoadError(str(root), problems)

    manifest = loader._load_manifest(root, problems)
    package = loader._make_package(root, manifest.id if manifest else root.name)
    tables = loader._load_models(root, package, problems)  # passed the declarations-only check
    state = loader._load_db(root, tables, problems) if tables is not None else None
    policy = loader._load_policy(root, problems)
    models = sys.modules.get(f"{package}.models")
    specs = _host_specs(tools_source, models, problems) if models else []
    if manifest is None or tables is None or state is None or problems:
        raise DomainLoadError(str(root), problems)
    init: dict[str, Any] = {
        "root": str(root.resolve()),
        "domain_id": manifest.id,
        "tables": state.to_dict(),
        "clock": manifest.clock.isoformat() if manifest.clock else None,
        "limits": limits.model_dump(),
    }
    toolkit = SandboxToolkit(specs, init, limits)
    try:
        _check_child(toolkit, state.state_hash())
        domain = Domain(manifest, root, tables, state, toolkit, policy or "", [])
        domain.tasks = loader._load_tasks(root, domain, problems, check_gold=check_gold)
        if problems:
            raise DomainLoadError(str(root), problems)
    except BaseException:
        toolkit.close()
        raise
    return domain


def _host_specs(source: str, models: ModuleType, problems: list[Problem]) -> list[ToolSpec]:
    try:
        return specs_from_source(source, models, problems)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        # Reached only with the static check bypassed: it reports these first otherwise.
        problems.append(Problem("tools.py", "", f"cannot be read: {type(exc).__name__}: {exc}"))
        return []


def _read(root: Path, name: str, problems: list[Problem]) -> str | None:
    try:
        return (root / name).read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.append(Problem(name, "", "missing"))
    except UnicodeDecodeError as exc:
        problems.append(Problem(name, f"byte {exc.start}", "not UTF-8 text"))
    return None


def _check_child(toolkit: SandboxToolkit, state_hash: str) -> None:
    """Start the child and check it sees the tools and the database the host does."""
    try:
        ready = toolkit.start()
    except ChildFailure as exc:
        raise DomainLoadError(
            toolkit._init["root"], [Problem("tools.py", "", exc.reason)]
        ) from None
    problems = []
    host_schemas = toolkit.schemas()
    if ready.get("schemas") != host_schemas:
        host = [s["function"]["name"] for s in host_schemas]
        child = [s.get("function", {}).get("name") for s in ready.get("schemas") or []]
        problems.append(
            Problem(
                "tools.py",
                "",
                f"the sandbox loaded other tools than the source declares (source: {host};"
                f" loaded: {child}); tools must be plain @tool functions",
            )
        )
    if ready.get("state_hash") != state_hash:
        problems.append(Problem("db.json", "", "the sandbox child sees another database"))
    if problems:
        raise DomainLoadError(toolkit._init["root"], problems)
