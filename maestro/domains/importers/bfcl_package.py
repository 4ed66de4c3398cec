"""The files of an imported BFCL package, written from BFCL's data, and the loader's check.

Everything here runs in the host and reads BFCL only as data (its JSON files, found without
importing the ``bfcl_eval`` package); BFCL's Python runs only in the sandbox child
(:mod:`maestro.domains.importers.bfcl_runtime`).

An imported package's tools.py is generated: one ``@tool`` per BFCL function, its schema from
BFCL's function doc (the JSON BFCL sends a model), its body a call to ``call_api``. Its
``API_CLASSES`` constant names each class's module and doc file. The loader grants the child
the vetted runtime and those modules only for a tools.py this module would write itself
(:func:`vetted_imports`), so a package cannot grant itself anything by what it declares.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import keyword
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from maestro.domains.errors import Problem

BENCHMARK = "bfcl"
DISTRIBUTION = "bfcl-eval"
RUNTIME_MODULE = "maestro.domains.importers.bfcl_runtime"
#: BFCL's API classes live in this package; no other module is vetted.
API_PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code."
SERVICE_FUNCTIONS = ("describe_classes", "initial_records", "execute_calls", "run_checker")

_TYPES = {
    "string": "str",
    "integer": "int",
    "float": "float",
    "number": "float",
    "boolean": "bool",
    "dict": "dict[str, Any]",
    "object": "dict[str, Any]",
    "any": "Any",
    "tuple": "list[Any]",
}


class BfclDataError(Exception):
    """BFCL's files are missing, or say something the importer cannot turn into a package."""


@dataclass(frozen=True)
class ApiClass:
    """One BFCL API class as a package uses it."""

    name: str
    module: str
    doc_file: str

    @property
    def table(self) -> str:
        return self.name


def bfcl_home() -> Path:
    """The installed ``bfcl_eval`` package folder, found without importing it."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise BfclDataError(
            f"{DISTRIBUTION} is not installed (scripts/setup.sh installs it with --no-deps)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def bfcl_version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise BfclDataError(f"{DISTRIBUTION} is not installed") from None


def func_docs(doc_file: str) -> list[dict[str, Any]]:
    """BFCL's function docs of one class (JSON lines), as it sends them to a model."""
    if Path(doc_file).name != doc_file:
        raise BfclDataError(f"function doc file {doc_file!r} is not a plain file name")
    path = bfcl_home() / "data" / "multi_turn_func_doc" / doc_file
    return _json_lines(path)


@cache
def _json_lines_cached(path: str, mtime: float) -> tuple[str, ...]:
    return tuple(line for line in Path(path).read_text(encoding="utf-8").splitlines() if line)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise BfclDataError(f"{path} does not exist")
    lines = _json_lines_cached(str(path), path.stat().st_mtime)
    try:
        return [json.loads(line) for line in lines]
    except json.JSONDecodeError as exc:
        raise BfclDataError(f"{path}: invalid JSON: {exc}") from None


# ----- tools.py --------------------------------------------------------------------------------


def _literal(text: str) -> str:
    """A double-quoted docstring body: one line, backslashes and quotes escaped."""
    return " ".join(text.split()).replace("\\", "\\\\").replace('"', '\\"')


def _annotation(prop: Mapping[str, Any]) -> str:
    kind = str(prop.get("type", "any"))
    if kind == "array":
        item = _TYPES.get(str((prop.get("items") or {}).get("type", "any")), "Any")
        return f"list[{item}]"
    return _TYPES.get(kind, "Any")


def _default(prop: Mapping[str, Any]) -> tuple[bool, Any]:
    """(has a default, its value); BFCL writes a None default as the string "None"."""
    if "default" not in prop:
        return False, None
    value = prop["default"]
    return True, None if value == "None" else value


