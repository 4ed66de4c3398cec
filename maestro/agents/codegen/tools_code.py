"""Turning the model's answer for one tool into the function tools.py holds.

The model writes the body; the host owns everything the runtime relies on: the ``@tool`` kind,
the exact signature, and a docstring whose ``Args:`` describe each parameter.
"""

from __future__ import annotations

import ast

from maestro.agents.codegen.blueprint import Blueprint, Operation
from maestro.agents.codegen.prompts import ParseError

TOOLS_HEADER = "from maestro.domains.sdk import Database, ToolError, tool\n"


def _docstring(bp: Blueprint, op: Operation) -> str:
    key = bp.entity(op.table).key
    args = "\n".join(
        f"        {p}: The {bp.entity(op.table).name.lower()}'s id."
        if p == key
        else f"        {p}: The {p.replace('_', ' ')}."
        for p in op.params
    )
    # Indented as it would be in the function body, since ast.unparse writes it verbatim.
    return f"{op.description}\n\n    Args:\n{args}\n    "


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
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the model's docstring: replaced by one the runtime can parse
    fn.body = [ast.Expr(ast.Constant(_docstring(bp, op))), *body] if body else [ast.Pass()]
    fn.decorator_list = [
        ast.Call(func=ast.Name("tool", ast.Load()), args=[ast.Constant(op.kind)], keywords=[])
    ]
    fn.returns = ast.Name("dict", ast.Load())
    fn.args.args[0].annotation = ast.Name("Database", ast.Load())
    for arg in fn.args.args[1:]:
        arg.annotation = ast.Name(op.params[arg.arg], ast.Load())
    return ast.unparse(ast.fix_missing_locations(fn)) + "\n"


def tools_source(bp: Blueprint, functions: dict[str, str]) -> str:
    """tools.py: the SDK import and each function, in the blueprint's order."""
    parts = [functions[op.name] for op in bp.operations if op.name in functions]
    return TOOLS_HEADER + "\n\n" + "\n\n".join(parts)
