"""Prompts of the synthesis team's stages (blueprint, data, tools, policy, review).

Every prompt states its answer's format completely and shows what the writer needs: the clock
(every stage that deals with dates sees the same "today"), the tables, the checks in words with
their absolute dates. A refused answer comes back on the next attempt as the conversation so
far: the prompt, the previous answer, and the error (:func:`chat`), for every stage alike.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from typing import Any

from maestro.agents.codegen.blueprint import (
    Adjust,
    Blueprint,
    Computed,
    Entity,
    FieldType,
    Operation,
    Restore,
    same_rule,
)
from maestro.agents.codegen.conditions import (
    Target,
    check_words,
    condition_node,
    record_params,
    resolve,
    subject_of,
)
from maestro.agents.codegen.data import DataLimits, share_tolerance
from maestro.agents.codegen.example import EXAMPLE
from maestro.agents.codegen.generator import generation_order
from maestro.agents.codegen.tools_code import tool_header
from maestro.domains.expressions import Aggregate, ExpressionError, Path, parse, walk
from maestro.scoring.conformance import tasks_coverage

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
- entities: 3 to 8 tables. "key" is the key field (not listed in "fields"); keys are the
  table's "prefix" (1 to 4 capital letters, different for each table) and digits, such as PS1001.
  "catalog": true marks a small fixed list (services, branches, plans, car classes) of about 10
  records; other tables hold about 100 records. "shares" (optional) gives the share of each
  value an enum field should hold, in percent: {"cabin": {"economy": 80, "business": 20}}.
  "key_known": false marks a table whose keys no customer knows (a sailing, a car class, a
  branch, a plan, a charge's internal id; a catalog's keys are unknown by default): customers
  name its records by what they know (a route and date, a city, a merchant and amount), so
  give it a list or lookup by those fields; the agent finds the key with it.
- field types: str, int, float, bool, date, datetime, ref:<table> (a key of that table),
  enum:a|b|c. int:1..8 and float:0..500 give the range of values; date:-60d..0d and
  datetime:+1d..+30d give the window, relative to today, where values fall (units d, w, y:
  date:-85y..-18y for a birth date). A trailing ? makes a field nullable (ref:patients? for a
  slot no patient holds yet). Give every date and number its window or range.
- expressions (used by checks, effects, quotes and laws): paths ($quantity is a parameter;
  order_id.status a field of the record order_id names; booking_id.sailing_id.departs_at
  follows a reference; a bare field is the operation's own record); constants ('text', 12,
  9.5, true, false, null); today and now; + - * / and round(x, 2), min(a, b), max(a, b),
  abs(x), if(condition, a, b) (a when the condition holds, else b), coalesce(x, 0) (x, or 0
  when x is null); dates: pickup_at + days(3), now - hours(2), days_between(a, b), hours_between(a, b),
  date(datetime); comparisons = != < <= > >= and x in ['a', 'b'], x not in [...], x is null,
  x is not null; and, or, not; count(<table> where <condition>) and sum(<table>.<field>
  where <condition>) over the records of a table (inside the where, a bare name is a field of
  the counted record: count(rentals where customer_id = $customer_id and status = 'active')).
  A null makes a comparison neither true nor false: a check on it fails.
- operations: 8 to 25, every operation such a desk needs for the brief: a lookup that finds the
  customer by what they know (email, or name and date of birth), lists and reads of their
  records, status lookups, searches by what a customer knows (by city, by date, by name),
  quotes of what a change would cost, and every change customers ask for: records to create
  (bookings, returns, claims), updates, cancellations, and where money changes hands the
  payments, fees and refunds. Names are snake_case (entity names CamelCase).
  - kind read: params hold the table's key; returns that record.
  - kind lookup: "by" lists the fields matched, params are exactly those fields (the fields'
    types, without range or window); returns the one record matching all of them.
  - kind list: "by" lists fields (a ref such as customer_id, or what a customer knows such as
    a city); params are exactly those fields; returns every matching record.
  - kind quote: params hold the table's key (and what the quote depends on); "returns" names
    each value it computes (at most 8), as an expression ({"fee": "round(rental_id.daily_rate * $days,
    2)"}); it changes nothing.
  - kind update: params hold the table's key; changes records.
  - kind create: adds a record to "table" under a new key the tool makes: the table's key is
    never one of its params (a replacement card names the old one lost_card_id, not card_id);
    "adds" names more records the same call adds ({"charge": "damage_charges"}: its fields are
    set as charge.amount, ...).
  - A parameter named like a table's key (order_id) or ending with _<key> (new_slot_id) names a
    record of that table, and the tool refuses a key that names none. Parameter types: str,
    int, float, bool, date, datetime, enum:a|b. Every parameter is used by a check or an effect.
  - "requires": the checks that must hold before the call; the tool refuses the call when one
    fails. Each is {"check": "<expression>"}, and with "when": "<expression>" it applies only
    when that holds ({"check": "$refills = 0", "when": "prescription_id.schedule = 'II'"}).
    Compare parameters and fields with each other (mileage_in at least the rental's mileage
    out, a new flight on the same route), count what must not exist yet (no refill already
    pending), compute limits (a refund at most what was paid).
  - "then" (update and create, optional): the other writes a customer brings in the same call
    after this one (cancel a booking, then book another sailing; change a flight, then pay the
    difference); a task of two writes is one of these pairs.
  - "sets": the effects, by target: "order_id.status"; "new.amount" (a field of the record a
    create adds: every field of it that is not nullable must be set); a bare field (the own
    record for update, the new one for create). Values: a constant, null, "$param",
    "$param.field" (a record's value before the call), "$today", "$now", {"add": n} or
    {"subtract": n} (n a number, "$param" or an expression), {"expr": "<expression>"} (a fee
    of rate times days, computed on the records before the call; a number, date or text, never
    an enum field's value: an enum takes a constant, so a value that depends on the record
    is one operation per value), {"restore": "<path>"} (put
    back a value a record kept, for a cancellation: "upgrade_id.previous_cabin").
- laws: what every record of the world keeps, 4 to 25 of them, each {"table", "holds":
  "<expression over one record>", "when" (optional), "says": "<the law in a sentence>"}. In a
  law a bare field is the record's own, self is the record (count(returns where rental_id =
  self) <= 1), and references are followed (returned_at >= rental_id.pickup_at). Write the laws
  that tie records together: dates in order, owners that match (an upgrade's passenger is its
  booking's), amounts within what the rules allow, at most one of something, statuses that
  agree with dates; totals that agree with what they total: every stored field that sums or
  counts other records gets its law, each as of its own date (a balance is its statement plus
  the charges and less the payments posted since; the statement balance is what was owed on the
  statement date, with every charge posted in its cycle: sum(... where posted_on <= statement_date));
  a record's state that agrees with its
  history (a car's mileage at least its last return's); and the records an event must leave
  (a late return has its late charge: count(...) = 1 when returned late). Think as an auditor
  of such a business: every relation an expert would check is a law. The data and every
  operation must keep them: give each operation the checks that keep them.
- rules: the policy the agent follows, one plain sentence each: the identity check, whose
  records the agent may touch, every limit and fee the operations enforce.
- agent_rules: 2 to 4 rules the tools do NOT check, which the agent upholds by refusing:
  "operation", the "rule" sentence, and "refuse_when": checks (the same expressions) that hold
  exactly when the agent must refuse. Choose rules the data can show (an amount above a limit, a
  date, a flag, a status), and that leave the call otherwise valid. Do not repeat an agent
  rule in "rules". A rule never refuses outright a value the operation's own check names as
  allowed (refusing rentals that are 'out' while the check is status in ['reserved', 'out']):
  take that value out of the check instead."""


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


