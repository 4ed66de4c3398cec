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

from maestro.domains.files import TargetError, check_target, write_inside
from maestro.domains.models import InitialState, Task
from maestro.domains.package import Domain

SPLITS = ("train", "dev", "test")
_SDK_IMPORT = re.compile(r"^from maestro\.domains\.sdk import (.+)$", re.MULTILINE)
_OTHER_MAESTRO_IMPORT = re.compile(r"^\s*(from|import)\s+maestro\b.*$", re.MULTILINE)


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
    tools_src = (domain.path / "tools.py").read_text(encoding="utf-8")
    models_src = (domain.path / "models.py").read_text(encoding="utf-8")
    prefix = _class_prefix(domain.id)
    clock = domain.manifest.clock.isoformat() if domain.manifest.clock else None
    return {
        "__init__.py": f'"""{domain.manifest.name} (exported from maestro)."""\n',
        "maestro_sdk.py": SDK_TEMPLATE,
        "tool_impl.py": _repoint_sdk(tools_src, pkg, "tools.py"),
        "data_model.py": _data_model(domain, _repoint_sdk(models_src, pkg, "models.py"), prefix),
        "tools.py": _toolkit(domain, tools_src, pkg, prefix, clock),
        "utils.py": UTILS_TEMPLATE.format(id=domain.id),
        "environment.py": ENV_TEMPLATE.format(id=domain.id, pkg=pkg, prefix=prefix),
        "README.md": README_TEMPLATE.format(id=domain.id, pkg=pkg, name=domain.manifest.name),
    }


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


def _toolkit(domain: Domain, tools_src: str, pkg: str, prefix: str, clock: str | None) -> str:
    tree = ast.parse(tools_src)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    names: set[str] = set()
    methods = []
    for spec in domain.toolkit.specs.values():
        node = defs.get(spec.name)
        if node is None:
            raise Tau2ExportError(f"tools.py: tool {spec.name} is not a top-level function")
        method, used = _method(node, tools_src, spec.kind)
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


def _method(node: ast.FunctionDef, src: str, kind: str) -> tuple[str, set[str]]:
    """A ToolKitBase method with the tool's parameters (minus ``db``) and docstring."""
    args = node.args.args[1:] + node.args.kwonlyargs
    defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + list(node.args.defaults)
    defaults = defaults[1:] + list(node.args.kw_defaults)
    params, used = ["self"], set()
    for arg, default in zip(args, defaults, strict=True):
        ann = ast.get_source_segment(src, arg.annotation) if arg.annotation else "Any"
        if arg.annotation is not None:
            used |= {n.id for n in ast.walk(arg.annotation) if isinstance(n, ast.Name)}
        text = f"{arg.arg}: {ann}"
        if default is not None:
            text += f" = {ast.get_source_segment(src, default)}"
        params.append(text)
    ret = ast.get_source_segment(src, node.returns) if node.returns else "Any"
    if node.returns is not None:
        used |= {n.id for n in ast.walk(node.returns) if isinstance(n, ast.Name)}
    doc = ast.get_docstring(node) or ""
    doc_lines = "\n".join(f"        {ln}" if ln else "" for ln in doc.splitlines())
    call = ", ".join([f"tool_impl.{node.name}", *(f"{a.arg}={a.arg}" for a in args)])
    tool_type = "ToolType.READ" if kind == "read" else "ToolType.WRITE"
    method = (
        f"    @is_tool({tool_type})\n"
        f"    def {node.name}({', '.join(params)}) -> {ret}:\n"
        f'        """{doc_lines.lstrip()}\n        """\n'
        f"        return self._run({call})\n"
    )
    return method, used


TOOLKIT_CLASS = '''CLOCK = {clock}


class {prefix}Tools(ToolKitBase):
    """All the tools of the {id} domain; each runs maestro's tool code on a view of the DB."""

    db: {prefix}DB

    def __init__(self, db: {prefix}DB) -> None:
        super().__init__(db)

    def _run(self, fn: Callable[..., Any], **kwargs: Any) -> Any:
        # Arguments are validated as maestro validates them (strict JSON types), so a wrong
        # type is the call's error rather than a crash inside the tool. Writes land in the
        # view and reach the DB only when the tool returns: a tool that raises (a
        # business-rule violation is a ValueError) changes nothing.
        kwargs = validate_arguments(fn, kwargs)
        view = Database(self.db, CLOCK)
        result = fn(view, **kwargs)
        view.commit()
        return typed(result)

'''

