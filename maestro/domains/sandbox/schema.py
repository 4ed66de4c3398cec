"""Host-owned pydantic models rebuilt from the JSON schemas a sandbox child reports.

The host validates what a sandboxed package's child sends (the database, every write, every
call's arguments) with models built here, by host code, from a small subset of JSON Schema:
the subset pydantic itself emits for the types a domain uses. Nothing in a schema is ever run:
each keyword maps to a fixed Python type or constraint, and a keyword outside the subset, or a
schema too large or deep, is refused with a message naming where it is.

| JSON Schema | type |
|---|---|
| ``string`` (``format`` date, date-time, time, duration, uuid) | ``str``, ``date``, ... |
| ``integer``, ``number``, ``boolean``, ``null`` | ``int``, ``float``, ``bool``, ``None`` |
| ``enum``, ``const`` | ``Literal[...]`` |
| ``anyOf`` | a union |
| ``array`` (``items``, ``uniqueItems``) | ``list[X]``, ``set[X]`` |
| ``object`` with ``properties`` | a model (``additionalProperties: false`` forbids extras) |
| ``object`` with ``additionalProperties`` | ``dict[str, X]`` |
| ``$ref`` to ``#/$defs/...`` | the model built for that definition |
| ``{}`` | ``Any`` |

Constraints (``minLength``, ``maxLength``, ``pattern`` (pydantic's linear-time regex engine),
``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``,
``minItems``, ``maxItems``) become ``Field`` constraints; ``x-maestro-ref`` becomes a ``Ref``,
``x-maestro-text`` a ``TextFormat``.
"""

from __future__ import annotations

import dataclasses
import keyword
import re
import typing
import uuid
from datetime import date, datetime, time, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from maestro.domains.sandbox.describe import REF_KEY, TEXT_KEY
from maestro.domains.sdk import Record, Ref, TextFormat

MAX_NODES = 20_000
MAX_DEPTH = 32
MAX_ENUM = 1_000
MAX_PATTERN = 1_000
MAX_PROPERTIES = 500
MAX_DEFS = 100  # each is built once; a chain of them is a chain of calls
#: What all of one package's schemas together may cost the host. Each distinct pattern is a
#: regex compiled by pydantic's engine, measured at 2-16 MB of host memory for ``\w{20}`` to
#: ``\w{200}`` (the same pattern again costs little); a repetition of a Unicode class
#: (``\w``, ``\d``, ``.``) grows it fastest, so those are bounded harder.
MAX_PACKAGE_NODES = 100_000
MAX_PACKAGE_MODELS = 1_000
MAX_PACKAGE_PATTERNS = 16
#: pydantic-core compiles a pattern once per field that carries it (its cache is per
#: validator), so fields sharing one pattern each cost its memory: 420 fields of one pattern
#: grew the host by 483 MB. At most this many fields (and items) of a package carry a pattern.
MAX_PATTERN_FIELDS = 64
MAX_REPEAT = 100
MAX_CLASS_REPEAT = 40

_FORMATS: dict[str, Any] = {
    "date": date,
    "date-time": datetime,
    "time": time,
    "duration": timedelta,
    "uuid": uuid.UUID,
}
_SCALARS: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": None,
}
_CONSTRAINTS = {
    "minLength": "min_length",
    "maxLength": "max_length",
    "pattern": "pattern",
    "minimum": "ge",
    "maximum": "le",
    "exclusiveMinimum": "gt",
    "exclusiveMaximum": "lt",
    "multipleOf": "multiple_of",
    "minItems": "min_length",
    "maxItems": "max_length",
}
#: Keywords that describe without constraining: read past.
_NOTES = frozenset({"title", "description", "default", "examples", "deprecated", REF_KEY, TEXT_KEY})
_KNOWN = (
    _NOTES
    | set(_CONSTRAINTS)
    | {"type", "format", "enum", "const", "anyOf", "allOf", "items", "uniqueItems"}
    | {"properties", "required", "additionalProperties", "$ref", "$defs"}
)
_RESERVED = frozenset(dir(BaseModel)) | {"key_field"}


class SchemaError(ValueError):
    """A schema outside the subset; the message says where (``properties.x.items``)."""


@dataclasses.dataclass
class Budget:
    """What one package's schemas have cost the host so far (share one across a package)."""

    nodes: int = 0
    models: int = 0
    patterns: set[str] = dataclasses.field(default_factory=set)
    pattern_fields: int = 0


def record_model(
    class_name: str, key_field: str, schema: Any, budget: Budget | None = None
) -> type[Record]:
    """A host-owned ``Record`` subclass named ``class_name`` validating ``schema``."""
    builder = _Builder(schema, budget or Budget())
    model = builder.model(class_name, builder.root, "", base=Record)
    if key_field not in model.model_fields or not issubclass(model, Record):
        raise SchemaError(f"the key field {key_field!r} is not a property")
    model.key_field = key_field
    return model


