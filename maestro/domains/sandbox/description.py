"""The host's reading of what a sandbox child says a package is: fixed models, own validation.

A child's ``describe`` reply is untrusted JSON. It is validated here against fixed pydantic
models (names that are identifiers, bounded sizes, nothing extra), turned into host-owned record
and argument models (``schema.py``); the database it sends is then validated record by record
with those models (``loader.load_db``) before it becomes the domain's initial state. Any
mismatch is a load problem naming the table, record or tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from maestro.domains.errors import Problem
from maestro.domains.runtime import ToolSpec
from maestro.domains.sandbox.schema import (
    Budget,
    SchemaError,
    params_model,
    record_model,
    without_marks,
)
from maestro.domains.store import TableSpec

Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
Text = Annotated[str, StringConstraints(max_length=20_000)]


class _Fixed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TableDescription(_Fixed):
    """One table as the child reports it."""

    name: Identifier
    class_name: Identifier
    key_field: Identifier
    record_schema: dict[str, Any]


class ToolDescription(_Fixed):
    """One tool as the child reports it."""

    name: Identifier
    kind: Literal["read", "write"]
    description: Text
    parameters: dict[str, Any]
    param_names: list[Identifier] = Field(max_length=200)


ProblemRows = Annotated[
    list[Annotated[list[Text], Field(min_length=3, max_length=3)]], Field(max_length=1000)
]


class PackageDescription(_Fixed):
    """A child's ``describe`` reply that loaded the package (``ok``); ``problems``: the
    records of db.json its record types refused."""

    ok: Literal[True]
    tables: list[TableDescription] = Field(min_length=1, max_length=500)
    tools: list[ToolDescription] = Field(min_length=1, max_length=1000)
    problems: ProblemRows


class ProblemReport(_Fixed):
    """A child's ``describe`` reply that did not load the package: its problems."""

    ok: Literal[False]
    problems: ProblemRows


@dataclass(frozen=True)
class DescribedToolSpec(ToolSpec):
    """A sandboxed tool: the host's argument model, and the schema the assistant sees exactly
    as the child computed it from the real function (validated, Ref marks removed)."""

    schema: dict[str, Any] = field(default_factory=dict)

    def openai_schema(self) -> dict[str, Any]:
        parameters = without_marks(self.schema)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }


def read_description(meta: dict[str, Any]) -> PackageDescription | list[Problem]:
    """The child's describe reply as a description, or the problems it reported or has."""
    body = {k: v for k, v in meta.items() if k not in ("seq", "nonce")}
    try:
        if body.get("ok") is False:
            report = ProblemReport.model_validate(body)
            return [Problem(f, where, msg) for f, where, msg in report.problems]
        return PackageDescription.model_validate(body)
    except ValidationError as exc:
        return [Problem("tools.py", "", f"the sandbox child sent an invalid description: {exc}")]


def host_tables(
    description: PackageDescription, problems: list[Problem], budget: Budget | None = None
) -> dict[str, TableSpec]:
    """The tables, each with a record model the host built from the reported schema;
    ``budget`` is shared with :func:`host_tools` to bound the package's cost as a whole."""
    tables: dict[str, TableSpec] = {}
    for t in description.tables:
        if t.name in tables:
            problems.append(Problem("models.py", "TABLES", f"table {t.name!r} is reported twice"))
            continue
        try:
            model = record_model(t.class_name, t.key_field, t.record_schema, budget)
        except (SchemaError, RecursionError) as exc:
            problems.append(
                Problem("models.py", t.class_name, f"record schema not supported: {exc}")
            )
            continue
        except Exception as exc:  # the last net: a child's schema never raises in the host
            problems.append(
                Problem("models.py", t.class_name, f"record schema not usable: {exc!r}")
            )
            continue
        tables[t.name] = TableSpec(t.name, model, t.key_field)
    return tables


def host_tools(
    description: PackageDescription, problems: list[Problem], budget: Budget | None = None
) -> list[ToolSpec]:
    """The tools, each with an argument model the host built and a function that refuses."""
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for t in description.tools:
        where = f"tool {t.name}"
        if t.name in seen:
            problems.append(Problem("tools.py", where, "is reported twice"))
            continue
        seen.add(t.name)
        try:
            params = params_model(t.name, t.parameters, budget)
        except (SchemaError, RecursionError) as exc:
            problems.append(Problem("tools.py", where, f"parameter schema not supported: {exc}"))
            continue
        except Exception as exc:  # the last net: a child's schema never raises in the host
            problems.append(Problem("tools.py", where, f"parameter schema not usable: {exc!r}"))
            continue
        if list(params.model_fields) != t.param_names:
            problems.append(Problem("tools.py", where, "parameter names do not match its schema"))
            continue
        names = tuple(t.param_names)
        spec = DescribedToolSpec(
            t.name, t.kind, _runs_in_the_sandbox, t.description, params, names, t.parameters
        )
        specs.append(spec)
    return specs


def _runs_in_the_sandbox(db: Any, **arguments: Any) -> Any:
    """A sandboxed tool's function in the host: it never runs here."""
    raise RuntimeError("this tool runs only in the sandbox; call it through the toolkit")