#: What the sandbox's static check refuses in the model's code, said where code is asked for.
STATIC_RULES = (
    "The host's static check refuses: .format() on anything but a string literal (write "
    "f-strings, or 'text {}'.format(x)), format fields that read attributes or items, names and "
    "texts holding '__', eval, exec, compile, open, setattr, globals, vars, dir and other "
    "introspection, class keywords such as metaclass, and async code."
)


def law_lines(bp: Blueprint) -> list[str]:
    """The world's laws as the prompts show them: the sentence and the expression."""
    out = []
    for _i, law in enumerate(bp.laws, start=1):
        when = f" (when {law.when})" if law.when else ""
        out.append(f"- {law.table}: {law.says} [{law.holds}{when}]")
    return out


def data_messages(
    bp: Blueprint, limits: DataLimits, previous: str | None, feedback: str | None
) -> Messages:
    order = generation_order(bp)
    tables = []
    for e in order:
        tables += _table_lines(bp, e)
        size = limits.catalog_size if e.catalog else limits.main_size
        for fname, shares in e.shares.items():
            shown = ", ".join(f"{v} {p:g}%" for v, p in shares.items())
            tables.append(
                f"    share of {fname}: {shown} (each within "
                f"{share_tolerance(size):.0f} points of the records made)"
            )
    checks = []
    for op in bp.operations:
        if op.requires and op.tool_kind == "write":
            words = "; ".join(check_words(bp, op, c) for c in op.requires)
            checks.append(f"- {op.name}: {words}")
    rules = []
    for r in bp.agent_rules:
        op = bp.operation(r.operation)
        words = "; ".join(check_words(bp, op, c) for c in r.refuse_when)
        rules.append(f"- {r.operation}: {r.rule} (applies when {words})")
    catalogs = [e.table for e in order if e.catalog]
    mains = [e.table for e in order if not e.catalog]
    lines = [
        f"Write the program that makes the database of {bp.name}: {bp.description}",
        clock_line(bp.clock),
        "",
        "Tables, in the order the program makes them (a table after the tables it refers to; "
        "X.f is field f of the record X names):",
        *tables,
        "",
        "Laws every record must keep (the host checks each on every record and refuses the "
        "data with the records that break it):",
        *(law_lines(bp) or ["- (none)"]),
        "",
        "Checks the operations make, and the agent rules (the tasks need records that meet "
        f"them: at least {limits.coverage} records meeting each operation's checks, at least one "
        "to which each agent rule applies, and others that do not):",
        *(checks or ["- (none)"]),
        *rules,
        "",
        "Write one Python function per table, make_<table>(db, rng, n), returning a list of at "
        "most n records, each a dict of every field of the table except the key (the host "
        "numbers the keys: the first record is <prefix>1001, the second <prefix>1002, in the "
        f"list's order). n is {limits.catalog_size} for a catalog"
        + (f" ({', '.join(catalogs)})" if catalogs else "")
        + f" and {limits.main_size} for a main table ({', '.join(mains)}): write each catalog "
        "whole, every item a real one with its own name, numbers and status; make about n "
        "records of a main table, fewer only where a table holds one record per parent (a "
        f"return per returned rental), never fewer than {limits.least}. Optionally, "
        "finish_<table>(db, rng, record) returns a dict of changes to one record once every "
        "table is made (a count of seats left from the bookings made), or None.",
        "- Build each record from the records it refers to, so they agree: a return is dated "
        "after its rental's pickup and shows its car's mileage and more; an upgrade is for its "
        "booking's own passenger; a refill is at its prescription's branch. Statuses agree with "
        "the dates around today (a past event is done or cancelled, a coming one booked), "
        "amounts with the rules (a fee the policy states is that fee), and every value with its "
        "field's range or window.",
        "- Beyond the laws, keep every relation an auditor of such a business would check: "
        "totals and balances equal what they total, each as of its own date (use finish_<table> "
        "to sum the records made after it: a statement balance counts every charge and payment "
        "up to its statement date, a balance those since); never draw a total at random; every event leaves the records the rules say it leaves (a late or refuelled "
        "return has its charge, at the stated rate); quantities are physically possible (a "
        "one-way rental's miles at least road_miles between its branches, miles and fuel used "
        "that fit the days); the free text of a record tells one story with its fields (a "
        "dispute is about the charge it disputes, directions fit the drug's form).",
        "- Real-looking data: real people's names, real cities with their own state, ZIP code "
        "and phone area code, emails made from the names at real providers. Never placeholders "
        '("name 4", "string", "example", "...", lorem ipsum) and never one value in most '
        "records.",
        "- db is the database made so far (the tables before this one): db.get(table, key), "
        "db.find(table, field=value, ...) (a list), db.scan(table) (every record, a list), "
        "db.count(table), db.today(), db.now(). rng is a random.Random seeded for this table: "
        "use it for every random choice, so the same seed makes the same world.",
        "- Already imported for you (write no imports): date, datetime, timedelta, Random, and "
        "from maestro.domains.worldgen: person(rng, country='US') -> {first_name, last_name, "
        "full_name, email}; place(rng, country='US', state=None) -> {city, state, state_name, "
        "zip, area_code, street, address, country} (a real city; country='GB' for the UK, with "
        "postcode and dialling_code); phone(rng, place) -> a number with that place's area "
        "code; road_miles(place_a, place_b) -> about how many miles one drives between two "
        "places (place dicts or 'City, ST'; None where no road joins them); "
        "street_address(rng, country='US'); email_for(rng, first, last); "
        "birth_date(rng, today, youngest=18, oldest=85) -> 'YYYY-MM-DD'; postcode(rng, "
        "district); fake(rng, country='US') -> a seeded Faker (fake(rng).company(), "
        ".license_plate(), ...). Dates are written 'YYYY-MM-DD', datetimes "
        "'YYYY-MM-DDTHH:MM:SS' (d.isoformat(), dt.isoformat(timespec='seconds')).",
        "- Only the functions and constants at the top level; no imports, no other statements; "
        "a constant is a literal (numbers, texts, lists and dicts of them): compute dates "
        "inside the functions. "
        "The program runs in a sandbox: no files, no network, no clock but db.today() and "
        "db.now(); each table must be made within a minute. " + STATIC_RULES,
        "",
        "Answer with one ```python code block holding the program.",
    ]
    return chat(lines, previous, feedback)