def params_model(tool_name: str, schema: Any, budget: Budget | None = None) -> type[BaseModel]:
    """A tool's argument model, configured as the runtime builds one (extra forbidden, strict)."""
    builder = _Builder(schema, budget or Budget())
    config = ConfigDict(extra="forbid", strict=True)
    return builder.model(f"{tool_name}_arguments", builder.root, "", config=config)


def without_marks(schema: Any) -> Any:
    """A copy of a schema without the SDK's marks (what the assistant sees)."""
    if isinstance(schema, dict):
        return {k: without_marks(v) for k, v in schema.items() if k not in (REF_KEY, TEXT_KEY)}
    if isinstance(schema, list):
        return [without_marks(v) for v in schema]
    return schema


class _Builder:
    def __init__(self, schema: Any, budget: Budget) -> None:
        self.budget = budget
        if not isinstance(schema, dict):
            raise SchemaError("the schema is not an object")
        defs = schema.get("$defs", {})
        if not isinstance(defs, dict) or len(defs) > MAX_DEFS:
            raise SchemaError(f"$defs must be an object of at most {MAX_DEFS} definitions")
        self.root = schema
        self.defs: dict[str, Any] = defs
        self.models: dict[str, type[BaseModel]] = {}
        self.building: set[str] = set()
        self.nodes = 0

    # ----- objects -----------------------------------------------------------------------------

    def model(
        self,
        name: str,
        node: dict[str, Any],
        path: str,
        *,
        base: type[BaseModel] | None = None,
        config: ConfigDict | None = None,
    ) -> type[BaseModel]:
        self._check(node, path, 0)
        if node.get("type") != "object" or not isinstance(node.get("properties", {}), dict):
            raise SchemaError(f"{path or 'the schema'}: a model must be an object with properties")
        properties: dict[str, Any] = node.get("properties", {})
        required = node.get("required", [])
        if not (
            isinstance(required, list)
            and all(isinstance(r, str) for r in required)
            and set(required) <= set(properties)
        ):
            raise SchemaError(f"{_at(path, 'required')}: must list properties")
        if len(properties) > MAX_PROPERTIES:
            raise SchemaError(f"{path or 'the schema'}: over {MAX_PROPERTIES} properties")
        self.budget.models += 1
        if self.budget.models > MAX_PACKAGE_MODELS:
            raise SchemaError(f"the package's schemas build over {MAX_PACKAGE_MODELS} models")
        fields: dict[str, Any] = {}
        for field, prop in properties.items():
            where = _at(path, f"properties.{field}")
            if not _usable_name(field):
                raise SchemaError(f"{where}: {field!r} cannot be a field name")
            if not isinstance(prop, dict):
                raise SchemaError(f"{where}: not a schema")
            annotation = self.type_of(prop, where, 1)
            if field in required:
                default: Any = ...
            else:
                # A default_factory leaves no default in the schema; the host never fills one
                # in for data the child normalized, which carries every field.
                default = prop.get("default")
                if "default" in prop:
                    _check_default(annotation, default, where)
            fields[field] = (annotation, Field(default, description=_text(prop)))
        extra = node.get("additionalProperties")
        if extra not in (None, True, False):
            raise SchemaError(f"{_at(path, 'additionalProperties')}: a model takes true or false")
        options: dict[str, Any] = dict(config or {})
        if extra is not None:
            options["extra"] = "forbid" if extra is False else "allow"
        try:
            if base is not None:  # config as class keywords: create_model takes no __config__
                return create_model(
                    _class_name(name),
                    __base__=base,
                    __cls_kwargs__=options,
                    __doc__=_text(node),
                    **fields,
                )
            return create_model(
                _class_name(name),
                __config__=ConfigDict(**options),  # type: ignore[typeddict-item]
                __doc__=_text(node),
                **fields,
            )
        except Exception as exc:  # pydantic's own refusals (a regex its engine rejects, ...)
            text = " / ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            raise SchemaError(f"{path or 'the schema'}: {text[-500:]}") from None

    def _definition(self, ref: str, path: str) -> type[BaseModel] | Any:
        key = ref.removeprefix("#/$defs/")
        node = self.defs.get(key)
        if not ref.startswith("#/$defs/") or not isinstance(node, dict):
            raise SchemaError(f"{path}: $ref {ref!r} does not name a definition")
        if key in self.models:
            return self.models[key]
        if key in self.building:
            raise SchemaError(f"{path}: {key} refers to itself; recursive types are not supported")
        self.building.add(key)
        try:
            if "properties" in node:
                built: Any = self.model(key, node, f"$defs.{key}")
            else:  # an Enum class: its values
                built = self.type_of(node, f"$defs.{key}", 1)
        finally:
            self.building.discard(key)
        self.models[key] = built
        return built

    # ----- any node ----------------------------------------------------------------------------

    def type_of(self, node: Any, path: str, depth: int) -> Any:
        if not isinstance(node, dict):
            raise SchemaError(f"{path}: not a schema")
        self._check(node, path, depth)
        base = self._base(node, path, depth)
        given = {k: v for k, v in node.items() if k in _CONSTRAINTS}
        _check_applies(node, given, path)
        _check_constraints(given, path, self.budget)
        metadata: list[Any] = []
        if given:
            metadata.append(Field(**{_CONSTRAINTS[k]: v for k, v in given.items()}))
        table = node.get(REF_KEY)
        if table is not None:
            if not isinstance(table, str) or not table:
                raise SchemaError(f"{_at(path, REF_KEY)}: must name a table")
            metadata.insert(0, Ref(table))
        text = node.get(TEXT_KEY)
        if text is not None:
            if text not in ("date", "datetime"):
                raise SchemaError(f"{_at(path, TEXT_KEY)}: must be 'date' or 'datetime'")
            metadata.append(TextFormat(text))
        return Annotated[(base, *metadata)] if metadata else base

    def _base(self, node: dict[str, Any], path: str, depth: int) -> Any:
        if "$ref" in node:
            return self._definition(str(node["$ref"]), path)
        if "allOf" in node:
            parts = node["allOf"]
            if not (isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], dict)):
                raise SchemaError(f"{_at(path, 'allOf')}: only one $ref is supported")
            return self._base(parts[0], _at(path, "allOf.0"), depth + 1)
        if "anyOf" in node:
            arms = node["anyOf"]
            if not isinstance(arms, list) or not arms:
                raise SchemaError(f"{_at(path, 'anyOf')}: must be a list of schemas")
            types_ = [
                self.type_of(a, _at(path, f"anyOf.{i}"), depth + 1) for i, a in enumerate(arms)
            ]
            return typing.Union[tuple(types_)]  # noqa: UP007 (built from a list)
        if "enum" in node or "const" in node:
            return _literal(node, path)
        kind = node.get("type")
        if kind == "array":
            return self._array(node, path, depth)
        if kind == "object":
            return self._mapping(node, path, depth)
        if kind is None:
            if set(node) - _NOTES:
                raise SchemaError(f"{path}: a schema without a type")
            return Any
        if not isinstance(kind, str) or kind not in _SCALARS:
            raise SchemaError(f"{_at(path, 'type')}: {kind!r} is not supported")
        fmt = node.get("format")
        if fmt is None:
            return _SCALARS[kind]
        if kind != "string" or not isinstance(fmt, str) or fmt not in _FORMATS:
            raise SchemaError(f"{_at(path, 'format')}: {fmt!r} is not supported")
        return _FORMATS[fmt]

    def _array(self, node: dict[str, Any], path: str, depth: int) -> Any:
        items = node.get("items", {})
        item = self.type_of(items, _at(path, "items"), depth + 1)
        unique = node.get("uniqueItems", False)
        if unique not in (True, False):
            raise SchemaError(f"{_at(path, 'uniqueItems')}: must be true or false")
        return set[item] if unique else list[item]  # type: ignore[valid-type]

    def _mapping(self, node: dict[str, Any], path: str, depth: int) -> Any:
        if "properties" in node:  # an inline object (a TypedDict): a model of its own
            return self.model(f"Inline{self.nodes}", node, path)
        values = node.get("additionalProperties", {})
        if values is True:
            values = {}
        value = self.type_of(values, _at(path, "additionalProperties"), depth + 1)
        return dict[str, value]  # type: ignore[valid-type]

    def _check(self, node: dict[str, Any], path: str, depth: int) -> None:
        self.nodes += 1
        self.budget.nodes += 1
        if self.nodes > MAX_NODES:
            raise SchemaError(f"the schema has over {MAX_NODES} nodes")
        if self.budget.nodes > MAX_PACKAGE_NODES:
            raise SchemaError(f"the package's schemas have over {MAX_PACKAGE_NODES} nodes")
        if depth > MAX_DEPTH:
            raise SchemaError(f"{path}: nested over {MAX_DEPTH} levels")
        unknown = sorted(set(node) - _KNOWN)
        if unknown:
            raise SchemaError(f"{path or 'the schema'}: keyword {unknown[0]!r} is not supported")


