"""From the LLM's blueprint JSON to a :class:`Blueprint`: slips that change no meaning are
forgiven, everything else is a :class:`BlueprintError` listing every problem, worded so the
next attempt can fix it."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from maestro.agents.codegen.blueprint import SCALARS, Blueprint, BlueprintError

_TYPE_ALIASES = {
    "string": "str",
    "text": "str",
    "email": "str",
    "integer": "int",
    "number": "float",
    "decimal": "float",
    "money": "float",
    "boolean": "bool",
    "timestamp": "datetime",
}
_KIND_ALIASES = {
    "get": "read",
    "fetch": "read",
    "find": "lookup",
    "search": "lookup",
    "write": "update",
    "change": "update",
    "modify": "update",
    "add": "create",
    "insert": "create",
    "new": "create",
}


def _snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def type_text(text: Any) -> Any:
    """Common spellings of a type (``string``, ``Integer``, ``enum:[a, b]``, ``ref:X?``)."""
    if not isinstance(text, str):
        return text
    raw = text.strip()
    nullable = "?" if raw.endswith("?") else ""
    body = raw.rstrip("?").strip()
    head, sep, rest = body.partition(":")
    low = head.strip().lower()
    low = _TYPE_ALIASES.get(low, low)
    if low == "enum" and sep:
        values = re.split(r"[|,]", rest.strip().strip("[]() "))
        rest = "|".join(v.strip().strip("'\"") for v in values if v.strip())
    elif low == "ref" and sep:
        rest = rest.strip()
    elif low not in (*SCALARS, "date", "datetime", "ref", "enum"):
        return raw
    return f"{low}{sep}{rest}{nullable}"


def _entity(raw: Any) -> Any:
    if not isinstance(raw, dict):
        return raw
    e = dict(raw)
    if isinstance(e.get("fields"), dict):
        e["fields"] = {k: type_text(v) for k, v in e["fields"].items() if k != e.get("key")}
    prefix = e.get("prefix")
    if isinstance(prefix, str) and not re.match(r"^[A-Z]{1,4}$", prefix):
        letters = re.sub(r"[^A-Za-z]", "", prefix).upper()
        if letters and prefix.isalpha() and len(prefix) <= 4:
            e["prefix"] = letters
        elif letters:
            e["prefix"] = letters[0]
    return e


def _operation(raw: Any, entities: list[Any]) -> Any:
    if not isinstance(raw, dict):
        return raw
    op = dict(raw)
    if isinstance(op.get("name"), str):
        op["name"] = _snake(op["name"])
    if isinstance(op.get("kind"), str):
        kind = op["kind"].strip().lower()
        op["kind"] = _KIND_ALIASES.get(kind, kind)
    if isinstance(op.get("params"), dict):
        op["params"] = {k: type_text(v) for k, v in op["params"].items()}
    if isinstance(op.get("by"), str):
        op["by"] = [op["by"]]
    requires = op.get("requires")
    if isinstance(requires, dict):  # {"status": ["active"]}: the older, shorter form
        op["requires"] = [
            {"check": k, "test": "in", "value": v if isinstance(v, list) else [v]}
            for k, v in requires.items()
        ]
    if op.get("kind") in ("lookup", "list") and not op.get("params"):
        fields = next(
            (
                e.get("fields")
                for e in entities
                if isinstance(e, dict) and e.get("table") == op.get("table")
            ),
            None,
        )
        if isinstance(fields, dict) and isinstance(op.get("by"), list):
            op["params"] = {f: _param_type(fields.get(f)) for f in op["by"] if isinstance(f, str)}
    return op


def _param_type(text: Any) -> str:
    """A parameter's type for a field: its base type, without range, window or null."""
    if not isinstance(text, str):
        return "str"
    head = text.rstrip("?").split(":")[0]
    if head in ("int", "float", "bool", "date", "datetime"):
        return head
    return text.rstrip("?") if head == "enum" else "str"


def _rule_text(rule: Any) -> Any:
    if isinstance(rule, dict):
        for key in ("rule", "text", "description", "policy"):
            if isinstance(rule.get(key), str) and rule[key].strip():
                return rule[key]
        texts = [v for v in rule.values() if isinstance(v, str) and v.strip()]
        return " ".join(texts) if texts else rule
    return rule


def normalise_blueprint(data: dict[str, Any]) -> dict[str, Any]:
    """Forgive slips that change no meaning: ``Kebab-Case`` names, type spellings (``string``,
    ``integer``, ``enum:[a, b]``), a word as the key prefix, the key repeated among the fields,
    kinds such as ``write`` or ``find``, ``requires`` as ``{field: [values]}``, lookup params left
    out (they are the ``by`` fields), a rule written as an object."""
    out = dict(data)
    if isinstance(out.get("domain_id"), str):
        out["domain_id"] = _snake(out["domain_id"])
    entities = out.get("entities")
    if isinstance(entities, list):
        out["entities"] = entities = [_entity(e) for e in entities]
    if isinstance(out.get("operations"), list):
        ents = entities if isinstance(entities, list) else []
        out["operations"] = [_operation(o, ents) for o in out["operations"]]
    if isinstance(out.get("rules"), list):
        out["rules"] = [_rule_text(r) for r in out["rules"]]
    if out.get("agent_rules") is None:
        out.pop("agent_rules", None)
    return out


def parse_blueprint(data: Any, *, clock: datetime, industry: str | None = None) -> Blueprint:
    """Validate the LLM's blueprint; :class:`BlueprintError` lists every problem found."""
    if not isinstance(data, dict):
        raise BlueprintError(f"the blueprint must be a JSON object, not {type(data).__name__}")
    data = normalise_blueprint(data)
    if industry and not data.get("industry"):
        data = {**data, "industry": industry}
    data.pop("clock", None)  # the host's, never the model's
    try:
        return Blueprint.model_validate({**data, "clock": clock})
    except ValidationError as exc:
        raise BlueprintError(_explain(exc)) from None


_UNION_TAG = re.compile(
    r"^(str|int|float|bool|none|list\[.*|dict\[.*|function-.*|Adjust|Computed|Restore)$"
)


def _explain(exc: ValidationError) -> str:
    lines: list[str] = []
    for err in exc.errors():
        parts = [str(p) for p in err["loc"]]
        msg = str(err["msg"]).removeprefix("Value error, ")
        # A union gives one error per branch: say it once, in words, where the value is.
        tag = next((i for i, p in enumerate(parts) if _UNION_TAG.match(p)), None)
        if tag is not None:
            parts = parts[:tag]
            msg = 'must be a string, number, true/false, null, a list of those, {"add": x}, {"expr": "..."} or {"restore": "..."}'
        loc = ".".join(parts)
        line = f"{loc}: {msg}" if loc else msg
        if line not in lines:
            lines.append(line)
    return "; ".join(lines)
