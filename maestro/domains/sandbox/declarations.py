"""models.py's extra rule for the static check: declarations only, and what a declaration
value or a type may be. A linter rule (models.py runs only in the sandbox child): it keeps
generated record types to what the host can check from their JSON schema, and tells an LLM
which line to fix.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from maestro.domains.errors import Problem


def where(node: ast.AST) -> str:
    """``line L col C`` of a node (columns counted from 1, like editors)."""
    return f"line {getattr(node, 'lineno', 0)} col {getattr(node, 'col_offset', -1) + 1}"


_MODELS_CALLS = frozenset({"Field", "Ref", "ConfigDict"})

_Bad = Callable[[ast.AST, str], None]


def declaration_problems(tree: ast.Module, filename: str) -> list[Problem]:
    """models.py may hold imports, literal constants, type aliases and record classes only."""
    out: list[Problem] = []

    def bad(node: ast.AST, message: str) -> None:
        out.append(Problem(filename, where(node), f"[declarations] {message}"))

    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, ast.Import | ast.ImportFrom | ast.Pass):
            continue
        if i == 0 and _is_docstring(stmt):
            continue
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            _check_assignment(stmt, bad)
        elif isinstance(stmt, ast.ClassDef):
            _check_class(stmt, bad)
        else:
            bad(stmt, f"{type(stmt).__name__} statements are not allowed in models.py")
    return out


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _check_assignment(stmt: ast.Assign | ast.AnnAssign, bad: _Bad) -> None:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    for target in targets:
        if not isinstance(target, ast.Name):
            bad(target, "only plain names may be assigned")
    if isinstance(stmt, ast.AnnAssign):
        why = type_expression_problem(stmt.annotation)
        if why:
            bad(stmt.annotation, why)
    if stmt.value is not None:
        named = [t.id for t in targets if isinstance(t, ast.Name)]
        why = value_problem(stmt.value)
        if "model_config" in named:
            why = why or _model_config_problem(stmt.value)
        if why:
            bad(stmt.value, why)


def _check_class(node: ast.ClassDef, bad: _Bad) -> None:
    if node.decorator_list:
        bad(node, "record classes may not be decorated")
    for base in node.bases:
        if not isinstance(base, ast.Name | ast.Attribute):
            bad(base, "a base class must be a name")
    for i, stmt in enumerate(node.body):
        if isinstance(stmt, ast.Pass) or (i == 0 and _is_docstring(stmt)):
            continue
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            _check_assignment(stmt, bad)
        else:
            bad(stmt, f"a record class may hold fields only, not {type(stmt).__name__}")


def value_problem(node: ast.expr) -> str | None:
    """Why an expression is not a declaration value (a literal, a type, Field/Ref/ConfigDict)."""
    if isinstance(node, ast.Constant):
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return value_problem(node.operand)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return next(filter(None, (value_problem(e) for e in node.elts)), None)
    if isinstance(node, ast.Dict):
        parts = [k for k in node.keys if k is not None] + list(node.values)
        if any(k is None for k in node.keys):
            return "dict unpacking is not allowed"
        return next(filter(None, (value_problem(e) for e in parts)), None)
    if isinstance(node, ast.Call):
        return _call_problem(node)
    return type_expression_problem(node)


#: Keywords a declaration may pass. Left out on purpose: anything that hands pydantic a
#: callable (json_schema_extra, validators), whose effect no JSON schema shows the host, and
#: ``regex_engine`` (the default Rust engine matches in linear time; Python's ``re`` does not).
_CALL_KEYWORDS = {
    "Field": frozenset(
        {
            "alias", "decimal_places", "default", "default_factory", "description", "examples",
            "exclude", "frozen", "ge", "gt", "le", "lt", "max_digits", "max_length",
            "min_length", "multiple_of", "pattern", "serialization_alias", "strict", "title",
            "validation_alias",
        }
    ),
    "ConfigDict": frozenset(
        {
            "coerce_numbers_to_str", "extra", "frozen", "populate_by_name", "str_max_length",
            "str_min_length", "str_strip_whitespace", "str_to_lower", "str_to_upper", "strict",
            "title", "use_enum_values", "validate_default",
        }
    ),
    "Ref": frozenset(),
}  # fmt: skip


def _call_problem(node: ast.Call) -> str | None:
    if not (isinstance(node.func, ast.Name) and node.func.id in _MODELS_CALLS):
        return f"only {sorted(_MODELS_CALLS)} may be called in a declaration"
    allowed = _CALL_KEYWORDS[node.func.id]
    for kw in node.keywords:
        if kw.arg is None:
            return "**kwargs is not allowed in a declaration"
        if kw.arg not in allowed:
            return f"{node.func.id}({kw.arg}=...) is not allowed (allowed: {', '.join(sorted(allowed))})"
        if kw.arg == "default_factory" and not isinstance(kw.value, ast.Name):
            return "default_factory must name a type, such as list"
    for arg in [*node.args, *(kw.value for kw in node.keywords)]:
        if isinstance(arg, ast.Name):
            continue  # default_factory=list, or a record type
        why = value_problem(arg)
        if why:
            return why
    return None


def _model_config_problem(value: ast.expr) -> str | None:
    """``model_config`` as a dict literal passes the same key allowlist as ConfigDict(...)."""
    if isinstance(value, ast.Dict):
        allowed = _CALL_KEYWORDS["ConfigDict"]
        for key in value.keys:
            if not (isinstance(key, ast.Constant) and key.value in allowed):
                return f"model_config keys must be among {', '.join(sorted(allowed))}"
        return None
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return None if value.func.id == "ConfigDict" else "model_config must be ConfigDict(...)"
    return "model_config must be ConfigDict(...)"


def type_expression_problem(node: ast.expr) -> str | None:
    """Why an expression is not a type (names, subscripts, ``|``, ``Literal[...]``, Ref)."""
    if isinstance(node, ast.Name):
        return None if not node.id.startswith("__") else f"name {node.id!r} is not allowed"
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and not node.attr.startswith("_"):
            return None
        return "a type may be 'module.Name' only"
    if isinstance(node, ast.Constant):
        if node.value is None or node.value is Ellipsis:
            return None
        if isinstance(node.value, str):
            return _string_annotation_problem(node.value)
        return f"{node.value!r} is not a type"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return type_expression_problem(node.left) or type_expression_problem(node.right)
    if isinstance(node, ast.Subscript):
        if isinstance(node.value, ast.Name | ast.Attribute) and _name_of(node.value) == "Literal":
            return _literal_args_problem(node.slice)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return type_expression_problem(node.value) or next(
            filter(None, (_type_or_metadata_problem(p) for p in parts)), None
        )
    if isinstance(node, ast.List):  # Callable[[int], str]
        return next(filter(None, (type_expression_problem(e) for e in node.elts)), None)
    return f"{type(node).__name__} is not allowed in a type"


def _type_or_metadata_problem(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):  # Annotated[str, Ref("customers")], Field(...)
        return _call_problem(node)
    return type_expression_problem(node)


def _literal_args_problem(node: ast.expr) -> str | None:
    parts = node.elts if isinstance(node, ast.Tuple) else [node]
    for p in parts:
        if isinstance(p, ast.UnaryOp) and isinstance(p.op, ast.USub):
            p = p.operand
        if not isinstance(p, ast.Constant):
            return "Literal[...] takes constants only"
    return None


def _string_annotation_problem(text: str) -> str | None:
    """A string annotation is evaluated as code by typing; it must itself be a type."""
    try:
        expr = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return f"string annotation {text!r} is not a type"
    why = type_expression_problem(expr)
    return f"string annotation {text!r}: {why}" if why else None


def _name_of(node: ast.Name | ast.Attribute) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr
