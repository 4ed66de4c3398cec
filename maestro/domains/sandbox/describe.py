"""In the sandbox child: what the host needs of a package, computed here and sent as JSON.

The host never runs package code, so everything it needs is computed in the child from the
real objects: each table's record JSON schema, class name and key field; each tool's kind,
description, parameter schema and parameter names; the database normalized by the real record
types (``loader.validated_records``). The SDK's marks, which a JSON schema does not carry, are
written into it at the node they mark: ``Ref`` as ``"x-maestro-ref": "<table>"``, ``TextFormat``
(``IsoDate``, ``IsoDateTime``) as ``"x-maestro-text": "date"``.
The host trusts none of it: it validates the shape, rebuilds its own models from the schemas
(``schema.py``) and validates every record again.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

from maestro.domains.runtime import Toolkit
from maestro.domains.sdk import Ref, TextFormat
from maestro.domains.store import TableSpec

REF_KEY = "x-maestro-ref"
TEXT_KEY = "x-maestro-text"


def describe_tables(tables: dict[str, TableSpec]) -> list[dict[str, Any]]:
    """One entry per table: name, class name, key field, record schema with Ref marks."""
    out = []
    for name, spec in tables.items():
        assert spec.model is not None
        schema = spec.model.model_json_schema()
        mark_refs(spec.model, schema, schema)
        out.append(
            {
                "name": name,
                "class_name": spec.model.__name__,
                "key_field": spec.key_field,
                "record_schema": schema,
            }
        )
    return out


def describe_tools(toolkit: Toolkit) -> list[dict[str, Any]]:
    """One entry per tool: name, kind, description, parameter schema with Ref marks."""
    out = []
    for spec in toolkit.specs.values():
        function = spec.openai_schema()["function"]
        parameters = function["parameters"]
        mark_refs(spec.params, parameters, parameters)
        out.append(
            {
                "name": spec.name,
                "kind": spec.kind,
                "description": function["description"],
                "parameters": parameters,
                "param_names": list(spec.param_names),
            }
        )
    return out


# ----- Ref marks --------------------------------------------------------------------------------


def mark_refs(model: type[BaseModel], node: dict[str, Any], root: dict[str, Any]) -> None:
    """Write each Ref of ``model``'s fields (nested models too) into its schema ``node``."""
    seen: set[str] = set()
    _mark_model(model, node, root, seen)


def _mark_model(
    model: type[BaseModel], node: dict[str, Any], root: dict[str, Any], seen: set[str]
) -> None:
    properties = node.get("properties")
    if not isinstance(properties, dict):
        return
    for name, info in model.model_fields.items():
        prop = properties.get(info.alias or name)
        if not isinstance(prop, dict):
            continue
        _mark(info.metadata, prop)
        _mark_type(info.annotation, prop, root, seen)


def _mark_type(ann: Any, node: dict[str, Any], root: dict[str, Any], seen: set[str]) -> None:
    node = _resolve(node, root)
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        _mark(ann.__metadata__, node)
        _mark_type(typing.get_args(ann)[0], node, root, seen)
    elif origin in (typing.Union, types.UnionType):
        arms = node.get("anyOf")
        args = typing.get_args(ann)
        if isinstance(arms, list) and len(arms) == len(args):
            for arg, arm in zip(args, arms, strict=True):
                if isinstance(arm, dict):
                    _mark_type(arg, arm, root, seen)
    elif origin in (list, set, frozenset) and isinstance(node.get("items"), dict):
        (item,) = typing.get_args(ann) or (Any,)
        _mark_type(item, node["items"], root, seen)
    elif origin is dict and isinstance(node.get("additionalProperties"), dict):
        args = typing.get_args(ann)
        if len(args) == 2:
            _mark_type(args[1], node["additionalProperties"], root, seen)
    elif isinstance(ann, type) and issubclass(ann, BaseModel):
        key = _def_key(node)
        if key not in seen:
            seen.add(key)
            _mark_model(ann, _resolve(node, root), root, seen)


def _mark(metadata: Any, node: dict[str, Any]) -> None:
    for meta in metadata:
        if isinstance(meta, Ref):
            node[REF_KEY] = meta.table
        elif isinstance(meta, TextFormat):
            node[TEXT_KEY] = meta.kind


def _def_key(node: dict[str, Any]) -> str:
    return str(node.get("title", id(node)))


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = root.get("$defs", {}).get(ref[len("#/$defs/") :])
        if isinstance(target, dict):
            return target
    return node
