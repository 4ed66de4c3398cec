"""Prompts of the synthesis team's stages (blueprint, data, tools, policy, review).

Every prompt states its answer's format completely and shows what the writer needs: the clock
(every stage that deals with dates sees the same "today"), the tables, the checks in words with
their absolute dates. A refused answer comes back on the next attempt as the conversation so
far: the prompt, the previous answer, and the error (:func:`chat`), for every stage alike.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from maestro.agents.codegen.blueprint import (
    Adjust,
    Blueprint,
    Entity,
    FieldType,
    Operation,
)
from maestro.agents.codegen.conditions import Target, check_words, record_params, resolve
from maestro.agents.codegen.data import DataLimits, vocabulary_fields
from maestro.agents.codegen.example import EXAMPLE
from maestro.agents.codegen.tools_code import tool_header

SYSTEM = "You are a careful software engineer. Answer with exactly what is asked, nothing else."

Messages = list[dict[str, str]]


def clock_line(clock: datetime) -> str:
    """The one way every prompt states the clock."""
    return (
        f"The system's clock: today is {clock.strftime('%A')} {clock.date().isoformat()}, and "
        f"the time is {clock.strftime('%H:%M')}. Every date is relative to it."
    )


def chat(lines: list[str], previous: str | None = None, feedback: str | None = None) -> Messages:
    """The request: the prompt, then (on a retry) the refused answer and why it was refused."""
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "\n".join(x for x in lines if x)},
    ]
    if feedback:
        if previous:
            messages.append({"role": "assistant", "content": previous})
        messages.append(
            {
                "role": "user",
                "content": f"Your previous answer was refused: {feedback}\nFix every problem "
                "named and answer again in full, in the same format.",
            }
        )
    return messages


# ----- blueprint --------------------------------------------------------------------------------

BLUEPRINT_LANGUAGE = """The language:
- entities: 3 to 6 tables. "key" is the key field (not listed in "fields"); keys are the
  table's "prefix" (1 to 4 capital letters, different for each table) and digits, such as PS1001.
  "catalog": true marks a small fixed list (services, branches, staff) of about 10 records;
  other tables grow to about 100 records.
- field types: str, int, float, bool, date, datetime, ref:<table> (a key of that table),
  enum:a|b|c. int:1..8 and float:0..500 give the range of values; date:-60d..0d and
  datetime:+1d..+30d give the window, relative to today, where values fall (units d, w, y:
  date:-85y..-18y for a birth date). A trailing ? makes a field nullable (ref:patients? for a
  slot no patient holds yet). Give every date and number its window or range.