def _literal(node: dict[str, Any], path: str) -> Any:
    values = node["enum"] if "enum" in node else [node["const"]]
    if not isinstance(values, list) or not values or len(values) > MAX_ENUM:
        raise SchemaError(f"{_at(path, 'enum')}: must list 1 to {MAX_ENUM} values")
    if "const" in node and node["const"] not in values:
        raise SchemaError(f"{_at(path, 'const')}: not among the enum's values")
    for v in values:
        if not (v is None or isinstance(v, str | int | float | bool)):
            raise SchemaError(f"{_at(path, 'enum')}: {type(v).__name__} values are not supported")
    return Literal[tuple(values)]


#: The constraints each plain type takes. Pydantic builds a model with a float's min_length,
#: then raises TypeError, not a ValidationError, on every value it validates.
_NUMBER = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
_APPLIES = {
    "string": frozenset({"minLength", "maxLength", "pattern"}),
    "integer": _NUMBER,
    "number": _NUMBER,
    "array": frozenset({"minItems", "maxItems"}),
}


def _check_applies(node: dict[str, Any], constraints: dict[str, Any], path: str) -> None:
    """Each constraint on a node whose own type takes it: a plain string (no ``format``), a
    number, an array; never on a union, an enum, a reference or an untyped node."""
    kind = node.get("type")
    plain = not ({"$ref", "allOf", "anyOf", "enum", "const"} & set(node))
    if kind == "string" and node.get("format") is not None:
        plain = False
    allowed = _APPLIES.get(kind, frozenset()) if plain and isinstance(kind, str) else frozenset()
    for name in constraints:
        if name not in allowed:
            described = kind if plain and isinstance(kind, str) else "this kind of schema"
            if kind == "string" and node.get("format") is not None:
                described = f"a string of format {node.get('format')!r}"
            raise SchemaError(f"{path}: {name} does not apply to {described}")


