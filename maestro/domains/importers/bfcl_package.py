"""The files of an imported BFCL package, written from BFCL's data, and the loader's check.

Everything here runs in the host and reads BFCL only as data (its JSON files, found without
importing the ``bfcl_eval`` package); BFCL's Python runs only in the sandbox child
(:mod:`maestro.domains.importers.bfcl_runtime`).

An imported package's tools.py is generated: one ``@tool`` per BFCL function, its schema from
BFCL's function doc (the JSON BFCL sends a model), its body a call to ``call_api``. Its
``API_CLASSES`` constant names each class's module and doc file. The loader grants the child
the vetted runtime and those modules only for a tools.py this module would write itself
(:func:`vetted_imports`), and only for BFCL's own classes, each with its own module and doc
file (:func:`known_classes`, read from BFCL's class table), so a package cannot grant itself
anything by what it declares.
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
from maestro.domains.files import write_inside

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


#: BFCL's class table, in its source: class -> module, and class -> function-doc file.
_CLASS_TABLE_FILE = Path("constants") / "executable_backend_config.py"
_MODULE_TABLE = "CLASS_FILE_PATH_MAPPING"
_DOC_TABLE = "MULTI_TURN_FUNC_DOC_FILE_MAPPING"


def known_classes() -> dict[str, ApiClass]:
    """BFCL's API classes by name, as its own class table names them: the only classes, modules
    and function-doc files a package may declare. Read as data from BFCL's source (string
    literals, and f-strings of its string constants); nothing of BFCL's is imported."""
    path = bfcl_home() / _CLASS_TABLE_FILE
    try:
        tables = _string_tables_cached(str(path), path.stat().st_mtime)
    except (OSError, SyntaxError, ValueError) as exc:
        raise BfclDataError(f"BFCL's class table {path}: {exc}") from None
    modules, docs = tables.get(_MODULE_TABLE), tables.get(_DOC_TABLE)
    if modules is None or docs is None:
        raise BfclDataError(f"{path} has no {_MODULE_TABLE} and {_DOC_TABLE} of strings")
    return {
        name: ApiClass(name, module, docs[name])
        for name, module in modules.items()
        if name in docs and module.startswith(API_PACKAGE)
    }


@cache
def _string_tables_cached(path: str, mtime: float) -> dict[str, dict[str, str]]:
    """Every top-level ``NAME = {"key": "text", ...}`` of a Python file whose keys and values
    are strings, f-strings of the file's earlier string constants included."""
    strings: dict[str, str] = {}
    tables: dict[str, dict[str, str]] = {}
    for node in ast.parse(Path(path).read_text(encoding="utf-8")).body:
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            continue
        target = node.targets[0].id
        if (text := _string(node.value, strings)) is not None:
            strings[target] = text
        elif isinstance(node.value, ast.Dict):
            pairs = zip(node.value.keys, node.value.values, strict=True)
            items = [
                (k if k is None else _string(k, strings), _string(v, strings)) for k, v in pairs
            ]
            table = {k: v for k, v in items if k is not None and v is not None}
            if len(table) == len(items):  # every key and value a string, no key twice
                tables[target] = table
    return tables


def _string(node: ast.expr, strings: Mapping[str, str]) -> str | None:
    """A string literal, or an f-string of literals and names of ``strings``; else None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if not isinstance(node, ast.JoinedStr):
        return None
    parts = []
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            parts.append(part.value)
        elif (
            isinstance(part, ast.FormattedValue)
            and part.conversion == -1
            and part.format_spec is None
            and isinstance(part.value, ast.Name)
            and part.value.id in strings
        ):
            parts.append(strings[part.value.id])
        else:
            return None
    return "".join(parts)


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
    """The tools.py of a package over these classes, from BFCL's function docs.

    Nothing in a class, module or version can change the file's structure: names must be
    identifiers (dotted, for a module), the table holds them as ``repr``, and the docstring's
    text is escaped (a class name holding ``\"\"\"`` injected a tool that vetting, which
    regenerates this file, then accepted)."""
    for c in classes:
        _check_names(c)
    table = "\n".join(f"    {c.name!r}: ({c.module!r}, {c.doc_file!r})," for c in classes)
    title = _literal(f"{', '.join(c.name for c in classes)} functions ({DISTRIBUTION} {version})")
    head = f'''"""BFCL's {title}, as maestro tools.

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


