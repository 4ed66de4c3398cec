"""Write a domain in tau2-bench's layout, so its users can run our domains in their harness.

``export_tau2(domain, out)`` writes two trees, mirroring tau2-bench's repository::

    data/tau2/domains/<id>/  db.json  policy.md  tasks.json  split_tasks.json  maestro_extras.json
    src/tau2/domains/<id>/   __init__.py  data_model.py  tools.py  environment.py  utils.py
                             maestro_sdk.py  tool_impl.py  README.md

``tools.py`` is a ``ToolKitBase`` subclass with one ``@is_tool(ToolType.READ|WRITE)`` method
per tool, same names, parameters and docstrings. Each method runs the domain's own tool code
(``tool_impl.py``: our ``tools.py`` with its SDK import pointed at ``maestro_sdk.py``, a small
stand-in for maestro's session over tau2's pydantic DB) and commits its writes only when the
tool returns, so a rejected call changes nothing, as in maestro. The generated code imports
``tau2`` (not installed here) and nothing of maestro.

``tasks.json`` holds only tau2's field names; what tau2 has no field for (category, split,
difficulty, provenance, ordered or forbidden actions, record deletions) goes to
``maestro_extras.json``, so :func:`read_tau2_export` gives back the original tasks exactly.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maestro.domains.errors import Problem
from maestro.domains.files import PackageFolder, TargetError, check_target, write_inside
from maestro.domains.loader import is_library_package
from maestro.domains.models import InitialState, Task
from maestro.domains.package import Domain
from maestro.domains.tau2_templates import (
    ENV_TEMPLATE,
    README_TEMPLATE,
    SDK_TEMPLATE,
    TOOLKIT_CLASS,
    UTILS_TEMPLATE,
)

SPLITS = ("train", "dev", "test")
_SDK_IMPORT = re.compile(r"^from maestro\.domains\.sdk import (.+)$", re.MULTILINE)
_OTHER_MAESTRO_IMPORT = re.compile(r"^[ \t]*(from|import)\s+maestro\b.*$", re.MULTILINE)


class Tau2ExportError(Exception):
    """The domain cannot be written in tau2's layout (no package folder, unexpected imports)."""


@dataclass
class Tau2Export:
    """What was written, and what tau2 cannot express exactly."""

    root: Path
    files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _class_prefix(domain_id: str) -> str:
    return "".join(part.capitalize() for part in domain_id.split("_"))


def tau2_task(task: Task, domain: Domain) -> tuple[dict[str, Any], dict[str, Any]]:
    """A task as tau2's ``Task`` JSON, and the maestro-only fields tau2 has no place for."""
    data = task.model_dump(mode="json")
    crit = data["evaluation_criteria"]
    extras: dict[str, Any] = {
        "category": data.pop("category"),
        "split": data.pop("split"),
        "difficulty": data.pop("difficulty"),
        "provenance": data.pop("provenance"),
        "ordered_actions": crit.pop("ordered_actions"),
        "forbidden_actions": crit.pop("forbidden_actions"),
        "user_turns": data.pop("user_turns"),
        "hidden_tools": data.pop("hidden_tools"),
    }
    crit["env_assertions"] = None
    data["ticket"] = None
    if task.initial_state is not None:
        extras["initial_state"] = data["initial_state"]
        data["initial_state"] = _tau2_initial_state(task.initial_state)
    return data, extras


def _tau2_initial_state(state: InitialState) -> dict[str, Any]:
    """tau2 deep-merges ``agent_data`` into the DB and replays ``initialization_actions``."""
    patch = {
        table: {key: rec for key, rec in rows.items() if rec is not None}
        for table, rows in state.initialization_data.items()
    }
    patch = {t: rows for t, rows in patch.items() if rows}
    return {
        "initialization_data": {"agent_data": patch, "user_data": None} if patch else None,
        "initialization_actions": [
            {"env_type": "assistant", "func_name": a.name, "arguments": a.arguments}
            for a in state.initialization_actions
        ]
        or None,
        "message_history": None,
    }


