"""Load a domain package whose Python runs only in the sandbox.

The loader's steps (``loader.assemble_package``) with the code step done by a sandbox child:
the host reads models.py and tools.py as text (checked statically, as a linter), starts a
child, and gets back, as JSON, what it needs: tables, record schemas, tools, and the database
normalized by the real record types. It validates all of it with models of its own
(``description.py``), hands the child the database as the host validated it, and checks the
child agrees (same state hash). Nothing of the package is imported or evaluated in the host.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maestro.domains import loader
from maestro.domains.errors import DomainLoadError, Problem
from maestro.domains.files import PackageFolder
from maestro.domains.loader import CodeLoader, PackageCode, RawDatabase
from maestro.domains.models import DomainManifest
from maestro.domains.package import Domain
from maestro.domains.sandbox.description import host_tables, host_tools, read_description
from maestro.domains.sandbox.isolation import SWITCHABLE
from maestro.domains.sandbox.limits import SandboxLimits
from maestro.domains.sandbox.process import (
    BEGIN_CAPS,
    ChildFailure,
    Launch,
    SandboxProcess,
    SandboxStartError,
)
from maestro.domains.sandbox.protocol import ChannelError
from maestro.domains.sandbox.schema import Budget
from maestro.domains.sandbox.static import check_models_source, check_tools_source
from maestro.domains.sandbox.toolkit import Package, SandboxToolkit, describe_caps, description_key

#: Modules of outside code the host has vetted, each with the names tools.py may import from
#: it (``{"maestro.domains.importers.bfcl_runtime": ("call_api",)}``). Given by the caller
#: (an importer, or the loader on an importer's word), never read from the package.
VettedImports = Mapping[str, Sequence[str]]


@contextmanager
def load_sandboxed_domain(
    path: str | Path,
    limits: SandboxLimits | None = None,
    *,
    check_gold: bool = True,
    vetted: VettedImports | None = None,
) -> Iterator[Domain]:
    """Load a domain package whose models.py and tools.py run only in a sandbox child.

    Usage: ``with load_sandboxed_domain(path) as domain: ...``; ``domain.toolkit`` is a
    :class:`SandboxToolkit`. Raises :class:`~maestro.domains.errors.DomainLoadError` listing
    every problem (the static check's included). The child stops when the block exits.

    ``vetted`` names modules of outside code the caller has vetted (a benchmark's API classes),
    each with the names tools.py may import from it (``from MODULE import NAME``): the child
    imports them before any package code runs; every run-time layer still applies to them. It
    is the caller's decision (an importer's), never the package's.
    """
    domain = open_untrusted(path, limits, check_gold=check_gold, vetted=vetted)
    try:
        yield domain
    finally:
        domain.close()


def open_untrusted(
    path: str | Path,
    limits: SandboxLimits | None = None,
    *,
    check_gold: bool = True,
    vetted: VettedImports | None = None,
) -> Domain:
    """Like :func:`load_sandboxed_domain`, for callers that hold the domain beyond one block:
    ``domain.close()`` stops the child, and so does this process's end."""
    options = SandboxOptions(limits or SandboxLimits(), frozen_vetted(vetted))
    return _open(path, options, check_gold=check_gold)


@dataclass(frozen=True)
class SandboxOptions:
    """How the host loads a sandboxed package: all of it the host's choice.

    ``check_static`` and ``disable`` exist for tests: they bypass the static check and turn
    isolation layers off, to show what the remaining layers stop on their own.
    """

    limits: SandboxLimits
    vetted: tuple[tuple[str, tuple[str, ...]], ...] = ()
    check_static: bool = True
    disable: frozenset[str] = frozenset()


def sandboxed_code(options: SandboxOptions | None = None) -> CodeLoader:
    """The loader's code step, done in a sandbox child (``loader.inspect_package`` uses it for
    every package outside the library)."""
    opts = options or SandboxOptions(SandboxLimits())
    unknown = opts.disable - SWITCHABLE
    if unknown:
        raise ValueError(f"no layer named {sorted(unknown)}; layers: {sorted(SWITCHABLE)}")

    def load(
        folder: PackageFolder,
        manifest: DomainManifest,
        raw_db: RawDatabase,
        problems: list[Problem],
    ) -> PackageCode | None:
        return _sandboxed(folder, manifest, raw_db, problems, opts)

    return load


def _open(path: str | Path, options: SandboxOptions, *, check_gold: bool) -> Domain:
    domain, problems = loader.assemble_package(path, sandboxed_code(options), check_gold=check_gold)
    if problems or domain is None:
        if domain is not None:
            domain.close()
        raise DomainLoadError(str(path), problems)
    return domain


def _sandboxed(
    folder: PackageFolder,
    manifest: DomainManifest,
    database: RawDatabase,
    problems: list[Problem],
    options: SandboxOptions,
) -> PackageCode | None:
    found: list[Problem] = []
    # As package files are read everywhere: regular files only, size-capped, strict UTF-8.
    models_source = folder.read_text("models.py", found)
    tools_source = folder.read_text("tools.py", found)
    if options.check_static:
        if models_source is not None:
            found += check_models_source(models_source)
        if tools_source is not None:
            found += check_tools_source(tools_source, vetted=dict(options.vetted))
    raw_db = database.take()
    if raw_db is not None and not isinstance(raw_db, dict):
        found.append(Problem("db.json", "", "must be an object of tables"))
    problems.extend(found)
    if found or models_source is None or tools_source is None or raw_db is None:
        return None
    box = RawDatabase(raw_db)
    del raw_db  # _first_boot takes the only reference, and drops it once the child has it
    launch = Launch(
        options.limits,
        manifest.id,
        manifest.clock.isoformat() if manifest.clock else None,
        models_source,
        tools_source,
        tuple(module for module, _ in options.vetted),
        options.disable,
    )
    process = SandboxProcess(launch)
    try:
        code = _first_boot(process, launch, box, problems)
    except BaseException:
        process.kill()
        raise
    if code is None:
        process.kill()
    return code


def _first_boot(
    process: SandboxProcess, launch: Launch, database: RawDatabase, problems: list[Problem]
) -> PackageCode | None:
    """Start the first child: hello, describe (with db.json), the host's models, begin. The
    host holds one copy of the database at a time: db.json's parsed value until the child has
    it, then the child's normalized one, then the host's records."""
    limits = launch.limits
    raw_db = database.take()
    max_nodes = _database_nodes(raw_db)
    try:
        process.start()
        described = process.exchange(
            {"op": "describe"},
            raw_db,
            timeout_s=limits.startup_timeout_s,
            caps=describe_caps(limits),
        )
        del raw_db
    except SandboxStartError as exc:
        problems.extend(Problem(*p) for p in _problem_rows(exc.problems))
        problems.append(Problem("tools.py", "", exc.reason))
        return None
    except ChildFailure as exc:
        problems.append(Problem("tools.py", "", f"the sandbox child failed: {exc.reason}"))
        return None
    meta = described.meta
    description = read_description(meta)
    if isinstance(description, list):
        problems.extend(description)
        return None
    schema_problems: list[Problem] = []
    budget = Budget()  # one package's schemas, tables and tools together
    tables = host_tables(description, schema_problems, budget)
    specs = host_tools(description, schema_problems, budget)
    problems.extend(schema_problems)
    if schema_problems:
        return None
    # The records the real record types refused, then the host's own check of the rest.
    problems.extend(Problem(f, at, msg) for f, at, msg in description.problems if f == "db.json")
    try:
        normalized = described.decoded_data(max_nodes)
        del described  # the bytes are decoded: free them before the records are built
        state = loader.load_db(normalized, tables, problems)
        del normalized
    except ChannelError as exc:  # the data section is not JSON
        problems.append(
            Problem("db.json", "", f"the sandbox child sent no readable database: {exc}")
        )
        return None
    if state is None:
        return None
    # With records refused, the domain is still built from the rest, as in process, so that
    # the tasks are checked too; the problems make the load fail all the same.
    try:
        ready = process.exchange(
            {"op": "begin"},
            state.tables_view(),
            timeout_s=limits.startup_timeout_s,
            caps=BEGIN_CAPS,
        )
    except ChildFailure as exc:
        problems.append(Problem("tools.py", "", f"the sandbox child failed: {exc.reason}"))
        return None
    if ready.meta.get("state_hash") != state.state_hash():
        problems.append(Problem("db.json", "", "the sandbox child sees another database"))
        return None
    package = Package(launch, description_key(meta), tables, state)
    return PackageCode(tables, state, SandboxToolkit(specs, package, first=process))


def _database_nodes(raw_db: Any) -> int:
    """Most JSON values the child's normalized database may hold: db.json's own, with room
    for the defaults the record types fill in. The child, not db.json, writes that copy: a
    53-byte db.json must not come back as millions of values in the host. Counted on the
    parsed value (a dump of it was one more copy of the database), exactly as ``json_nodes``
    counts the dump: one, and per container its items (at least one: a bracket each)."""
    count, pending = 1, [raw_db]
    while pending:
        item = pending.pop()
        if isinstance(item, dict | list):
            count += max(len(item), 1)
            pending.extend(item.values() if isinstance(item, dict) else item)
    return 8 * count + 100_000


def _problem_rows(rows: list[Any]) -> list[tuple[str, str, str]]:
    out = []
    for row in rows[:1000]:
        if isinstance(row, list) and len(row) == 3 and all(isinstance(x, str) for x in row):
            out.append((row[0][:200], row[1][:200], row[2][:2000]))
    return out


def frozen_vetted(vetted: VettedImports | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``vetted`` as :class:`SandboxOptions` holds it: sorted, hashable."""
    return tuple(sorted((module, tuple(names)) for module, names in (vetted or {}).items()))