- operations: 5 to 12, what the desk needs for the brief: at least one lookup that finds the
  customer by what they know (email, or name and date of birth), lists of their records, reads,
  and the changes customers ask for: records to create (bookings, returns, tickets), updates,
  cancellations. An operation's "table" is the table of the record it reads or changes, or the
  one it adds a record to. Names are snake_case (entity names CamelCase).
  - kind read: params hold the table's key; returns that record.
  - kind lookup: "by" lists the fields matched, params are exactly those fields (the fields'
    types, without range or window); returns the one record matching all of them.
  - kind list: "by" lists fields (often a ref such as customer_id); params are exactly those
    fields; returns every matching record.
  - kind update: params hold the table's key; changes records.
  - kind create: adds one record to "table" under a new key the tool makes (not a param).
  - A parameter named like a table's key (order_id) or ending with _<key> (new_slot_id) names a
    record of that table, and the tool refuses a key that names none. Parameter types: str,
    int, float, bool, date, datetime, enum:a|b. Every parameter is used by a check or an effect.
  - "requires": checks that must hold before the change; the tool refuses the call when one
    fails. "check" names a value: "$quantity" is a parameter; "order_id.status" a field of the
    record order_id names; "booking_id.sailing_id.departs_at" follows a reference; a bare field
    ("status") is the operation's own record (read and update). Tests: in, not_in (a list of
    values); equals (a value or "$param"); is_null, not_null (no value); at_least, at_most (a
    number or "$param"); within_last_days N (on or after today - N days), older_than_days N
    (before today - N days), at_least_days_ahead N (on or after today + N days; 0: not in the
    past), less_than_days_ahead N; at_least_hours_ahead H, less_than_hours_ahead H (datetimes,
    relative to now). A null value fails every test but is_null.
  - "sets": the effects, by target: "order_id.status"; "new.amount" (a field of the record a
    create adds: every field of it that is not nullable must be set); a bare field (the own
    record for update, the new one for create). Values: a constant, null, "$param",
    "$param.field" (a record's value before the call), "$today", "$now", {"add": n} or
    {"subtract": n} (n a number or "$param").
- rules: the policy the agent follows, one plain sentence each: the identity check, whose
  records the agent may touch, every limit the operations enforce.
- agent_rules: 2 to 4 rules the tools do NOT check, which the agent upholds by refusing:
  "operation", the "rule" sentence, and "refuse_when": checks (same language) that hold exactly
  when the agent must refuse. Choose rules the data can show (an amount above a limit, a date,
  a flag, a status), and that leave the call otherwise valid."""


def blueprint_messages(
    brief: str, industry: str | None, clock: datetime, previous: str | None, feedback: str | None
) -> Messages:
    lines = [
        f"Design the data and operations of a customer-service desk for this business: {brief}",
        f"Industry: {industry}." if industry else "",
        clock_line(clock),
        "",
        "Answer with one JSON object shaped like this complete example, which is for a ferry "
        "line; design yours for the business above, with its own tables and operations:",
        json.dumps(EXAMPLE, indent=1),
        "",
        BLUEPRINT_LANGUAGE,
    ]
    return chat(lines, previous, feedback)


# ----- data -------------------------------------------------------------------------------------


def _table_lines(bp: Blueprint, e: Entity) -> list[str]:
    kind = "catalog" if e.catalog else "main table"
    lines = [f'- {e.table} ({kind}; key {e.key}: "{e.prefix}" and digits, such as {e.prefix}1001):']
    for fname, ftype in e.field_types().items():
        lines.append(f"    {fname}: {ftype.describe(bp.clock)}")
    return lines


def _skeleton_value(bp: Blueprint, ftype: FieldType) -> Any:
    if ftype.nullable:
        return None
    if ftype.base == "enum":
        return ftype.choices[0]
    if ftype.base == "ref":
        return f"{bp.entity(str(ftype.ref)).prefix}1001"
    if ftype.base == "bool":
        return False
    if ftype.numeric:
        low = ftype.low if ftype.low is not None else 1
        return int(low) if ftype.base == "int" else float(low)
    window = ftype.window(bp.clock)
    day = window[0] if window else bp.clock.date()
    return day.isoformat() if ftype.base == "date" else f"{day.isoformat()}T09:00:00"


def data_skeleton(bp: Blueprint) -> dict[str, Any]:
    """The data answer's shape, one record per table with "..." for text: what the prompt shows."""
    records: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for e in bp.entities:
        rec: dict[str, Any] = {e.key: f"{e.prefix}1001"}
        for fname, ftype in e.field_types().items():
            rec[fname] = (
                "..." if ftype.base == "str" and not ftype.nullable else _skeleton_value(bp, ftype)
            )
        records[e.table] = [rec]
        values[e.table] = {f: ["...", "..."] for f in vocabulary_fields(e)}
    return {"records": records, "values": values}


def data_messages(
    bp: Blueprint, limits: DataLimits, previous: str | None, feedback: str | None
) -> Messages:
    tables = [line for e in bp.entities for line in _table_lines(bp, e)]
    checks = []
    for op in bp.operations:
        if op.requires:
            words = "; ".join(check_words(bp, op, c) for c in op.requires)
            checks.append(f"- {op.name}: {words}")
    rules = []
    for r in bp.agent_rules:
        op = bp.operation(r.operation)
        words = "; ".join(check_words(bp, op, c) for c in r.refuse_when)
        rules.append(f"- {r.operation}: {r.rule} (applies when {words})")
    fields = ", ".join(f"{e.table}.{f}" for e in bp.entities for f in vocabulary_fields(e))
    catalogs = [e.table for e in bp.entities if e.catalog]
    lines = [
        f"Write the seed data of {bp.name}: {bp.description}",
        clock_line(bp.clock),
        "",
        "Tables (X.f below is field f of the record that parameter X names):",
        *tables,
        "",
        f"Write {limits.seeds} to {limits.seeds + 4} seed records per main table, keys numbered "
        "from 1001 with each table's own prefix. The host then grows each main table to about "
        f"{limits.main_size} records: a grown record copies a seed's enum values, booleans and "
        "nulls, points its references at other records, moves its dates together inside their "
        'windows, and draws its text from "values".'
        + (
            f" Write each catalog ({', '.join(catalogs)}) whole, {limits.catalog_size} records: "
            "the host never grows a catalog, so each record's name, numbers and status must "
            "describe one real item."
            if catalogs
            else ""
        )
        + " So:",
        "- give seeds of every kind the operations need: some that meet each operation's checks "
        "(below) and some that do not, and some to which each agent rule applies;",
        "- a ref field holds the key of a seed record of that table (or null where the type "
        "allows); dates fall inside their windows, past events in the past and coming ones "
        "in the future;",
        "- where a value repeats one of the referenced record (a booking's fare paid is its "
        "sailing's fare), write it so in every seed: grown records then copy it the same way;",
        "- every text value is real-looking data: real people's names, real streets and towns, "
        "real product names, emails at real providers (gmail.com, outlook.com...). Never "
        'placeholders ("name 4", "Book title 6", "string", "example", "...", lorem ipsum) and '
        "never one value in every record.",
        "",
        "Checks the operations make:",
        *(checks or ["- (none)"]),
        "Agent rules:",
        *(rules or ["- (none)"]),
        "",
        f'"values": for each text field ({fields}), at least {limits.values} distinct realistic '
        "values of that kind (where one field holds a person's full name, give full names).",
        "",
        'Answer with one JSON object in this shape, every "..." replaced by real data and each '
        "list as long as asked:",
        json.dumps(data_skeleton(bp)),
    ]
    return chat(lines, previous, feedback)


# ----- tools ------------------------------------------------------------------------------------


def _touched_tables(bp: Blueprint, op: Operation) -> list[str]:
    tables = [op.table, *record_params(bp, op).values()]
    for text in [c.check for c in op.requires] + list(op.sets):
        subject = resolve(bp, op, text, effect=text in op.sets)
        if isinstance(subject, Target):
            tables += list(subject.tables)
    return list(dict.fromkeys(tables))


def _effect_words(bp: Blueprint, op: Operation, target: str, value: Any) -> str:
    subject = resolve(bp, op, target, effect=True)
    assert isinstance(subject, Target)
    name = subject.text
    if isinstance(value, Adjust):
        amount = value.amount
        shown = f"the parameter {amount[1:]}" if isinstance(amount, str) else repr(amount)
        return f"{name}: {'add' if value.sign > 0 else 'subtract'} {shown}"
    if value == "$today":
        return f"{name} = today's date, db.today(), written YYYY-MM-DD"
    if value == "$now":
        return f"{name} = db.now(), written YYYY-MM-DDTHH:MM:SS"
    if isinstance(value, str) and value.startswith("$"):
        if "." in value:
            return f"{name} = the value of {value[1:]} before this call"
        return f"{name} = the parameter {value[1:]}"
    return f"{name} = {value!r}"


def _contract_lines(bp: Blueprint, op: Operation) -> list[str]:
    e = bp.entity(op.table)
    named = record_params(bp, op)
    lines: list[str] = []
    if op.kind == "read":
        return [
            f"Return the {op.table} record whose key is {e.key} (db.require raises ToolError when it does not exist)."
        ]
    if op.kind == "lookup":
        match = ", ".join(f"{f}={f}" for f in op.by)
        return [
            f"Return the one {op.table} record whose fields {op.by} all equal the parameters of "
            f"the same names (db.find({op.table!r}, {match})); raise ToolError when none matches."
        ]
    if op.kind == "list":
        out = []
        for p, table in named.items():
            out.append(
                f"First raise ToolError when no {table} record has the key {p} (db.require)."
            )
        match = ", ".join(f"{f}={f}" for f in op.by)
        return [
            *out,
            f"Return the list of {op.table} records whose fields {op.by} equal the parameters (db.find({op.table!r}, {match})); it may be empty.",
        ]
    lines.append(
        "First check, before changing anything, and raise ToolError with a message saying which "
        "check failed at the first that does:"
    )
    for p, table in named.items():
        lines.append(f"- the {table} record {p} names exists (db.require raises ToolError);")
    for c in op.requires:
        lines.append(f"- {check_words(bp, op, c)};")
    lines.append("Then make these changes, and nothing else:")
    if op.kind == "create":
        lines.append(
            f'- make the new key with db.new_id("{op.table}", "{e.prefix}") and add the record with '
            f'db.insert("{op.table}", record): it holds {e.key} (the new key) and every field of '
            f"{op.table}; fields not set below are None;"
        )
    lines += [f"- {_effect_words(bp, op, t, v)};" for t, v in op.sets.items()]
    lines.append(
        "Return the new record (what db.insert returns, updated if an effect changed it)."
        if op.kind == "create"
        else f"Return the {op.table} record {e.key} names, as it is after the changes."
    )
    rules = bp.agent_rules_of(op.name)
    if rules:
        lines.append(
            "Do NOT check these rules; the agent upholds them, and the tool must accept such calls: "
            + " ".join(r.rule for r in rules)
        )
    return lines


def _param_words(bp: Blueprint, op: Operation, name: str) -> str:
    table = record_params(bp, op).get(name)
    if table is not None:
        return f"str, the key of a {table} record"
    return FieldType.parse(op.params[name]).describe(bp.clock)


def tool_messages(
    bp: Blueprint, op: Operation, previous: str | None, feedback: str | None
) -> Messages:
    tables = [line for t in _touched_tables(bp, op) for line in _table_lines(bp, bp.entity(t))]
    params = "; ".join(f"{p}: {_param_words(bp, op, p)}" for p in op.params) or "none"
    lines = [
        f"Write one Python function: the tool {op.name} of {bp.name} ({bp.description}).",
        clock_line(bp.clock),
        f"What it does: {op.description}",
        f"Parameters: {params}. A date parameter arrives as a string YYYY-MM-DD, a datetime "
        "one as YYYY-MM-DDTHH:MM:SS (their types IsoDate and IsoDateTime are str).",
        "Tables it uses (records are dicts; a date field holds a string YYYY-MM-DD, a datetime "
        "field YYYY-MM-DDTHH:MM:SS, a null field None):",
        *tables,
        "Paths: X.f is field f of the record whose key is the parameter X; X.r.f follows the "
        "reference field r to its record; new.f is a field of the record this tool adds. A null "
        "value fails every check except 'is null'. Compare dates as objects, such as "
        "date.fromisoformat(rec['delivered_on']) >= db.today() - timedelta(days=30), and "
        "datetimes with datetime.fromisoformat(...) against db.now(); round money to 2 decimals.",
        *_contract_lines(bp, op),
        "",
        "The database db: db.require(table, key) returns the record or raises ToolError; "
        "db.get(table, key) returns it or None; db.find(table, field=value, ...) returns the "
        "matching records (a list); db.scan(table) returns them all; db.insert(table, record) "
        "adds a record and returns it; db.update(table, key, field=value, ...) returns the "
        "changed record; db.new_id(table, prefix) returns the next free key; db.today() is the "
        "clock's date (a datetime.date) and db.now() its datetime: never use the computer's "
        "clock. date, datetime, timedelta and ToolError are already imported; write no imports "
        "and no other functions.",
        "Start exactly with:",
        tool_header(bp, op),
        "Answer with one ```python code block holding this one function.",
    ]
    return chat(lines, previous, feedback)


# ----- policy and review ------------------------------------------------------------------------


def policy_messages(bp: Blueprint, previous: str | None, feedback: str | None) -> Messages:
    rules = "\n".join(f"{i}. {r}" for i, r in enumerate(bp.policy_rules(), start=1))
    lines = [
        f"Write the policy an agent of {bp.name} ({bp.description}) must follow, in Markdown: a "
        "'# ' title line, one or two sentences on the agent's role, then a numbered list "
        "('1. ...') with one item per rule below, in plain words, keeping every number, limit "
        "and condition exactly.",
        clock_line(bp.clock),
        f"Rules:\n{rules}",
        "Answer with the Markdown only.",
    ]
    return chat(lines, previous, feedback)


def tool_line(bp: Blueprint, op: Operation) -> str:
    """One tool as the reviewer sees it: its signature, what it does, and what it checks."""
    line = f"{op.name}({', '.join(op.params)}) [{op.kind}]: {op.description}"
    if op.requires:
        line += " It refuses unless: " + "; ".join(check_words(bp, op, c) for c in op.requires)
    return line


def review_examples(tools: list[str], tasks: list[str] | None = None) -> list[str]:
    """The answer shapes the review prompt shows (each parses with ``parse_review``)."""
    tool = tools[0] if tools else "cancel_booking"
    task = (tasks or ["task_w001"])[0]
    return [
        json.dumps({"verdict": "ok", "stage": "", "tool": "", "tasks": [], "problem": ""}),
        json.dumps(
            {
                "verdict": "fix",
                "stage": "tools",
                "tool": tool,
                "tasks": [],
                "problem": f"{tool} accepts what rule 3 forbids.",
            }
        ),
        json.dumps(
            {
                "verdict": "fix",
                "stage": "blueprint",
                "tool": "",
                "tasks": [],
                "problem": "Missing operation: no tool finds a customer by email, which rule 1 needs.",
            }
        ),
        json.dumps(
            {
                "verdict": "fix",
                "stage": "tasks",
                "tool": "",
                "tasks": [task],
                "problem": f"{task} asks the agent for a change that rule 4 forbids.",
            }
        ),
    ]


def review_messages(
    bp: Blueprint,
    policy: str,
    tools: list[str],
    tasks: list[str],
    previous: str | None,
    feedback: str | None,
    task_ids: list[str] | None = None,
) -> Messages:
    names = [op.name for op in bp.operations]
    examples = "\n".join(review_examples(names, task_ids))
    lines = [
        f"Check that the policy, tools and tasks of {bp.name} ({bp.description}) agree with each "
        "other and that the tools let the agent do what the policy and tasks need.",
        clock_line(bp.clock),
        "Tables: " + "; ".join(f"{e.table} ({', '.join(e.fields)})" for e in bp.entities),
        f"Policy:\n{policy}",
        "Tools:\n" + "\n".join(f"- {t}" for t in tools),
        "Rules the agent upholds by refusing, which the tools deliberately accept (the refusal "
        "tasks test them; do not ask a tool to enforce them):\n"
        + ("\n".join(f"- {r.operation}: {r.rule}" for r in bp.agent_rules) or "- (none)"),
        "Tasks (what the customer says, the calls a correct agent makes, or the call it must "
        "refuse):\n" + "\n".join(f"- {t}" for t in tasks),
        'Answer with one JSON object: "verdict" is "ok" when they agree, or "fix" with "stage" '
        'naming what must change: "blueprint" (an operation is missing or wrong: say which), '
        '"tools" (one tool\'s code: name it in "tool"), "policy", "tasks" or "data"; "tool" is '
        'empty unless the stage is "tools"; "tasks" lists the ids of the tasks at fault when '
        'the stage is "tasks" (they are dropped and replaced; leave it empty to redo them '
        'all) and is empty otherwise; "problem" is one sentence. Examples:',
        examples,
    ]
    return chat(lines, previous, feedback)
