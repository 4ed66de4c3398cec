"""Tool specs built in the host from tools.py's syntax tree, without running tools.py.

The host needs each tool's argument model (for schemas, argument validation and the tool graph)
but must not import untrusted code. A tool's signature is declarative: parameter names, type
annotations, literal defaults, a docstring and the ``@tool(kind)`` mark. Annotations are checked
to be type expressions (names, ``module.Name``, subscripts, ``|``, ``Literal[...]``, ``Ref(...)``)
and evaluated against what the module imports from the allowlist and from models.py, so the
specs equal the in-process ones; the child's schemas are compared with them on start.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import types
from collections.abc import Callable
from typing import Any

from maestro.domains import sdk
from maestro.domains.errors import Problem
from maestro.domains.runtime import ToolDefinitionError, ToolSpec, spec_from_function
from maestro.domains.sandbox.declarations import type_expression_problem, where
from maestro.domains.sandbox.static import STDLIB_ALLOWED

_SAFE_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "bool",
        "bytes",
        "dict",
        "float",
        "frozenset",
        "int",
        "list",
        "set",
        "str",
        "tuple",
    )
}
_SAFE_BUILTINS["None"] = None


def specs_from_source(
    source: str, models: types.ModuleType, problems: list[Problem], filename: str = "tools.py"
) -> list[ToolSpec]:
    """One ToolSpec per ``@tool`` function of ``source``, in definition order."""
    tree = ast.parse(source, filename=filename)
    namespace = _module_namespace(tree, models)
    specs = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        kind = _tool_kind(node)
        if kind is None:
            continue
        stub = _stub(node, kind, namespace, problems, filename)
        if stub is None:
            continue
        try:
            specs.append(spec_from_function(stub))
        except ToolDefinitionError as exc:
            problems.append(Problem(filename, f"line {node.lineno}", str(exc)))
    if not specs and not problems:
        problems.append(Problem(filename, "", "defines no tool (functions marked with @tool)"))
    return specs


def _module_namespace(tree: ast.Module, models: types.ModuleType) -> dict[str, Any]:
    """Names the module binds that a signature may use: allowlisted imports and type aliases."""
    namespace: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in STDLIB_ALLOWED:
                    top = alias.name.split(".")[0]
                    target = alias.name if alias.asname else top
                    namespace[alias.asname or top] = importlib.import_module(target)
        elif isinstance(node, ast.ImportFrom):
            source = _import_source(node, models)
            for alias in node.names:
                if source is not None and hasattr(source, alias.name):
                    namespace[alias.asname or alias.name] = getattr(source, alias.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                value = _evaluate(node.value, namespace)
                if value is not _UNRESOLVED:
                    namespace[targets[0].id] = value
                else:
                    namespace.pop(targets[0].id, None)
    # Calls inside annotations must reach the real Ref, never a name the module rebound.
    if namespace.get("Ref", sdk.Ref) is not sdk.Ref:
        del namespace["Ref"]
    return namespace


def _import_source(node: ast.ImportFrom, models: types.ModuleType) -> Any:
    if node.level == 1 and node.module == "models":
        return models
    if node.level == 1 and node.module is None:
        return types.SimpleNamespace(models=models)
    if node.level == 0 and node.module == sdk.__name__:
        return sdk
    if node.level == 0 and node.module in STDLIB_ALLOWED:
        return importlib.import_module(node.module)
    return None


class _Unresolved:
    pass


_UNRESOLVED = _Unresolved()


def _evaluate(node: ast.expr, namespace: dict[str, Any], depth: int = 0) -> Any:
    """The value of a type expression, or _UNRESOLVED when it is not one or cannot be built."""
    if type_expression_problem(node) is not None:
        return _UNRESOLVED
    code = compile(ast.Expression(body=node), "<annotation>", "eval")
    try:
        # Only type expressions get here (no calls but Ref/Field, no dunders, no lambdas).
        value = eval(code, {"__builtins__": _SAFE_BUILTINS}, dict(namespace))
    except Exception:
        return _UNRESOLVED
    if isinstance(value, str) and depth < 3:  # a quoted annotation: the type it names
        return _evaluate(ast.parse(value, mode="eval").body, namespace, depth + 1)
    return value


def _tool_kind(node: ast.FunctionDef) -> str | None:
    for dec in node.decorator_list:
        if (
            isinstance(dec, ast.Call)
            and isinstance(dec.func, ast.Name | ast.Attribute)
            and (dec.func.id if isinstance(dec.func, ast.Name) else dec.func.attr) == "tool"
            and len(dec.args) == 1
            and isinstance(dec.args[0], ast.Constant)
            and dec.args[0].value in ("read", "write")
        ):
            return str(dec.args[0].value)
    return None


def _stub(
    node: ast.FunctionDef,
    kind: str,
    namespace: dict[str, Any],
    problems: list[Problem],
    filename: str,
) -> Callable[..., Any] | None:
    """A function with the tool's name, docstring and signature whose body refuses to run."""
    args = node.args
    if args.posonlyargs or args.vararg or args.kwarg:
        problems.append(
            Problem(filename, where(node), f"{node.name}: parameters must be plain named ones")
        )
        return None
    positional = args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    params: list[tuple[ast.arg, ast.expr | None, inspect._ParameterKind]] = [
        (a, d, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for a, d in zip(positional, defaults, strict=True)
    ]
    params += [
        (a, d, inspect.Parameter.KEYWORD_ONLY)
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    parameters = []
    annotations: dict[str, Any] = {}
    for i, (arg, default_node, kind_of) in enumerate(params):
        default: Any = inspect.Parameter.empty
        if default_node is not None:
            try:
                default = ast.literal_eval(default_node)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                problems.append(
                    Problem(
                        filename,
                        where(default_node),
                        f"{node.name}: the default of {arg.arg!r} must be a literal",
                    )
                )
                return None
        if arg.annotation is not None and i > 0:
            value = _evaluate(arg.annotation, namespace)
            if value is _UNRESOLVED:
                problems.append(
                    Problem(
                        filename,
                        where(arg.annotation),
                        f"{node.name}: the type of {arg.arg!r} must be built from the standard "
                        "library's allowed modules, the SDK and models.py (names, X[...], X | Y, "
                        "Literal[...]); the sandbox cannot resolve it without running tools.py",
                    )
                )
                return None
            annotations[arg.arg] = value
        parameters.append(inspect.Parameter(arg.arg, kind_of, default=default))

    # The stub's globals are the module's allowed names, so forward references in the
    # annotations resolve as they would in tools.py, and nothing else does.
    scope = {"__builtins__": {**_SAFE_BUILTINS, "RuntimeError": RuntimeError}, **namespace}
    stub = types.FunctionType(_refuse.__code__, scope, node.name)
    stub.__qualname__ = node.name
    stub.__doc__ = ast.get_docstring(node)
    stub.__annotations__ = annotations
    stub.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return sdk.tool(kind)(stub)  # type: ignore[arg-type]


def _refuse(*_: Any, **__: Any) -> Any:
    raise RuntimeError("this tool runs only in the sandbox; call it through the toolkit")