# ----- tools ------------------------------------------------------------------------------------


def _touched_tables(bp: Blueprint, op: Operation) -> list[str]:
    tables = [op.table, *record_params(bp, op).values(), *op.adds.values()]
    nodes = [condition_node(bp, op, c) for c in op.requires]
    nodes += [parse(c.when) for c in op.requires if c.when]
    nodes += [parse(text) for text in op.returns.values()]
    nodes += [parse(v.expr) for v in op.sets.values() if isinstance(v, Computed)]
    nodes += [
        parse(v.amount)
        for v in op.sets.values()
        if isinstance(v, Adjust) and isinstance(v.amount, str)
    ]
    nodes += [parse(v.restore) for v in op.sets.values() if isinstance(v, Restore)]
    for node in nodes:
        for n in walk(node):
            if isinstance(n, Aggregate):
                tables.append(n.table)
            elif isinstance(n, Path):
                try:
                    subject = subject_of(bp, op, n)
                except ExpressionError:
                    continue
                if isinstance(subject, Target):
                    tables += list(subject.tables)
    for text in op.sets:
        subject = resolve(bp, op, text, effect=True)
        if isinstance(subject, Target):
            tables += list(subject.tables)
    return list(dict.fromkeys(tables))


def _effect_words(bp: Blueprint, op: Operation, target: str, value: Any) -> str:
    subject = resolve(bp, op, target, effect=True)
    assert isinstance(subject, Target)
    name = subject.text
    if isinstance(value, Adjust):
        amount = value.amount
        shown = repr(amount)
        if isinstance(amount, str):
            shown = f"the parameter {amount[1:]}" if amount[1:] in op.params else amount
        return f"{name}: {'add' if value.sign > 0 else 'subtract'} {shown}"
    if isinstance(value, Computed):
        return f"{name} = {value.expr} (computed on the records as they are before the call)"
    if isinstance(value, Restore):
        return f"{name} = the value of {value.restore} before this call (put back)"
    if value == "$today":
        return f"{name} = today's date, db.today(), written YYYY-MM-DD"
    if value == "$now":
        return f"{name} = db.now(), written YYYY-MM-DDTHH:MM:SS"
    if isinstance(value, str) and value.startswith("$"):
        if "." in value:
            return f"{name} = the value of {value[1:]} before this call"
        return f"{name} = the parameter {value[1:]}"
    return f"{name} = {value!r}"


