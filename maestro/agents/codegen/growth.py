"""The host grows the LLM's seed records into a database of real size, around the clock.

Main tables grow; a catalog (plans, services, branches) is the model's whole list, never grown:
a grown plan would pair one seed's name with another's numbers ("Talk & Text Basic", 158 GB).
Every grown record copies one seed (its template):

- enum values, booleans and nulls are kept: they say what kind of record it is (a delivered
  order keeps its delivery date, an open slot keeps no patient);
- dates move together by one random number of days, inside every field's window and on the
  same side of the clock (a past delivery stays past, an upcoming appointment upcoming, and a
  delivery stays after its order); a field with a wide window (a birth date) moves alone;
- a reference points at a record of the same kind as the seed's target (a travelled booking
  at a departed sailing), and a value the seeds copy from the referenced record (a booking's
  fare paid is its sailing's fare) is copied the same way;
- numbers are drawn near the seed's, inside the declared range (a small integer range whole);
- two references to one table are equal or different as the seed's are (a scheduled plan is
  not the current plan);
- text comes from the vocabulary: people's names recombined, emails made from the names, the
  last digits (at most six: a SIM serial keeps its 8944 prefix) of a phone or street number
  redrawn when it is used already (numbers in other text, "0800" or "Max 200GB", are kept as
  written); text fields named alike (``restaurant_name``, ``restaurant_address``) are copied
  together from one seed.

Keys continue the table's prefix (``PA1001``, ``PA1002``...); the natural identifiers a lookup
matches on stay unique. The same seed gives the same database.
"""

from __future__ import annotations

import random
import re
from datetime import date, datetime, timedelta
from typing import Any

from maestro.agents.codegen.blueprint import Blueprint, Entity, FieldType
from maestro.agents.codegen.conditions import as_when
from maestro.agents.codegen.data import Database, DataLimits, JSONRecord, SeedData, unique_fields

#: Days a date without a window may move.
_FREE_SHIFT = 365
#: A window this wide (a date of birth) moves on its own, not with the record's events.
_WIDE_WINDOW = 730
_EMAIL_DOMAINS = ("gmail.com", "outlook.com", "yahoo.com", "icloud.com")
_FIRST = ("first_name", "given_name", "firstname", "forename")
_LAST = ("last_name", "surname", "family_name", "lastname")
_FULL = ("name", "full_name", "fullname")


def grow(bp: Blueprint, data: SeedData, limits: DataLimits, *, seed: int = 0) -> Database:
    """The database: the seeds, and grown records up to each table's size (deterministic)."""
    rng = random.Random(seed)
    db: Database = {t: {k: dict(r) for k, r in rows.items()} for t, rows in data.records.items()}
    for e in _order(bp):
        if not e.catalog:  # a catalog is the model's, whole: recombined it would mix items
            _Grower(bp, e, db, data.values[e.table], rng).fill(limits.main_size)
    return db


def _order(bp: Blueprint) -> list[Entity]:
    """Entities with referenced tables first, so references can point at existing keys."""
    done: list[Entity] = []
    pending = list(bp.entities)
    while pending:
        ready = [
            e
            for e in pending
            if all(
                t.ref in {d.table for d in done} or t.ref == e.table
                for t in e.field_types().values()
                if t.ref is not None
            )
        ] or pending[:1]  # a cycle: start anywhere; references then point at the seeds
        done.append(ready[0])
        pending.remove(ready[0])
    return done


def kind_of(bp: Blueprint, table: str, record: JSONRecord) -> tuple[Any, ...]:
    """What kind of record this is: its enum values, booleans, nulls, and which side of the
    clock each date lies on."""
    today = bp.clock.date()
    out: list[Any] = []
    for fname, ftype in bp.entity(table).field_types().items():
        value = record.get(fname)
        if ftype.base in ("enum", "bool"):
            out.append(value)
        elif value is None:
            out.append(None)
        elif ftype.temporal:
            out.append(_side(value, ftype.base, today))
    return tuple(out)


def _side(value: Any, base: str, today: date) -> int:
    when = as_when(value, base)
    day = when.date() if isinstance(when, datetime) else when
    if day is None:
        return 0
    return (day > today) - (day < today)