SDK_TEMPLATE = '''"""Stand-in for maestro's domain SDK over tau2's pydantic DB (generated by maestro).

Tools read and write plain JSON records through ``Database``; writes are buffered and applied
to the DB by ``commit()``, after the tool returned.
"""

import inspect
import json
import typing
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache
from typing import Any, Callable, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, create_model

ToolKind = Literal["read", "write"]
_DELETED = object()


class ToolResult(RootModel[Any]):
    """A tool's answer, as a model: tau2 turns a plain dict's numbers and booleans into strings
    (its to_json_str), but sends a model's dump as it is, so the agent reads what maestro's
    assistant reads."""


def typed(result: Any) -> Any:
    if result is None or isinstance(result, str | BaseModel):
        return result
    return ToolResult(result)


@cache
def _arguments_model(fn: Callable[..., Any]) -> type[BaseModel]:
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for p in list(inspect.signature(fn).parameters.values())[1:]:
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (hints.get(p.name, Any), Field(default))
    config = ConfigDict(extra="forbid", strict=True)
    return create_model(f"{fn.__name__}_arguments", __config__=config, **fields)


def validate_arguments(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments checked as maestro's runtime checks them (strict JSON types: "5" is not
    an integer, dates come as ISO strings); a ToolError naming each problem otherwise. The
    messages are those of maestro.domains.runtime, written out here: the export imports
    nothing of maestro."""
    model = _arguments_model(fn)
    try:
        valid = model.model_validate_json(json.dumps(kwargs, default=str))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"])
            if err["type"] == "missing":
                problems.append(f"missing required argument {loc!r}")
            elif err["type"] == "extra_forbidden":
                problems.append(f"unexpected argument {loc!r}")
            else:
                got = json.dumps(err.get("input"), default=str)
                problems.append(f"argument {loc!r}: {err['msg']} (got {got})")
        raise ToolError(f"invalid arguments for {fn.__name__}: {'; '.join(problems)}") from None
    return {name: getattr(valid, name) for name in model.model_fields}


class ToolError(ValueError):
    """A business-rule violation; tau2 shows its message to the agent."""


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key_field: ClassVar[str] = "id"


@dataclass(frozen=True)
class Ref:
    table: str


def tool(kind: ToolKind) -> Callable[[Any], Any]:
    def mark(fn: Any) -> Any:
        fn.__maestro_tool_kind__ = kind
        return fn

    return mark


def _singular(table: str) -> str:
    name = table.replace("_", " ")
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith(("ses", "xes")):
        return name[:-2]
    return name[:-1] if name.endswith("s") else name


class Database:
    """maestro's session API (get, require, find, scan, insert, update, ...) over a tau2 DB."""

    def __init__(self, db: BaseModel, clock: datetime | None) -> None:
        self._db = db
        self._clock = clock
        self._overlay: dict[str, dict[str, Any]] = {}

    def _table(self, table: str) -> dict[str, Any]:
        rows = getattr(self._db, table, None)
        if not isinstance(rows, dict):
            raise ValueError(f"unknown table {table!r}")
        return rows

    def _raw(self, table: str, key: str) -> dict[str, Any] | None:
        layer = self._overlay.get(table, {})
        if key in layer:
            rec = layer[key]
            return None if rec is _DELETED else rec
        rec = self._table(table).get(key)
        return None if rec is None else rec.model_dump(mode="json")

    def get(self, table: str, key: str) -> dict[str, Any] | None:
        rec = self._raw(table, key)
        return None if rec is None else _copy(rec)

    def exists(self, table: str, key: str) -> bool:
        return self._raw(table, key) is not None

    def require(self, table: str, key: str, what: str | None = None) -> dict[str, Any]:
        rec = self._raw(table, key)
        if rec is None:
            raise ToolError(f"{what or _singular(table)} {key!r} not found")
        return _copy(rec)

    def keys(self, table: str) -> list[str]:
        keys = set(self._table(table))
        for key, rec in self._overlay.get(table, {}).items():
            if rec is _DELETED:
                keys.discard(key)
            else:
                keys.add(key)
        return sorted(keys)

    def scan(self, table: str, where: Callable[[dict[str, Any]], bool] | None = None) -> list:
        out = []
        for key in self.keys(table):
            rec = self._raw(table, key)
            if rec is not None and (where is None or where(rec)):
                out.append(_copy(rec))
        return out

    def find(self, table: str, **equals: Any) -> list:
        return self.scan(table, lambda r: all(r.get(k) == v for k, v in equals.items()))

    def count(self, table: str) -> int:
        return len(self.keys(table))

    def now(self) -> datetime:
        if self._clock is None:
            raise ValueError("this domain declares no clock")
        return self._clock

    def today(self) -> date:
        return self.now().date()

    def _model(self, table: str) -> type[BaseModel]:
        return type(self._db).model_fields[table].annotation.__args__[1]

    def _normalise(self, table: str, record: Any) -> tuple[str, dict[str, Any]]:
        model = self._model(table)
        data = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
        data = model.model_validate(data).model_dump(mode="json")
        return data[model.key_field], data

    def insert(self, table: str, record: Any) -> dict[str, Any]:
        key, data = self._normalise(table, record)
        if self.exists(table, key):
            raise ToolError(f"{_singular(table)} {key!r} already exists")
        self._overlay.setdefault(table, {})[key] = data
        return _copy(data)

    def put(self, table: str, record: Any) -> dict[str, Any]:
        key, data = self._normalise(table, record)
        self._overlay.setdefault(table, {})[key] = data
        return _copy(data)

    def update(self, table: str, key: str, **fields: Any) -> dict[str, Any]:
        current = self.require(table, key)
        current.update(fields)
        new_key, data = self._normalise(table, current)
        if new_key != key:
            raise ValueError(f"update cannot change the key of {table}/{key}")
        self._overlay.setdefault(table, {})[key] = data
        return _copy(data)

    def delete(self, table: str, key: str) -> None:
        self.require(table, key)
        self._overlay.setdefault(table, {})[key] = _DELETED

    def new_id(self, table: str, prefix: str, width: int = 4) -> str:
        numbers = [
            int(k[len(prefix):])
            for k in self.keys(table)
            if k.startswith(prefix) and k[len(prefix):].isdigit()
        ]
        return f"{prefix}{max(numbers, default=0) + 1:0{width}d}"

    def commit(self) -> None:
        """Apply the buffered writes to the DB (called once the tool returned)."""
        for table, layer in self._overlay.items():
            rows = self._table(table)
            model = self._model(table)
            for key, rec in layer.items():
                if rec is _DELETED:
                    rows.pop(key, None)
                else:
                    rows[key] = model.model_validate(rec)
        self._overlay = {}


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
'''

