"""Load a domain package folder, validating every file and reporting every problem found.

Each problem names its file and where in it: a record (``customers/C1001.email``), a task
(``line 12 (task vet_017)``), a line of Python. Loading goes on past a problem wherever what
follows can still be checked, so one run lists everything to fix.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import traceback
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from maestro.domains.errors import DomainLoadError, Problem
from maestro.domains.facts import MAX_FACTS, fact_problem
from maestro.domains.files import PackageFolder, cap_problems
from maestro.domains.laws import LAWS_FILE, Law, law_problems, parse_laws, table_shapes
from maestro.domains.library import LIBRARY_ROOT
from maestro.domains.models import DomainManifest, Task, task_size_problems
from maestro.domains.package import Domain, TaskStateError, describe_failures, replay_gold
from maestro.domains.runtime import ToolDefinitionError, Toolkit, spec_from_function, tool_functions
from maestro.domains.sdk import Record, Ref
from maestro.domains.store import MAX_RECORD_DEPTH, State, TableSpec, deeper_than, held_bytes

PACKAGE_FILES = ("domain.json", "models.py", "db.json", "tools.py", "policy.md", "tasks.jsonl")

_load_counter = itertools.count()


def load_domain(path: str | Path, *, check_gold: bool = True, trusted: bool = False) -> Domain:
    """Load and validate a domain package; :class:`DomainLoadError` lists every problem.

    Only the shipped library (``maestro/domains/library``) and packages the calling code marks
    ``trusted=True`` (test fixtures) run their Python in this process. Every other package is
    loaded through the sandbox, whatever its ``domain.json`` says: its models.py and tools.py
    run only in a sandbox child process, which ``domain.close()`` stops (it also stops when
    this process ends).
    """
    domain, problems = inspect_package(path, check_gold=check_gold, trusted=trusted)
    if problems or domain is None:
        if domain is not None:
            domain.close()
        raise DomainLoadError(str(path), problems)
    return domain


def inspect_package(
    path: str | Path, *, check_gold: bool = True, trusted: bool = False
) -> tuple[Domain | None, list[Problem]]:
    """Load what can be loaded and list every problem; the domain is None when unusable.

    ``trusted`` as in :func:`load_domain`; a sandboxed domain returned with problems still
    holds its child: close it.
    """
    if trusted:
        return assemble_package(path, _code_in_process, check_gold=check_gold, trusted=True)
    library = library_package(path)
    if library is not None:
        # The resolved folder, not the path given: a link flipped after the check would
        # otherwise have another folder's Python run here (a check-then-use race).
        return assemble_package(library, _code_in_process, check_gold=check_gold, trusted=True)
    # Code an LLM or an outside benchmark wrote is never imported here (DESIGN: untrusted
    # code runs only inside the sandbox).
    return assemble_package(path, _outside_code, check_gold=check_gold)


def is_library_package(path: str | Path) -> bool:
    """Whether a folder is one of the shipped library's packages (its code runs in process)."""
    return library_package(path) is not None


def library_package(path: str | Path) -> Path | None:
    """The library package folder ``path`` resolves to (no link left in it), or None.

    Load the returned path, never ``path`` again: only a package of the library itself (a
    folder directly under it) counts, and the answer holds for the resolved folder only.
    """
    try:
        resolved = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, a symlink loop, an unreadable folder
        return None
    return resolved if resolved.parent == LIBRARY_ROOT else None


@dataclass
class PackageCode:
    """What a package's Python gives the loader: its tables, initial state and tools."""

    tables: dict[str, TableSpec]
    initial: State
    toolkit: Toolkit