class _Grower:
    """Grows one table."""

    def __init__(
        self,
        bp: Blueprint,
        e: Entity,
        db: Database,
        vocab: dict[str, list[str]],
        rng: random.Random,
    ) -> None:
        self.bp, self.e, self.db, self.vocab, self.rng = bp, e, db, vocab, rng
        self.types = e.field_types()
        self.rows = db[e.table]
        self.templates = [self.rows[k] for k in sorted(self.rows)]
        self.used = {f: {r[f] for r in self.rows.values() if isinstance(r[f], str)} for f in vocab}
        self.copies = _copied_fields(bp, e, db, self.templates)
        self.kinds: dict[str, dict[tuple[Any, ...], list[str]]] = {}
        # A lookup's identifiers must stay unique: copied whole from a seed they never would.
        unique = {f for combo in unique_fields(bp, e) for f in combo}
        self.groups = [g for g in text_groups(self.types) if not unique & set(g)]

    def fill(self, size: int) -> None:
        if not self.templates:
            return
        uniques = unique_fields(self.bp, self.e)
        seen = {c: {tuple(r[f] for f in c) for r in self.rows.values()} for c in uniques}
        prefix = self.e.prefix
        numbers = [int(m.group(1)) for k in self.rows if (m := re.match(rf"^{prefix}(\d+)$", k))]
        next_number = max(numbers, default=1000) + 1
        for _ in range(size * 20):
            if len(self.rows) >= size:
                break
            rec = self.record(self.rng.choice(self.templates))
            combos = {c: tuple(rec[f] for f in c) for c in uniques}
            if any(value in seen[c] for c, value in combos.items()):
                continue
            key = f"{prefix}{next_number}"
            next_number += 1
            self.rows[key] = {self.e.key: key, **rec}
            for c, value in combos.items():
                seen[c].add(value)
            for f in self.vocab:
                if isinstance(rec.get(f), str):
                    self.used[f].add(rec[f])

    def record(self, template: JSONRecord) -> JSONRecord:
        shifts = self._date_shifts(template)
        rec: JSONRecord = {}
        for fname, ftype in self.types.items():
            value = template[fname]
            if value is None or ftype.base in ("enum", "bool"):
                rec[fname] = value
            elif ftype.base == "ref":
                rec[fname] = self._target(str(ftype.ref), value)
            elif ftype.numeric:
                rec[fname] = _number(ftype, value, self.rng)
            elif ftype.temporal:
                rec[fname] = _shifted(value, ftype.base, shifts.get(fname, 0))
            else:
                rec[fname] = None  # text: drawn below, once names are known
        self._same_or_different(template, rec)
        _draw_text(self.types, template, rec, self.vocab, self.used, self.rng)
        _take_together(self.groups, self.templates, template, rec, self.rng)
        for fname, (ref_field, source) in self.copies.items():
            target = self.db.get(str(self.types[ref_field].ref), {}).get(rec[ref_field])
            if target is not None and target.get(source) is not None:
                rec[fname] = target[source]
        return rec

    def _same_or_different(self, template: JSONRecord, rec: JSONRecord) -> None:
        """Two references to one table stay as the seed has them: equal, or different (a
        scheduled plan is another plan than the current one, drawn apart they met by chance)."""
        refs = [f for f, t in self.types.items() if t.base == "ref" and rec.get(f) is not None]
        for i, a in enumerate(refs):
            for b in refs[i + 1 :]:
                table = self.types[a].ref
                if self.types[b].ref != table:
                    continue
                if template[a] == template[b]:
                    rec[b] = rec[a]
                    continue
                for _ in range(10):
                    if rec[b] != rec[a]:
                        break
                    rec[b] = self._target(str(table), template[b])
                if rec[b] == rec[a]:
                    rec[b] = template[b] if template[b] != rec[a] else template[a]

    def _target(self, table: str, seed_target: Any) -> Any:
        """A record of ``table`` of the same kind as the one the seed points at."""
        rows = self.db.get(table, {})
        if not rows:
            return seed_target
        if table not in self.kinds:
            index: dict[tuple[Any, ...], list[str]] = {}
            for key in sorted(rows):
                index.setdefault(kind_of(self.bp, table, rows[key]), []).append(key)
            self.kinds[table] = index
        like = rows.get(seed_target)
        pool = self.kinds[table].get(kind_of(self.bp, table, like), []) if like else []
        return self.rng.choice(pool or sorted(rows))

    def _date_shifts(self, template: JSONRecord) -> dict[str, int]:
        """Days to move each date field: one shift for the record's events, inside every
        window and keeping each on its side of the clock; wide windows move alone."""
        low, high = -_FREE_SHIFT, _FREE_SHIFT
        today = self.bp.clock.date()
        wide: dict[str, tuple[int, int]] = {}
        for fname, ftype in self.types.items():
            when = as_when(template[fname], ftype.base) if ftype.temporal else None
            if when is None:
                continue
            day = when.date() if isinstance(when, datetime) else when
            window = ftype.window(self.bp.clock)
            if window is None:
                lo, hi = -_FREE_SHIFT, _FREE_SHIFT
            else:
                lo, hi = (window[0] - day).days, (window[1] - day).days
                if (window[1] - window[0]).days >= _WIDE_WINDOW:
                    wide[fname] = (lo, hi)
                    continue
            # Past stays past, future stays future, today stays today.
            if day < today:
                hi = min(hi, (today - day).days - 1)
            elif day > today:
                lo = max(lo, (today - day).days + 1)
            else:
                lo, hi = max(lo, 0), min(hi, 0)
            low, high = max(low, lo), min(high, hi)
        common = self.rng.randint(low, high) if low <= high else 0
        shifts = {f: common for f, t in self.types.items() if t.temporal}
        for fname, (lo, hi) in wide.items():
            shifts[fname] = self.rng.randint(lo, hi) if lo <= hi else 0
        return shifts