UTILS_TEMPLATE = '''"""Paths of the {id} domain's data (generated by maestro)."""

from tau2.utils.utils import DATA_DIR

{ID}_DATA_PATH = DATA_DIR / "tau2" / "domains" / "{id}"
{ID}_DB_PATH = {ID}_DATA_PATH / "db.json"
{ID}_POLICY_PATH = {ID}_DATA_PATH / "policy.md"
{ID}_TASK_SET_PATH = {ID}_DATA_PATH / "tasks.json"
'''.replace("{ID}", "DOMAIN")

ENV_TEMPLATE = '''"""Environment and tasks of the {id} domain, as tau2's registry expects (generated)."""

from typing import Optional

from tau2.data_model.tasks import Task
from tau2.environment.environment import Environment
from tau2.utils import load_file

from {pkg}.data_model import {prefix}DB
from {pkg}.tools import {prefix}Tools
from {pkg}.utils import DOMAIN_DATA_PATH, DOMAIN_DB_PATH, DOMAIN_POLICY_PATH, DOMAIN_TASK_SET_PATH


def get_environment(db: Optional[{prefix}DB] = None, solo_mode: bool = False) -> Environment:
    if solo_mode:
        raise ValueError("{id} domain does not support solo mode")
    if db is None:
        db = {prefix}DB.load(DOMAIN_DB_PATH)
    with open(DOMAIN_POLICY_PATH, "r") as fp:
        policy = fp.read()
    return Environment(domain_name="{id}", policy=policy, tools={prefix}Tools(db))


def get_tasks(task_split_name: Optional[str] = "base") -> list[Task]:
    tasks = [Task.model_validate(t) for t in load_file(DOMAIN_TASK_SET_PATH)]
    if task_split_name is None:
        return tasks
    splits = get_tasks_split()
    if task_split_name not in splits:
        raise ValueError(f"Invalid task split name: {{task_split_name}}. Valid: {{list(splits)}}")
    return [t for t in tasks if t.id in splits[task_split_name]]


def get_tasks_split() -> dict[str, list[str]]:
    return load_file(DOMAIN_DATA_PATH / "split_tasks.json")
'''

README_TEMPLATE = """# {name}: a maestro domain in tau2-bench's layout

Copy `src/tau2/domains/{id}` and `data/tau2/domains/{id}` into a tau2-bench checkout, then
register the domain in `src/tau2/registry.py`:

```python
from {pkg}.environment import get_environment as {id}_get_environment
from {pkg}.environment import get_tasks as {id}_get_tasks
from {pkg}.environment import get_tasks_split as {id}_get_tasks_split

registry.register_domain({id}_get_environment, "{id}")
registry.register_tasks({id}_get_tasks, "{id}", get_task_splits={id}_get_tasks_split)
```

`split_tasks.json` holds the splits `train`, `dev`, `test` and `base` (every task); run a split
with `tau2 run --domain {id} --task-split-name test ...`.

`maestro_extras.json` keeps what tau2's task format has no field for; tau2 ignores it.
"""
