"""What the synthesis stages get back from the model, and the JSON Schemas they send for it.

Parsing accepts code fences and prose around the JSON or code, and nothing else. Every JSON
stage sends ``response_format`` built from the same pydantic model its parser validates with
(:func:`response_format`), trimmed to what llama.cpp's JSON-schema-to-grammar converter, vLLM
and OpenAI-compatible servers accept: objects, arrays, enums, ``anyOf``, ``$defs``/``$ref``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from maestro.agents.client import json_schema_format
from maestro.agents.codegen.blueprint import same_rule
from maestro.agents.structured import AnswerRefused, json_object

#: Schema keywords kept; everything else (titles, defaults, patterns, lengths) is dropped.
SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$defs",
        "$ref",
        "minItems",
        "maxItems",
    }
)


class ParseError(ValueError):
    """The model's answer holds no usable JSON or code; the message says what was wrong."""


_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The first JSON object in the answer: inside a code fence, or the outermost braces."""
    try:
        return json_object(text)
    except AnswerRefused as exc:
        raise ParseError(f"the answer cannot be read: {exc}") from None


def extract_code(text: str) -> str:
    """The Python in the answer: the first fenced block, or the whole answer when unfenced."""
    m = _FENCE.search(text)
    if m:
        return m.group(1).strip() + "\n"
    if "```" in text:  # an unclosed fence: the answer was cut off
        raise ParseError("the code block is not closed (the answer was cut off?)")
    return text.strip() + "\n"


def unfence(text: str) -> str:
    """A Markdown answer without the code fence a model may put around it."""
    stripped = text.strip()
    if stripped.startswith("```"):
        try:
            return extract_code(stripped)
        except ParseError:
            return stripped.strip("`").strip() + "\n"
    return stripped + "\n"


def clean_schema(schema: Any) -> Any:
    """A pydantic JSON Schema with only the keywords every structured-output server accepts."""
    if isinstance(schema, list):
        return [clean_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in SCHEMA_KEYWORDS:
            continue
        if key in ("properties", "$defs"):
            out[key] = {name: clean_schema(sub) for name, sub in value.items()}
        else:
            out[key] = clean_schema(value)
    return out


def response_format(name: str, model: type[BaseModel]) -> dict[str, Any]:
    """The ``response_format`` of a JSON stage: its answer model's schema, strict."""
    return json_schema_format(name, clean_schema(model.model_json_schema()), strict=True)


# ----- the reviewer's answer --------------------------------------------------------------------

ReviewStage = Literal["blueprint", "data", "tools", "policy", "tasks"]


class ReviewAnswer(BaseModel):
    """The reviewer's verdict; ``stage``, ``tool`` and ``problem`` may be empty or null when
    the verdict is ``ok``, ``tool`` when the stage is not ``tools``, and ``tasks`` (the ids of
    the tasks at fault) when the stage is not ``tasks``."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["ok", "fix"]
    stage: ReviewStage | Literal[""] | None = None
    tool: str | None = None
    problem: str | None = None
    tasks: list[str] | None = None


@dataclass(frozen=True)
class ReviewFinding:
    """A "fix" verdict: the stage to send back to (``tools:<name>`` for a tool), the problem,
    and for tasks the ids of those at fault (empty: all of them)."""

    owner: str
    problem: str
    tasks: tuple[str, ...] = ()


def parse_review(
    text: str, tools: list[str], tasks: list[str] | None = None
) -> ReviewFinding | None:
    """None when the critic approves; else what to send back where. Task ids may be given in
    full or by their ending (``w004``). :class:`ParseError` when the verdict is not usable."""
    data = extract_json(text)
    try:
        answer = ReviewAnswer.model_validate(data)
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors()
        )
        raise ParseError(f'the review must be {{"verdict": "ok" | "fix", ...}}: {where}') from None
    if answer.verdict == "ok":
        return None
    problem = (answer.problem or "").strip()
    if not answer.stage or not problem:
        raise ParseError(
            'a "fix" verdict needs "stage" (blueprint, data, tools, policy or tasks) and '
            '"problem" (one sentence)'
        )
    if answer.stage == "tools":
        if answer.tool not in tools:
            raise ParseError(f'a tools fix must name one of the tools {tools} in "tool"')
        return ReviewFinding(f"tools:{answer.tool}", problem)
    named: tuple[str, ...] = ()
    if answer.stage == "tasks" and answer.tasks:
        named = tuple(_task_ids(answer.tasks, tasks or []))
    return ReviewFinding(str(answer.stage), problem, named)


def _task_ids(given: list[str], ids: list[str]) -> list[str]:
    """The full ids of the tasks named (each exactly, or by the one id it ends)."""
    out, unknown = [], []
    for name in given:
        found = [i for i in ids if i == name.strip()] or [
            i for i in ids if name.strip() and i.endswith("_" + name.strip())
        ]
        if len(found) == 1:
            out.append(found[0])
        else:
            unknown.append(name)
    if unknown:
        raise ParseError(f'"tasks" names no task (or more than one): {unknown}; they are {ids}')
    return list(dict.fromkeys(out))


def policy_problem(policy: str, n_rules: int) -> str | None:
    """Why a policy.md is not acceptable, or None."""
    lines = [line.strip() for line in policy.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("# "):
        return "the policy must start with a '# ' title line"
    items = [line for line in lines if re.match(r"^\d+\.\s", line)]
    if len(items) < max(1, n_rules):
        return f"the policy has {len(items)} numbered item(s); it needs one per rule ({n_rules})"
    for i, a in enumerate(items):
        for b in items[i + 1 :]:
            if same_rule(a.split(".", 1)[1], b.split(".", 1)[1]):
                return f"the policy states one rule twice: {a!r} and {b!r}; state each rule once"
    return None
