"""The blueprint: what a synthesized domain holds, as a validated structure the LLM writes.

Kept compact so a small model can write it as one JSON object::

    {"domain_id": "bike_rental", "name": "Bike rental", "description": "...",
     "entities": [{"name": "Rental", "table": "rentals", "key": "rental_id", "prefix": "R",
                   "fields": {"customer_id": "ref:customers", "status": "enum:active|returned"}}],
     "operations": [{"name": "return_rental", "kind": "write", "table": "rentals",
                     "description": "Return an active rental.",
                     "params": {"rental_id": "str"},
                     "requires": {"status": ["active"]}, "sets": {"status": "returned"}}],
     "rules": ["Only active rentals can be returned."]}

Field types are ``str``, ``int``, ``float``, ``bool``, ``ref:<table>`` and ``enum:a|b|c``. An
operation acts on one record of its table, named by the parameter that carries the table's key;
``requires`` lists the values a field must hold before it (preconditions) and ``sets`` the values
it holds after (effects; ``"$param"`` takes a parameter's value). Both become unit tests.
"""

from __future__ import annotations

import keyword
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

IDENT = r"^[a-z][a-z0-9_]{0,39}$"
SCALARS = ("str", "int", "float", "bool")
Scalar = str | int | float | bool
_ENUM_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_ -]{0,39}$")


class BlueprintError(ValueError):
    """A blueprint that does not hold together; the message lists every problem."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldType(_Strict):
    """One parsed field type."""

    base: Literal["str", "int", "float", "bool", "ref", "enum"]
    ref: str | None = None
    choices: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> FieldType:
        """``str`` | ``int`` | ``float`` | ``bool`` | ``ref:table`` | ``enum:a|b``."""
        if text in SCALARS:
            return cls(base=text)
        if text.startswith("ref:") and re.match(IDENT, text[4:]):
            return cls(base="ref", ref=text[4:])
        if text.startswith("enum:"):
            choices = tuple(c.strip() for c in text[5:].split("|"))
            valid = all(_ENUM_VALUE.match(c) for c in choices)
            if choices and valid and len(set(choices)) == len(choices):
                return cls(base="enum", choices=choices)
        raise ValueError(
            f"unknown field type {text!r}: use str, int, float, bool, ref:<table> or enum:a|b|c"
        )

    def accepts(self, value: Any) -> bool:
        """Whether a JSON value fits this type."""
        if self.base == "enum":
            return value in self.choices
        if self.base in ("str", "ref"):
            return isinstance(value, str)
        if self.base == "bool":
            return isinstance(value, bool)
        if self.base == "int":
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, int | float) and not isinstance(value, bool)


def _check_ident(name: str, what: str) -> None:
    if not re.match(IDENT, name) or keyword.iskeyword(name):
        raise ValueError(f"{what} {name!r} is not a lowercase identifier")


class Entity(_Strict):
    """A record type and its table."""

    name: str = Field(pattern=r"^[A-Z][A-Za-z0-9]{0,39}$")
    table: str = Field(pattern=IDENT)
    key: str = Field(pattern=IDENT)
    prefix: str = Field(pattern=r"^[A-Z]{1,3}$")
    fields: dict[str, str] = Field(min_length=1)

    @model_validator(mode="after")
    def _fields_parse(self) -> Entity:
        for name, text in self.fields.items():
            _check_ident(name, f"field of {self.name}")
            FieldType.parse(text)
        if self.key in self.fields:
            raise ValueError(f"{self.name}: the key {self.key!r} is declared again in fields")
        return self

    def field_types(self) -> dict[str, FieldType]:
        return {name: FieldType.parse(text) for name, text in self.fields.items()}


class Operation(_Strict):
    """A tool: what it reads or changes, when it may, and what it does."""

    name: str = Field(pattern=IDENT)
    kind: Literal["read", "write"]
    table: str = Field(pattern=IDENT)
    description: str = Field(min_length=1, max_length=300)
    params: dict[str, Literal["str", "int", "float", "bool"]] = Field(min_length=1)
    requires: dict[str, list[Scalar]] = Field(default_factory=dict)
    sets: dict[str, Scalar] = Field(default_factory=dict)


class Blueprint(_Strict):
    """A whole domain's design; validated so that every name it uses exists."""

    domain_id: str = Field(pattern=r"^[a-z][a-z0-9_]{1,39}$")
    name: str = Field(min_length=1, max_length=80)
    description: str = Field(min_length=1, max_length=500)
    industry: str | None = None
    entities: list[Entity] = Field(min_length=1, max_length=6)
    operations: list[Operation] = Field(min_length=1, max_length=8)
    rules: list[str] = Field(default_factory=list, max_length=12)

    @model_validator(mode="after")
    def _consistent(self) -> Blueprint:
        problems: list[str] = []
        tables = {e.table: e for e in self.entities}
        for label, names in (
            ("entity", [e.name for e in self.entities]),
            ("table", [e.table for e in self.entities]),
            ("operation", [o.name for o in self.operations]),
        ):
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                problems.append(f"{label} names repeat: {dup}")
        for e in self.entities:
            for fname, ftype in e.field_types().items():
                if ftype.ref is not None and ftype.ref not in tables:
                    problems.append(f"{e.name}.{fname} refers to unknown table {ftype.ref!r}")
        for op in self.operations:
            problems.extend(_operation_problems(op, tables))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def entity(self, table: str) -> Entity:
        for e in self.entities:
            if e.table == table:
                return e
        raise KeyError(table)

    def operation(self, name: str) -> Operation:
        for op in self.operations:
            if op.name == name:
                return op
        raise KeyError(name)


