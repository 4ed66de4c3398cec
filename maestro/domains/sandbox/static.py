"""Static validation of LLM-written ``tools.py`` and ``models.py``, before anything runs.

The check is an allowlist over the syntax tree, not a search for bad words: what a generated
domain needs (typed functions, dict and list work, dates, decimals, regular expressions, the SDK)
passes; what an escape needs (other modules, dunder or private attributes, frame and code
objects, ``exec``-like builtins, attribute access by computed name) is named as a problem at
``line L col C`` with the rule it breaks. It is a linter, not the boundary: package code runs
only in the sandbox child, whatever this check says, and the run-time layers hold for whatever
it cannot see.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
import types
from collections.abc import Iterator, Mapping, Sequence

from maestro.domains.errors import Problem
from maestro.domains.sandbox.declarations import declaration_problems, where

MAX_SOURCE_BYTES = 512 * 1024

#: Standard-library modules generated code may import. Left out on purpose: anything with files,
#: processes, network or the interpreter (os, io, sys, socket, subprocess, importlib, ctypes,
#: gc, inspect, pickle, marshal), ``operator`` and ``string`` (attribute access by name through
#: ``attrgetter`` and ``Formatter``), ``random`` and ``uuid`` (replay must be deterministic).
STDLIB_ALLOWED = frozenset(
    {
        "bisect",
        "calendar",
        "collections",
        "collections.abc",
        "dataclasses",
        "datetime",
        "decimal",
        "enum",
        "fractions",
        "functools",
        "heapq",
        "itertools",
        "json",
        "math",
        "re",
        "statistics",
        "textwrap",
        "typing",
    }
)

SDK_MODULE = "maestro.domains.sdk"
#: Names that may be imported from pydantic (models.py only): field constraints and config.
PYDANTIC_ALLOWED = frozenset({"Field", "ConfigDict"})

#: Builtins that reach the interpreter, files or the import system.
FORBIDDEN_BUILTINS = frozenset(
    {
        "__import__",
        "breakpoint",
        "compile",
        "delattr",
        "dir",
        "eval",
        "exec",
        "exit",
        "globals",
        "help",
        "input",
        "locals",
        "memoryview",
        "open",
        "quit",
        "setattr",
        "vars",
    }
)

#: Attribute names without underscores that still lead to frames, code or class graphs.
FORBIDDEN_ATTRIBUTES = frozenset(
    {
        "ag_code",
        "ag_frame",
        "co_code",
        "co_consts",
        "cr_await",
        "cr_code",
        "cr_frame",
        "f_back",
        "f_builtins",
        "f_code",
        "f_globals",
        "f_locals",
        "format_map",
        "gi_code",
        "gi_frame",
        "gi_yieldfrom",
        "mro",
        "tb_frame",
        "tb_next",
        "with_traceback",
        # typing helpers that evaluate strings as code
        "ForwardRef",
        "get_type_hints",
        "make_dataclass",
    }
)

_NAMED_GETTERS = frozenset({"getattr", "hasattr"})
_FORMAT_FIELD = re.compile(r"\{[^{}]*[.\[]")


def check_tools_source(
    source: str, filename: str = "tools.py", vetted: Mapping[str, Sequence[str]] | None = None
) -> list[Problem]:
    """Every rule a generated ``tools.py`` breaks, each as a Problem at ``line L col C``.

    An empty list means the source may be loaded into the sandbox; it does not make it safe to
    import in the host: tools.py runs only in the sandbox child. ``vetted`` (from the host,
    never from the package) allows ``from MODULE import NAME`` for the names it lists.
    """
    tree, problems = _parse(source, filename)
    if tree is None:
        return problems
    checker = _Checker(filename, models_file=False, vetted=vetted)
    checker.visit(tree)
    return problems + _in_order(checker.problems)


def check_models_source(source: str, filename: str = "models.py") -> list[Problem]:
    """Every rule a generated ``models.py`` breaks; models.py may only declare record types.

    Allowed: imports from the allowlist (the SDK, pydantic's ``Field`` and ``ConfigDict``,
    ``typing``, ``datetime``, ``enum``...), classes whose bodies are annotated fields with literal
    or ``Field(...)`` defaults, simple constants (literals, ``Literal[...]`` aliases) and
    ``TABLES``. Because nothing else is allowed (no functions, no validators, no calls but
    ``Field``, ``Ref`` and ``ConfigDict`` with literal arguments), what a models.py that
    passes means is all in its JSON schemas, which the host checks.
    """
    tree, problems = _parse(source, filename)
    if tree is None:
        return problems
    checker = _Checker(filename, models_file=True)
    checker.visit(tree)
    return problems + _in_order(checker.problems + declaration_problems(tree, filename))


# ----- parsing ----------------------------------------------------------------------------------


def _parse(source: str, filename: str) -> tuple[ast.Module | None, list[Problem]]:
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        return None, [Problem(filename, "", f"is {size} bytes; the limit is {MAX_SOURCE_BYTES}")]
    try:
        return ast.parse(source, filename=filename), []
    except SyntaxError as exc:
        where = f"line {exc.lineno} col {exc.offset}" if exc.lineno else ""
        return None, [Problem(filename, where, f"syntax error: {exc.msg}")]
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return None, [Problem(filename, "", f"cannot be parsed: {type(exc).__name__}: {exc}")]


def _in_order(problems: list[Problem]) -> list[Problem]:
    """Problems by position in the file, as an editor lists them."""

    def position(p: Problem) -> tuple[int, int]:
        parts = p.location.split()
        return (int(parts[1]), int(parts[3])) if len(parts) == 4 else (0, 0)

    return sorted(problems, key=position)


@functools.cache
def _module_attribute(module: str, name: str) -> str | None:
    """The name of the module that ``module.name`` is, if it is one (``typing.sys`` is
    ``sys``); ``module`` is an allowed standard-library module, imported here to look."""
    try:
        value = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return value.__name__ if isinstance(value, types.ModuleType) else None


def _allowed_module(name: str) -> bool:
    """An allowed module, or a submodule of one (``json.decoder``), reached as an attribute."""
    return name in STDLIB_ALLOWED or name.partition(".")[0] in STDLIB_ALLOWED


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


# ----- rules for both files ---------------------------------------------------------------------


class _Checker(ast.NodeVisitor):
    """Walks the whole tree once; each visit method is one family of rules."""

    def __init__(
        self,
        filename: str,
        *,
        models_file: bool,
        vetted: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.filename = filename
        self.models_file = models_file
        self.vetted = vetted or {}
        self.problems: list[Problem] = []
        #: Names bound to an allowed standard-library module, by the module they are.
        self.modules: dict[str, str] = {}

    def problem(self, node: ast.AST, rule: str, message: str) -> None:
        self.problems.append(Problem(self.filename, where(node), f"[{rule}] {message}"))

    # imports

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in STDLIB_ALLOWED:
                self.problem(node, "import", f"import of {alias.name!r} is not allowed")
            elif alias.asname:
                self.modules[alias.asname] = alias.name
            else:
                top = alias.name.partition(".")[0]
                self.modules[top] = top
            self._bound_name(node, alias.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            if alias.name == "*":
                self.problem(node, "import", f"'from {module or '.'} import *' is not allowed")
                continue
            self._bound_name(node, alias.asname)
            reason = self._import_refused(node, module, alias.name)
            if reason:
                self.problem(node, "import", reason)

    def _import_refused(self, node: ast.ImportFrom, module: str, name: str) -> str | None:
        if node.level:
            own = (module, name) in (("models", name), ("", "models"))
            if node.level == 1 and own and not self.models_file:
                return (
                    None
                    if not _dunder(name) and not name.startswith("_")
                    else (f"import of private name {name!r} from models")
                )
            return f"relative import 'from {'.' * node.level}{module} import {name}' is not allowed; only 'from .models import ...' in tools.py"
        if module == "__future__" and name == "annotations":
            return None
        if module == SDK_MODULE:
            return None if not name.startswith("_") else f"{name!r} is private to the SDK"
        if module in self.vetted:
            allowed = self.vetted[module]
            return (
                None if name in allowed else f"only {sorted(allowed)} may be imported from {module}"
            )
        if module == "pydantic" and self.models_file:
            if name in PYDANTIC_ALLOWED:
                return None
            return f"only {sorted(PYDANTIC_ALLOWED)} may be imported from pydantic"
        if module in STDLIB_ALLOWED or f"{module}.{name}" in STDLIB_ALLOWED:
            if name in FORBIDDEN_ATTRIBUTES or name.startswith("_"):
                return f"{module}.{name} is not allowed"
            inner = _module_attribute(module, name) if module in STDLIB_ALLOWED else None
            if inner is not None and not _allowed_module(inner):
                return f"{module}.{name} is the module {inner}, which is not allowed"
            if inner is not None:
                self.modules[self._local(node, name)] = inner
            return None
        return f"import from {module!r} is not allowed (allowed: the SDK, .models, {', '.join(sorted(STDLIB_ALLOWED))})"

    def _bound_name(self, node: ast.AST, name: str | None) -> None:
        if name is not None and _dunder(name):
            self.problem(node, "dunder", f"name {name!r} is not allowed")

    # names and attributes

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_BUILTINS:
            self.problem(node, "builtin", f"{node.id}() is not allowed")
        elif node.id.startswith("__"):
            self.problem(node, "dunder", f"name {node.id!r} is not allowed")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_"):
            kind = "dunder" if _dunder(node.attr) else "private"
            self.problem(node, kind, f"attribute {node.attr!r} is not allowed")
        elif node.attr in FORBIDDEN_ATTRIBUTES:
            self.problem(node, "introspection", f"attribute {node.attr!r} is not allowed")
        else:
            module = self._module_of(node.value)
            inner = _module_attribute(module, node.attr) if module else None
            if inner is not None and not _allowed_module(inner):
                self.problem(
                    node, "import", f"{module}.{node.attr} is the module {inner}, not allowed"
                )
        self.generic_visit(node)

    def _module_of(self, node: ast.expr) -> str | None:
        """The allowed module an expression names (``typing``, ``collections.abc``), if any."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            outer = self._module_of(node.value)
            inner = _module_attribute(outer, node.attr) if outer else None
            return inner if inner is not None and _allowed_module(inner) else None
        return None

    def _local(self, node: ast.ImportFrom, name: str) -> str:
        for alias in node.names:
            if alias.name == name:
                return alias.asname or name
        return name

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _NAMED_GETTERS:
            name_arg = node.args[1] if len(node.args) > 1 else None
            if not (
                isinstance(name_arg, ast.Constant)
                and isinstance(name_arg.value, str)
                and not name_arg.value.startswith("_")
            ):
                self.problem(
                    node,
                    "getattr",
                    f"{func.id}() needs a literal attribute name without underscores",
                )
        if isinstance(func, ast.Name) and func.id == "type" and len(node.args) != 1:
            self.problem(node, "builtin", "type() with three arguments builds classes; not allowed")
        if isinstance(func, ast.Attribute) and func.attr == "format":
            receiver = func.value
            if not (isinstance(receiver, ast.Constant) and isinstance(receiver.value, str)):
                self.problem(node, "format", ".format() is allowed only on a string literal")
            elif _FORMAT_FIELD.search(receiver.value):
                self.problem(node, "format", "format fields may not access attributes or items")
        for kw in node.keywords:
            if kw.arg is not None and _dunder(kw.arg):
                self.problem(node, "dunder", f"keyword {kw.arg!r} is not allowed")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "__" in node.value:
            self.problem(node, "dunder", "string literals may not contain '__'")
        elif isinstance(node.value, bytes) and b"__" in node.value:
            self.problem(node, "dunder", "bytes literals may not contain '__'")

    # definitions

    def _definition(self, node: ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef) -> None:
        if _dunder(node.name):
            self.problem(node, "dunder", f"definition of {node.name!r} is not allowed")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._definition(node)
        for arg in _arguments(node.args):
            if _dunder(arg.arg):
                self.problem(arg, "dunder", f"parameter {arg.arg!r} is not allowed")
        self.generic_visit(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.problem(node, "async", "tools are synchronous; async def is not allowed")
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._definition(node)
        for kw in node.keywords:
            self.problem(node, "class", f"class keyword {kw.arg!r} (metaclass, ...) is not allowed")
        self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for arg in _arguments(node.args):
            if _dunder(arg.arg):
                self.problem(arg, "dunder", f"parameter {arg.arg!r} is not allowed")
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:
            if attr.startswith("_"):
                self.problem(node, "private", f"match on attribute {attr!r} is not allowed")
        self.generic_visit(node)

    def visit_Await(self, node: ast.Await) -> None:
        self.problem(node, "async", "await is not allowed")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            if _dunder(name):
                self.problem(node, "dunder", f"global {name!r} is not allowed")


def _arguments(args: ast.arguments) -> Iterator[ast.arg]:
    yield from args.posonlyargs
    yield from args.args
    yield from args.kwonlyargs
    if args.vararg:
        yield args.vararg
    if args.kwarg:
        yield args.kwarg
