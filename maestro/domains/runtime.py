"""The tool runtime: schemas from signatures, argument validation, deadlines, typed outcomes.

A call never raises for anything the assistant did wrong: an unknown tool, a missing, extra or
mistyped argument, a business-rule violation, a crash inside the tool or a call past its deadline
each come back as a :class:`ToolOutcome` whose content the assistant reads, and the call's writes
are rolled back.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import time
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from maestro.domains.errors import ToolDeadlineExceeded, ToolError
from maestro.domains.sdk import ToolKind, tool_kind
from maestro.domains.store import Session
from maestro.domains.watchdog import default_watchdog

# "sandbox" and "crash" come from the sandbox (maestro.domains.sandbox): a refused operation or
# limit hit, and a child process that died.
OutcomeStatus = Literal[
    "ok", "tool_error", "invalid_call", "unknown_tool", "exception", "timeout", "sandbox", "crash"
]

DEFAULT_DEADLINE_S = 5.0
#: Tool names maestro keeps for itself: ``serve-mcp`` lists its session tools
#: (``maestro_open_session``...) beside the domain's, and a package's tool of the same name
#: was listed twice and never reached.
RESERVED_TOOL_PREFIX = "maestro_"


class Deadlines(Protocol):
    """What interrupts a tool past its deadline: the watchdog thread in process, a timer
    signal in the sandbox child (which may not call C through ctypes)."""

    def arm(self, seconds: float) -> int:
        """Start the clock for the calling thread; returns a token for :meth:`disarm`."""
        ...

    def disarm(self, token: int) -> bool:
        """Stop the clock; True when the deadline had fired."""
        ...


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call gave: the content the assistant sees, and how the call ended."""

    name: str
    arguments: dict[str, Any]
    content: str
    status: OutcomeStatus
    kind: ToolKind | None
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class ToolDefinitionError(Exception):
    """A function registered as a tool cannot be exposed (no type hints, no docstring, ...)."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its function, kind, description and argument model."""

    name: str
    kind: ToolKind
    fn: Callable[..., Any]
    description: str
    params: type[BaseModel]
    param_names: tuple[str, ...]

    def openai_schema(self) -> dict[str, Any]:
        """The tool in OpenAI's function-calling format."""
        schema = _strip_titles(self.params.model_json_schema())
        schema.setdefault("properties", {})
        schema["additionalProperties"] = False
        schema.setdefault("required", [])
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }

    def signature_text(self) -> str:
        """``name(arg: type, ...)`` for error messages."""
        parts = []
        for name, f in self.params.model_fields.items():
            opt = "" if f.is_required() else "?"
            parts.append(f"{name}{opt}: {_type_name(f.annotation)}")
        return f"{self.name}({', '.join(parts)})"


def spec_from_function(fn: Callable[..., Any], kind: ToolKind | None = None) -> ToolSpec:
    """Build a tool spec from a typed function whose first parameter is the database."""
    kind = kind or tool_kind(fn)
    name = fn.__name__
    if kind is None:
        raise ToolDefinitionError(f"{name}: not registered with @tool('read'|'write')")
    if name.startswith(RESERVED_TOOL_PREFIX):
        raise ToolDefinitionError(
            f"{name}: tool names starting with {RESERVED_TOOL_PREFIX!r} are maestro's own "
            "(serve-mcp's session tools); rename the tool"
        )
    doc = inspect.getdoc(fn)
    if not doc:
        raise ToolDefinitionError(f"{name}: a tool needs a docstring (the assistant reads it)")
    summary, arg_docs = parse_docstring(doc)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(f"{name}: cannot resolve type hints: {exc}") from None
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        raise ToolDefinitionError(f"{name}: the first parameter must be the database (db)")
    fields: dict[str, Any] = {}
    for p in params[1:]:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise ToolDefinitionError(
                f"{name}: parameter {p.name!r} must be a plain named parameter"
            )
        if p.name not in hints:
            raise ToolDefinitionError(f"{name}: parameter {p.name!r} has no type hint")
        if p.name not in arg_docs:
            raise ToolDefinitionError(f"{name}: parameter {p.name!r} is not described under Args:")
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (hints[p.name], Field(default, description=arg_docs[p.name]))
    extra_docs = set(arg_docs) - set(fields)
    if extra_docs:
        raise ToolDefinitionError(
            f"{name}: Args: describes unknown parameter(s) {sorted(extra_docs)}"
        )
    model = create_model(
        f"{name}_arguments",
        __config__=ConfigDict(extra="forbid", strict=True),
        **fields,
    )
    return ToolSpec(name, kind, fn, summary, model, tuple(fields))