def _copied_fields(
    bp: Blueprint, e: Entity, db: Database, templates: list[JSONRecord]
) -> dict[str, tuple[str, str]]:
    """Fields every seed copies from the record a reference names (a booking's fare paid is
    its sailing's fare): ``field -> (ref field, field of the referenced record)``."""
    types = e.field_types()
    out: dict[str, tuple[str, str]] = {}
    for fname, ftype in types.items():
        if ftype.base in ("ref", "enum", "bool"):
            continue
        for ref_field, rtype in types.items():
            if rtype.ref is None or rtype.ref == e.table or fname in out:
                continue
            target_types = bp.entity(rtype.ref).field_types()
            for source, stype in target_types.items():
                if stype.base != ftype.base:
                    continue
                pairs = [
                    (t[fname], db[rtype.ref].get(t[ref_field], {}).get(source))
                    for t in templates
                    if t[ref_field] is not None and t[fname] is not None
                ]
                if len(pairs) >= 2 and all(a == b for a, b in pairs):
                    out[fname] = (ref_field, source)
                    break
    return out


def _shifted(value: Any, base: str, days: int) -> Any:
    when = as_when(value, base)
    if when is None:
        return value
    moved = when + timedelta(days=days)
    return moved.isoformat()


def _number(ftype: FieldType, value: Any, rng: random.Random) -> int | float:
    """Near the seed's value (a headphone's total stays a headphone's), inside the range; a small
    integer range (a quantity of 1 to 3) is drawn whole. A zero stays zero (sold out)."""
    low, high = sorted((value * 0.6, value * 1.4))
    if ftype.low is not None and ftype.high is not None:
        if ftype.base == "int" and ftype.high - ftype.low <= 10:
            low, high = ftype.low, ftype.high
        low, high = max(low, ftype.low), min(high, ftype.high)
    if ftype.base == "int":
        first = -int(-low // 1)
        return rng.randint(first, max(first, int(high // 1)))
    return round(rng.uniform(low, high), 2)


def _person_like(types: dict[str, FieldType]) -> bool:
    return any("email" in n or "birth" in n or n == "dob" for n in types)


def _draw_text(
    types: dict[str, FieldType],
    template: JSONRecord,
    rec: JSONRecord,
    vocab: dict[str, list[str]],
    used: dict[str, set[str]],
    rng: random.Random,
) -> None:
    person = _person_like(types)
    first = last = None
    for fname, values in vocab.items():
        if template[fname] is None or "email" in fname:
            continue  # a null stays null; emails are made from the names below
        full = (
            person and (fname in _FULL or fname.endswith("_name")) and fname not in _FIRST + _LAST
        )
        if fname in _FIRST or fname in _LAST:
            rec[fname] = rng.choice(values)
        elif full and all(len(v.split()) >= 2 for v in values):
            firsts = [v.split()[0] for v in values]
            lasts = [v.split()[-1] for v in values]
            rec[fname] = f"{rng.choice(firsts)} {rng.choice(lasts)}"
        else:
            fresh = [v for v in values if v not in used[fname]]
            value = rng.choice(fresh or values)
            # A phone or a street number used already gets new last digits; numbers inside other
            # text ("0800", "Max 200GB") say something and stay as written.
            reused = value in used[fname]
            rec[fname] = _redraw_digits(value, rng) if reused and _numbered(fname) else value
        if fname in _FIRST:
            first = rec[fname]
        elif fname in _LAST:
            last = rec[fname]
        elif full and first is None and len(rec[fname].split()) >= 2:
            first, last = rec[fname].split()[0], rec[fname].split()[-1]
    for fname, values in vocab.items():
        if "email" in fname and template[fname] is not None:
            rec[fname] = _email(values, first, last, rng)


def text_groups(types: dict[str, FieldType]) -> list[list[str]]:
    """Text fields that describe one thing together, named alike (``restaurant_name``,
    ``restaurant_address``): drawn apart, "Dishoom Manchester" got another restaurant's
    address. People's names and emails are not among them (they are recombined and made)."""
    words: dict[str, list[str]] = {}
    for fname, ftype in types.items():
        if ftype.base != "str" or "email" in fname or fname in _FIRST + _LAST + _FULL:
            continue
        if "_" in fname:
            words.setdefault(fname.split("_")[0], []).append(fname)
    return [names for names in words.values() if len(names) >= 2]


def _take_together(
    groups: list[list[str]],
    templates: list[JSONRecord],
    template: JSONRecord,
    rec: JSONRecord,
    rng: random.Random,
) -> None:
    """Each group of text fields that belong together copied whole from one seed that has them
    all (a record whose template is null in one of them keeps what it drew)."""
    for names in groups:
        if any(template[f] is None for f in names):
            continue
        whole = [t for t in templates if all(t[f] is not None for f in names)]
        source = rng.choice(whole) if whole else template
        for f in names:
            rec[f] = source[f]


def _ascii(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())


def _email(values: list[str], first: str | None, last: str | None, rng: random.Random) -> str:
    domains = [v.rsplit("@", 1)[1] for v in values if "@" in v] or list(_EMAIL_DOMAINS)
    domain = rng.choice(domains)
    a, b = _ascii(first or ""), _ascii(last or "")
    if a and b:
        local = rng.choice([f"{a}.{b}", f"{a[0]}{b}", f"{a}{b}", f"{a}.{b[0]}"])
        if rng.random() < 0.3:
            local += str(rng.randint(2, 99))
        return f"{local}@{domain}"
    base = rng.choice(values)
    local = base.split("@")[0] if "@" in base else _ascii(base) or "guest"
    return f"{local}{rng.randint(2, 999)}@{domain}"


#: Text fields whose digits identify rather than describe (a phone, a house number).
_NUMBERED = ("phone", "mobile", "address", "street", "postcode", "zip", "number", "plate", "serial")


def _numbered(fname: str) -> bool:
    return any(w in fname for w in _NUMBERED)


#: Most trailing digits redrawn: a long number (a SIM serial, 8944...) keeps its issuer's
#: prefix, as every seed's does.
_REDRAWN = 6


def _redraw_digits(value: str, rng: random.Random) -> str:
    """The value with the last digits (at most ``_REDRAWN``) of its last run of digits
    redrawn, same length (phones, house numbers, serials)."""
    runs = list(re.finditer(r"\d+", value))
    if not runs:
        return value
    run = runs[-1]
    digits = run.group(0)
    kept, tail = digits[:-_REDRAWN], digits[-_REDRAWN:]
    # Inside a long number any digit may lead the tail; a short one keeps a leading 0 or non-0.
    lead = (0 if kept or tail[0] == "0" else 1, 0 if tail[0] == "0" and not kept else 9)
    first = str(rng.randint(*lead))
    new = kept + first + "".join(str(rng.randint(0, 9)) for _ in tail[1:])
    return value[: run.start()] + new + value[run.end() :]
