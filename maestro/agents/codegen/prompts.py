"""Prompts of the synthesis team, and strict-but-tolerant parsing of what comes back.

Prompts are short and concrete (the embedded 0.5B model follows an example better than a
specification); parsing accepts code fences and prose around the JSON or code, and nothing else.
"""

from __future__ import annotations

import json
import re
from typing import Any

from maestro.agents.codegen.blueprint import Blueprint, Operation

SYSTEM = "You are a careful software engineer. Answer with exactly what is asked, nothing else."

#: The blueprint's shape with placeholders: a small model given a concrete example copies it
#: (measured: the embedded model returned the example's tables for all three default briefs).
BLUEPRINT_SKELETON = """{"domain_id": "<snake_case id>", "name": "<name>", "description": "<one sentence>",
 "entities": [{"name": "<CamelCase>", "table": "<plural snake_case>", "key": "<singular>_id",
   "prefix": "<one capital letter>",
   "fields": {"<field>": "str | int | float | bool | ref:<table> | enum:<a>|<b>"}}],
 "operations": [{"name": "<verb_noun>", "kind": "read | write", "table": "<table>",
   "description": "<what it does>", "params": {"<singular>_id": "str"},
   "requires": {"<enum field>": ["<allowed value>"]}, "sets": {"<enum field>": "<new value>"}}],
 "rules": ["<policy rule>"]}"""


class ParseError(ValueError):
    """The model's answer holds no usable JSON or code; the message says what was wrong."""


_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The first JSON object in the answer: inside a code fence, or the outermost braces."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    errors = []
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError as exc:
            errors.append(f"{exc.msg} at line {exc.lineno} column {exc.colno}")
    if not candidates:
        raise ParseError("the answer holds no JSON object")
    raise ParseError(f"the answer's JSON does not parse: {errors[0]}")


def extract_code(text: str) -> str:
    """The Python in the answer: the first fenced block, or the whole answer when unfenced."""
    m = _FENCE.search(text)
    if m:
        return m.group(1).strip() + "\n"
    if "```" in text:  # an unclosed fence: the answer was cut off
        raise ParseError("the code block is not closed (the answer was cut off?)")
    return text.strip() + "\n"


def blueprint_messages(
    brief: str, industry: str | None, feedback: str | None
) -> list[dict[str, str]]:
    lines = [
        f"Design the data and operations of a customer-service system for: {brief}",
        f"Industry: {industry}." if industry else "",
        "Answer with one JSON object in this shape (replace every <...>):",
        BLUEPRINT_SKELETON,
        "Use 2 or 3 entities and 3 or 4 operations. Each operation's params must include its "
        "table's key. A write operation requires and sets values of an enum field.",
    ]
    if feedback:
        lines.append(f"Your previous answer was rejected: {feedback}. Fix it.")
    return _chat(lines)


def data_messages(bp: Blueprint, per_table: int, feedback: str | None) -> list[dict[str, str]]:
    tables = {e.table: {e.key: f"{e.prefix}1", **e.fields} for e in bp.entities}
    lines = [
        f"Write realistic sample records for the {bp.name} domain: {bp.description}",
        f"Give {per_table} records per table. Field types: {json.dumps(tables)}",
        'Answer with one JSON object: {"<table>": [<record>, ...], ...}. Keys look like '
        '"C1001"; a ref:<table> field holds a key of that table; an enum field holds one of '
        "its values.",
    ]
    if feedback:
        lines.append(f"Your previous answer was rejected: {feedback}. Fix it.")
    return _chat(lines)


def tool_header(bp: Blueprint, op: Operation) -> str:
    """The exact first lines the model must write for one tool."""
    params = ", ".join(f"{p}: {t}" for p, t in op.params.items())
    ret = "dict"
    return f'@tool("{op.kind}")\ndef {op.name}(db: Database, {params}) -> {ret}:'


def tool_messages(
    bp: Blueprint, op: Operation, previous: str | None, feedback: str | None
) -> list[dict[str, str]]:
    e = bp.entity(op.table)
    lines = [
        f"Write one Python function for the {bp.name} domain. Table {op.table!r} holds "
        f"records keyed by {e.key!r} with fields {json.dumps(e.fields)}.",
        f"It must: {op.description}",
        "Available: db.require(table, key) returns the record dict or raises ToolError; "
        "db.update(table, key, field=value) returns the new record; db.find(table, field=value) "
        "returns a list; raise ToolError('reason') to refuse. No imports.",
    ]
    for fname, allowed in op.requires.items():
        lines.append(f"Refuse with ToolError unless {fname} is one of {allowed}.")
    for fname, value in op.sets.items():
        if isinstance(value, str) and value.startswith("$"):
            source = f"the parameter {value[1:]}"
        else:
            source = repr(value)
        lines.append(f"Then set {fname} to {source}.")
    lines.append("Return the record. Start exactly with:\n" + tool_header(bp, op))
    lines.append("Answer with one ```python code block.")
    if previous and feedback:
        lines.append(f"Your previous code:\n```python\n{previous}```\nfailed: {feedback}\nFix it.")
    return _chat(lines)


def policy_messages(bp: Blueprint, feedback: str | None) -> list[dict[str, str]]:
    rules = "\n".join(f"- {r}" for r in bp.rules) or "- Verify the customer's identity first."
    lines = [
        f"Write the policy an agent of the {bp.name} domain must follow, in Markdown: a "
        "'# ' title line, one sentence on the agent's role, then a numbered list with one "
        "item per rule below, in plain words.",
        f"Rules:\n{rules}",
    ]
    if feedback:
        lines.append(f"Your previous answer was rejected: {feedback}. Fix it.")
    return _chat(lines)


def review_messages(policy: str, tools: list[str], tasks: list[str]) -> list[dict[str, str]]:
    lines = [
        "Check that this domain's policy, tools and tasks agree with each other.",
        f"Policy:\n{policy}",
        "Tools:\n" + "\n".join(f"- {t}" for t in tools),
        "Tasks:\n" + "\n".join(f"- {t}" for t in tasks),
        'Answer with JSON: {"verdict": "ok"} when they agree, or {"verdict": "fix", '
        '"stage": "policy" | "tools" | "tasks", "tool": "<tool name or empty>", '
        '"problem": "<one sentence>"}.',
    ]
    return _chat(lines)


def _chat(lines: list[str]) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "\n".join(x for x in lines if x)},
    ]
