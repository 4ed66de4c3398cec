"""A constraint reported for a type it does not apply to (a float's ``min_length``) is refused
when the host builds its record model, naming the field: pydantic accepts it at build time
and raises ``TypeError`` (not a ``ValidationError``) on the first value (issue 23)."""

from __future__ import annotations

from typing import Any

import pytest

from maestro.domains.sandbox.schema import SchemaError, params_model, record_model


def _record(prop: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"id": {"type": "string"}, "weight": prop},
        "required": ["id"],
    }


@pytest.mark.parametrize(
    ("prop", "keyword"),
    [
        ({"type": "number", "minLength": 1}, "minLength"),
        ({"type": "integer", "pattern": "^1$"}, "pattern"),
        ({"type": "string", "minimum": 1}, "minimum"),
        ({"type": "string", "format": "date", "minLength": 1}, "minLength"),
        ({"type": "array", "items": {}, "maxLength": 2}, "maxLength"),
        ({"type": "boolean", "maximum": 1}, "maximum"),
        ({"anyOf": [{"type": "number"}, {"type": "string"}], "minLength": 1}, "minLength"),
        ({"enum": [1, 2], "minLength": 1}, "minLength"),
    ],
)
def test_a_constraint_outside_its_type_is_refused_naming_the_field(
    prop: dict[str, Any], keyword: str
) -> None:
    with pytest.raises(SchemaError, match=rf"properties\.weight: {keyword} does not apply"):
        record_model("Product", "id", _record(prop))
    with pytest.raises(SchemaError, match=rf"properties\.weight: {keyword} does not apply"):
        params_model("set_weight", _record(prop))


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "minLength": 1, "maxLength": 9, "pattern": "^a"},
        {"type": "number", "minimum": 0, "exclusiveMaximum": 9, "multipleOf": 0.5},
        {"type": "integer", "maximum": 3},
        {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        {"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}]},
    ],
)
def test_constraints_that_fit_their_type_still_hold(prop: dict[str, Any]) -> None:
    model = record_model("Product", "id", _record(prop))
    assert "weight" in model.model_fields
