"""The blueprint: what a synthesized domain holds, as a validated structure the LLM writes.

A blueprint names tables (entities), the operations a customer-service desk performs on them,
the policy rules, and the rules only the agent upholds (``agent_rules``). The LLM writes it as
one JSON object (the prompt shows a whole example); the host adds the clock. Every operation is
a contract the LLM-written tool code must meet, checked by unit tests derived from it
(``checks.py``); the paths and tests the operations use are defined in ``conditions.py``.

Field types: ``str``, ``int``, ``float``, ``bool``, ``date``, ``datetime``, ``ref:<table>``,
``enum:a|b|c``; numbers may carry a range (``int:1..8``), dates a window relative to the clock
(``date:-60d..0d``, ``datetime:+1d..+30d``, units d, w, y); a trailing ``?`` makes a field
nullable (``ref:patients?``: an open slot has no patient).

Operation kinds: ``read`` (one record by key), ``lookup`` (one record by natural identifiers:
``by`` fields, such as email or name + date of birth), ``list`` (records whose ``by`` fields
equal the parameters), ``update`` (change records) and ``create`` (add a record with a key the
tool generates, and maybe change others).
"""

from __future__ import annotations

import keyword
import re
from datetime import date, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from maestro.domains.laws import LawSpec
from maestro.domains.sandbox.schema import usable_field_name

IDENT = r"^[a-z][a-z0-9_]{0,39}$"
SCALARS = ("str", "int", "float", "bool")
Scalar = str | int | float | bool
#: Names a parameter may not take: the database, the new record, the clock.
RESERVED = frozenset({"db", "new", "today", "now"})
_ENUM_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_ -]{0,39}$")
_NUMBER = r"[+-]?\d+(?:\.\d+)?"
_RANGE = re.compile(rf"^({_NUMBER})\.\.({_NUMBER})$")
_OFFSET = re.compile(r"^([+-]?\d+)([dwy]?)$")
_UNIT_DAYS = {"": 1, "d": 1, "w": 7, "y": 365}
Base = Literal["str", "int", "float", "bool", "date", "datetime", "ref", "enum"]