def maestro_task(data: dict[str, Any], extras: dict[str, Any]) -> Task:
    """Inverse of :func:`tau2_task`."""
    data = json.loads(json.dumps(data))
    extras = dict(extras)
    data.pop("ticket", None)
    crit = data["evaluation_criteria"]
    crit.pop("env_assertions", None)
    crit["ordered_actions"] = extras.pop("ordered_actions")
    crit["forbidden_actions"] = extras.pop("forbidden_actions")
    data["initial_state"] = extras.pop("initial_state", None)
    return Task.model_validate({**data, **extras})


def export_tau2(domain: Domain, out: Path, *, force: bool = False) -> Tau2Export:
    """Write the domain under ``out`` in tau2's layout; returns the files and the losses.

    A non-empty ``out`` is refused unless ``force``; a link inside it is never written through.
    """
    if domain.path is None:
        raise Tau2ExportError(f"domain {domain.id} has no package folder to read its code from")
    out = Path(out)
    try:
        check_target(out, force=force)
    except TargetError as exc:
        raise Tau2ExportError(str(exc)) from None
    data_dir = out / "data" / "tau2" / "domains" / domain.id
    src_dir = out / "src" / "tau2" / "domains" / domain.id
    result = Tau2Export(out)
    tasks, extras = [], {}
    for task in domain.tasks:
        data, extra = tau2_task(task, domain)
        tasks.append(data)
        extras[task.id] = extra
        result.warnings += _losses(task)
    splits: dict[str, list[str]] = {s: [t.id for t in domain.tasks if t.split == s] for s in SPLITS}
    splits["base"] = [t.id for t in domain.tasks]
    files = {
        data_dir / "db.json": _json(domain.initial.to_dict()),
        data_dir / "policy.md": domain.policy,
        data_dir / "tasks.json": _json(tasks),
        data_dir / "split_tasks.json": _json(splits),
        data_dir / "maestro_extras.json": _json(extras),
        **{src_dir / name: text for name, text in _code(domain).items()},
    }
    for path, text in files.items():
        try:
            write_inside(out, path, text)
        except TargetError as exc:
            raise Tau2ExportError(str(exc)) from None
        result.files.append(path)
    return result


def _losses(task: Task) -> list[str]:
    out = []
    crit = task.evaluation_criteria
    if crit.forbidden_actions:
        out.append(f"{task.id}: forbidden_actions are not checked by tau2 (kept in extras)")
    if crit.ordered_actions:
        out.append(f"{task.id}: ordered_actions: tau2 matches actions in any order")
    if task.user_turns or task.hidden_tools:
        out.append(
            f"{task.id}: scripted user turns and hidden tools: tau2 simulates its user and shows"
            " every tool (kept in extras)"
        )
    state = task.initial_state
    if state and any(
        r is None for rows in state.initialization_data.values() for r in rows.values()
    ):
        out.append(f"{task.id}: initial_state deletes records; tau2's agent_data cannot delete")
    return out


def read_tau2_export(root: Path, domain_id: str) -> tuple[dict[str, Any], list[Task], str]:
    """The db, tasks (back as maestro tasks) and policy of an export, for round-trip checks."""
    data_dir = Path(root) / "data" / "tau2" / "domains" / domain_id
    db = json.loads((data_dir / "db.json").read_text(encoding="utf-8"))
    raw = json.loads((data_dir / "tasks.json").read_text(encoding="utf-8"))
    extras = json.loads((data_dir / "maestro_extras.json").read_text(encoding="utf-8"))
    tasks = [maestro_task(t, extras[t["id"]]) for t in raw]
    return db, tasks, (data_dir / "policy.md").read_text(encoding="utf-8")


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


# ----- generated code ----------------------------------------------------------------------------