def _tool(cls: ApiClass, doc: Mapping[str, Any]) -> str:
    name = str(doc["name"])
    params = doc.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    required = set(params.get("required") or [])
    for p in [name, *props]:
        if not p.isidentifier() or keyword.iskeyword(p) or p == "db" or p.startswith("_"):
            raise BfclDataError(f"{cls.doc_file}: {name}: {p!r} cannot be a Python parameter")
    args, docs = [], []
    for p, prop in props.items():
        ann = _annotation(prop)
        has_default, default = _default(prop)
        if p in required:
            args.append(f"{p}: {ann}")
        elif not has_default:
            raise BfclDataError(f"{cls.doc_file}: {name}: optional {p!r} has no default")
        else:
            ann = f"{ann} | None" if default is None and ann != "Any" else ann
            args.append(f"{p}: {ann} = {default!r}")
        docs.append(f"        {p}: {_literal(str(prop.get('description', '')))}")
    signature = ", ".join(["db: Database", *(["*", *args] if args else [])])
    call_args = "{" + ", ".join(f"{p!r}: {p}" for p in props) + "}"
    body = [
        '@tool("write")',
        f"def {name}({signature}) -> str:",
        f'    """{_literal(str(doc.get("description", name)))}',
    ]
    if docs:
        body += ["", "    Args:", *docs]
    body += ['    """', f"    return call_api(db, {cls.name!r}, {name!r}, {call_args})"]
    return "\n".join(body)


def tools_source(classes: Sequence[ApiClass], version: str) -> str:
    """The tools.py of a package over these classes, from BFCL's function docs."""
    table = "\n".join(f"    {c.name!r}: ({c.module!r}, {c.doc_file!r})," for c in classes)
    head = f'''"""BFCL's {", ".join(c.name for c in classes)} functions ({DISTRIBUTION} {version}), as maestro tools.

Generated by maestro's BFCL importer: each tool calls the class method of the same name on the
instance the session holds, inside the sandbox. Do not edit: the loader runs this package only
if this file is exactly what the importer writes. BFCL does not say which functions change
state, so every tool is marked "write".
"""

from typing import Any

from {RUNTIME_MODULE} import call_api
from maestro.domains.sdk import Database, tool

#: class -> (module, BFCL function-doc file)
API_CLASSES = {{
{table}
}}
'''
    tools = [_tool(c, doc) for c in classes for doc in func_docs(c.doc_file)]
    names = [t.split("def ", 1)[1].split("(", 1)[0] for t in tools]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BfclDataError(f"two classes of one package define the same functions: {twice}")
    return head + "\n\n" + "\n\n\n".join(tools) + "\n"


def classes_of(tools_py: str) -> list[ApiClass]:
    """The ``API_CLASSES`` a generated tools.py declares (read from its syntax tree)."""
    tree = ast.parse(tools_py)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "API_CLASSES"
        ):
            table = ast.literal_eval(node.value)
            return [ApiClass(name, module, doc) for name, (module, doc) in table.items()]
    raise BfclDataError("tools.py declares no API_CLASSES")


def vetted_imports(
    source: str | None, version: str | None, problems: list[Problem]
) -> tuple[dict[str, tuple[str, ...]], list[Problem]]:
    """What the sandbox child may let this package's tools.py (``source``, as the load read it;
    None with ``problems`` when it could not) import: the runtime's ``call_api`` and its
    classes' modules, when tools.py is the importer's own output."""
    if source is None:
        return {}, problems or [Problem("tools.py", "", "missing")]
    try:
        classes = classes_of(source)
        installed = bfcl_version()
        if version != installed:
            return {}, [
                Problem(
                    "domain.json",
                    "provenance.imported_from.version",
                    f"the package was imported from {DISTRIBUTION} {version}; {installed} is installed",
                )
            ]
        outside = [c.module for c in classes if not c.module.startswith(API_PACKAGE)]
        if outside:
            raise BfclDataError(f"API_CLASSES names modules outside {API_PACKAGE}: {outside}")
        if tools_source(classes, installed) != source:
            raise BfclDataError(
                "tools.py is not the file maestro's BFCL importer writes for its API_CLASSES"
                " (edited?); re-import the category"
            )
    except (OSError, SyntaxError, ValueError, BfclDataError) as exc:
        return {}, [Problem("tools.py", "", f"imported from {BENCHMARK}: {exc}")]
    # The API modules first: the runtime looks at the classes loaded when it loads.
    vetted: dict[str, tuple[str, ...]] = {c.module: () for c in classes}
    vetted[RUNTIME_MODULE] = ("call_api",)
    return vetted, []