class BlueprintError(ValueError):
    """A blueprint that does not hold together; the message lists every problem."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _offset_days(text: str) -> int:
    m = _OFFSET.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not an offset such as -60d, 0d, +2w or -18y")
    return int(m.group(1)) * _UNIT_DAYS[m.group(2)]


class FieldType(_Strict):
    """One parsed field (or parameter) type."""

    base: Base
    ref: str | None = None
    choices: tuple[str, ...] = ()
    nullable: bool = False
    #: Numbers: the range of values; dates: the window, in days from the clock's date.
    low: float | None = None
    high: float | None = None

    @classmethod
    def parse(cls, text: str) -> FieldType:
        """``str`` | ``int[:a..b]`` | ``float[:a..b]`` | ``bool`` | ``date[:-60d..0d]`` |
        ``datetime[:+1d..+30d]`` | ``ref:<table>`` | ``enum:a|b``, each with an optional
        trailing ``?`` (nullable)."""
        raw = text.strip()
        nullable = raw.endswith("?")
        body = raw[:-1].strip() if nullable else raw
        head, sep, rest = body.partition(":")
        try:
            return cls._parse(head, rest, nullable, bool(sep))
        except ValueError as exc:
            raise ValueError(
                f"unknown field type {text!r} ({exc}): use str, int, float, bool, date, "
                "datetime, ref:<table> or enum:a|b|c; int:1..9 and float:0..500 give a range, "
                "date:-60d..0d and datetime:+1d..+30d a window around the clock (units d, w, "
                "y), and a trailing ? makes the field nullable"
            ) from None

    @classmethod
    def _parse(cls, head: str, rest: str, nullable: bool, has_rest: bool) -> FieldType:
        if head in ("str", "bool") and not has_rest:
            return cls(base=head, nullable=nullable)
        if head in ("int", "float"):
            if not has_rest:
                return cls(base=head, nullable=nullable)
            m = _RANGE.match(rest.strip())
            if not m or float(m.group(1)) > float(m.group(2)):
                raise ValueError(f"{rest!r} is not a range low..high")
            return cls(base=head, nullable=nullable, low=float(m.group(1)), high=float(m.group(2)))
        if head in ("date", "datetime"):
            if not has_rest:
                return cls(base=head, nullable=nullable)
            low, sep, high = rest.partition("..")
            if not sep:
                raise ValueError(f"{rest!r} is not a window such as -60d..0d")
            lo, hi = _offset_days(low), _offset_days(high)
            if lo > hi:
                raise ValueError(f"the window {rest!r} ends before it starts")
            return cls(base=head, nullable=nullable, low=lo, high=hi)
        if head == "ref" and re.match(IDENT, rest.strip()):
            return cls(base="ref", ref=rest.strip(), nullable=nullable)
        if head == "enum":
            choices = tuple(c.strip() for c in rest.split("|"))
            if not choices or not all(_ENUM_VALUE.match(c) for c in choices):
                raise ValueError("enum values are words of letters, digits, _, - or space")
            if len(set(choices)) != len(choices):
                raise ValueError("enum values repeat")
            return cls(base="enum", choices=choices, nullable=nullable)
        raise ValueError("not a type")

    @property
    def numeric(self) -> bool:
        return self.base in ("int", "float")

    @property
    def temporal(self) -> bool:
        return self.base in ("date", "datetime")

    def accepts(self, value: Any) -> bool:
        """Whether a JSON value fits this type (ranges and windows aside)."""
        if value is None:
            return self.nullable
        if self.base == "enum":
            return value in self.choices
        if self.base in ("str", "ref"):
            return isinstance(value, str)
        if self.base == "bool":
            return isinstance(value, bool)
        if self.base == "int":
            return isinstance(value, int) and not isinstance(value, bool)
        if self.base == "float":
            return isinstance(value, int | float) and not isinstance(value, bool)
        return isinstance(value, str) and parse_when(value, self.base) is not None

    def window(self, clock: datetime) -> tuple[date, date] | None:
        """The dates a value of this date or datetime field must fall on, or None if unbounded."""
        if not self.temporal or self.low is None or self.high is None:
            return None
        today = clock.date()
        return today + timedelta(days=self.low), today + timedelta(days=self.high)

    def bounds_problem(self, value: Any, clock: datetime) -> str | None:
        """Why a value of the right type lies outside its range or window, or None."""
        if value is None:
            return None
        ranged = self.numeric and self.low is not None and self.high is not None
        if ranged and not self.low <= value <= self.high:
            return f"{value!r} is outside {self.low:g}..{self.high:g}"
        window = self.window(clock)
        if window is not None:
            when = parse_when(value, self.base)
            day = when.date() if isinstance(when, datetime) else when
            if day is not None and not window[0] <= day <= window[1]:
                return f"{value!r} is outside {window[0].isoformat()}..{window[1].isoformat()}"
        return None

    def describe(self, clock: datetime) -> str:
        """The type in words, with absolute dates, for prompts."""
        if self.base == "enum":
            text = "one of " + "|".join(self.choices)
        elif self.base == "ref":
            text = f"a key of {self.ref}"
        elif self.numeric and self.low is not None:
            text = f"{self.base} from {self.low:g} to {self.high:g}"
        elif self.temporal:
            shape = "YYYY-MM-DD" if self.base == "date" else "YYYY-MM-DDTHH:MM:SS"
            window = self.window(clock)
            text = f"{self.base} {shape}"
            if window is not None:
                text += f" from {window[0].isoformat()} to {window[1].isoformat()}"
        else:
            text = self.base
        return text + (", or null" if self.nullable else "")


def parse_when(value: Any, base: str) -> date | datetime | None:
    """An ISO date (``base="date"``) or datetime value, or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        if base == "date":
            return date.fromisoformat(value) if len(value) == 10 else None
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if "T" in value and parsed.tzinfo is None else None


_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "for",
        "from",
        "has",
        "have",
        "if",
        "in",
        "is",
        "it",
        "its",
        "may",
        "must",
        "of",
        "on",
        "or",
        "the",
        "their",
        "then",
        "they",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
    ]
)


def rule_words(text: str) -> frozenset[str]:
    """The words of a rule that carry its meaning (case, punctuation and small words aside)."""
    words = (w for w in re.findall(r"[a-z0-9$%]+", text.lower()) if w not in _STOP_WORDS)
    return frozenset(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words)


def same_rule(a: str, b: str) -> bool:
    """Whether two rule sentences say one rule: the same meaningful words, nearly (at least 80%
    of the two's together), or one's all within the other's when it has five or more."""
    wa, wb = rule_words(a), rule_words(b)
    if not wa or not wb:
        return wa == wb
    small, large = sorted((wa, wb), key=len)
    if len(small) >= 5 and small <= large:
        return True
    return len(wa & wb) / len(wa | wb) >= 0.8


def check_ident(name: str, what: str) -> None:
    if not re.match(IDENT, name) or keyword.iskeyword(name):
        raise ValueError(f"{what} {name!r} is not a lowercase identifier")