def _code(domain: Domain) -> dict[str, str]:
    assert domain.path is not None
    pkg = f"tau2.domains.{domain.id}"
    tools_src, models_src = _sources(domain.path)
    prefix = _class_prefix(domain.id)
    clock = domain.manifest.clock.isoformat() if domain.manifest.clock else None
    code = {
        "__init__.py": _doc_literal(f"{domain.manifest.name} (exported from maestro).", "") + "\n",
        "maestro_sdk.py": SDK_TEMPLATE,
        "tool_impl.py": _repoint_sdk(tools_src, pkg, "tools.py"),
        "data_model.py": _data_model(domain, _repoint_sdk(models_src, pkg, "models.py"), prefix),
        "tools.py": _toolkit(domain, tools_src, pkg, prefix, clock),
        "utils.py": UTILS_TEMPLATE.format(id=domain.id),
        "environment.py": ENV_TEMPLATE.format(id=domain.id, pkg=pkg, prefix=prefix),
        "README.md": README_TEMPLATE.format(id=domain.id, pkg=pkg, name=domain.manifest.name),
    }
    for name, text in code.items():  # what the package wrote must not have become code here
        if name.endswith(".py"):
            try:
                compile(text, name, "exec", dont_inherit=True)
            except SyntaxError as exc:
                raise Tau2ExportError(
                    f"generated {name} does not compile (line {exc.lineno}: {exc.msg})"
                ) from None
    return code


def _sources(folder: Path) -> tuple[str, str]:
    """tools.py and models.py, read as every package file is (``files.PackageFolder``): no
    link, no special file, no second name (unless it is the library's), size-capped."""
    package = PackageFolder.open(folder, shared_files=is_library_package(folder))
    if isinstance(package, Problem):
        raise Tau2ExportError(str(package))
    problems: list[Problem] = []
    with package:
        tools_src = package.read_text("tools.py", problems)
        models_src = package.read_text("models.py", problems)
    if problems or tools_src is None or models_src is None:
        shown = "; ".join(str(p) for p in problems) or "tools.py or models.py is missing"
        raise Tau2ExportError(f"{folder}: {shown}")
    return tools_src, models_src


def _doc_literal(doc: str, indent: str) -> str:
    """``doc`` as a string literal: triple-quoted when nothing in it can end or escape the
    literal, otherwise its ``repr`` (a docstring holding \"\"\" once became live code here)."""
    plain = all(c.isprintable() or c in "\n\t" for c in doc)
    if not plain or '"""' in doc or "\\" in doc or doc.endswith('"'):
        return repr(doc)
    body = "\n".join(f"{indent}{line}" if line else "" for line in doc.splitlines())
    return f'"""{body.lstrip()}\n{indent}"""' if "\n" in doc else f'"""{doc}"""'


def _repoint_sdk(source: str, pkg: str, file: str) -> str:
    if not _SDK_IMPORT.search(source):
        raise Tau2ExportError(f"{file}: no 'from maestro.domains.sdk import ...' line to repoint")
    source = _SDK_IMPORT.sub(rf"from {pkg}.maestro_sdk import \1", source)
    leftover = _OTHER_MAESTRO_IMPORT.search(source)
    if leftover:
        raise Tau2ExportError(f"{file}: imports maestro beyond the SDK: {leftover.group(0)!r}")
    return source


def _data_model(domain: Domain, models_src: str, prefix: str) -> str:
    fields = []
    for spec in domain.tables.values():
        assert spec.model is not None
        fields.append(
            f"    {spec.name}: dict[str, {spec.model.__name__}] = Field(\n"
            f"        default_factory=dict, description={spec.name!r} + ' by ' + {spec.key_field!r}\n"
            "    )"
        )
    return (
        models_src.rstrip()
        + "\n\n\n# ----- tau2's DB: one field per table (generated by maestro) -----\n\n"
        + "from pydantic import Field  # noqa: E402\n"
        + "from tau2.environment.db import DB  # noqa: E402\n\n\n"
        + f'class {prefix}DB(DB):\n    """The {domain.id} database: table -> key -> record."""\n\n'
        + "\n".join(fields)
        + "\n"
    )


#: What tau2's ``ToolKitBase`` (and its metaclass) define: a tool method of that name would
#: replace tau2's own (``get_db_hash`` and ``update_db`` are how tau2 checks the database).
TAU2_TOOLKIT_NAMES = frozenset(
    {
        "db",
        "tools",
        "use_tool",
        "get_tools",
        "has_tool",
        "is_discoverable",
        "get_discoverable_tools",
        "has_discoverable_tool",
        "tool_type",
        "tool_mutates_state",
        "get_statistics",
        "update_db",
        "get_db_hash",
        "set_conversation_context",
        "get_conversation_context",
        "set_skip_write_critic",
        "get_skip_write_critic",
    }
)


