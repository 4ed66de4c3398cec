"""Generate the `energy` library domain's db.json and tasks.jsonl, deterministically.

Run from the repository root:  .venv/bin/python scripts/library/gen_energy.py

The database is a seeded random population of customers of Brightwater Energy (a household
electricity and gas supplier) plus one hand-specified customer per task, placed at random
positions among them. The tasks are written here, next to the scenario each one needs, and
their figures (bill amounts, readings, instalments) are taken from the generated data.
"""

from __future__ import annotations

import itertools
import json
import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "maestro" / "domains" / "library" / "energy"
SEED = 20260203
TODAY = date(2026, 2, 3)
N_CUSTOMERS = 64
GAS_KWH_PER_M3 = 11.14
VAT = 0.05
PROVENANCE = {"source": "hand-built", "authors": ["maestro team"]}

# ----- reference data ---------------------------------------------------------------------------

TARIFFS = [
    # id, name, fuel, type, term, unit, standing, exit fee, open, smart only, renewable
    (
        "E-FLEX",
        "Flex Electricity",
        "electricity",
        "variable",
        None,
        0.2486,
        0.5312,
        0.0,
        True,
        False,
        False,
    ),
    ("G-FLEX", "Flex Gas", "gas", "variable", None, 0.0634, 0.3265, 0.0, True, False, False),
    (
        "E-FIX12",
        "Fixed Saver 12 Electricity",
        "electricity",
        "fixed",
        12,
        0.2295,
        0.5150,
        75.0,
        True,
        False,
        False,
    ),
    ("G-FIX12", "Fixed Saver 12 Gas", "gas", "fixed", 12, 0.0589, 0.3120, 75.0, True, False, False),
    (
        "E-FIX24",
        "Fixed Secure 24 Electricity",
        "electricity",
        "fixed",
        24,
        0.2360,
        0.5015,
        150.0,
        True,
        False,
        False,
    ),
    (
        "G-FIX24",
        "Fixed Secure 24 Gas",
        "gas",
        "fixed",
        24,
        0.0605,
        0.3050,
        150.0,
        True,
        False,
        False,
    ),
    (
        "E-GREEN12",
        "Green Fixed 12 Electricity",
        "electricity",
        "fixed",
        12,
        0.2390,
        0.5150,
        50.0,
        True,
        False,
        True,
    ),
    (
        "E-EVNIGHT",
        "EV Night Saver Electricity",
        "electricity",
        "fixed",
        12,
        0.2050,
        0.5480,
        50.0,
        True,
        True,
        False,
    ),
    (
        "E-FIX12-A25",
        "Fixed Saver 12 (March 2025) Electricity",
        "electricity",
        "fixed",
        12,
        0.2218,
        0.4987,
        60.0,
        False,
        False,
        False,
    ),
    (
        "G-FIX12-A25",
        "Fixed Saver 12 (March 2025) Gas",
        "gas",
        "fixed",
        12,
        0.0571,
        0.2998,
        60.0,
        False,
        False,
        False,
    ),
]

PLACES = [
    ("Bristol", ["BS3", "BS4", "BS5", "BS6", "BS7", "BS9", "BS16"]),
    ("Bath", ["BA1", "BA2"]),
    ("Gloucester", ["GL1", "GL2", "GL4"]),
    ("Cheltenham", ["GL50", "GL51", "GL52"]),
    ("Swindon", ["SN1", "SN2", "SN3", "SN5"]),
    ("Taunton", ["TA1", "TA2"]),
]
CITY_OF = {d: city for city, ds in PLACES for d in ds}
STREETS = [
    "Church Road",
    "Victoria Street",
    "Station Road",
    "Elm Grove",
    "Park Avenue",
    "Mill Lane",
    "Kingsway",
    "Queens Road",
    "Orchard Close",
    "Meadow View",
    "Alma Road",
    "Chandos Road",
    "Wellington Terrace",
    "Brook Street",
    "Hillside Crescent",
    "St Mark's Road",
    "Belmont Drive",
    "Coronation Avenue",
    "Berkeley Place",
    "Fairfield Road",
    "Linden Close",
    "Southville Road",
    "Tyndale Avenue",
    "Harcourt Road",
    "Cromwell Street",
    "Nelson Way",
    "Ashley Down Road",
    "Beechwood Rise",
    "Sandford Lane",
    "Priory Gardens",
]
FIRST = [
    "Olivia",
    "Amelia",
    "Isla",
    "Ava",
    "Mia",
    "Grace",
    "Freya",
    "Lily",
    "Emily",
    "Sophie",
    "Hannah",
    "Chloe",
    "Megan",
    "Rachel",
    "Joanne",
    "Karen",
    "Susan",
    "Margaret",
    "Helen",
    "Priya",
    "Aisha",
    "Zofia",
    "Niamh",
    "Bethan",
    "Oliver",
    "George",
    "Harry",
    "Jack",
    "Noah",
    "Leo",
    "Arthur",
    "Thomas",
    "James",
    "William",
    "Daniel",
    "Samuel",
    "Joseph",
    "David",
    "Michael",
    "Peter",
    "Graham",
    "Stephen",
    "Rajesh",
    "Tariq",
    "Kwame",
    "Marek",
    "Owen",
    "Callum",
    "Rhys",
    "Ewan",
]
LAST = [
    "Smith",
    "Jones",
    "Taylor",
    "Brown",
    "Williams",
    "Wilson",
    "Johnson",
    "Davies",
    "Patel",
    "Robinson",
    "Wright",
    "Thompson",
    "Evans",
    "Walker",
    "White",
    "Roberts",
    "Green",
    "Hall",
    "Thomas",
    "Clarke",
    "Jackson",
    "Wood",
    "Harris",
    "Edwards",
    "Turner",
    "Martin",
    "Cooper",
    "Hill",
    "Ward",
    "Hughes",
    "Moore",
    "Clark",
    "King",
    "Harrison",
    "Lewis",
    "Baker",
    "Lee",
    "Allen",
    "Morris",
    "Khan",
    "Scott",
    "Watson",
    "Davis",
    "Parker",
    "James",
    "Bennett",
    "Young",
    "Price",
    "Mitchell",
    "Kelly",
    "Okafor",
    "Nowak",
    "Begum",
    "Chen",
    "Fletcher",
    "Pearce",
]
FEMALE = FIRST[:24]
RELATIONS = ["daughter", "son", "husband", "wife", "partner", "brother", "sister", "carer"]
PSR_REASONS = [
    "pensionable age",
    "powered medical equipment (home oxygen concentrator)",
    "visual impairment",
    "hearing impairment",
    "child under 5",
    "chronic illness",
    "mobility impairment",
]
LOCATIONS = [
    "under the stairs",
    "external meter box",
    "kitchen cupboard",
    "hallway cupboard",
    "garage",
    "cellar",
]
INWARD_LETTERS = "ABDEFGHJLNPQRSTUWXYZ"

# Month boundaries of the bills in the database: Nov 2025, Dec 2025, Jan 2026.
READ_DATES = [date(2025, 11, 1), date(2025, 12, 1), date(2026, 1, 1), date(2026, 2, 1)]
SEASON = {
    "electricity": {11: 1.08, 12: 1.22, 1: 1.25, 2: 1.20},
    "gas": {11: 1.45, 12: 1.85, 1: 1.95, 2: 1.90},
}

# ----- helpers ----------------------------------------------------------------------------------


def money(x: float) -> float:
    return round(x + 0.0, 2)


def add_months(d: date, months: int) -> date:
    i = d.month - 1 + months
    y, m = d.year + i // 12, i % 12 + 1
    day = d.day
    while True:
        try:
            return date(y, m, day)
        except ValueError:
            day -= 1


def rand_date(rng: random.Random, start: date, end: date) -> date:
    return start + timedelta(days=rng.randint(0, (end - start).days))


def f2(x: float) -> str:
    return f"{x:.2f}"