EXPRESSIONS_MEAN = (
    "Expressions mean exactly what they say: count(T where c) counts the records of T for which "
    "c holds (a bare name inside is a field of the counted record), round(x, 2) rounds half up, "
    "days_between(a, b) is the number of days from a's date to b's, hours_between(a, b) the "
    "hours from a to b, days(n) and hours(n) move a date, if(c, a, b) is a when c holds and b "
    "otherwise, coalesce(x, y) is x unless it is null, a null makes a comparison fail."
)


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
    if op.kind == "quote":
        lines.append(
            "Then change nothing and return a dict with exactly these values, each computed as "
            "written on the records as they are:"
        )
        lines += [f"- {name}: {text}" for name, text in op.returns.items()]
        return [*lines, EXPRESSIONS_MEAN]
    lines.append("Then make these changes, and nothing else:")
    if op.kind == "create":
        lines.append(
            f'- make the new key with db.new_id("{op.table}", "{e.prefix}") and add the record with '
            f'db.insert("{op.table}", record): it holds {e.key} (the new key) and every field of '
            f"{op.table}; fields not set below are None (it is new below);"
        )
        for name, table in op.adds.items():
            other = bp.entity(table)
            lines.append(
                f"- add one more record, {name} below, to {table}: its key from "
                f'db.new_id("{table}", "{other.prefix}"), every field of {table} (None when not '
                "set below);"
            )
    lines += [f"- {_effect_words(bp, op, t, v)};" for t, v in op.sets.items()]
    lines.append(
        "Return the new record (what db.insert returns, updated if an effect changed it)."
        if op.kind == "create"
        else f"Return the {op.table} record {e.key} names, as it is after the changes."
    )
    lines.append(EXPRESSIONS_MEAN)
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
        "matching records (a list; text matches with case and spacing ignored); db.scan(table) "
        "returns them all; db.insert(table, record) "
        "adds a record and returns it; db.update(table, key, field=value, ...) returns the "
        "changed record; db.new_id(table, prefix) returns the next free key; db.today() is the "
        "clock's date (a datetime.date) and db.now() its datetime: never use the computer's "
        "clock. date, datetime, timedelta and ToolError are already imported; write no imports "
        "and no other functions. " + STATIC_RULES,
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
        "and condition exactly, each rule stated once (no item repeats another's rule).",
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