class Entity(_Strict):
    """A record type and its table."""

    name: str = Field(pattern=r"^[A-Z][A-Za-z0-9]{0,39}$")
    table: str = Field(pattern=IDENT)
    key: str = Field(pattern=IDENT)
    #: Keys are this prefix and digits: ``PA1001``.
    prefix: str = Field(pattern=r"^[A-Z]{1,4}$")
    #: A small fixed list (services, branches, doctors) rather than a table that grows.
    catalog: bool = False
    #: Whether a customer knows this table's keys (a booking code from their email: true; a car
    #: class, a branch, a plan code, a charge's internal id: false). None: a main table's are
    #: known, a catalog's are not. The agent finds an unknown key with a read; the customer
    #: names the record by what they know of it (its name, its city, its date and amount).
    key_known: bool | None = None
    fields: dict[str, str] = Field(min_length=1, max_length=20)
    #: The share of each value an enum field should hold, in percent (``{"cabin":
    #: {"economy": 80, "business": 15, "first": 5}}``); the data is checked against it.
    shares: dict[str, dict[str, float]] = Field(default_factory=dict, max_length=6)

    @model_validator(mode="after")
    def _fields_parse(self) -> Entity:
        for name, text in self.fields.items():
            check_ident(name, f"field of {self.name}")
            if not usable_field_name(name):
                raise ValueError(
                    f"field of {self.name} {name!r} is a name the record models keep for "
                    "themselves (model_..., copy, json, schema, dict, validate ...): rename it"
                )
            FieldType.parse(text)
        if not usable_field_name(self.key):
            raise ValueError(
                f"the key of {self.name} {self.key!r} is a name the record models keep for "
                "themselves (model_..., copy, json, schema, dict, validate ...): rename it"
            )
        if self.key in self.fields:
            raise ValueError(f"{self.name}: the key {self.key!r} is declared again in fields")
        types = self.field_types()
        for fname, shares in self.shares.items():
            ftype = types.get(fname)
            if ftype is None or ftype.base != "enum":
                raise ValueError(f"{self.name}.shares: {fname!r} is not an enum field")
            unknown = sorted(set(shares) - set(ftype.choices))
            if unknown:
                raise ValueError(f"{self.name}.shares.{fname}: {unknown} are not its values")
            if any(v < 0 for v in shares.values()) or sum(shares.values()) > 100.5:
                raise ValueError(
                    f"{self.name}.shares.{fname}: percentages from 0 that sum to 100 at most"
                )
        return self

    def field_types(self) -> dict[str, FieldType]:
        return {name: FieldType.parse(text) for name, text in self.fields.items()}

    @property
    def desk_key(self) -> bool:
        """Whether only the desk knows this table's keys (see ``key_known``)."""
        return self.catalog if self.key_known is None else not self.key_known


Test = Literal[
    "in",
    "not_in",
    "equals",
    "is_null",
    "not_null",
    "at_least",
    "at_most",
    "within_last_days",
    "older_than_days",
    "at_least_days_ahead",
    "less_than_days_ahead",
    "at_least_hours_ahead",
    "less_than_hours_ahead",
]


class Condition(_Strict):
    """A precondition, as an expression (``{"check": "mileage_in >= rental_id.mileage_out"}``,
    optionally only ``when`` another holds), or in the older form: ``check`` names a value
    (``order_id.status``, ``$quantity``), ``test`` what must hold of it, ``value`` against what.
    """

    check: str = Field(min_length=1, max_length=4000)
    test: Test | None = None
    value: Scalar | list[Scalar] | None = None
    #: The check applies only when this condition holds (``booking_id.vehicle``).
    when: str | None = Field(None, min_length=1, max_length=4000)

    @model_validator(mode="after")
    def _form(self) -> Condition:
        if self.test is None and self.value is not None:
            raise ValueError('an expression check has no "value": write it into "check"')
        return self

    @property
    def is_expression(self) -> bool:
        return self.test is None


class Adjust(_Strict):
    """An effect that adds to or subtracts from a number (stock, points, balance)."""

    add: int | float | str | None = None
    subtract: int | float | str | None = None

    @model_validator(mode="after")
    def _one(self) -> Adjust:
        if (self.add is None) == (self.subtract is None):
            raise ValueError('an adjustment is {"add": x} or {"subtract": x}')
        return self

    @property
    def sign(self) -> int:
        return 1 if self.add is not None else -1

    @property
    def amount(self) -> int | float | str:
        value = self.add if self.add is not None else self.subtract
        assert value is not None
        return value