def tool_functions(module: types.ModuleType) -> list[Callable[..., Any]]:
    """The functions a module defines and registers with ``@tool``, in definition order."""
    fns = [
        obj
        for obj in vars(module).values()
        if inspect.isfunction(obj)
        and tool_kind(obj) is not None
        and obj.__module__ == module.__name__
    ]
    return sorted(fns, key=lambda f: f.__code__.co_firstlineno)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and its ``Args:`` entries."""
    lines = doc.splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    args_indent = 0
    for raw in lines:
        line = raw.strip()
        if line in ("Args:", "Arguments:", "Parameters:"):
            section, current = "args", None
            continue
        if line.endswith(":") and line[:-1] in (
            "Returns",
            "Raises",
            "Yields",
            "Example",
            "Examples",
            "Note",
        ):
            section, current = "other", None
            continue
        if section is None:
            summary.append(line)
        elif section == "args" and line:
            indent = len(raw) - len(raw.lstrip())
            head, sep, rest = line.partition(":")
            arg_name = head.split("(")[0].strip()
            if sep and arg_name.isidentifier() and (current is None or indent <= args_indent):
                current, args_indent = arg_name, indent
                args[current] = rest.strip()
            elif current is not None:
                args[current] = f"{args[current]} {line}".strip()
    return " ".join(" ".join(summary).split()), args


#: When the calls of the current check must end (``time.perf_counter``), and that check's
#: whole budget in seconds, for the message; None outside :func:`calls_end_within`.
_CALLS_END: ContextVar[tuple[float, float] | None] = ContextVar("maestro_calls_end", default=None)


@contextlib.contextmanager
def calls_end_within(budget_s: float) -> Iterator[None]:
    """Every tool call made inside ends within ``budget_s`` seconds of now, on any toolkit:
    a call's own deadline is cut to what is left, and a call once it has passed is not run
    (status ``timeout``). Nested budgets keep the earlier end. Checks that replay package code
    (``domains validate``, the nightly's gates) hold one: a package whose tools each take
    just under their deadline stalled a validate for hours (27 s an action, 1,000 actions)."""
    end = time.perf_counter() + budget_s
    outer = _CALLS_END.get()
    token = _CALLS_END.set(outer if outer is not None and outer[0] <= end else (end, budget_s))
    try:
        yield
    finally:
        _CALLS_END.reset(token)


def calls_ended() -> bool:
    """Whether the current :func:`calls_end_within` budget has run out."""
    end = _CALLS_END.get()
    return end is not None and time.perf_counter() >= end[0]


class Toolkit:
    """A domain's tools, callable by name on a session with validation and a deadline."""

    def __init__(
        self,
        specs: Iterable[ToolSpec],
        *,
        deadline_s: float = DEFAULT_DEADLINE_S,
        watchdog: Deadlines | None = None,
    ) -> None:
        self.specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in self.specs:
                raise ToolDefinitionError(f"two tools are named {spec.name!r}")
            self.specs[spec.name] = spec
        self.deadline_s = deadline_s
        self._watchdog = watchdog

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def close(self) -> None:
        """Nothing to release in process (the sandbox's toolkit stops its child here)."""

    def kind(self, name: str) -> ToolKind | None:
        spec = self.specs.get(name)
        return spec.kind if spec else None

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI-format schemas of every tool, for the assistant's request."""
        return [s.openai_schema() for s in self.specs.values()]

    def validate_arguments(self, name: str, arguments: dict[str, Any] | str) -> list[str]:
        """Problems with a call's arguments (empty when the call is well formed)."""
        spec = self.specs.get(name)
        if spec is None:
            return [f"unknown tool {name!r}"]
        parsed = _parse_arguments(arguments)
        if isinstance(parsed, str):
            return [parsed]
        try:
            spec.params.model_validate_json(json.dumps(parsed))
        except ValidationError as exc:
            return _explain(exc)
        return []

    def prepare(
        self, name: str, arguments: dict[str, Any] | str, started: float
    ) -> PreparedCall | ToolOutcome:
        """Check a call before anything runs: the tool exists and its arguments validate.

        Returns what running it needs, or the outcome the caller gets instead
        (``unknown_tool``, ``invalid_call``). The arguments it records are the call's own,
        parsed, whatever happens later; the sandbox's toolkit records exactly these too.
        """
        spec = self.specs.get(name)
        parsed = _parse_arguments(arguments)
        args_for_record = parsed if isinstance(parsed, dict) else {"_raw": arguments}
        if spec is None:
            return _outcome(
                name,
                args_for_record,
                f"Error: unknown tool {name!r}. Available tools: {', '.join(self.specs)}.",
                "unknown_tool",
                None,
                started,
            )
        if isinstance(parsed, str):
            return _outcome(
                name,
                args_for_record,
                f"Error: {parsed}. Expected {spec.signature_text()}.",
                "invalid_call",
                spec.kind,
                started,
            )
        try:
            text = arguments if isinstance(arguments, str) else json.dumps(parsed)
            validated = spec.params.model_validate_json(text)
        except (TypeError, ValueError, RecursionError) as exc:  # ValidationError included
            problems = "; ".join(
                _explain(exc) if isinstance(exc, ValidationError) else [_not_json(exc)]
            )
            return _outcome(
                name,
                parsed,
                f"Error: invalid arguments for {name}: {problems}. Expected {spec.signature_text()}.",
                "invalid_call",
                spec.kind,
                started,
            )
        if (end := _CALLS_END.get()) is not None and started >= end[0]:
            return _outcome(
                name,
                parsed,
                f"Error: {name}: not run: the check's {end[1]:g} s for all its tool calls ran out.",
                "timeout",
                spec.kind,
                started,
            )
        kwargs = {p: getattr(validated, p) for p in spec.param_names}
        return PreparedCall(spec, parsed, kwargs)

    def call_limit(self, deadline_s: float | None, started: float) -> float:
        """Seconds a call started at ``started`` may run: its deadline (the toolkit's unless
        given), cut to what is left of a :func:`calls_end_within` budget."""
        limit = self.deadline_s if deadline_s is None else deadline_s
        end = _CALLS_END.get()
        return limit if end is None else max(0.0, min(limit, end[0] - started))

    def call(
        self,
        session: Session,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        deadline_s: float | None = None,
    ) -> ToolOutcome:
        """Run one tool call on a session; never raises for the caller's mistakes."""
        started = time.perf_counter()
        prepared = self.prepare(name, arguments, started)
        if isinstance(prepared, ToolOutcome):
            return prepared
        spec, parsed = prepared.spec, prepared.arguments

        def outcome(content: str, status: OutcomeStatus) -> ToolOutcome:
            return _outcome(name, parsed, content, status, spec.kind, started)

        watchdog = self._watchdog or default_watchdog()
        limit = self.call_limit(deadline_s, started)
        fired = False
        try:
            with session.transaction():
                token = watchdog.arm(limit)
                try:
                    try:
                        result = spec.fn(session, **prepared.kwargs)
                    finally:
                        fired = watchdog.disarm(token)
                except ToolDeadlineExceeded:
                    watchdog.disarm(token)
                    fired = True
                if fired:
                    raise ToolDeadlineExceeded()
                content = render_result(result)
        except ToolDeadlineExceeded:
            return outcome(
                f"Error: {name} did not finish within {limit:g} s; nothing was changed.", "timeout"
            )
        except ToolError as exc:
            return outcome(f"Error: {exc}", "tool_error")
        except Exception as exc:  # a crash inside a tool is the episode's data, not the runner's
            return outcome(f"Error: {name} failed: {type(exc).__name__}: {exc}", "exception")
        return outcome(content, "ok")


@dataclass(frozen=True)
class PreparedCall:
    """A call whose tool exists and whose arguments validated (:meth:`Toolkit.prepare`)."""

    spec: ToolSpec
    arguments: dict[str, Any]  # as the call gave them, parsed: what the outcome records
    kwargs: dict[str, Any]  # validated: what the tool function receives


def _outcome(
    name: str,
    arguments: dict[str, Any],
    content: str,
    status: OutcomeStatus,
    kind: ToolKind | None,
    started: float,
) -> ToolOutcome:
    return ToolOutcome(name, arguments, content, status, kind, time.perf_counter() - started)


def _not_json(exc: Exception) -> str:
    return f"arguments must be JSON values ({type(exc).__name__}: {exc})"


def render_result(result: Any) -> str:
    """A tool's return value as the text the assistant reads."""
    if isinstance(result, str):
        return result
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json")
    elif isinstance(result, list):
        result = [r.model_dump(mode="json") if isinstance(r, BaseModel) else r for r in result]
    return json.dumps(result, ensure_ascii=False, default=str)


def _parse_arguments(arguments: dict[str, Any] | str | None) -> dict[str, Any] | str:
    """The arguments as a dict, or a message saying why they are not a JSON object."""
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str):
        return f"arguments must be a JSON object, not {type(arguments).__name__}"
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return f"arguments must be a JSON object, not {type(value).__name__}"
    return value


def _explain(exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "missing":
            out.append(f"missing required argument {loc!r}")
        elif err["type"] == "extra_forbidden":
            out.append(f"unexpected argument {loc!r}")
        else:
            out.append(
                f"argument {loc!r}: {err['msg']} (got {json.dumps(err.get('input'), default=str)})"
            )
    return out


#: Keywords whose value maps names (a parameter, a model) to schemas: a name there is never a
#: keyword, so a parameter called ``title`` stays.
_NAME_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def _strip_titles(schema: Any, *, names: bool = False) -> Any:
    """The schema without pydantic's ``title`` keywords (noise to a model)."""
    if isinstance(schema, dict):
        if names:
            return {k: _strip_titles(v) for k, v in schema.items()}
        return {
            k: _strip_titles(v, names=k in _NAME_MAPS) for k, v in schema.items() if k != "title"
        }
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")