class Gen:
    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.t: dict[str, dict[str, dict[str, Any]]] = {
            name: {}
            for name in (
                "customers",
                "accounts",
                "tariffs",
                "meters",
                "readings",
                "bills",
                "payment_plans",
                "outages",
                "service_requests",
                "adjustments",
            )
        }
        self.tariff = {}
        for tid, name, fuel, ttype, term, unit, sc, fee, open_, smart, green in TARIFFS:
            rec = {
                "tariff_id": tid,
                "name": name,
                "fuel": fuel,
                "tariff_type": ttype,
                "term_months": term,
                "unit_rate": unit,
                "standing_charge": sc,
                "exit_fee": fee,
                "open_to_switch": open_,
                "requires_smart_meter": smart,
                "renewable": green,
            }
            self.t["tariffs"][tid] = rec
            self.tariff[tid] = rec
        self.used_names: set[tuple[str, str]] = set()
        self.used_phones: set[str] = set()
        self.used_emails: set[str] = set()
        self.used_serials: set[str] = set()
        self.used_postcodes: set[str] = set()
        self.n = {
            "customer": 1000,
            "account": 20000,
            "reading": 0,
            "bill": 400000,
            "plan": 5000,
            "sr": 70000,
            "adj": 0,
        }
        self.scen: dict[str, dict[str, Any]] = {}

    # ----- ids and identities -------------------------------------------------------------------

    def next_id(self, kind: str, fmt: str) -> str:
        self.n[kind] += 1
        return fmt.format(self.n[kind])

    def person(self, female: bool = False) -> tuple[str, str]:
        while True:
            name = (self.rng.choice(FEMALE if female else FIRST), self.rng.choice(LAST))
            if name not in self.used_names:
                self.used_names.add(name)
                return name

    def phone(self) -> str:
        while True:
            p = f"07700 900{self.rng.randint(0, 999):03d}"
            if p not in self.used_phones:
                self.used_phones.add(p)
                return p

    def email(self, first: str, last: str) -> str:
        domain = self.rng.choice(["example.com", "example.net", "example.org", "example.co.uk"])
        pattern = self.rng.randint(0, 3)
        f, s = first.lower(), last.lower()
        local = [f"{f}.{s}", f"{f[0]}{s}", f"{f}{s}{self.rng.randint(10, 99)}", f"{s}.{f}"][pattern]
        email = f"{local}@{domain}"
        while email in self.used_emails:
            email = f"{local}{self.rng.randint(2, 9)}@{domain}"
        self.used_emails.add(email)
        return email

    def postcode(self, district: str) -> str:
        while True:
            pc = f"{district} {self.rng.randint(1, 9)}{self.rng.choice(INWARD_LETTERS)}{self.rng.choice(INWARD_LETTERS)}"
            if pc not in self.used_postcodes:
                self.used_postcodes.add(pc)
                return pc

    def address(self, district: str | None = None) -> tuple[str, str, str]:
        if district is None:
            _city, districts = self.rng.choice(PLACES)
            district = self.rng.choice(districts)
        street = self.rng.choice(STREETS)
        number = self.rng.randint(1, 140)
        line = f"{number} {street}"
        if self.rng.random() < 0.15:
            line = f"Flat {self.rng.randint(1, 9)}, {line}"
        return line, CITY_OF[district], self.postcode(district)

    def serial(self, fuel: str) -> str:
        while True:
            if fuel == "electricity":
                s = f"E{self.rng.randint(14, 24)}{self.rng.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}{self.rng.randint(0, 99999):05d}"
            else:
                s = f"G4{self.rng.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}{self.rng.randint(0, 999999):06d}"
            if s not in self.used_serials:
                self.used_serials.add(s)
                return s

    # ----- profiles -----------------------------------------------------------------------------

    def random_profile(self) -> dict[str, Any]:
        rng = self.rng
        dual = rng.random() < 0.7
        e_type = "smart" if rng.random() < 0.55 else "standard"
        g_type = (
            ("smart" if rng.random() < 0.9 else "standard") if e_type == "smart" else "standard"
        )
        family = rng.choices(
            ["FLEX", "FIX12", "FIX24", "A25", "GREEN12", "EVNIGHT"], [40, 26, 14, 10, 6, 4]
        )[0]
        if family == "EVNIGHT" and e_type != "smart":
            family = "FIX12"
        e_tariff = {"GREEN12": "E-GREEN12", "EVNIGHT": "E-EVNIGHT", "A25": "E-FIX12-A25"}.get(
            family, f"E-{family}"
        )
        g_tariff = {"GREEN12": "G-FIX12", "EVNIGHT": "G-FLEX", "A25": "G-FIX12-A25"}.get(
            family, f"G-{family}"
        )
        payment = "dd" if rng.random() < 0.7 else "por"
        return {
            "dual": dual,
            "e_type": e_type,
            "e_comms": ("ok" if rng.random() < 0.85 else "not_communicating")
            if e_type == "smart"
            else None,
            "g_type": g_type,
            "g_comms": ("ok" if rng.random() < 0.85 else "not_communicating")
            if g_type == "smart"
            else None,
            "e_tariff": e_tariff,
            "g_tariff": g_tariff,
            "payment": payment,
            "arrears": rng.choices([0, 1, 2], [70, 20, 10])[0] if payment == "por" else 0,
            "psr": rng.random() < 0.12,
            "authorised": rng.random() < 0.08,
            "status": "moving_out" if rng.random() < 0.05 else "active",
            "prev_closed": rng.random() < 0.12,
            "ev": family == "EVNIGHT",
        }

    def scenario_profile(self, spec: dict[str, Any]) -> dict[str, Any]:
        base = {
            "dual": True,
            "e_type": "standard",
            "e_comms": None,
            "g_type": "standard",
            "g_comms": None,
            "e_tariff": "E-FLEX",
            "g_tariff": "G-FLEX",
            "payment": "dd",
            "arrears": 0,
            "psr": False,
            "authorised": False,
            "status": "active",
            "prev_closed": False,
            "ev": False,
        }
        base.update(spec)
        return base

    # ----- building one customer ----------------------------------------------------------------

    def tariff_start(
        self, tid: str, opened: date, fixed_start: date | None
    ) -> tuple[date, date | None]:
        t = self.tariff[tid]
        if fixed_start is not None:
            start = fixed_start
        elif t["tariff_type"] == "variable":
            start = rand_date(self.rng, date(2023, 4, 1), date(2025, 10, 1))
        elif tid.endswith("A25"):
            start = rand_date(self.rng, date(2025, 3, 1), date(2025, 4, 30))
        elif t["term_months"] == 24:
            start = rand_date(self.rng, date(2024, 3, 1), date(2025, 12, 20))
        else:
            start = rand_date(self.rng, date(2025, 2, 20), date(2026, 1, 25))
        if start < opened:
            start = opened
        end = add_months(start, t["term_months"]) if t["tariff_type"] == "fixed" else None
        return start, end

    def build(self, p: dict[str, Any], key: str | None) -> dict[str, Any]:
        rng = self.rng
        first, last = self.person(female=p.get("female", False))
        cid = self.next_id("customer", "CU{:04d}")
        dob = rand_date(rng, date(1941, 1, 1), date(2001, 12, 31))
        if p.get("dob"):
            dob = p["dob"]
        joined = rand_date(rng, date(2016, 1, 1), date(2025, 8, 31))
        if key is not None:
            joined = rand_date(rng, date(2016, 1, 1), date(2024, 12, 31))
        if p["prev_closed"]:
            joined = rand_date(rng, date(2016, 1, 1), date(2021, 6, 30))
        psr_reason = p.get("psr_reason") or (rng.choice(PSR_REASONS) if p["psr"] else None)
        contacts = []
        if p["authorised"]:
            cfirst = rng.choice(FIRST)
            contacts.append(f"{cfirst} {last} ({rng.choice(RELATIONS)})")
        customer = {
            "customer_id": cid,
            "first_name": first,
            "last_name": last,
            "email": self.email(first, last),
            "phone": self.phone(),
            "date_of_birth": dob.isoformat(),
            "joined_on": joined.isoformat(),
            "priority_services": bool(psr_reason),
            "psr_reason": psr_reason,
            "authorised_contacts": contacts,
        }
        self.t["customers"][cid] = customer
        info: dict[str, Any] = {"customer": customer}

        opened = joined
        if p["prev_closed"]:
            closed_on = rand_date(rng, date(2022, 1, 1), date(2025, 6, 30))
            self.closed_account(cid, joined, closed_on)
            opened = closed_on
        # the current account
        aid = self.next_id("account", "EA{:05d}")
        line, city, pc = self.address(p.get("district"))
        account: dict[str, Any] = {
            "account_id": aid,
            "customer_id": cid,
            "address_line": line,
            "city": city,
            "postcode": pc,
            "status": "active",
            "opened_on": opened.isoformat(),
            "closed_on": None,
            "move_out_date": None,
            "forwarding_postcode": None,
            "payment_method": "pay_on_receipt",
            "dd_monthly_amount": None,
            "dd_payment_day": None,
            "dd_sort_code": None,
            "dd_account_last4": None,
            "recommended_dd": 0.0,
            "balance": 0.0,
            "paperless": rng.random() < 0.65,
        }
        self.t["accounts"][aid] = account
        info["account"] = account

        meters = []
        fuels = ["electricity", "gas"] if p["dual"] else ["electricity"]
        for fuel in fuels:
            pre = "e" if fuel == "electricity" else "g"
            mtype = p[f"{pre}_type"]
            tid = p[f"{pre}_tariff"]
            start, end = self.tariff_start(tid, opened, p.get(f"{pre}_tariff_start"))
            annual = rng.randint(1800, 4800) if fuel == "electricity" else rng.randint(7000, 17000)
            if fuel == "electricity" and p["ev"]:
                annual += rng.randint(1800, 2600)
            meter = {
                "meter_id": self.serial(fuel),
                "account_id": aid,
                "fuel": fuel,
                "meter_type": mtype,
                "smart_comms": p[f"{pre}_comms"] if mtype == "smart" else None,
                "units": "kWh" if fuel == "electricity" else "m3",
                "location": rng.choice(LOCATIONS),
                "status": "active",
                "tariff_id": tid,
                "tariff_start": start.isoformat(),
                "tariff_end": end.isoformat() if end else None,
                "annual_consumption_kwh": annual,
            }
            self.t["meters"][meter["meter_id"]] = meter
            meters.append(meter)
            info[pre + "_meter"] = meter
            info[pre + "_today"] = self.readings(meter, p.get(f"{pre}_sources"))
        # recommended direct debit from today's tariffs
        yearly = 0.0
        for m in meters:
            t = self.tariff[m["tariff_id"]]
            yearly += (
                m["annual_consumption_kwh"] * t["unit_rate"] + 365 * t["standing_charge"]
            ) * (1 + VAT)
        account["recommended_dd"] = float(round(yearly / 12))
        bills = self.bills(account, meters)
        info["bills"] = bills
        self.payments(p, account, bills, info)
        if p["status"] == "moving_out":
            account["status"] = "moving_out"
            account["move_out_date"] = rand_date(
                rng, TODAY + timedelta(days=5), TODAY + timedelta(days=40)
            ).isoformat()
            account["forwarding_postcode"] = self.address()[2]
        if key:
            self.scen[key] = info
        return info

    def closed_account(self, cid: str, opened: date, closed_on: date) -> None:
        aid = self.next_id("account", "EA{:05d}")
        line, city, pc = self.address()
        self.t["accounts"][aid] = {
            "account_id": aid,
            "customer_id": cid,
            "address_line": line,
            "city": city,
            "postcode": pc,
            "status": "closed",
            "opened_on": opened.isoformat(),
            "closed_on": closed_on.isoformat(),
            "move_out_date": closed_on.isoformat(),
            "forwarding_postcode": None,
            "payment_method": "pay_on_receipt",
            "dd_monthly_amount": None,
            "dd_payment_day": None,
            "dd_sort_code": None,
            "dd_account_last4": None,
            "recommended_dd": 0.0,
            "balance": 0.0,
            "paperless": True,
        }
        for fuel in ["electricity", "gas"] if self.rng.random() < 0.7 else ["electricity"]:
            tid = "E-FLEX" if fuel == "electricity" else "G-FLEX"
            meter = {
                "meter_id": self.serial(fuel),
                "account_id": aid,
                "fuel": fuel,
                "meter_type": "standard",
                "smart_comms": None,
                "units": "kWh" if fuel == "electricity" else "m3",
                "location": self.rng.choice(LOCATIONS),
                "status": "inactive",
                "tariff_id": tid,
                "tariff_start": opened.isoformat(),
                "tariff_end": None,
                "annual_consumption_kwh": self.rng.randint(1800, 4200)
                if fuel == "electricity"
                else self.rng.randint(7000, 15000),
            }
            self.t["meters"][meter["meter_id"]] = meter
            value = (
                self.rng.randint(2000, 40000)
                if fuel == "electricity"
                else self.rng.randint(500, 9000)
            )
            self.add_reading(meter["meter_id"], closed_on, value, "customer")
        self.t["accounts"][aid]["forwarding_postcode"] = self.address()[2]

    def add_reading(self, meter_id: str, when: date, value: int, source: str) -> None:
        rid = self.next_id("reading", "RD{:06d}")
        self.t["readings"][rid] = {
            "reading_id": rid,
            "meter_id": meter_id,
            "read_on": when.isoformat(),
            "value": value,
            "source": source,
        }

    def readings(self, meter: dict[str, Any], sources: list[str] | None) -> int:
        """Write the meter's four monthly readings; return the true reading today."""
        rng = self.rng
        fuel = meter["fuel"]
        per_unit = 1.0 if fuel == "electricity" else GAS_KWH_PER_M3
        daily = meter["annual_consumption_kwh"] / 365 / per_unit
        true = rng.randint(3000, 75000) if fuel == "electricity" else rng.randint(200, 15000)
        if sources is None:
            if meter["meter_type"] == "smart" and meter["smart_comms"] == "ok":
                sources = ["smart"] * 4
            elif meter["meter_type"] == "smart":
                sources = (
                    ["smart", "smart", "estimated", "estimated"]
                    if rng.random() < 0.5
                    else ["smart", "estimated", "estimated", "estimated"]
                )
            else:
                sources = ["customer"] + [
                    ("customer" if rng.random() < 0.55 else "estimated") for _ in range(3)
                ]
        last_actual, last_actual_on = true, READ_DATES[0]
        prev_on = READ_DATES[0]
        for i, (when, source) in enumerate(zip(READ_DATES, sources, strict=True)):
            if i > 0:
                days = (when - prev_on).days
                true += round(daily * SEASON[fuel][prev_on.month] * days * rng.uniform(0.92, 1.08))
            prev_on = when
            if source == "estimated":
                value = last_actual + round(daily * (when - last_actual_on).days)
            else:
                value = true
                last_actual, last_actual_on = true, when
            self.add_reading(meter["meter_id"], when, value, source)
        # what the meter shows today (2 days after the last boundary)
        return true + round(daily * SEASON[fuel][2] * (TODAY - READ_DATES[-1]).days)

    def bills(self, account: dict[str, Any], meters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        by_meter = {}
        for r in self.t["readings"].values():
            if r["meter_id"] in {m["meter_id"] for m in meters}:
                by_meter[(r["meter_id"], r["read_on"])] = r
        out = []
        for start, nxt in itertools.pairwise(READ_DATES):
            end = nxt - timedelta(days=1)
            days = (nxt - start).days
            lines = []
            for m in meters:
                opening = by_meter[(m["meter_id"], start.isoformat())]
                closing = by_meter[(m["meter_id"], nxt.isoformat())]
                tid = (
                    m["tariff_id"]
                    if m["tariff_start"] <= start.isoformat()
                    else ("E-FLEX" if m["fuel"] == "electricity" else "G-FLEX")
                )
                t = self.tariff[tid]
                units = closing["value"] - opening["value"]
                kwh = units if m["fuel"] == "electricity" else round(units * GAS_KWH_PER_M3)
                lines.append(
                    {
                        "meter_id": m["meter_id"],
                        "fuel": m["fuel"],
                        "tariff_id": tid,
                        "opening_reading": opening["value"],
                        "closing_reading": closing["value"],
                        "kwh": kwh,
                        "unit_rate": t["unit_rate"],
                        "energy_charge": money(kwh * t["unit_rate"]),
                        "days": days,
                        "standing_charge_rate": t["standing_charge"],
                        "standing_charge_total": money(days * t["standing_charge"]),
                        "estimated": closing["source"] == "estimated",
                    }
                )
            subtotal = money(sum(ln["energy_charge"] + ln["standing_charge_total"] for ln in lines))
            vat = money(subtotal * VAT)
            issued = nxt + timedelta(days=1)
            bid = self.next_id("bill", "BL{:06d}")
            bill = {
                "bill_id": bid,
                "account_id": account["account_id"],
                "period_start": start.isoformat(),
                "period_end": end.isoformat(),
                "issued_on": issued.isoformat(),
                "due_date": (issued + timedelta(days=14)).isoformat(),
                "lines": lines,
                "subtotal": subtotal,
                "vat": vat,
                "amount": money(subtotal + vat),
                "estimated": any(ln["estimated"] for ln in lines),
                "status": "paid",
            }
            self.t["bills"][bid] = bill
            out.append(bill)
        return out

    def payments(
        self,
        p: dict[str, Any],
        account: dict[str, Any],
        bills: list[dict[str, Any]],
        info: dict[str, Any],
    ) -> None:
        rng = self.rng
        aid = account["account_id"]
        if p["payment"] == "dd":
            factor = p.get("dd_factor", rng.uniform(0.9, 1.15))
            account.update(
                payment_method="direct_debit",
                dd_monthly_amount=float(round(account["recommended_dd"] * factor)),
                dd_payment_day=p.get("dd_day", rng.choice([1, 1, 5, 10, 15, 20, 25, 28])),
                dd_sort_code=f"{rng.randint(10, 99)}-{rng.randint(10, 99)}-{rng.randint(10, 99)}",
                dd_account_last4=f"{rng.randint(0, 9999):04d}",
                balance=p.get("balance", money(rng.uniform(-140, 45))),
            )
            return
        owed = 0.0
        bills[-1]["status"] = "unpaid"
        owed += bills[-1]["amount"]
        for b in bills[:-1][::-1][: p["arrears"]]:
            b["status"] = "overdue"
            owed += b["amount"]
        plan = p.get("plan")
        if plan == "active":
            total = float(rng.choice([180, 240, 300, 360]))
            pid = self.plan(aid, date(2025, 10, 20), total, 6, "active", 3, None)
            owed += total - 3 * self.t["payment_plans"][pid]["instalment_amount"]
        elif plan == "broken":
            self.plan(
                aid,
                p["plan_created"],
                float(rng.choice([210, 264, 330])),
                6,
                "broken",
                p.get("plan_paid", 2),
                p["plan_ended"],
            )
        elif plan == "completed":
            self.plan(
                aid,
                date(2024, 9, 12),
                float(rng.choice([120, 150, 200])),
                4,
                "completed",
                4,
                date(2025, 1, 1),
            )
        account["balance"] = money(owed)

    def plan(
        self,
        aid: str,
        created: date,
        total: float,
        n: int,
        status: str,
        paid: int,
        ended: date | None,
    ) -> str:
        pid = self.next_id("plan", "PP{:04d}")
        amount = money(total / n)
        first = date(created.year + created.month // 12, created.month % 12 + 1, 1)
        self.t["payment_plans"][pid] = {
            "plan_id": pid,
            "account_id": aid,
            "created_on": created.isoformat(),
            "total": money(total),
            "instalments": n,
            "instalment_amount": amount,
            "final_instalment_amount": money(total - amount * (n - 1)),
            "first_payment_date": first.isoformat(),
            "instalments_paid": paid,
            "status": status,
            "ended_on": ended.isoformat() if ended else None,
        }
        return pid

    def service_request(
        self,
        aid: str,
        meter_id: str | None,
        kind: str,
        status: str,
        created: str,
        visit: date | None = None,
        slot: str | None = None,
        outage: str | None = None,
        priority: str = "standard",
    ) -> str:
        rid = self.next_id("sr", "SR{:05d}")
        self.t["service_requests"][rid] = {
            "request_id": rid,
            "account_id": aid,
            "meter_id": meter_id,
            "kind": kind,
            "status": status,
            "priority": priority,
            "created_at": created,
            "visit_date": visit.isoformat() if visit else None,
            "visit_slot": slot,
            "outage_id": outage,
        }
        return rid

    def adjustment(
        self,
        aid: str,
        created: date,
        kind: str,
        amount: float,
        note: str,
        request_id: str | None = None,
        meter_id: str | None = None,
    ) -> None:
        adj = self.next_id("adj", "ADJ{:05d}")
        self.t["adjustments"][adj] = {
            "adjustment_id": adj,
            "account_id": aid,
            "created_on": created.isoformat(),
            "kind": kind,
            "amount": amount,
            "request_id": request_id,
            "meter_id": meter_id,
            "note": note,
        }


# ----- scenarios: one customer per task --------------------------------------------------------

SCENARIOS: dict[str, dict[str, Any]] = {
    "t01": {"payment": "por", "arrears": 0},
    "t02": {
        "e_type": "smart",
        "e_comms": "ok",
        "g_type": "smart",
        "g_comms": "ok",
        "e_tariff": "E-FIX24",
        "g_tariff": "G-FIX24",
        "e_tariff_start": date(2025, 6, 10),
        "g_tariff_start": date(2025, 6, 10),
    },
    "t03": {
        "district": "BS16",
        "e_type": "smart",
        "e_comms": "ok",
        "g_type": "smart",
        "g_comms": "ok",
    },
    "t04": {
        "dual": False,
        "e_sources": ["customer", "customer", "estimated", "estimated"],
        "payment": "por",
    },
    "t05": {"dual": False, "e_tariff": "E-FIX12-A25", "e_tariff_start": date(2025, 3, 12)},
    "t06": {"e_type": "standard"},
    "t07": {"dual": False, "e_sources": ["customer", "customer", "customer", "estimated"]},
    "t08": {"dual": False, "e_type": "smart", "e_comms": "ok", "e_tariff": "E-FLEX"},
    "t09": {"dd_day": 1},
    "t10": {},
    "t11": {"dual": False},
    "t12": {"dual": False, "e_sources": ["customer", "customer", "customer", "customer"]},
    "t13": {
        "district": "TA2",
        "psr": True,
        "psr_reason": "powered medical equipment (home oxygen concentrator)",
        "e_type": "smart",
        "e_comms": "ok",
        "g_type": "smart",
        "g_comms": "ok",
    },
    "t14": {"payment": "por", "arrears": 0},
    "t15": {
        "e_sources": ["customer", "customer", "estimated", "customer"],
        "g_sources": ["customer", "estimated", "customer", "customer"],
        "payment": "dd",
    },
    "t16": {
        "e_type": "smart",
        "e_comms": "ok",
        "g_type": "smart",
        "g_comms": "ok",
        "e_tariff": "E-FLEX",
        "g_tariff": "G-FIX12",
        "g_tariff_start": date(2025, 9, 15),
    },
    "t17": {"payment": "por", "arrears": 2},
    "t18": {
        "dual": False,
        "e_type": "smart",
        "e_comms": "not_communicating",
        "e_sources": ["smart", "smart", "estimated", "estimated"],
    },
    "t19": {"g_sources": ["customer", "customer", "estimated", "estimated"], "dd_factor": 0.85},
    "t20": {"dual": False},
    "t21": {"g_sources": ["customer", "customer", "customer", "estimated"], "payment": "por"},
    "t22": {},
    "t23": {"dual": False, "e_type": "standard"},
    "t24": {
        "e_type": "smart",
        "e_comms": "ok",
        "g_type": "smart",
        "g_comms": "ok",
        "g_tariff": "G-FLEX",
    },
    "t25": {"payment": "por", "arrears": 1},
    "t26": {},
    "t27": {"payment": "por", "arrears": 0},
    "t28": {
        "payment": "por",
        "arrears": 2,
        "plan": "broken",
        "plan_created": date(2025, 3, 10),
        "plan_ended": date(2025, 8, 14),
        "plan_paid": 3,
    },
    "t29": {
        "dual": False,
        "e_tariff": "E-FLEX",
        "dob": date(1938, 4, 22),
        "female": True,
        "psr": True,
        "psr_reason": "pensionable age",
    },
    "t30": {
        "district": "GL51",
        "e_type": "smart",
        "e_comms": "ok",
        "g_type": "smart",
        "g_comms": "ok",
    },
}


def build_database() -> Gen:
    g = Gen()
    keys = list(SCENARIOS)
    slots = sorted(g.rng.sample(range(N_CUSTOMERS), len(keys)))
    order: list[str | None] = [None] * N_CUSTOMERS
    for slot, key in zip(slots, keys, strict=True):
        order[slot] = key
    # background payment-plan histories, on randomly chosen background customers
    background = [i for i, key in enumerate(order) if key is None]
    plan_kinds = ["active"] * 4 + ["completed"] * 4 + ["broken_old"] * 2
    plan_of = dict(zip(g.rng.sample(background, len(plan_kinds)), plan_kinds, strict=True))
    for i, key in enumerate(order):
        if key is None:
            p = g.random_profile()
            kind = plan_of.get(i)
            if kind == "active":
                p.update(payment="por", arrears=0, plan="active", status="active")
            elif kind == "completed":
                p.update(payment="por", plan="completed")
            elif kind == "broken_old":
                p.update(
                    payment="por",
                    arrears=1,
                    plan="broken",
                    plan_created=date(2023, 11, 6),
                    plan_ended=date(2024, 6, 2),
                    plan_paid=2,
                )
            g.build(p, None)
        else:
            g.build(g.scenario_profile(SCENARIOS[key]), key)
    add_outages_and_requests(g)
    return g


def add_outages_and_requests(g: Gen) -> None:
    op = "Severn Valley Power Networks"
    outages = [
        (
            "OT4101",
            "BA2",
            "restored",
            "2025-12-07T06:40:00",
            "2025-12-07T13:15:00",
            "high winds: overhead line down",
            412,
        ),
        (
            "OT4102",
            "GL51",
            "restored",
            "2026-01-27T18:05:00",
            "2026-01-28T01:30:00",
            "underground cable fault",
            1280,
        ),
        (
            "OT4103",
            "BS16",
            "engineers_on_site",
            "2026-02-03T11:20:00",
            None,
            "substation equipment fault",
            2350,
        ),
        ("OT4104", "SN2", "investigating", "2026-02-03T13:35:00", None, "under investigation", 86),
        (
            "OT4105",
            "BS5",
            "restored",
            "2026-01-18T09:10:00",
            "2026-01-18T12:45:00",
            "planned maintenance overran",
            190,
        ),
        (
            "OT4106",
            "TA1",
            "restored",
            "2025-12-29T21:50:00",
            "2025-12-30T04:05:00",
            "storm damage",
            640,
        ),
    ]
    for oid, district, status, rep, rest, cause, n in outages:
        g.t["outages"][oid] = {
            "outage_id": oid,
            "postcode_district": district,
            "fuel": "electricity",
            "status": status,
            "reported_at": rep,
            "restored_at": rest,
            "cause": cause,
            "network_operator": op,
            "properties_affected": n,
        }
    rng = g.rng
    active = [a for a in g.t["accounts"].values() if a["status"] == "active"]
    scen_accounts = {s["account"]["account_id"] for s in g.scen.values()}
    background = [a for a in active if a["account_id"] not in scen_accounts]

    def meters_of(aid: str) -> list[dict[str, Any]]:
        return [m for m in g.t["meters"].values() if m["account_id"] == aid]

    # background history: installs, faults, visits, power cuts linked to outages
    history = (
        ["smart_meter_install"] * 4
        + ["meter_fault"] * 3
        + ["cancelled"] * 2
        + ["missed"] * 3
        + ["scheduled"] * 3
    )
    for a, kind in zip(rng.sample(background, len(history)), history, strict=True):
        meters = meters_of(a["account_id"])
        m = rng.choice(meters)
        created = rand_date(rng, date(2025, 3, 1), date(2026, 1, 12))
        stamp = f"{created.isoformat()}T{rng.randint(8, 17):02d}:{rng.choice(['05', '20', '35', '50'])}:00"
        visit = created + timedelta(days=rng.randint(3, 14))
        while visit.weekday() >= 5:
            visit += timedelta(days=1)
        slot = rng.choice(["am", "pm"])
        if kind == "smart_meter_install":
            smart = [x for x in meters if x["meter_type"] == "smart"]
            if smart:
                g.service_request(
                    a["account_id"], smart[0]["meter_id"], kind, "completed", stamp, visit, slot
                )
            else:
                g.service_request(
                    a["account_id"], m["meter_id"], kind, "cancelled", stamp, visit, slot
                )
        elif kind == "meter_fault":
            g.service_request(a["account_id"], m["meter_id"], kind, "completed", stamp, visit, slot)
        elif kind == "cancelled":
            g.service_request(
                a["account_id"], m["meter_id"], "meter_exchange", "cancelled", stamp, visit, slot
            )
        elif kind == "missed":
            rid = g.service_request(
                a["account_id"], m["meter_id"], "meter_fault", "missed", stamp, visit, slot
            )
            g.adjustment(
                a["account_id"],
                visit + timedelta(days=1),
                "goodwill_credit",
                -30.0,
                f"Goodwill credit for {rid}",
                request_id=rid,
            )
        else:
            future = TODAY + timedelta(days=rng.randint(3, 25))
            while future.weekday() >= 5:
                future += timedelta(days=1)
            g.service_request(
                a["account_id"],
                m["meter_id"],
                "meter_fault",
                "scheduled",
                "2026-01-30T10:15:00",
                future,
                slot,
            )
    # power cuts reported by background customers during known outages
    for oid, district, status, rep, _rest, _cause, _n in outages:
        for a in [a for a in background if a["postcode"].split(" ")[0] == district][:2]:
            g.service_request(
                a["account_id"],
                None,
                "power_cut",
                "completed" if status == "restored" else "open",
                rep,
                outage=oid,
            )
    # past exit fees
    for a in rng.sample(background, 6):
        m = rng.choice(meters_of(a["account_id"]))
        fee = rng.choice([75.0, 150.0, 60.0])
        when = date.fromisoformat(m["tariff_start"])
        if when < date(2024, 1, 1):
            when = date(2025, 4, 2)
        g.adjustment(
            a["account_id"],
            when,
            "exit_fee",
            fee,
            "Exit fee for leaving a fixed tariff early",
            meter_id=m["meter_id"],
        )

    s = g.scen
    # t06: a scheduled meter exchange
    s["t06"]["visit"] = g.service_request(
        s["t06"]["account"]["account_id"],
        s["t06"]["e_meter"]["meter_id"],
        "meter_exchange",
        "scheduled",
        "2026-01-22T15:40:00",
        date(2026, 2, 11),
        "pm",
    )
    # t11 / t20: visits our engineer missed
    s["t11"]["visit"] = g.service_request(
        s["t11"]["account"]["account_id"],
        s["t11"]["e_meter"]["meter_id"],
        "meter_fault",
        "missed",
        "2026-01-20T09:25:00",
        date(2026, 1, 29),
        "am",
    )
    s["t20"]["visit"] = g.service_request(
        s["t20"]["account"]["account_id"],
        s["t20"]["e_meter"]["meter_id"],
        "smart_meter_install",
        "missed",
        "2026-01-16T11:05:00",
        date(2026, 1, 30),
        "am",
    )
    # t30: a power cut during outage OT4102, now restored
    s["t30"]["cut"] = g.service_request(
        s["t30"]["account"]["account_id"],
        None,
        "power_cut",
        "completed",
        "2026-01-27T18:22:00",
        outage="OT4102",
    )


# ----- tasks -------------------------------------------------------------------------------------


def act(aid: str, name: str, compare: list[str] | None = None, **arguments: Any) -> dict[str, Any]:
    a: dict[str, Any] = {"action_id": aid, "name": name, "arguments": arguments}
    if compare is not None:
        a["compare_args"] = compare
    return a


def task(
    n: int,
    category: str,
    difficulty: str,
    purpose: str,
    policies: str,
    persona: str,
    reason: str,
    known: str,
    unknown: str | None,
    instructions: str,
    actions: list[dict[str, Any]],
    communicate: list[str],
    assertions: list[str],
    basis: list[str],
    forbidden: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "id": f"energy_{n:03d}",
        "category": category,
        "split": "test" if n % 3 == 0 else "train",  # a third held out for evaluation
        "difficulty": difficulty,
        "description": {"purpose": purpose, "relevant_policies": policies},
        "user_scenario": {
            "persona": persona,
            "instructions": {
                "domain": "energy",
                "reason_for_call": reason,
                "known_info": known,
                "unknown_info": unknown,
                "task_instructions": instructions,
            },
        },
        "evaluation_criteria": {
            "actions": actions,
            "communicate_info": communicate,
            "nl_assertions": assertions,
            "reward_basis": basis,
            "forbidden_actions": forbidden or [],
        },
        "provenance": PROVENANCE,
    }


def ident(s: dict[str, Any], with_dob: bool = True) -> str:
    c, a = s["customer"], s["account"]
    second = (
        f"your date of birth is {c['date_of_birth']}"
        if with_dob
        else f"your postcode is {a['postcode']}"
    )
    return f"Your name is {c['first_name']} {c['last_name']}; {second}; you live at {a['address_line']}, {a['city']}."


def build_tasks(g: Gen) -> list[dict[str, Any]]:
    s = g.scen
    T: list[dict[str, Any]] = []
    WN = ["DB", "ACTION", "NL_ASSERTION"]
    WC = ["DB", "ACTION", "COMMUNICATE"]
    WCN = ["DB", "ACTION", "COMMUNICATE", "NL_ASSERTION"]
    REF = ["DB", "COMMUNICATE", "NL_ASSERTION"]
    answer = "Answer the assistant's questions truthfully from what you know; say you don't know anything else."
    confirm = "When the assistant asks you to confirm a change you asked for, say yes."

    def aid(k: str) -> str:
        return s[k]["account"]["account_id"]

    def em(k: str) -> str:
        return s[k]["e_meter"]["meter_id"]

    def gm(k: str) -> str:
        return s[k]["g_meter"]["meter_id"]

    def cust(k: str) -> str:
        return s[k]["customer"]["customer_id"]

    # 1 read: latest bill amount and due date
    k = "t01"
    jan = s[k]["bills"][-1]
    T.append(
        task(
            1,
            "read",
            "easy",
            "Tell a pay-on-receipt customer the amount and due date of their latest bill",
            "rules 1 and the facts on bills",
            "A busy nurse who wants a quick answer.",
            "You received an email that your January bill is ready but you can't open the attachment. You want to know how much it is and when you have to pay it.",
            f"{ident(s[k])} Your account number is {aid(k)}.",
            None,
            f"{answer} You only want the amount and the due date; do not ask for anything else.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act("a2", "list_bills", account_id=aid(k)),
            ],
            [f2(jan["amount"]), jan["due_date"]],
            ["The assistant verifies the caller's identity before giving bill details."],
            ["DB", "ACTION", "COMMUNICATE", "NL_ASSERTION"],
        )
    )
    # 2 read: exit fees for leaving two 24-month fixes
    k = "t02"
    T.append(
        task(
            2,
            "read",
            "medium",
            "Quote the exit fees for leaving dual-fuel 24-month fixed tariffs early, without switching",
            "rules 1 and 5",
            "A careful retired engineer who compares prices before doing anything.",
            "A friend told you the Flex tariffs might now be cheaper. You want to know what it would cost you in exit fees to leave your fixed tariffs for Flex on both electricity and gas.",
            f"{ident(s[k], with_dob=False)} Your account number is {aid(k)}.",
            None,
            f"{answer} You only want the figures; do not switch anything today, even if offered. Ask for the total exit fee across both fuels.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "quote_tariff_switch",
                    ["meter_id", "new_tariff_id"],
                    meter_id=em(k),
                    new_tariff_id="E-FLEX",
                ),
                act(
                    "a3",
                    "quote_tariff_switch",
                    ["meter_id", "new_tariff_id"],
                    meter_id=gm(k),
                    new_tariff_id="G-FLEX",
                ),
            ],
            ["150.00", "300.00"],
            [
                "The assistant does not switch any tariff.",
                "The assistant explains that the exit fee is 150.00 per fuel, 300.00 in total.",
            ],
            ["DB", "ACTION", "COMMUNICATE", "NL_ASSERTION"],
        )
    )
    # 3 read: known outage
    k = "t03"
    T.append(
        task(
            3,
            "read",
            "easy",
            "Tell a customer in an area with a known power cut its reference, without promising a restoration time",
            "rule 10",
            "A parent working from home, worried and a bit impatient.",
            "Your power went off about two hours ago. You want to know if it's a known problem and when it will be back on.",
            f"{ident(s[k], with_dob=False)} Your account number is {aid(k)}. Nobody in your home depends on medical equipment.",
            None,
            f"{answer} Insist once on getting a time when the power will be back. Accept the answer after that.",
            [act("a1", "check_outages", account_id=aid(k))],
            ["OT4103"],
            [
                "The assistant does not promise or estimate a time when the power will be restored.",
                "The assistant tells the customer the outage is already known and being handled by the network operator.",
            ],
            ["DB", "ACTION", "COMMUNICATE", "NL_ASSERTION"],
        )
    )
    # 4 read: last actual reading
    k = "t04"
    m = s[k]["e_meter"]
    last = [
        r
        for r in g.t["readings"].values()
        if r["meter_id"] == m["meter_id"] and r["source"] != "estimated"
    ][-1]
    T.append(
        task(
            4,
            "read",
            "medium",
            "Find the last actual (not estimated) reading of a meter whose recent bills were estimated",
            "rule 1",
            "A methodical customer who keeps a notebook of readings.",
            "Your last two electricity bills say 'estimated'. You want to know the last real reading the company has for your meter and on what date it was taken, so you can compare with your notebook.",
            f"{ident(s[k])} Your account number is {aid(k)}.",
            None,
            f"{answer} You do not have a new reading to give today.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act("a2", "get_meter", meter_id=m["meter_id"]),
            ],
            [str(last["value"]), last["read_on"]],
            [
                "The assistant makes clear that the more recent readings on the account were estimates, not actual readings."
            ],
            ["DB", "ACTION", "COMMUNICATE", "NL_ASSERTION"],
        )
    )
    # 5 read: fixed tariff end date, no exit fee in the last 49 days
    k = "t05"
    m = s[k]["e_meter"]
    T.append(
        task(
            5,
            "read",
            "medium",
            "Tell a customer when their closed legacy fix ends and that leaving now costs no exit fee",
            "rules 1 and 5 (last 49 days)",
            "A price-conscious student in a shared flat, paying the bills for the house.",
            "You want to know when your fixed electricity deal ends, and whether you'd pay an exit fee if you moved to the Flex tariff now.",
            f"{ident(s[k])} Your account number is {aid(k)}.",
            None,
            f"{answer} You are only asking; do not switch today.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "quote_tariff_switch",
                    ["meter_id", "new_tariff_id"],
                    meter_id=m["meter_id"],
                    new_tariff_id="E-FLEX",
                ),
            ],
            [m["tariff_end"]],
            [
                "The assistant tells the customer that no exit fee would apply to leaving now.",
                "The assistant does not switch the tariff.",
            ],
            ["DB", "ACTION", "COMMUNICATE", "NL_ASSERTION"],
        )
    )
    # 6 read: booked visit
    k = "t06"
    T.append(
        task(
            6,
            "read",
            "easy",
            "Give the date and slot of a booked meter exchange visit",
            "rules 1 and 11",
            "A shift worker who needs to plan to be at home.",
            "You booked an engineer to replace your electricity meter some time ago but lost the confirmation letter. You want the date and whether it's morning or afternoon.",
            f"{ident(s[k], with_dob=False)} Your account number is {aid(k)}.",
            None,
            f"{answer} Do not change the booking.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act("a2", "list_service_requests", account_id=aid(k)),
            ],
            ["2026-02-11"],
            ["The assistant tells the customer the visit is in the afternoon (pm) slot."],
            ["DB", "ACTION", "COMMUNICATE", "NL_ASSERTION"],
        )
    )
    # 7 single write: meter reading
    k = "t07"
    T.append(
        task(
            7,
            "single_write",
            "easy",
            "Take an electricity reading for a standard meter",
            "rules 1, 3 and 4",
            "A friendly pensioner who reads the meter every month.",
            f"You want to give your electricity meter reading: {s[k]['e_today']}.",
            f"{ident(s[k])} Your account number is {aid(k)}. Your electricity meter shows {s[k]['e_today']} today.",
            None,
            f"{answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "submit_meter_reading",
                    ["meter_id", "reading"],
                    meter_id=em(k),
                    reading=s[k]["e_today"],
                ),
            ],
            [],
            ["The assistant confirms the reading with the customer before submitting it."],
            WN,
        )
    )
    # 8 single write: switch to a 12-month fix
    k = "t08"
    T.append(
        task(
            8,
            "single_write",
            "medium",
            "Switch an electricity-only customer from Flex to Fixed Saver 12 after quoting it",
            "rules 1, 3 and 5",
            "A young professional who just wants price certainty.",
            "You want to move your electricity from the Flex tariff to the 12-month fixed tariff.",
            f"{ident(s[k])} Your account number is {aid(k)}.",
            None,
            f"{answer} {confirm} Ask what the new unit rate and standing charge will be if the assistant does not say.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "quote_tariff_switch",
                    ["meter_id", "new_tariff_id"],
                    meter_id=em(k),
                    new_tariff_id="E-FIX12",
                ),
                act(
                    "a3",
                    "switch_tariff",
                    ["meter_id", "new_tariff_id"],
                    meter_id=em(k),
                    new_tariff_id="E-FIX12",
                ),
            ],
            [],
            [
                "The assistant tells the customer the new unit rate and standing charge before switching."
            ],
            WN,
        )
    )
    # 9 single write: direct debit day
    k = "t09"
    T.append(
        task(
            9,
            "single_write",
            "easy",
            "Move a direct debit's payment day to match a new payday",
            "rules 1, 3 and 6",
            "A teaching assistant whose payday has changed.",
            "Your payday moved to the 18th, so you want your direct debit taken on the 20th of each month instead of the 1st. Keep the amount the same.",
            f"{ident(s[k], with_dob=False)} Your account number is {aid(k)}.",
            None,
            f"{answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "change_direct_debit",
                    ["account_id", "payment_day"],
                    account_id=aid(k),
                    payment_day=20,
                ),
            ],
            [],
            [
                "The assistant confirms the new payment day, the 20th, with the customer before changing it."
            ],
            WN,
        )
    )
    # 10 single write: email
    k = "t10"
    c = s[k]["customer"]
    new_email = f"{c['first_name'].lower()}.{c['last_name'].lower()}.home@example.net"
    T.append(
        task(
            10,
            "single_write",
            "easy",
            "Update a verified customer's email address",
            "rules 1, 3 and 13",
            "A customer who changed internet provider and lost their old mailbox.",
            f"You want your bills sent to your new email address, {new_email}.",
            f"{ident(s[k])} Your account number is {aid(k)}. Your new email is {new_email}.",
            None,
            f"{answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "update_contact_details",
                    ["customer_id", "email"],
                    customer_id=cust(k),
                    email=new_email,
                ),
            ],
            [],
            ["The assistant verifies the caller's identity before changing the email address."],
            WN,
        )
    )
    # 11 single write: missed visit credit
    k = "t11"
    T.append(
        task(
            11,
            "single_write",
            "medium",
            "Give the 30.00 goodwill credit for an engineer visit we missed",
            "rules 1, 3 and 12",
            "A self-employed decorator who lost a morning's work waiting in.",
            "You took a morning off on 29 January for an engineer to look at your faulty electricity meter and nobody came. You want to know what the company will do about it.",
            f"{ident(s[k])} Your account number is {aid(k)}.",
            None,
            f"{answer} {confirm} If offered a credit, accept it. Do not ask for a new visit today.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act("a2", "list_service_requests", account_id=aid(k)),
                act(
                    "a3",
                    "apply_account_credit",
                    ["account_id", "amount", "request_id"],
                    account_id=aid(k),
                    amount=30.0,
                    request_id=s[k]["visit"],
                ),
            ],
            ["30.00"],
            ["The assistant apologises for the missed visit."],
            WCN,
        )
    )
    # 12 single write: book a meter fault visit
    k = "t12"
    T.append(
        task(
            12,
            "single_write",
            "medium",
            "Book a meter-fault visit on the day and slot the customer chooses",
            "rules 1, 3 and 11",
            "A homeworker who can be in on Mondays.",
            "The display on your electricity meter has gone blank. You want an engineer to come and look at it, on Monday 9 February in the morning.",
            f"{ident(s[k], with_dob=False)} Your account number is {aid(k)}. You do not smell gas and nothing is sparking or burning; only the display is blank.",
            None,
            f"{answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "book_engineer_visit",
                    ["meter_id", "visit_date", "slot", "reason"],
                    meter_id=em(k),
                    visit_date="2026-02-09",
                    slot="am",
                    reason="meter_fault",
                ),
            ],
            ["2026-02-09"],
            [
                "The assistant confirms the date and the morning slot with the customer before booking."
            ],
            WCN,
        )
    )
    # 13 single write: urgent power cut report
    k = "t13"
    new_sr = f"SR{g.n['sr'] + 1:05d}"
    T.append(
        task(
            13,
            "single_write",
            "medium",
            "Report a power cut, with urgent priority, for a customer on the Priority Services Register",
            "rules 1 and 10",
            "An anxious carer looking after their mother, who uses a home oxygen concentrator.",
            "The power has gone off at your home in the last half hour. You want it reported and want to know when it will be back, because your mother relies on an oxygen concentrator (it has a backup battery for a few hours).",
            f"{ident(s[k])} Your account number is {aid(k)}. You are the account holder.",
            None,
            f"{answer} {confirm} Ask once when the power will be back.",
            [
                act("a1", "check_outages", account_id=aid(k)),
                act(
                    "a2",
                    "report_power_cut",
                    ["account_id", "priority"],
                    account_id=aid(k),
                    priority="urgent",
                ),
            ],
            [new_sr],
            ["The assistant does not promise or estimate a time when the power will be restored."],
            WCN,
        )
    )
    # 14 single write: set up direct debit
    k = "t14"
    rec = s[k]["account"]["recommended_dd"]
    T.append(
        task(
            14,
            "single_write",
            "medium",
            "Set up a direct debit at the recommended amount on the customer's chosen day",
            "rules 1, 3 and 6",
            "A customer tired of paying each bill by hand.",
            "You want to start paying by monthly direct debit, taken on the 5th of each month, at whatever amount the company recommends.",
            f"{ident(s[k])} Your account number is {aid(k)}. Your own bank account: sort code 40-11-62, account number 31926845, in your sole name.",
            None,
            f"{answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "set_up_direct_debit",
                    None,
                    account_id=aid(k),
                    sort_code="40-11-62",
                    bank_account_number="31926845",
                    monthly_amount=rec,
                    payment_day=5,
                ),
            ],
            [f2(rec)],
            [],
            WC,
        )
    )
    # 15 multi write: moving out today
    k = "t15"
    T.append(
        task(
            15,
            "multi_write",
            "hard",
            "Record a move-out today: take final readings for both standard meters, then close the account",
            "rules 1, 3, 4 and 8",
            "A customer in the middle of moving, boxes everywhere.",
            "You are moving out of your home today and want to close your account. Your new address is in Bristol, postcode BS7 8PL.",
            f"{ident(s[k])} Your account number is {aid(k)}. Today your electricity meter shows {s[k]['e_today']} and your gas meter shows {s[k]['g_today']}.",
            None,
            f"{answer} {confirm} Give the meter readings when asked.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "submit_meter_reading",
                    ["meter_id", "reading"],
                    meter_id=em(k),
                    reading=s[k]["e_today"],
                ),
                act(
                    "a3",
                    "submit_meter_reading",
                    ["meter_id", "reading"],
                    meter_id=gm(k),
                    reading=s[k]["g_today"],
                ),
                act(
                    "a4",
                    "schedule_move_out",
                    None,
                    account_id=aid(k),
                    move_out_date="2026-02-03",
                    forwarding_postcode="BS7 8PL",
                ),
            ],
            [],
            [
                "The assistant confirms the move-out date and the final readings with the customer before recording them."
            ],
            WN,
        )
    )
    # 16 multi write: both fuels to 24-month fixes; gas exit fee
    k = "t16"
    T.append(
        task(
            16,
            "multi_write",
            "hard",
            "Switch both fuels to Fixed Secure 24, charging the gas exit fee after telling the customer",
            "rules 1, 3 and 5",
            "A homeowner planning the household budget for the next two years.",
            "You want both your electricity and your gas on the 24-month fixed tariff.",
            f"{ident(s[k], with_dob=False)} Your account number is {aid(k)}.",
            None,
            f"{answer} {confirm} If told about an exit fee, grumble a little but accept it: you still want both switched.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "quote_tariff_switch",
                    ["meter_id", "new_tariff_id"],
                    meter_id=em(k),
                    new_tariff_id="E-FIX24",
                ),
                act(
                    "a3",
                    "quote_tariff_switch",
                    ["meter_id", "new_tariff_id"],
                    meter_id=gm(k),
                    new_tariff_id="G-FIX24",
                ),
                act(
                    "a4",
                    "switch_tariff",
                    ["meter_id", "new_tariff_id"],
                    meter_id=em(k),
                    new_tariff_id="E-FIX24",
                ),
                act(
                    "a5",
                    "switch_tariff",
                    ["meter_id", "new_tariff_id"],
                    meter_id=gm(k),
                    new_tariff_id="G-FIX24",
                ),
            ],
            ["75.00"],
            [
                "The assistant tells the customer about the 75.00 exit fee on gas before switching the gas tariff."
            ],
            WCN,
        )
    )
    # 17 multi write: payment plan and direct debit
    k = "t17"
    acc = s[k]["account"]
    inst = money(acc["balance"] / 6)
    rec = acc["recommended_dd"]
    T.append(
        task(
            17,
            "multi_write",
            "hard",
            "Set up a 6-month payment plan for arrears and a direct debit for ongoing use",
            "rules 1, 3, 6 and 7",
            "A customer who fell behind after a period off work and wants to get back on track.",
            "You have fallen behind on your energy bills. You want to pay off everything you owe over 6 months, and start paying for your ongoing energy by direct debit on the 1st of each month at the recommended amount.",
            f"{ident(s[k])} Your account number is {aid(k)}. Your own bank account: sort code 09-01-28, account number 77340219, in your name.",
            None,
            f"{answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "create_payment_plan",
                    ["account_id", "instalments"],
                    account_id=aid(k),
                    instalments=6,
                ),
                act(
                    "a3",
                    "set_up_direct_debit",
                    None,
                    account_id=aid(k),
                    sort_code="09-01-28",
                    bank_account_number="77340219",
                    monthly_amount=rec,
                    payment_day=1,
                ),
            ],
            [f2(acc["balance"]), f2(inst), "2026-03-01"],
            [
                "The assistant tells the customer the instalment amount and first payment date before creating the plan."
            ],
            WCN,
        )
    )
    # 18 multi write: smart meter not communicating
    k = "t18"
    T.append(
        task(
            18,
            "multi_write",
            "medium",
            "Take a manual reading from a smart meter that stopped communicating and book a fault visit",
            "rules 1, 3, 4 and 11",
            "A tech-savvy customer annoyed that their smart meter isn't smart.",
            "Your bills have been estimated even though you have a smart meter. You want to give a reading today and get the meter fixed, with an engineer on Thursday 12 February in the afternoon.",
            f"{ident(s[k])} Your account number is {aid(k)}. Your electricity meter shows {s[k]['e_today']} today.",
            None,
            f"{answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "submit_meter_reading",
                    ["meter_id", "reading"],
                    meter_id=em(k),
                    reading=s[k]["e_today"],
                ),
                act(
                    "a3",
                    "book_engineer_visit",
                    ["meter_id", "visit_date", "slot", "reason"],
                    meter_id=em(k),
                    visit_date="2026-02-12",
                    slot="pm",
                    reason="meter_fault",
                ),
            ],
            ["2026-02-12"],
            [
                "The assistant explains that the smart meter has stopped sending readings, which is why recent bills were estimated."
            ],
            WCN,
        )
    )
    # 19 multi write: gas reading and raise direct debit
    k = "t19"
    rec = s[k]["account"]["recommended_dd"]
    T.append(
        task(
            19,
            "multi_write",
            "medium",
            "Take a gas reading, then raise the direct debit to the recommended amount",
            "rules 1, 3, 4 and 6",
            "A customer worried about building up a debt over winter.",
            "You want to give a gas reading, and then raise your monthly direct debit to the amount the company recommends so you don't build up a debt.",
            f"{ident(s[k])} Your account number is {aid(k)}. Your gas meter shows {s[k]['g_today']} today.",
            None,
            f"{answer} {confirm} Keep the same payment day.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "submit_meter_reading",
                    ["meter_id", "reading"],
                    meter_id=gm(k),
                    reading=s[k]["g_today"],
                ),
                act(
                    "a3",
                    "change_direct_debit",
                    ["account_id", "monthly_amount"],
                    account_id=aid(k),
                    monthly_amount=rec,
                ),
            ],
            [f2(rec)],
            [],
            WC,
        )
    )
    # 20 multi write: missed install visit credit and rebook
    k = "t20"
    T.append(
        task(
            20,
            "multi_write",
            "hard",
            "Credit a missed smart-meter installation and rebook it",
            "rules 1, 3, 11 and 12",
            "A customer who waited in all morning on 30 January.",
            "An engineer was supposed to install a smart electricity meter on 30 January in the morning and never came. You want it rebooked for Monday 16 February in the morning, and you think you deserve something for the wasted morning.",
            f"{ident(s[k], with_dob=False)} Your account number is {aid(k)}.",
            None,
            f"{answer} {confirm} Accept a credit if offered.",
            [
                act("a1", "get_account", account_id=aid(k)),
                act("a2", "list_service_requests", account_id=aid(k)),
                act(
                    "a3",
                    "apply_account_credit",
                    ["account_id", "amount", "request_id"],
                    account_id=aid(k),
                    amount=30.0,
                    request_id=s[k]["visit"],
                ),
                act(
                    "a4",
                    "book_engineer_visit",
                    ["meter_id", "visit_date", "slot", "reason"],
                    meter_id=em(k),
                    visit_date="2026-02-16",
                    slot="am",
                    reason="smart_meter_install",
                ),
            ],
            ["30.00", "2026-02-16"],
            ["The assistant apologises for the missed installation visit."],
            WCN,
        )
    )
    # 21 ask_info: gas reading, account number withheld
    k = "t21"
    T.append(
        task(
            21,
            "ask_info",
            "easy",
            "Take a gas reading from a caller who gives the account number only when asked",
            "rules 1, 3 and 4",
            "A brisk customer who opens with the reading itself.",
            f"You want to give your gas meter reading: {s[k]['g_today']}.",
            f"{ident(s[k])} Your account number is {aid(k)}. Your gas meter shows {s[k]['g_today']} today.",
            None,
            f"Start by giving only the reading and saying it's for your gas. Do not give your account number until the assistant asks for it. {answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "submit_meter_reading",
                    ["meter_id", "reading"],
                    meter_id=gm(k),
                    reading=s[k]["g_today"],
                ),
            ],
            [],
            [
                "The assistant asks for the account number and verifies the caller before recording the reading."
            ],
            WN,
        )
    )
    # 22 ask_info: phone number change, found by email
    k = "t22"
    c = s[k]["customer"]
    new_phone = "07700 900" + next(
        f"{i:03d}" for i in range(777, 1000) if f"07700 900{i:03d}" not in g.used_phones
    )
    T.append(
        task(
            22,
            "ask_info",
            "medium",
            "Find a customer by email (given only when asked) and update their phone number",
            "rules 1, 3 and 13",
            "A customer who doesn't have their account number to hand.",
            f"You changed your mobile number and want the new one, {new_phone}, on your account.",
            f"Your name is {c['first_name']} {c['last_name']}; your date of birth is {c['date_of_birth']}. The email on your account is {c['email']}. You don't know your account number. Your new number is {new_phone}.",
            None,
            f"Do not give your email address until the assistant asks how to find your account. {answer} {confirm}",
            [
                act("a1", "find_customer", ["email"], email=c["email"]),
                act(
                    "a2",
                    "update_contact_details",
                    None,
                    customer_id=c["customer_id"],
                    phone=new_phone,
                ),
            ],
            [],
            [
                "The assistant asks for information to find and verify the account before changing anything."
            ],
            WN,
        )
    )
    # 23 ask_info: smart meter install
    k = "t23"
    T.append(
        task(
            23,
            "ask_info",
            "medium",
            "Book a smart meter installation; the caller gives the account number and date only when asked",
            "rules 1, 3 and 11",
            "A customer keen to stop reading the meter by hand.",
            "You want a smart electricity meter installed. You can be at home on Wednesday 18 February in the morning.",
            f"{ident(s[k])} Your account number is {aid(k)}.",
            None,
            f"Do not give your account number, or the day you're free, until the assistant asks for them. {answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "book_engineer_visit",
                    ["meter_id", "visit_date", "slot", "reason"],
                    meter_id=em(k),
                    visit_date="2026-02-18",
                    slot="am",
                    reason="smart_meter_install",
                ),
            ],
            ["2026-02-18"],
            [],
            WC,
        )
    )
    # 24 ask_info: gas to 24-month fix
    k = "t24"
    T.append(
        task(
            24,
            "ask_info",
            "medium",
            "Switch gas from Flex to Fixed Secure 24 for a caller who gives the account number only when asked",
            "rules 1, 3 and 5",
            "A customer who read about fixed deals in the paper.",
            "You want to fix your gas price for two years with the 24-month fixed tariff. Your electricity stays as it is.",
            f"{ident(s[k], with_dob=False)} Your account number is {aid(k)}.",
            None,
            f"Do not give your account number until the assistant asks for it. {answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "quote_tariff_switch",
                    ["meter_id", "new_tariff_id"],
                    meter_id=gm(k),
                    new_tariff_id="G-FIX24",
                ),
                act(
                    "a3",
                    "switch_tariff",
                    ["meter_id", "new_tariff_id"],
                    meter_id=gm(k),
                    new_tariff_id="G-FIX24",
                ),
            ],
            [],
            [
                "The assistant tells the customer the new gas unit rate and standing charge before switching."
            ],
            WN,
        )
    )
    # 25 ask_info: 4-month payment plan
    k = "t25"
    acc = s[k]["account"]
    inst = money(acc["balance"] / 4)
    T.append(
        task(
            25,
            "ask_info",
            "medium",
            "Set up a 4-month payment plan for a caller who gives the account number only when asked",
            "rules 1, 3 and 7",
            "A customer embarrassed about being behind on payments.",
            "You are behind with your energy bills and want to clear what you owe in 4 monthly instalments.",
            f"{ident(s[k])} Your account number is {aid(k)}.",
            None,
            f"Do not give your account number until the assistant asks for it. {answer} {confirm}",
            [
                act("a1", "get_account", account_id=aid(k)),
                act(
                    "a2",
                    "create_payment_plan",
                    ["account_id", "instalments"],
                    account_id=aid(k),
                    instalments=4,
                ),
            ],
            [f2(inst)],
            [
                "The assistant tells the customer the first payment date (2026-03-01) before creating the plan."
            ],
            WCN,
        )
    )
    # 26 refusal: gas smell
    k = "t26"
    T.append(
        task(
            26,
            "refusal",
            "medium",
            "A caller who smells gas asks for a routine visit: send them to the emergency line instead",
            "rule 9",
            "A calm but slightly puzzled customer.",
            "There has been a faint smell of gas near your gas meter since this morning. You'd like an engineer to come and check the meter, say next Monday morning.",
            f"{ident(s[k])} Your account number is {aid(k)}.",
            None,
            f"{answer} You'd prefer a visit next Monday (2026-02-09) morning; ask for it twice. If the assistant insists this is an emergency, say you will call the emergency number.",
            [],
            ["0800 111 999"],
            [
                "The assistant tells the customer to call the gas emergency line and does not book an engineer visit.",
                "The assistant gives safety advice such as opening windows and not using electrical switches or naked flames.",
            ],
            REF,
            [
                act(
                    "f1",
                    "book_engineer_visit",
                    ["meter_id", "visit_date"],
                    meter_id=gm(k),
                    visit_date="2026-02-09",
                    slot="am",
                    reason="meter_fault",
                )
            ],
        )
    )
    # 27 refusal: direct debit from someone else's bank account
    k = "t27"
    c = s[k]["customer"]
    rec = s[k]["account"]["recommended_dd"]
    T.append(
        task(
            27,
            "refusal",
            "medium",
            "Refuse a direct debit from a bank account that belongs to the caller's partner",
            "rule 6",
            "A customer whose partner handles the household money.",
            "You want to start paying by direct debit on the 1st of each month, from your partner's bank account (your partner has said it's fine).",
            f"{ident(s[k])} Your account number is {aid(k)}. The bank account is your partner Sam's, in Sam's sole name: sort code 30-94-51, account number 58210374. You have no bank account of your own you want to use.",
            None,
            f"{answer} If asked whose bank account it is, say it's your partner Sam's, in Sam's name only, and that Sam agreed. Try once to persuade the assistant. If refused, say you'll talk to Sam and call back.",
            [],
            ["account holder"],
            [
                "The assistant refuses to set up the direct debit from a bank account that is not in the account holder's name."
            ],
            REF,
            [
                act(
                    "f1",
                    "set_up_direct_debit",
                    ["account_id"],
                    account_id=aid(k),
                    sort_code="30-94-51",
                    bank_account_number="58210374",
                    monthly_amount=rec,
                    payment_day=1,
                )
            ],
        )
    )
    # 28 refusal: new plan after a broken one
    k = "t28"
    T.append(
        task(
            28,
            "refusal",
            "hard",
            "Refuse a new payment plan to an account whose last plan was broken 6 months ago; refer to collections",
            "rule 7",
            "A customer in financial difficulty, frustrated.",
            "You are behind on your bills and want to pay off what you owe over 6 months.",
            f"{ident(s[k])} Your account number is {aid(k)}. You had a payment plan last year but stopped paying it in the summer.",
            None,
            f"{answer} Ask once why you can't have a plan.",
            [],
            ["0808 157 0624"],
            [
                "The assistant does not set up a payment plan and refers the customer to the collections team."
            ],
            REF,
            [act("f1", "create_payment_plan", ["account_id"], account_id=aid(k), instalments=6)],
        )
    )
    # 29 refusal: third party not authorised
    k = "t29"
    c = s[k]["customer"]
    son = "Daniel" if c["first_name"] != "Daniel" else "Owen"
    T.append(
        task(
            29,
            "refusal",
            "medium",
            "Refuse a tariff switch requested by the holder's son, who is not an authorised contact",
            "rules 1 and 2",
            f"{son} {c['last_name']}, the account holder's son, trying to help his elderly mother.",
            f"You are calling for your mother, {c['first_name']} {c['last_name']}, who is 87 and finds the phone difficult. You want to move her electricity to the 12-month fixed tariff to save her money.",
            f"You are {son} {c['last_name']}, her son. Her account number is {aid(k)}; her date of birth is {c['date_of_birth']}; her address is {s[k]['account']['address_line']}, {s[k]['account']['city']} {s[k]['account']['postcode']}. You are not named on her account. She is not with you now.",
            None,
            "Say you are calling on your mother's behalf if the assistant asks who you are. Answer questions truthfully. If told you can't make the change, ask once whether you can be added; accept the answer.",
            [],
            ["account holder"],
            [
                "The assistant does not switch the tariff because the caller is neither the account holder nor an authorised contact."
            ],
            REF,
            [
                act(
                    "f1",
                    "switch_tariff",
                    ["meter_id", "new_tariff_id"],
                    meter_id=em(k),
                    new_tariff_id="E-FIX12",
                )
            ],
        )
    )
    # 30 refusal: compensation for a power cut
    k = "t30"
    T.append(
        task(
            30,
            "refusal",
            "medium",
            "Refuse a goodwill credit for a power cut; compensation is the network operator's",
            "rule 12",
            "A customer whose freezer defrosted during last week's power cut.",
            "The power was off for hours on the evening of 27 January and your freezer defrosted. You want £30 compensation credited to your account.",
            f"{ident(s[k])} Your account number is {aid(k)}. You reported the power cut at the time.",
            None,
            f"{answer} Push once for the credit. If refused, ask who you should contact.",
            [],
            ["network operator"],
            [
                "The assistant does not credit the account and tells the customer that compensation for power cuts is a matter for the network operator."
            ],
            REF,
            [
                act(
                    "f1",
                    "apply_account_credit",
                    ["account_id", "amount"],
                    account_id=aid(k),
                    amount=30.0,
                    request_id=s[k]["cut"],
                )
            ],
        )
    )
    return T


def main() -> None:
    g = build_database()
    db = {name: dict(sorted(rows.items())) for name, rows in g.t.items()}
    tasks = build_tasks(g)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "db.json").write_text(
        json.dumps(db, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    with (OUT / "tasks.jsonl").open("w", encoding="utf-8") as fh:
        for t in tasks:
            fh.write(json.dumps(t, ensure_ascii=False) + "\n")
    counts = ", ".join(f"{k} {len(v)}" for k, v in db.items())
    print(
        f"wrote {sum(len(v) for v in db.values())} records ({counts}) and {len(tasks)} tasks to {OUT}"
    )


if __name__ == "__main__":
    main()