# ----- models.py, the service package ---------------------------------------------------------


def models_source(classes: Sequence[ApiClass]) -> str:
    tables = ", ".join(f"{c.table!r}: Attribute" for c in classes)
    return f'''"""State of BFCL API instances: one table per class, one record per instance attribute.

``value`` is the attribute as maestro.domains.importers.objstate encodes it. Generated.
"""

from typing import Any, ClassVar

from maestro.domains.sdk import Record


class Attribute(Record):
    key_field: ClassVar[str] = "name"

    name: str
    value: Any = None


TABLES = {{{tables}}}
'''


_SERVICE_TOOLS = '''"""BFCL's own code on request: class table, initial states, its executor and its checker."""

from typing import Any

from maestro.domains.importers.bfcl_runtime import (
    describe_classes,
    execute_calls,
    initial_records,
    run_checker,
)
from maestro.domains.sdk import Database, tool


@tool("read")
def describe(db: Database) -> dict[str, Any]:
    """BFCL's API classes, their modules, function-doc files and method signatures."""
    return describe_classes()


@tool("read")
def initial_state(
    db: Database, class_ref: str, config: dict[str, Any], long_context: bool
) -> dict[str, Any]:
    """The attributes of a class instance loaded with a test entry's initial config.

    Args:
        class_ref: The BFCL class name.
        config: The class's part of the entry's initial_config.
        long_context: Whether the category loads long-context scenarios.
    """
    return initial_records(class_ref, config, long_context)


@tool("read")
def execute(
    db: Database, entry: dict[str, Any], turns: list[list[str]], long_context: bool
) -> dict[str, Any]:
    """BFCL's executor on call strings, turn by turn: results and final state.

    Args:
        entry: The test entry (id, initial_config, involved_classes).
        turns: Call strings per turn.
        long_context: Whether the category loads long-context scenarios.
    """
    return execute_calls(entry, turns, long_context)


@tool("read")
def check(
    db: Database,
    entry: dict[str, Any],
    ground_truth: list[list[str]],
    answer_turns: list[list[list[str]]],
    category: str,
) -> dict[str, Any]:
    """BFCL's multi-turn checker on one entry.

    Args:
        entry: The test entry (id, initial_config, involved_classes).
        ground_truth: BFCL's ground-truth call strings per turn.
        answer_turns: The model's call strings per turn and step (``model_*`` names are
            pydantic's own).
        category: The test category.
    """
    return run_checker(entry, ground_truth, answer_turns, category)
'''


def write_service_package(root: Path, version: str) -> None:
    """A package whose tools are BFCL's code on request (the importer's and the checker's);
    it has no state of its own, but the store wants one table."""
    root.mkdir(parents=True, exist_ok=True)
    manifest = {
        "id": "bfcl_service",
        "name": "BFCL service",
        "version": "1.0.0",
        "description": f"BFCL's own code ({DISTRIBUTION} {version}) on request.",
        "provenance": {"source": "hand-built", "authors": ["maestro BFCL importer"]},
    }
    files = {
        "domain.json": json.dumps(manifest, indent=2),
        "models.py": models_source([ApiClass("runs", "", "")]),
        "db.json": json.dumps({"runs": {}}),
        "tools.py": _SERVICE_TOOLS,
        "policy.md": "Not an environment: BFCL's code on request for maestro's importer.\n",
        "tasks.jsonl": "",
    }
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")


def service_vetted(modules: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The service package's grant: the runtime's service functions and the API modules."""
    # The API modules first: the runtime looks at the classes loaded when it loads.
    vetted: dict[str, tuple[str, ...]] = {m: () for m in modules if m.startswith(API_PACKAGE)}
    vetted[RUNTIME_MODULE] = SERVICE_FUNCTIONS
    return vetted