def _toolkit(domain: Domain, tools_src: str, pkg: str, prefix: str, clock: str | None) -> str:
    tree = ast.parse(tools_src)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    names: set[str] = set()
    methods = []
    for spec in domain.toolkit.specs.values():
        node = defs.get(spec.name)
        if node is None:
            raise Tau2ExportError(f"tools.py: tool {spec.name} is not a top-level function")
        if spec.name in TAU2_TOOLKIT_NAMES or spec.name.startswith("_"):
            raise Tau2ExportError(
                f"tools.py: tool {spec.name} would replace tau2's own ToolKitBase.{spec.name}, "
                "which tau2 calls itself (rename the tool to export the domain)"
            )
        method, used = _method(node, spec.kind)
        methods.append(method)
        names |= used
    imported = sorted(n for n in names if not hasattr(builtins, n))
    header = [
        f'"""Toolkit of the {domain.id} domain in tau2 style (generated by maestro export tau2)."""',
        "",
        "from datetime import datetime",
        "from typing import Any, Callable",
        "",
        "from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool",
        "",
        f"from {pkg} import tool_impl",
        f"from {pkg}.data_model import {prefix}DB",
        f"from {pkg}.maestro_sdk import Database, typed, validate_arguments",
    ]
    if imported:
        header.append(f"from {pkg}.tool_impl import {', '.join(imported)}  # noqa: F401")
    clock_line = f"datetime.fromisoformat({clock!r})" if clock else "None"
    body = TOOLKIT_CLASS.format(prefix=prefix, id=domain.id, clock=clock_line)
    return "\n".join(header) + "\n\n" + body + "\n".join(methods)


def _method(node: ast.FunctionDef, kind: str) -> tuple[str, set[str]]:
    """A ToolKitBase method with the tool's parameters (minus ``db``) and docstring."""
    args = node.args.args[1:] + node.args.kwonlyargs
    defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + list(node.args.defaults)
    defaults = defaults[1:] + list(node.args.kw_defaults)
    params, used = ["self"], set()
    for arg, default in zip(args, defaults, strict=True):
        # Regenerated from the tree (ast.unparse), never pasted: no comment or layout of the
        # package's source reaches the generated file.
        ann = ast.unparse(arg.annotation) if arg.annotation else "Any"
        if arg.annotation is not None:
            used |= {n.id for n in ast.walk(arg.annotation) if isinstance(n, ast.Name)}
        text = f"{arg.arg}: {ann}"
        if default is not None:
            text += f" = {ast.unparse(default)}"
        params.append(text)
    ret = ast.unparse(node.returns) if node.returns else "Any"
    if node.returns is not None:
        used |= {n.id for n in ast.walk(node.returns) if isinstance(n, ast.Name)}
    doc = ast.get_docstring(node) or ""
    call = ", ".join([f"tool_impl.{node.name}", *(f"{a.arg}={a.arg}" for a in args)])
    tool_type = "ToolType.READ" if kind == "read" else "ToolType.WRITE"

    def render(literal: str) -> str:
        return (
            f"    @is_tool({tool_type})\n"
            f"    def {node.name}({', '.join(params)}) -> {ret}:\n"
            f"        {literal}\n"
            f"        return self._run({call})\n"
        )

    for literal in (_doc_literal(doc, " " * 8), repr(doc)):  # the plain form, else repr
        method = render(literal)
        if _only_the_docstring_differs(method, render('""'), doc):
            return method, used
    raise Tau2ExportError(f"tools.py: the docstring of {node.name} cannot be written safely")


def _only_the_docstring_differs(method: str, reference: str, doc: str) -> bool:
    """Whether ``method`` parses to ``reference`` with ``doc`` as its docstring, and nothing
    more: text from the package changed no statement of the generated code."""
    trees = []
    for text in (method, reference):
        try:
            (fn,) = ast.parse("class _Check:\n" + text).body[0].body  # type: ignore[attr-defined]
        except (SyntaxError, ValueError):
            return False
        trees.append(fn)
    mine, theirs = trees
    if (ast.get_docstring(mine) or "") != doc:
        return False
    return ast.dump(ast.Module(mine.body[1:], [])) == ast.dump(ast.Module(theirs.body[1:], []))