def _check_names(cls: ApiClass) -> None:
    """Refuse a class or module that is not a Python name (its text goes into generated code)."""
    if not cls.name.isidentifier() or keyword.iskeyword(cls.name):
        raise BfclDataError(f"API class {_shown(cls.name)} is not a Python identifier")
    if not all(p.isidentifier() and not keyword.iskeyword(p) for p in cls.module.split(".")):
        raise BfclDataError(f"module {_shown(cls.module)} of {cls.name} is not a dotted name")


def _shown(text: str) -> str:
    """A name from a package, quoted and cut for a one-line problem."""
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def classes_of(tools_py: str) -> list[ApiClass]:
    """The ``API_CLASSES`` a generated tools.py declares (read from its syntax tree), each one
    of BFCL's own classes with its own module and function-doc file (:func:`known_classes`);
    :class:`BfclDataError` for anything else."""
    tree = ast.parse(tools_py)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "API_CLASSES"
        ):
            return _known(_api_classes(ast.literal_eval(node.value)))
    raise BfclDataError("tools.py declares no API_CLASSES")


def _api_classes(table: object) -> list[ApiClass]:
    """``API_CLASSES``'s value as classes, if it has the shape the importer writes: a dict of
    class name -> (module, function-doc file), all strings (``[1]`` and ``{'A': 1}`` were an
    AttributeError and a TypeError out of ``domains validate``)."""
    if not isinstance(table, dict):
        raise BfclDataError(
            f"API_CLASSES is a {type(table).__name__}, not a dict of class name -> (module,"
            " function-doc file)"
        )
    classes = []
    for name, value in table.items():
        if not (
            isinstance(name, str)
            and isinstance(value, tuple)
            and len(value) == 2
            and all(isinstance(v, str) for v in value)
        ):
            key = _shown(name) if isinstance(name, str) else f"a {type(name).__name__} key"
            raise BfclDataError(
                f"API_CLASSES: {key} is not a class name with a (module, function-doc file)"
                " pair of strings"
            )
        classes.append(ApiClass(name, *value))
    return classes


def _known(classes: list[ApiClass]) -> list[ApiClass]:
    """``classes``, when each is one of BFCL's, with BFCL's module and function-doc file."""
    known = known_classes()
    for c in classes:
        if c.name not in known:
            raise BfclDataError(
                f"API_CLASSES names {_shown(c.name)}, not one of BFCL's classes"
                f" ({', '.join(sorted(known))})"
            )
        if c != known[c.name]:
            mine = known[c.name]
            raise BfclDataError(
                f"API_CLASSES gives {c.name} the module {_shown(c.module)} and doc file"
                f" {_shown(c.doc_file)}; BFCL's are {mine.module!r} and {mine.doc_file!r}"
            )
    return classes


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
        if tools_source(classes, installed) != source:
            raise BfclDataError(
                "tools.py is not the file maestro's BFCL importer writes for its API_CLASSES"
                " (edited?); re-import the category"
            )
    except (RecursionError, MemoryError):  # what CPython's parser says of absurd nesting
        return {}, [Problem("tools.py", "", "cannot be parsed: it nests too deeply")]
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
    it has no state of its own, but the store wants one table. Its files are written as every
    package's are (:func:`maestro.domains.files.write_inside`: never through a link)."""
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
        write_inside(root, root / name, text)


def service_vetted(modules: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The service package's grant: the runtime's service functions and the API modules."""
    # The API modules first: the runtime looks at the classes loaded when it loads.
    vetted: dict[str, tuple[str, ...]] = {m: () for m in modules if m.startswith(API_PACKAGE)}
    vetted[RUNTIME_MODULE] = SERVICE_FUNCTIONS
    return vetted