def _check_constraints(constraints: dict[str, Any], path: str, budget: Budget) -> None:
    for name, value in constraints.items():
        if name == "pattern":
            if not isinstance(value, str) or len(value) > MAX_PATTERN:
                raise SchemaError(f"{path}: pattern must be a string of at most {MAX_PATTERN}")
            _check_pattern(value, path)
            budget.patterns.add(value)
            budget.pattern_fields += 1
            if budget.pattern_fields > MAX_PATTERN_FIELDS:
                raise SchemaError(
                    f"{path}: over {MAX_PATTERN_FIELDS} fields of the package's schemas carry a"
                    " pattern (each is compiled, and held, once per field)"
                )
            if len(budget.patterns) > MAX_PACKAGE_PATTERNS:
                raise SchemaError(
                    f"{path}: the package's schemas use over {MAX_PACKAGE_PATTERNS} distinct patterns"
                )
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise SchemaError(f"{path}: {name} must be a number")


_REPEAT = re.compile(r"\{(\d*)(?:,(\d*))?\}")
_CLASS = re.compile(r"\\[wWdDsSpP]|\.|\[\^")


def _check_pattern(pattern: str, path: str) -> None:
    """Bound what compiling ``pattern`` costs: counted repetitions (``{n}``, ``{n,m}``) are
    what a compiled regex grows with, Unicode classes fastest."""
    bounds = [max(int(lo or 0), int(hi or 0)) for lo, hi in _REPEAT.findall(pattern)]
    if any(b > MAX_REPEAT for b in bounds):
        raise SchemaError(f"{path}: pattern repeats more than {MAX_REPEAT} times")
    if _CLASS.search(pattern) and sum(bounds) > MAX_CLASS_REPEAT:
        raise SchemaError(
            f"{path}: pattern's counted repetitions of a character class add up to over "
            f"{MAX_CLASS_REPEAT}"
        )


def _check_default(annotation: Any, default: Any, where: str) -> None:
    """A default the host may fill in must be valid: the host never stores a record its own
    model would refuse."""
    try:
        TypeAdapter(annotation).validate_python(default)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"]
        raise SchemaError(
            f"{where}: its default {str(default)[:80]!r} is invalid ({message})"
        ) from None
    except Exception as exc:  # a type pydantic cannot build an adapter for here
        raise SchemaError(f"{where}: its default cannot be checked ({exc!r}"[:300] + ")") from None


def usable_field_name(name: str) -> bool:
    """Whether a record model may have a field ``name`` (not a keyword, not private, not
    pydantic's: ``model_*`` and BaseModel's own attributes such as ``copy``, ``json``)."""
    return _usable_name(name)


def _usable_name(name: str) -> bool:
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
        and not name.startswith("model_")
        and name not in _RESERVED
    )


def _class_name(name: str) -> str:
    return name if name.isidentifier() and not keyword.iskeyword(name) else "Record"


def _text(node: dict[str, Any]) -> str | None:
    value = node.get("description")
    return value if isinstance(value, str) else None


def _at(path: str, step: str) -> str:
    return f"{path}.{step}" if path else step