def _operation_problems(op: Operation, tables: dict[str, Entity]) -> list[str]:
    where = f"operation {op.name}"
    entity = tables.get(op.table)
    if entity is None:
        return [f"{where}: unknown table {op.table!r}; tables are {sorted(tables)}"]
    problems = []
    for p in op.params:
        if keyword.iskeyword(p) or p == "db" or not re.match(IDENT, p):
            problems.append(f"{where}: parameter {p!r} is not a usable name")
    if entity.key not in op.params:
        problems.append(f"{where}: needs the parameter {entity.key!r} (the key of {op.table})")
    types = entity.field_types()
    for fname, allowed in op.requires.items():
        ftype = types.get(fname)
        if ftype is None:
            problems.append(f"{where}: requires unknown field {op.table}.{fname}")
        elif not allowed or not all(ftype.accepts(v) for v in allowed):
            problems.append(f"{where}: requires {fname} in {allowed}, not values of {ftype.base}")
    if op.kind == "read" and op.sets:
        problems.append(f"{where}: a read operation cannot set fields")
    for fname, value in op.sets.items():
        ftype = types.get(fname)
        if ftype is None:
            problems.append(f"{where}: sets unknown field {op.table}.{fname}")
        elif isinstance(value, str) and value.startswith("$"):
            if value[1:] not in op.params:
                problems.append(f"{where}: sets {fname} from unknown parameter {value[1:]!r}")
        elif not ftype.accepts(value):
            problems.append(f"{where}: sets {fname} to {value!r}, not a {ftype.base} value")
    return problems


_TYPE_ALIASES = {
    "string": "str",
    "text": "str",
    "date": "str",
    "datetime": "str",
    "time": "str",
    "email": "str",
    "integer": "int",
    "number": "float",
    "decimal": "float",
    "boolean": "bool",
}


def _snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def _type_text(text: Any) -> Any:
    """Common spellings of a field type in the blueprint language (dates are ISO strings)."""
    if not isinstance(text, str):
        return text
    low = text.strip()
    if low.lower() in _TYPE_ALIASES:
        return _TYPE_ALIASES[low.lower()]
    if low.lower().startswith("enum:"):
        values = re.split(r"[|,]", low[5:].strip("[]() "))
        return "enum:" + "|".join(v.strip().strip("'\"") for v in values if v.strip())
    return low.lower() if low.lower() in SCALARS else low


def _entity(raw: Any) -> Any:
    if not isinstance(raw, dict):
        return raw
    e = dict(raw)
    if isinstance(e.get("fields"), dict):
        e["fields"] = {k: _type_text(v) for k, v in e["fields"].items() if k != e.get("key")}
    prefix = e.get("prefix")
    if isinstance(prefix, str) and not re.match(r"^[A-Z]{1,3}$", prefix) and prefix[:1].isalpha():
        e["prefix"] = prefix[0].upper()
    return e


def _operation(raw: Any) -> Any:
    if not isinstance(raw, dict):
        return raw
    op = dict(raw)
    if isinstance(op.get("name"), str):
        op["name"] = _snake(op["name"])
    if isinstance(op.get("params"), dict):
        op["params"] = {k: _type_text(v) for k, v in op["params"].items()}
    if isinstance(op.get("requires"), dict):
        op["requires"] = {k: v if isinstance(v, list) else [v] for k, v in op["requires"].items()}
    return op


def normalise_blueprint(data: dict[str, Any]) -> dict[str, Any]:
    """Forgive a small model's usual slips that change no meaning: ``Kebab-Case`` names where
    snake_case is meant, type spellings (``string``,
    ``integer``, ``datetime`` as an ISO string), ``enum:[a, b]``, a word as the key prefix, the
    key repeated among the fields, a single allowed value not in a list, a rule written
    as an object."""
    out = dict(data)
    for key in ("domain_id",):
        if isinstance(out.get(key), str):
            out[key] = _snake(out[key])
    if isinstance(out.get("entities"), list):
        out["entities"] = [_entity(e) for e in out["entities"]]
    if isinstance(out.get("operations"), list):
        out["operations"] = [_operation(o) for o in out["operations"]]
    if isinstance(out.get("rules"), list):  # {"rule": "..."} objects: their text is the rule
        out["rules"] = [_rule_text(r) for r in out["rules"]]
    return out


def _rule_text(rule: Any) -> Any:
    if isinstance(rule, dict):
        for key in ("rule", "text", "description", "policy"):
            if isinstance(rule.get(key), str) and rule[key].strip():
                return rule[key]
        texts = [v for v in rule.values() if isinstance(v, str) and v.strip()]
        return " ".join(texts) if texts else rule
    return rule


def parse_blueprint(data: Any, *, industry: str | None = None) -> Blueprint:
    """Validate the LLM's blueprint; :class:`BlueprintError` lists every problem found."""
    if not isinstance(data, dict):
        raise BlueprintError(f"the blueprint must be a JSON object, not {type(data).__name__}")
    data = normalise_blueprint(data)
    if industry and not data.get("industry"):
        data = {**data, "industry": industry}
    try:
        return Blueprint.model_validate(data)
    except ValidationError as exc:
        lines: list[str] = []
        for err in exc.errors():
            parts = [str(p) for p in err["loc"]]
            msg = str(err["msg"]).removeprefix("Value error, ")
            if (
                parts and parts[-1] in SCALARS
            ):  # one error per branch of a scalar union: say it once
                parts, msg = (
                    parts[:-1],
                    "must be a string, number or true/false, not a list or object",
                )
            loc = ".".join(parts)
            line = f"{loc}: {msg}" if loc else msg
            if line not in lines:
                lines.append(line)
        raise BlueprintError("; ".join(lines)) from None