class Computed(_Strict):
    """An effect whose value is an expression over the state before the call (a fee of
    ``rental_id.car_class_id.daily_rate * $days``)."""

    expr: str = Field(min_length=1, max_length=4000)


class Restore(_Strict):
    """An effect that puts back a value a record kept when it was made or changed (a cancelled
    upgrade restores ``upgrade_id.previous_cabin`` onto the booking)."""

    restore: str = Field(min_length=1, max_length=200)


Kind = Literal["read", "lookup", "list", "update", "create", "quote"]
#: What an effect writes: a constant, null, ``$param``, ``$today``, ``$now``, ``$param.field``,
#: an adjustment, an expression, or a restored value.
SetValue = Scalar | Adjust | Computed | Restore | None


class Operation(_Strict):
    """A tool: what it reads or changes, when it may, and what it does."""

    name: str = Field(pattern=IDENT)
    kind: Kind
    table: str = Field(pattern=IDENT)
    description: str = Field(min_length=1, max_length=300)
    params: dict[str, str] = Field(default_factory=dict, max_length=10)
    #: lookup and list: the fields of ``table`` matched against the parameters of the same name.
    by: list[str] = Field(default_factory=list, max_length=3)
    requires: list[Condition] = Field(default_factory=list, max_length=12)
    #: Effects by target (``order_id.status``, ``new.amount``, ``slot_id.patient_id``).
    sets: dict[str, SetValue] = Field(default_factory=dict, max_length=24)
    #: create: more records the call adds, by the name its effects give them
    #: (``{"charge": "damage_charges"}``: ``charge.amount`` is a field of the second record).
    adds: dict[str, str] = Field(default_factory=dict, max_length=3)
    #: quote: what the tool answers, by name, each an expression (``{"total": "..."}``).
    returns: dict[str, str] = Field(default_factory=dict, max_length=8)
    #: update and create: the writes a customer brings in the same call after this one (a
    #: flight change, then paying its difference). Tasks of two writes follow these.
    then: list[str] = Field(default_factory=list, max_length=3)

    @property
    def tool_kind(self) -> Literal["read", "write"]:
        return "write" if self.kind in ("update", "create") else "read"

    def new_records(self) -> dict[str, str]:
        """The records a create adds, by name: ``new`` (its table) and the others it adds."""
        if self.kind != "create":
            return {}
        return {"new": self.table, **self.adds}

    def param_types(self) -> dict[str, FieldType]:
        return {name: FieldType.parse(text) for name, text in self.params.items()}


class AgentRule(_Strict):
    """A rule the tool does not enforce and the agent must: refuse ``operation`` when every
    condition of ``refuse_when`` holds."""

    operation: str = Field(pattern=IDENT)
    rule: str = Field(min_length=1, max_length=300)
    refuse_when: list[Condition] = Field(min_length=1, max_length=4)


class BlueprintDraft(_Strict):
    """What the LLM writes (the JSON Schema sent to it is this model's)."""

    domain_id: str = Field(pattern=r"^[a-z][a-z0-9_]{1,39}$")
    name: str = Field(min_length=1, max_length=80)
    description: str = Field(min_length=1, max_length=500)
    industry: str | None = None
    entities: list[Entity] = Field(min_length=2, max_length=8)
    operations: list[Operation] = Field(min_length=5, max_length=25)
    rules: list[str] = Field(min_length=1, max_length=25)
    agent_rules: list[AgentRule] = Field(default_factory=list, max_length=6)
    #: The world's laws: what every record keeps, checked on the data and after every call.
    laws: list[LawSpec] = Field(default_factory=list, max_length=30)

    @model_validator(mode="after")
    def _consistent(self) -> BlueprintDraft:
        from maestro.agents.codegen.validation import blueprint_problems

        problems = blueprint_problems(self)
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

    def desk_keys(self) -> frozenset[str]:
        """The tables whose keys a customer does not know: an agent finds them with a read."""
        return frozenset(e.table for e in self.entities if e.desk_key)

    def agent_rules_of(self, name: str) -> list[AgentRule]:
        return [r for r in self.agent_rules if r.operation == name]

    def policy_rules(self) -> list[str]:
        """Every rule the policy states once: the rules, then the agent rules that do not say
        again what a rule says (:func:`same_rule`)."""
        out: list[str] = []
        for rule in [*self.rules, *(r.rule for r in self.agent_rules)]:
            if not any(same_rule(rule, seen) for seen in out):
                out.append(rule)
        return out


class Blueprint(BlueprintDraft):
    """A validated blueprint with the world's clock, which the host sets."""

    clock: datetime


def draft_fields() -> set[str]:
    return set(BlueprintDraft.model_fields)
