"""Turning the model's answer for one tool into the function tools.py holds.

The model writes the body; the host owns everything the runtime relies on: the ``@tool`` kind,
the exact signature (types included: a date parameter is an ``IsoDate``), and a docstring whose
``Args:`` describe each parameter.
"""

from __future__ import annotations

import ast

from maestro.agents.codegen.answers import ParseError
from maestro.agents.codegen.blueprint import Blueprint, FieldType, Operation
from maestro.agents.codegen.conditions import record_params

TOOLS_HEADER = (
    "from datetime import date, datetime, timedelta\n"
    "from typing import Literal\n\n"
    "from maestro.domains.sdk import Database, IsoDate, IsoDateTime, ToolError, tool\n"
)


def param_annotation(ftype: FieldType) -> str:
    """The Python annotation of a parameter of this type."""
    if ftype.base == "enum":
        return "Literal[" + ", ".join(repr(c) for c in ftype.choices) + "]"
    return {"date": "IsoDate", "datetime": "IsoDateTime"}.get(ftype.base, ftype.base)


def param_doc(bp: Blueprint, op: Operation, name: str) -> str:
    """What one parameter holds, as the assistant reads it in the tool's schema."""
    table = record_params(bp, op).get(name)
    if table is not None:
        e = bp.entity(table)
        return f'The key of the {e.name.lower()} ({table} record), such as "{e.prefix}1001".'
    ftype = op.param_types()[name]
    words = name.replace("_", " ")
    if ftype.base == "date":
        return f"The {words}, a date written YYYY-MM-DD."
    if ftype.base == "datetime":
        return f"The {words}, a date and time written YYYY-MM-DDTHH:MM:SS."
    if ftype.base == "enum":
        return f"The {words}: one of {', '.join(ftype.choices)}."
    return f"The {words}."


def _docstring(bp: Blueprint, op: Operation) -> str:
    args = "\n".join(f"        {p}: {param_doc(bp, op, p)}" for p in op.params) or ""
    section = f"\n\n    Args:\n{args}\n    " if args else "\n    "
    # Indented as it would be in the function body, since ast.unparse writes it verbatim.
    return f"{op.description}{section}"


def normalise_tool(bp: Blueprint, op: Operation, code: str) -> str:
    """The function for ``op`` from the model's code, with the host's decorator and docstring.

    Raises :class:`ParseError` when the code does not parse or does not define ``op.name``
    with the parameters ``(db, <params>)``.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ParseError(f"syntax error at line {exc.lineno}: {exc.msg}") from None
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == op.name]
    if not found:
        raise ParseError(f"the code defines no function named {op.name}")
    fn = found[0]
    names = [a.arg for a in fn.args.args]
    want = ["db", *op.params]
    if names != want or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        raise ParseError(f"{op.name} must take ({', '.join(want)}), not ({', '.join(names)})")
    if fn.args.defaults:
        raise ParseError(f"{op.name}: parameters take no defaults")
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the model's docstring: replaced by one the runtime can parse
    fn.body = [ast.Expr(ast.Constant(_docstring(bp, op))), *body] if body else [ast.Pass()]
    fn.decorator_list = [
        ast.Call(func=ast.Name("tool", ast.Load()), args=[ast.Constant(op.tool_kind)], keywords=[])
    ]
    fn.returns = ast.Name("list" if op.kind == "list" else "dict", ast.Load())
    fn.args.args[0].annotation = ast.Name("Database", ast.Load())
    types = op.param_types()
    for arg in fn.args.args[1:]:
        arg.annotation = ast.parse(param_annotation(types[arg.arg]), mode="eval").body
    return ast.unparse(ast.fix_missing_locations(fn)) + "\n"


def tools_source(bp: Blueprint, functions: dict[str, str]) -> str:
    """tools.py: the imports and each function, in the blueprint's order."""
    parts = [functions[op.name] for op in bp.operations if op.name in functions]
    return TOOLS_HEADER + "\n\n" + "\n\n".join(parts)


def tool_header(bp: Blueprint, op: Operation) -> str:
    """The exact first lines the model must write for one tool."""
    types = op.param_types()
    params = "".join(f", {p}: {param_annotation(t)}" for p, t in types.items())
    ret = "list" if op.kind == "list" else "dict"
    return f'@tool("{op.tool_kind}")\ndef {op.name}(db: Database{params}) -> {ret}:'