def coverage_lines(bp: Blueprint, tasks: list[Any], rejected: list[str]) -> list[str]:
    """What the reviewer reads of the tasks' coverage: the operations in some task's gold and
    those in none, the tasks by kind, the agent rules with a refusal and without, and why
    tasks were not made (the stage's rejections, counted by reason)."""
    cov = tasks_coverage([op.name for op in bp.operations], tasks)
    refused = list(cov["refusals_by_rule"])
    rules = [
        r.rule
        for r in bp.agent_rules
        if any(r.rule.casefold() in x.casefold() or same_rule(r.rule, x) for x in refused)
    ]
    missing = [r.rule for r in bp.agent_rules if r.rule not in rules]
    reasons = rejections_by_reason(rejected)
    why = dict(
        str(line).split(": ", 2)[1:]
        for line in rejected
        if str(line).startswith("not_covered: ") and str(line).count(": ") >= 2
    )
    never = [
        f"{name} ({why[name]})" if name in why else name for name in cov["tools_never_in_gold"]
    ]
    return [
        f"operations in some task's gold: {cov['tools_in_gold']} of {cov['tools']}; in none: "
        + (", ".join(never) or "(none)"),
        "tasks by kind: " + ", ".join(f"{k} {v}" for k, v in cov["task_kinds"].items()),
        f"agent rules with a refusal task: {len(rules)} of {len(bp.agent_rules)}; without: "
        + ("; ".join(missing) or "(none)"),
        "tasks not made, by reason: "
        + (", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "(none)"),
    ]


def rejections_by_reason(rejected: list[str]) -> Counter[str]:
    """Rejected-task lines (``<reason>: <detail>``) counted by their reason."""
    return Counter(str(line).split(":", 1)[0] for line in rejected)


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
    world: dict[str, list[dict[str, Any]]] | None = None,
    laws: list[str] | None = None,
    coverage: list[str] | None = None,
) -> Messages:
    names = [op.name for op in bp.operations]
    examples = "\n".join(review_examples(names, task_ids))
    data_lines: list[str] = []
    for table, rows in (world or {}).items():
        data_lines.append(f"{table} ({len(rows)} shown):")
        data_lines += [json.dumps(r, sort_keys=True) for r in rows]
    lines = [
        f"Check that the policy, tools, tasks and data of {bp.name} ({bp.description}) agree "
        "with each other and with the real world, and that the tools let the agent do what the "
        "policy and tasks need.",
        clock_line(bp.clock),
        "Tables: " + "; ".join(f"{e.table} ({', '.join(e.fields)})" for e in bp.entities),
        f"Policy:\n{policy}",
        "Tools:\n" + "\n".join(f"- {t}" for t in tools),
        "Rules the agent upholds by refusing, which the tools deliberately accept (the refusal "
        "tasks test them; do not ask a tool to enforce them):\n"
        + ("\n".join(f"- {r.operation}: {r.rule}" for r in bp.agent_rules) or "- (none)"),
        "The world's laws, as the host checked them on every record:\n"
        + ("\n".join(f"- {line}" for line in (laws or [])) or "- (none declared)"),
        "A sample of the data (records of each table with the records they refer to):\n"
        + ("\n".join(data_lines) or "(none)"),
        "Tasks (what the customer says, the calls a correct agent makes, or the call it must "
        "refuse):\n" + "\n".join(f"- {t}" for t in tasks),
        "What the tasks cover:\n" + ("\n".join(f"- {c}" for c in (coverage or [])) or "- (none)"),
        'Answer with one JSON object: "verdict" is "ok" when they agree, or "fix" with "stage" '
        'naming what must change: "blueprint" (an operation or a law is missing or wrong: say '
        'which), "tools" (one tool\'s code: name it in "tool"), "policy", "tasks" or "data" '
        '(records a person who runs such a business would call wrong: quote one); "tool" is '
        'empty unless the stage is "tools"; "tasks" lists the ids of the tasks at fault when '
        'the stage is "tasks" (they are dropped and replaced; leave it empty to redo them '
        "all; flag a task whose calls chain what no customer brings in one call, such as "
        'extending a rental and then cancelling it) and is empty otherwise; "problem" is one sentence. Examples:',
        examples,
    ]
    return chat(lines, previous, feedback)