class RawDatabase:
    """db.json as parsed (None when unreadable), handed over once: whoever takes it holds the
    only reference, so the parsed file is freed as soon as its records are built and a large
    database is never held twice by the frames of the load (an 18 MB db.json cost 522 MB)."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def take(self) -> Any:
        value, self._value = self._value, None
        return value


#: Loads a package's models.py, db.json (given parsed, to take once) and tools.py, reading
#: through the open package folder and adding every problem found; None when the domain cannot
#: be built.
CodeLoader = Callable[
    [PackageFolder, DomainManifest, RawDatabase, list[Problem]], PackageCode | None
]


def assemble_package(
    path: str | Path, load_code: CodeLoader, *, check_gold: bool, trusted: bool = False
) -> tuple[Domain | None, list[Problem]]:
    """The loader's steps around the code: files present, domain.json, db.json read, the code
    (in process or in the sandbox), policy.md, tasks.jsonl with gold replays. Every file is
    read through one handle on the folder (``files.PackageFolder``); hard-linked files are
    allowed only when ``trusted``. At most ``files.MAX_PROBLEMS_PER_FILE`` problems a file."""
    folder = PackageFolder.open(path, shared_files=trusted)
    if isinstance(folder, Problem):
        return None, [folder]
    with folder:
        domain, problems = _assemble(folder, load_code, check_gold=check_gold)
    return domain, cap_problems(problems)


def _assemble(
    folder: PackageFolder, load_code: CodeLoader, *, check_gold: bool
) -> tuple[Domain | None, list[Problem]]:
    # Links and special files refuse the whole package before any file of it is read.
    problems = folder.scan()
    if problems:
        return None, problems
    for name in PACKAGE_FILES:
        if not folder.lexists(name):
            problems.append(Problem(name, "", "missing"))

    manifest = _load_manifest(folder, problems)
    raw_db = RawDatabase(folder.read_json("db.json", problems))
    code = load_code(folder, manifest, raw_db, problems) if manifest is not None else None
    del raw_db
    policy = _load_policy(folder, problems)
    if manifest is None or code is None:
        return None, problems
    domain = Domain(
        manifest, folder.path, code.tables, code.initial, code.toolkit, policy or "", []
    )
    domain.laws = _load_laws(folder, domain, problems)
    try:
        domain.tasks = _load_tasks(folder, domain, problems, check_gold=check_gold)
    except BaseException:
        domain.close()
        raise
    return domain, problems


def _code_in_process(
    folder: PackageFolder, manifest: DomainManifest, raw_db: RawDatabase, problems: list[Problem]
) -> PackageCode | None:
    package = _make_package(folder.path, manifest.id)
    tables = _load_models(folder, package, problems)
    db = load_db(raw_db.take(), tables, problems) if tables is not None else None
    toolkit = _load_tools(folder, package, problems)
    if tables is None or db is None or toolkit is None:
        return None
    return PackageCode(tables, db, toolkit)


def _outside_code(
    folder: PackageFolder, manifest: DomainManifest, raw_db: RawDatabase, problems: list[Problem]
) -> PackageCode | None:
    """The code step for every package outside the library: in a sandbox child.

    An imported package runs outside code (a benchmark's API classes); its importer, host-side,
    decides which vetted modules the child may let tools.py import, and only for a tools.py it
    would have written itself: what the package says about its origin grants nothing alone.
    """
    from maestro.domains.sandbox.limits import SandboxLimits
    from maestro.domains.sandbox.package import SandboxOptions, frozen_vetted, sandboxed_code

    vetted: dict[str, tuple[str, ...]] = {}
    if manifest.provenance.source == "imported":
        from maestro.domains.importers import vetted_imports

        # Through the load's handle: the tools.py vetted is the one the child is given.
        vetted, refused = vetted_imports(folder, manifest)
        if refused:
            problems.extend(refused)
            return None
    options = SandboxOptions(SandboxLimits(), frozen_vetted(vetted))
    return sandboxed_code(options)(folder, manifest, raw_db, problems)


# ----- domain.json ------------------------------------------------------------------------------


def validation_problems(file: str, prefix: str, exc: ValidationError) -> list[Problem]:
    """One problem per pydantic error, located at ``prefix.field.path``."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        where = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
        out.append(Problem(file, where, err["msg"]))
    return out


def _load_manifest(folder: PackageFolder, problems: list[Problem]) -> DomainManifest | None:
    raw = folder.read_json("domain.json", problems)
    if raw is None:
        return None
    try:
        return DomainManifest.model_validate(raw)
    except ValidationError as exc:
        problems.extend(validation_problems("domain.json", "", exc))
        return None


# ----- laws.json --------------------------------------------------------------------------------


def _load_laws(folder: PackageFolder, domain: Domain, problems: list[Problem]) -> list[Law]:
    """The package's laws (none without laws.json), each checked on every record of db.json."""
    if not folder.lexists(LAWS_FILE):
        return []
    raw = folder.read_json(LAWS_FILE, problems)
    if raw is None:
        return []
    laws, found = parse_laws(raw, table_shapes(domain.tables))
    problems.extend(found)
    domain.laws = laws
    if laws:
        problems.extend(law_problems(domain.check_laws()))
    return laws


# ----- Python files -----------------------------------------------------------------------------


def _make_package(root: Path, domain_id: str) -> str:
    """Register the folder as a fresh, uniquely named package so tools.py can import .models."""
    name = f"maestro_domain_{domain_id}_{next(_load_counter)}"
    module = types.ModuleType(name)
    module.__path__ = [str(root)]
    module.__package__ = name
    sys.modules[name] = module
    return name


def _import(
    folder: PackageFolder, package: str, stem: str, problems: list[Problem]
) -> types.ModuleType | None:
    file = folder.path / f"{stem}.py"
    source = folder.read_text(file.name, problems)
    if source is None:
        return None
    name = f"{package}.{stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        # The source read above (a regular file, size-capped), not the path read again.
        exec(compile(source, str(file), "exec"), module.__dict__)
    except SyntaxError as exc:
        problems.append(Problem(file.name, f"line {exc.lineno}", f"syntax error: {exc.msg}"))
        return None
    except Exception as exc:
        line = next(
            (
                f.lineno
                for f in reversed(traceback.extract_tb(exc.__traceback__))
                if f.filename == str(file)
            ),
            None,
        )
        problems.append(
            Problem(
                file.name,
                f"line {line}" if line else "",
                f"import failed: {type(exc).__name__}: {exc}",
            )
        )
        return None
    return module


def _load_models(
    folder: PackageFolder, package: str, problems: list[Problem]
) -> dict[str, TableSpec] | None:
    module = _import(folder, package, "models", problems)
    if module is None:
        return None
    return table_specs(module, problems)


def table_specs(module: types.ModuleType, problems: list[Problem]) -> dict[str, TableSpec] | None:
    """The tables a loaded models.py declares in ``TABLES`` (the sandbox child uses it too)."""
    tables = getattr(module, "TABLES", None)
    if not isinstance(tables, dict) or not tables:
        problems.append(
            Problem("models.py", "TABLES", "must be a dict of table name -> Record subclass")
        )
        return None
    specs: dict[str, TableSpec] = {}
    for name, model in tables.items():
        if not (isinstance(model, type) and issubclass(model, Record)):
            problems.append(
                Problem("models.py", f"TABLES[{name!r}]", "is not a subclass of sdk.Record")
            )
            continue
        if model.key_field not in model.model_fields:
            problems.append(
                Problem(
                    "models.py", model.__name__, f"key_field {model.key_field!r} is not a field"
                )
            )
            continue
        specs[name] = TableSpec(name, model, model.key_field)
    return specs


def _ref_target(ann: Any) -> str | None:
    """The table an annotation refers to, through Optional and Annotated; None when none."""
    if typing.get_origin(ann) is typing.Annotated:
        for meta in ann.__metadata__:
            if isinstance(meta, Ref):
                return meta.table
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        for arg in typing.get_args(ann):
            found = _ref_target(arg)
            if found:
                return found
    return None


def _references(model: type[BaseModel], data: Any, path: str) -> list[tuple[str, str, Any]]:
    """(field path, referenced table, value) for every Ref in a record, nested parts included."""
    out: list[tuple[str, str, Any]] = []
    if not isinstance(data, dict):
        return out
    for fname, finfo in model.model_fields.items():
        value = data.get(fname)
        where = f"{path}.{fname}"
        direct = next((m.table for m in finfo.metadata if isinstance(m, Ref)), None)
        out.extend(_walk(finfo.annotation, value, where, direct))
    return out


def _walk(ann: Any, value: Any, where: str, table: str | None) -> list[tuple[str, str, Any]]:
    if value is None:
        return []
    table = table or _ref_target(ann)
    if table is not None and not isinstance(value, list | dict):
        return [(where, table, value)]
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _walk(typing.get_args(ann)[0], value, where, table)
    if origin in (typing.Union, types.UnionType):
        return [
            r
            for arg in typing.get_args(ann)
            if arg is not type(None)
            for r in _walk(arg, value, where, table)
        ]
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(ann) or (Any,)
        return [r for i, v in enumerate(value) for r in _walk(item, v, f"{where}[{i}]", table)]
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return _references(ann, value, where)
    return []


#: The most a database may hold in the host once its records are built, their defaults filled
#: in, counted as Python holds them (``store.held_bytes``, which errs high; the library's largest
#: database counts 2.7 MB). db.json's caps count what the file holds, not what the defaults fill in:
#: 32-byte records filling seven empty containers each made a 13.6 MB db.json cost 1,061 MB.
MAX_DATABASE_HELD_BYTES = 256 * 1024 * 1024


def load_db(
    raw: Any,
    tables: dict[str, TableSpec],
    problems: list[Problem],
    *,
    max_held_bytes: int = MAX_DATABASE_HELD_BYTES,
) -> State | None:
    """db.json (parsed) as the initial state: records validated, keys and references checked
    (the sandbox's host runs it on what its child sent, with the host's own record models).
    ``raw`` is taken, as :func:`validated_records` says; None when the records built would hold
    over ``max_held_bytes``."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.append(Problem("db.json", "", "must be an object of tables"))
        return None
    clean, over = _validated(raw, tables, problems, max_held_bytes)
    if over is not None:
        if over not in problems:  # a sandbox's child, which built the same records, said so
            problems.append(over)
        return None
    problems.extend(reference_problems(tables, clean))
    return State(clean, tables)


def validated_records(
    raw: dict[str, Any],
    tables: dict[str, TableSpec],
    problems: list[Problem],
    *,
    max_held_bytes: int = MAX_DATABASE_HELD_BYTES,
) -> dict[str, dict[str, dict[str, Any]]]:
    """db.json's records validated and dumped by their tables' record types; an unknown table,
    a table that is not an object, an invalid record or one whose key field is not its key is a
    problem, and left out. (The sandbox runs this with the real record types in its child, and
    again with the host's own.)

    ``raw`` is taken: each record leaves it once built, so db.json as parsed and the records
    built are never both held whole. Once the records built hold over ``max_held_bytes``, the
    building stops with a problem at the record that crossed it; what was built, that record
    included, is returned: a sandbox's child sends it, and its host, counting the same records,
    refuses them too, without the rest ever being built on either side."""
    clean, over = _validated(raw, tables, problems, max_held_bytes)
    if over is not None:
        problems.append(over)
    return clean


def _validated(
    raw: dict[str, Any], tables: dict[str, TableSpec], problems: list[Problem], max_held: int
) -> tuple[dict[str, dict[str, dict[str, Any]]], Problem | None]:
    """The records built, and the problem of the budget when they crossed it (then the rest
    of ``raw`` is left as it was)."""
    clean: dict[str, dict[str, dict[str, Any]]] = {}
    held = built = 0
    for table, rows in raw.items():
        spec = tables.get(table)
        if spec is None:
            problems.append(
                Problem("db.json", table, f"unknown table (models.py declares {sorted(tables)})")
            )
            continue
        if not isinstance(rows, dict):
            problems.append(Problem("db.json", table, "must be an object of key -> record"))
            continue
        clean[table] = {}
        for key in list(rows):
            data = _built_record(spec, f"{table}/{key}", key, rows.pop(key), problems)
            if data is None:
                continue
            clean[table][key] = data
            held, built = held + held_bytes(key) + held_bytes(data), built + 1
            if held > max_held:
                return clean, Problem(
                    "db.json",
                    f"{table}/{key}",
                    f"{built:,} records hold {held:,} bytes in the host once their defaults are "
                    f"filled in; a database may hold at most {max_held:,}",
                )
    return clean, None


def _built_record(
    spec: TableSpec, where: str, key: str, rec: Any, problems: list[Problem]
) -> dict[str, Any] | None:
    """One record validated and dumped by its table's record type; None (and its problems)
    when it is refused."""
    if deeper_than(rec, MAX_RECORD_DEPTH):
        problems.append(Problem("db.json", where, f"nested deeper than {MAX_RECORD_DEPTH} levels"))
        return None
    try:
        assert spec.model is not None
        data: dict[str, Any] = spec.model.model_validate(rec).model_dump(mode="json")
    except ValidationError as exc:
        problems.extend(validation_problems("db.json", where, exc))
        return None
    except (ValueError, TypeError) as exc:
        # A constraint that does not fit its field's type ("Unable to apply constraint
        # 'min_length'"), or what a record type's own code raised.
        message = f"{type(exc).__name__}: {exc}"
        problems.append(Problem("db.json", where, f"cannot be validated: {message[:500]}"))
        return None
    if data.get(spec.key_field) != key:
        problems.append(
            Problem(
                "db.json", where, f"{spec.key_field} is {data.get(spec.key_field)!r}, not the key"
            )
        )
        return None
    return data


def reference_problems(
    tables: dict[str, TableSpec], clean: dict[str, dict[str, dict[str, Any]]]
) -> list[Problem]:
    """Every Ref in validated records that names a missing record or an unknown table."""
    problems: list[Problem] = []
    unknown_targets: set[tuple[str, str]] = set()
    for table, spec in tables.items():
        assert spec.model is not None
        for key, rec in clean.get(table, {}).items():
            for where, target, value in _references(spec.model, rec, f"{table}/{key}"):
                if target not in tables:
                    unknown_targets.add((spec.model.__name__, target))
                elif value not in clean.get(target, {}):
                    problems.append(
                        Problem("db.json", where, f"refers to missing {target} {value!r}")
                    )
    for model_name, target in sorted(unknown_targets):
        problems.append(Problem("models.py", model_name, f"Ref to unknown table {target!r}"))
    return problems


def _load_tools(folder: PackageFolder, package: str, problems: list[Problem]) -> Toolkit | None:
    module = _import(folder, package, "tools", problems)
    if module is None:
        return None
    specs = []
    for fn in tool_functions(module):
        try:
            specs.append(spec_from_function(fn))
        except ToolDefinitionError as exc:
            problems.append(Problem("tools.py", f"line {fn.__code__.co_firstlineno}", str(exc)))
    if not specs:
        problems.append(Problem("tools.py", "", "defines no tool (functions marked with @tool)"))
        return None
    return Toolkit(specs)


def _load_policy(folder: PackageFolder, problems: list[Problem]) -> str | None:
    text = folder.read_text("policy.md", problems)
    if text is None:
        return None
    if not text.strip():
        problems.append(Problem("policy.md", "", "is empty"))
    return text


# ----- tasks.jsonl ------------------------------------------------------------------------------


def _load_tasks(
    folder: PackageFolder, domain: Domain, problems: list[Problem], *, check_gold: bool
) -> list[Task]:
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for lineno, raw in folder.read_jsonl("tasks.jsonl", problems):
        where = f"line {lineno}"
        if isinstance(raw, dict) and isinstance(raw.get("id"), str) and len(raw["id"]) <= 200:
            where = f"line {lineno} (task {raw['id']})"
        oversized = task_size_problems(raw)
        if oversized:
            problems.extend(Problem("tasks.jsonl", where, msg) for msg in oversized)
            continue
        try:
            task = Task.model_validate(raw)
        except ValidationError as exc:
            problems.extend(validation_problems("tasks.jsonl", where, exc))
            continue
        if task.id in seen:
            problems.append(
                Problem("tasks.jsonl", where, f"duplicate task id (first on line {seen[task.id]})")
            )
            continue
        seen[task.id] = lineno
        found = _task_problems(domain, task, check_gold=check_gold)
        problems.extend(Problem("tasks.jsonl", where, msg) for msg in found)
        if not found:
            tasks.append(task)
    return tasks


def _task_problems(domain: Domain, task: Task, *, check_gold: bool) -> list[str]:
    out = []
    crit = task.evaluation_criteria
    if task.user_scenario.instructions.domain != domain.id:
        out.append(
            f"user_scenario.instructions.domain is {task.user_scenario.instructions.domain!r}, not {domain.id!r}"
        )
    for c in crit.empty_criteria():
        out.append(f"reward_basis names {c.value} but the task gives it nothing to check")
    if len(crit.communicate_info) > MAX_FACTS:
        out.append(
            f"communicate_info holds {len(crit.communicate_info)} facts; a task may ask for at "
            f"most {MAX_FACTS}"
        )
    else:
        out.extend(p for p in map(fact_problem, crit.communicate_info) if p)
    unknown_tools = [t for t in task.hidden_tools if t not in domain.toolkit.specs]
    if unknown_tools:
        out.append(f"hidden_tools names tools the domain does not have: {unknown_tools}")
    groups = [("actions", crit.actions), ("forbidden_actions", crit.forbidden_actions)]
    if task.initial_state:
        groups.append(
            ("initial_state.initialization_actions", task.initial_state.initialization_actions)
        )
    for label, actions in groups:
        ids = [a.action_id for a in actions]
        if len(set(ids)) != len(ids):
            out.append(f"{label}: duplicate action_id")
        for a in actions:
            for msg in domain.toolkit.validate_arguments(a.name, a.arguments):
                out.append(f"{label} {a.action_id}: {msg}")
    if out or not check_gold:
        return out
    try:
        result = replay_gold(domain, task)
    except TaskStateError as exc:
        return [str(exc)]
    out.extend(describe_failures(task.gold_actions, result))
    if domain.laws and result.ok:
        check = domain.check_laws(result.session, changed=True)
        out.extend(f"the gold actions leave {line}" for line in check.lines())
    return out
