"""Generate the vetclinic library domain's db.json and tasks.jsonl.

Deterministic: a seeded random.Random builds the background clients, pets and history, and the
hand-written scenario records that the tasks rely on are added first. Run from the repository
root:

    .venv/bin/python scripts/library/gen_vetclinic.py

It rewrites maestro/domains/library/vetclinic/db.json and tasks.jsonl.
"""

from __future__ import annotations

import json
import random
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "maestro" / "domains" / "library" / "vetclinic"
SEED = 20260512

NOW = datetime(2026, 5, 12, 9, 30)
TODAY = NOW.date()
SLOTS_FROM = TODAY
SLOTS_TO = date(2026, 5, 30)
HISTORY_FROM = date(2024, 3, 1)
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
WELLNESS_DISCOUNT = 0.10
LATE_FEE = 35.00
DELIVERY_FEE = 7.50

Rec = dict[str, Any]

# ----- the group: clinics, vets, services ---------------------------------------------------

# fmt: off
SERVICES: list[tuple] = [
    # code, name, fee, minutes, species, desk-bookable, exam, min weeks, max weeks, specialty
    ("WELLNESS", "Wellness exam", 68.00, 30, ["dog", "cat"], True, True, None, None, None),
    ("SICK", "Sick-pet exam", 82.00, 30, ["dog", "cat"], True, True, None, None, None),
    ("VACC", "Vaccination visit", 45.00, 30, ["dog", "cat", "rabbit", "ferret"], True, False, None, None, None),
    ("RECHECK", "Recheck exam", 40.00, 30, ["dog", "cat", "rabbit", "guinea_pig", "ferret", "bird"], True, True, None, None, None),
    ("NAIL", "Nail trim", 22.00, 30, ["dog", "cat", "rabbit", "guinea_pig", "ferret", "bird"], True, False, None, None, None),
    ("MICROCHIP", "Microchip implant", 55.00, 30, ["dog", "cat", "rabbit", "ferret"], True, False, None, None, None),
    ("SENIOR", "Senior wellness screen", 145.00, 30, ["dog", "cat"], True, True, 364, None, None),
    ("PUPPY", "Puppy/kitten first visit", 75.00, 30, ["dog", "cat"], True, True, None, 26, None),
    ("DENTAL_ASSESS", "Dental assessment", 60.00, 30, ["dog", "cat", "rabbit"], True, True, None, None, None),
    ("EXOTIC", "Exotic pet exam", 90.00, 30, ["rabbit", "guinea_pig", "ferret", "bird"], True, True, None, None, None),
    ("BEHAVIOR", "Behavior consultation", 120.00, 30, ["dog", "cat"], True, True, None, None, "behavior"),
    ("DENTAL_CLEAN", "Dental cleaning under anesthesia", 385.00, 180, ["dog", "cat"], False, False, None, None, None),
    ("SPAY_NEUTER", "Spay/neuter surgery", 320.00, 240, ["dog", "cat", "rabbit"], False, False, None, None, None),
]
SERVICE = {
    s[0]: {
        "service_code": s[0], "name": s[1], "fee": s[2], "duration_min": s[3], "species": s[4],
        "desk_bookable": s[5], "is_exam": s[6], "min_age_weeks": s[7], "max_age_weeks": s[8],
        "requires_specialty": s[9],
    }
    for s in SERVICES
}

CLINICS: list[Rec] = [
    {
        "clinic_id": "downtown",
        "name": "Cedar Hollow Downtown",
        "address": "412 Alder Street, Millbrook, OR 97401",
        "phone": "541-555-0100",
        "hours": "Mon-Fri 08:00-18:00; Sat 09:00-13:00; Sun closed",
        "emergency_24h": False,
        "services": ["WELLNESS", "SICK", "VACC", "RECHECK", "NAIL", "MICROCHIP", "SENIOR", "PUPPY",
                     "DENTAL_ASSESS", "DENTAL_CLEAN", "SPAY_NEUTER"],
    },
    {
        "clinic_id": "riverside",
        "name": "Cedar Hollow Riverside",
        "address": "88 River Road, Millbrook, OR 97403",
        "phone": "541-555-0110",
        "hours": "Mon-Fri 08:00-18:00; Sat 09:00-13:00; emergency hospital open 24 hours (541-555-0199)",
        "emergency_24h": True,
        "services": ["WELLNESS", "SICK", "VACC", "RECHECK", "NAIL", "MICROCHIP", "SENIOR", "PUPPY",
                     "DENTAL_CLEAN", "SPAY_NEUTER"],
    },
    {
        "clinic_id": "eastgate",
        "name": "Cedar Hollow Eastgate",
        "address": "2710 Eastgate Boulevard, Alder Falls, OR 97405",
        "phone": "541-555-0120",
        "hours": "Mon-Fri 08:00-18:00; Sat 09:00-13:00; Sun closed",
        "emergency_24h": False,
        "services": ["WELLNESS", "SICK", "VACC", "RECHECK", "NAIL", "MICROCHIP", "PUPPY",
                     "DENTAL_ASSESS", "EXOTIC", "BEHAVIOR", "SPAY_NEUTER"],
    },
]
CLINIC = {c["clinic_id"]: c for c in CLINICS}

DOG_CAT = ["dog", "cat"]
VETS: list[tuple] = [
    # id, name, clinic, species, specialties, working days
    ("V01", "Dr. Priya Raman", "downtown", DOG_CAT, ["internal medicine"], ["Mon", "Tue", "Wed", "Thu", "Fri"]),
    ("V02", "Dr. Marcus Bell", "downtown", DOG_CAT, ["neurology"], ["Mon", "Tue", "Thu", "Sat"]),
    ("V03", "Dr. Elena Sokolova", "downtown", DOG_CAT, ["dentistry"], ["Wed", "Thu", "Fri"]),
    ("V04", "Dr. James Whitaker", "downtown", DOG_CAT, ["general practice"], ["Mon", "Tue", "Wed"]),
    ("V05", "Dr. Helen Okafor", "riverside", DOG_CAT, ["feline medicine"], ["Wed", "Thu", "Fri"]),
    ("V06", "Dr. Samuel Reyes", "riverside", DOG_CAT, ["dermatology"], ["Mon", "Tue", "Wed", "Fri"]),
    ("V07", "Dr. Aiko Tanaka", "riverside", DOG_CAT, ["general practice"], ["Mon", "Tue", "Thu", "Sat"]),
    ("V08", "Dr. Fiona Gallagher", "riverside", ["dog", "cat", "ferret"], ["emergency and critical care"], ["Tue", "Wed", "Thu", "Fri", "Sat"]),
    ("V09", "Dr. Tomas Lindqvist", "eastgate", ["rabbit", "guinea_pig", "ferret", "bird", "cat"], ["exotic animal medicine"], ["Tue", "Thu", "Fri"]),
    ("V10", "Dr. Naledi Dlamini", "eastgate", DOG_CAT, ["behavior"], ["Mon", "Tue", "Thu", "Fri"]),
    ("V11", "Dr. Rachel Kim", "eastgate", ["rabbit", "guinea_pig", "bird", "dog", "cat"], ["exotic animal medicine"], ["Mon", "Wed", "Thu", "Sat"]),
    ("V12", "Dr. Owen Pryce", "eastgate", DOG_CAT, ["general practice"], ["Tue", "Wed", "Thu", "Fri"]),
]
VET = {
    v[0]: {"vet_id": v[0], "name": v[1], "clinic_id": v[2], "species": list(v[3]),
           "specialties": v[4], "working_days": v[5]}
    for v in VETS
}

VACCINES = {
    # species: [(vaccine, interval in days, price)]
    "dog": [("Rabies", 1095, 28.00), ("DHPP", 1095, 32.00), ("Bordetella", 365, 26.00), ("Leptospirosis", 365, 29.00)],
    "cat": [("Rabies", 365, 28.00), ("FVRCP", 1095, 30.00), ("FeLV", 365, 34.00)],
    "rabbit": [("RHDV2", 365, 48.00)],
    "ferret": [("Rabies", 365, 28.00), ("Canine distemper", 365, 31.00)],
    "guinea_pig": [],
    "bird": [],
}
VACCINE_PRICE = {name: price for rows in VACCINES.values() for name, _, price in rows}

MEDICATIONS = {
    # (medication, strength, instructions, quantity, controlled)
    "dog": [
        ("Carprofen", "75 mg", "1 tablet by mouth every 12 hours with food", 60, False),
        ("Apoquel (oclacitinib)", "16 mg", "1 tablet by mouth once daily", 30, False),
        ("Cephalexin", "500 mg", "1 capsule by mouth every 12 hours until finished", 28, False),
        ("Trazodone", "100 mg", "1 tablet by mouth 2 hours before travel or visits", 10, False),
        ("Levothyroxine", "0.5 mg", "1 tablet by mouth every 12 hours", 60, False),
        ("Enalapril", "5 mg", "1 tablet by mouth every 12 hours", 60, False),
        ("Simparica Trio", "20.1-40 kg", "1 chewable tablet by mouth once a month", 6, False),
        ("Tramadol", "50 mg", "1 tablet by mouth every 8-12 hours as needed for pain", 30, True),
        ("Gabapentin", "100 mg", "1 capsule by mouth every 12 hours", 60, True),
        ("Phenobarbital", "16.2 mg", "1 tablet by mouth every 12 hours", 60, True),
    ],
    "cat": [
        ("Methimazole", "2.5 mg", "1 tablet by mouth every 12 hours", 60, False),
        ("Prednisolone", "5 mg", "1/2 tablet by mouth once daily", 30, False),
        ("Amlodipine", "0.625 mg", "1 tablet by mouth once daily", 30, False),
        ("Revolution Plus", "2.8-5.5 kg", "apply 1 tube to the skin once a month", 6, False),
        ("Gabapentin", "100 mg", "1 capsule by mouth 90 minutes before visits", 10, True),
        ("Buprenorphine", "0.3 mg/ml", "0.1 ml in the cheek pouch every 8 hours as needed", 1, True),
    ],
    "rabbit": [
        ("Meloxicam oral suspension", "1.5 mg/ml", "0.3 ml by mouth once daily", 1, False),
        ("Enrofloxacin", "22.7 mg/ml", "0.5 ml by mouth every 12 hours", 1, False),
    ],
    "guinea_pig": [("Vitamin C chewable", "50 mg", "1 tablet by mouth once daily", 60, False)],
    "ferret": [("Prednisolone oral solution", "1 mg/ml", "0.5 ml by mouth once daily", 1, False)],
    "bird": [("Meloxicam oral suspension", "0.5 mg/ml", "0.1 ml by mouth once daily", 1, False)],
}

VISIT_EXTRAS = {
    "SICK": [("Skin cytology", 38.50), ("Urinalysis", 54.00), ("Radiographs (2 views)", 128.00),
             ("Antinausea injection", 36.25), ("Antibiotic injection", 42.00), ("Blood panel", 96.00),
             ("Medication dispensed", 24.80)],
    "RECHECK": [("Skin cytology", 38.50), ("Blood panel", 96.00), ("Medication dispensed", 24.80)],
    "SENIOR": [("Urinalysis", 54.00), ("Blood pressure measurement", 35.00)],
    "DENTAL_ASSESS": [("Dental radiographs", 185.00)],
    "DENTAL_CLEAN": [("Tooth extraction", 45.00), ("Dental radiographs", 85.00)],
    "EXOTIC": [("Fecal exam", 36.00), ("Medication dispensed", 24.80)],
    "WELLNESS": [("Heartworm test", 45.00), ("Fecal exam", 36.00)],
}

# ----- name pools ---------------------------------------------------------------------------

FIRST = [
    "Aaliyah", "Abigail", "Adrian", "Aisha", "Alejandro", "Alice", "Amir", "Ana", "Andre", "Anika",
    "Ben", "Bianca", "Caleb", "Camila", "Chloe", "Connor", "Dana", "Deepa", "Diego", "Dmitri",
    "Elena", "Eli", "Emeka", "Emma", "Ethan", "Fatima", "Felix", "Gabriel", "Grace", "Hana",
    "Hector", "Imani", "Isaac", "Isabel", "Jack", "Jasmine", "Javier", "Jenna", "Joaquin", "Jordan",
    "Julia", "Kai", "Kenji", "Kiara", "Laila", "Leah", "Liam", "Lina", "Lucas", "Malik", "Maya",
    "Mateo", "Megan", "Nathan", "Nia", "Noah", "Olivia", "Omar", "Paige", "Rafael", "Rania",
    "Riley", "Sam", "Sara", "Sean", "Sofia", "Tariq", "Tessa", "Tomas", "Uma", "Vera", "Wes",
    "Xavier", "Yara", "Zoe",
]
LAST = [
    "Abbott", "Acosta", "Bauer", "Bishop", "Brennan", "Castillo", "Chen", "Cho", "Dawson", "Diaz",
    "Ellison", "Erikson", "Fischer", "Flores", "Garner", "Gupta", "Hale", "Hoang", "Ibarra",
    "Iverson", "Jensen", "Kaur", "Keller", "Kowalski", "Larsen", "Lopez", "Mahoney", "Morales",
    "Nguyen", "Novak", "O'Brien", "Ortega", "Patel", "Pham", "Quinn", "Ramirez", "Reed", "Sato",
    "Schultz", "Shah", "Sullivan", "Thornton", "Tran", "Usman", "Vasquez", "Walsh", "Weber", "Xu",
    "Yamada", "Young", "Zielinski",
]
STREETS = [
    "Alder Street", "Birch Lane", "Cascade Avenue", "Cedar Court", "Dogwood Drive", "Elm Street",
    "Fir Terrace", "Hawthorne Road", "Larch Way", "Madrona Place", "Maple Avenue", "Oak Street",
    "Pine Ridge Road", "Quail Run", "Sequoia Lane", "Spruce Street", "Sycamore Drive",
    "Willow Bend", "Hemlock Circle", "Aspen Loop",
]
TOWNS = [("Millbrook", "97401"), ("Millbrook", "97403"), ("Alder Falls", "97405"), ("Cedar Hollow", "97408")]
EMAIL_DOMAINS = ["gmail.com", "outlook.com", "fastmail.com", "yahoo.com", "mailbox.org", "proton.me"]
PET_NAMES = {
    "dog": [
        "Max", "Bella", "Charlie", "Daisy", "Cooper", "Lola", "Milo", "Sadie", "Teddy", "Ruby",
        "Finn", "Willow", "Bear", "Nala", "Jasper", "Poppy", "Gus", "Rocky", "Penny", "Winston",
        "Murphy", "Archie", "Stella", "Leo", "Sunny", "Pickles", "Waffles", "Beans", "Bandit",
        "Sherlock", "Pumpkin", "Tofu", "Blue", "Moose", "Ranger", "Olive", "Ginger",
    ],
    "cat": [
        "Luna", "Oliver", "Cleo", "Simon", "Pearl", "Oscar", "Lulu", "Ivy", "Felix", "Misty",
        "Smokey", "Tigger", "Willow", "Pepper", "Coco", "Salem", "Biscuit", "Nutmeg", "Marble",
        "Socks", "Jinx", "Figaro", "Pixel", "Boots", "Clementine", "Mochi",
    ],
    "rabbit": ["Thumper", "Hopper", "Clover", "Flopsy", "Juniper", "Bun", "Basil", "Marshmallow"],
    "guinea_pig": ["Nibbles", "Oreo", "Cocoa", "Popcorn", "Squeak", "Toffee"],
    "ferret": ["Slinky", "Ziggy", "Noodle", "Bandit", "Loki"],
    "bird": ["Kiwi", "Sunny", "Rio", "Pip", "Mango", "Skye"],
}
BREEDS = {
    "dog": [
        "Labrador Retriever", "Golden Retriever", "German Shepherd", "French Bulldog", "Beagle",
        "Standard Poodle", "Miniature Schnauzer", "Boxer", "Dachshund", "Border Collie",
        "Australian Shepherd", "Pembroke Welsh Corgi", "Shih Tzu", "Boston Terrier", "Siberian Husky",
        "Pit Bull Terrier Mix", "Mixed", "Cocker Spaniel", "Bernese Mountain Dog", "Yorkshire Terrier",
        "Havanese", "Great Dane",
    ],
    "cat": [
        "Domestic Shorthair", "Domestic Shorthair", "Domestic Shorthair", "Domestic Longhair",
        "Domestic Medium Hair", "Siamese", "Maine Coon", "Ragdoll", "Bengal", "Russian Blue",
        "Sphynx", "British Shorthair", "Persian",
    ],
    "rabbit": ["Holland Lop", "Netherland Dwarf", "Mini Rex", "Lionhead", "Flemish Giant"],
    "guinea_pig": ["American", "Abyssinian", "Peruvian", "Teddy"],
    "ferret": ["Standard Sable", "Champagne", "Albino"],
    "bird": ["Budgerigar", "Cockatiel", "Green-cheeked Conure", "African Grey Parrot", "Lovebird"],
}
WEIGHT = {"dog": (4.0, 42.0), "cat": (3.2, 7.5), "rabbit": (1.1, 5.5), "guinea_pig": (0.7, 1.2),
          "ferret": (0.7, 2.0), "bird": (0.03, 0.5)}
ALLERGIES = ["chicken", "beef", "penicillin", "flea saliva", "grass pollen", "sulfa drugs"]

# Which fields refer to each renumbered table.
REFS = {
    "owners": [("pets", "owner_id"), ("payment_cards", "owner_id"), ("appointments", "owner_id"),
               ("invoices", "owner_id"), ("payments", "owner_id"), ("refill_requests", "owner_id")],
    "pets": [("appointments", "pet_id"), ("vaccinations", "pet_id"), ("prescriptions", "pet_id"),
             ("invoices", "pet_id"), ("refill_requests", "pet_id")],
    "slots": [("appointments", "slot_id")],
    "appointments": [("invoices", "appointment_id")],
    "invoices": [("payments", "invoice_id"), ("refill_requests", "delivery_invoice_id")],
    "payment_cards": [("payments", "card_id")],
    "prescriptions": [("refill_requests", "prescription_id")],
}
KEY = {
    "clinics": "clinic_id", "vets": "vet_id", "services": "service_code", "owners": "owner_id",
    "payment_cards": "card_id", "pets": "pet_id", "slots": "slot_id",
    "appointments": "appointment_id", "vaccinations": "vaccination_id",
    "prescriptions": "prescription_id", "invoices": "invoice_id", "payments": "payment_id",
    "refill_requests": "request_id",
}
FINAL_IDS = {
    # table: (prefix, first number, sort key of a record; None: sorted by owner)
    "owners": ("C", 1001, lambda r: (r["client_since"], r["last_name"], r["first_name"])),
    "payment_cards": ("CARD", 1001, None),
    "pets": ("P", 2001, None),
    "prescriptions": ("RX", 3001, lambda r: (r["prescribed_on"], r["pet_id"])),
    "refill_requests": ("RF", 4001, lambda r: (r["requested_on"], r["prescription_id"])),
    "appointments": ("A", 5001, lambda r: (r["booked_on"], r["start"], r["vet_id"])),
    "vaccinations": ("VX", 6001, lambda r: (r["given_on"], r["pet_id"], r["vaccine"])),
    "slots": ("S", 7001, lambda r: (r["start"], r["vet_id"])),
    "invoices": ("INV", 8001, lambda r: (r["issued_on"], r["owner_id"], r["kind"])),
    "payments": ("PAY", 9001, lambda r: (r["paid_on"], r["invoice_id"])),
}
# fmt: on


def iso(d: date | datetime) -> str:
    return d.isoformat()


def money(x: float) -> float:
    return round(x + 1e-9, 2)


def day_grid(d: date) -> list[str]:
    """Appointment start times a vet can have on a day."""
    if d.weekday() == 5:
        first, last = (9, 0), (12, 30)
    else:
        first, last = (8, 30), (17, 0)
    out = []
    t = datetime(d.year, d.month, d.day, *first)
    end = datetime(d.year, d.month, d.day, *last)
    while t <= end:
        out.append(t.strftime("%H:%M"))
        t += timedelta(minutes=30)
    return out


def works(vet_id: str, d: date) -> bool:
    return WEEKDAYS[d.weekday()] in VET[vet_id]["working_days"]


class World:
    """The database being built, with temporary ids renumbered at the end."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.t: dict[str, dict[str, Rec]] = {name: {} for name in KEY}
        self.counter = 0
        self.taken: dict[tuple[str, date], set[str]] = {}
        self.reserved: set[tuple[str, date]] = set()
        self.phones: set[str] = set()
        self.emails: set[str] = set()
        self.final: dict[str, str] = {}
        self.waivers: dict[str, list[date]] = {}

    # ----- low level -------------------------------------------------------------------------

    def add(self, table: str, rec: Rec) -> str:
        self.counter += 1
        key = f"tmp{self.counter}"
        rec[KEY[table]] = key
        self.t[table][key] = rec
        return key

    def take(self, vet_id: str, when: datetime) -> None:
        d = when.date()
        hhmm = when.strftime("%H:%M")
        assert works(vet_id, d), f"{vet_id} does not work on {d}"
        assert hhmm in day_grid(d), f"{hhmm} is not a slot time on {d}"
        used = self.taken.setdefault((vet_id, d), set())
        assert hhmm not in used, f"{vet_id} is busy at {when}"
        used.add(hhmm)

    def free_times(self, vet_id: str, d: date) -> list[str]:
        used = self.taken.get((vet_id, d), set())
        return [t for t in day_grid(d) if t not in used]

    # ----- records ---------------------------------------------------------------------------

    def owner(
        self,
        first: str,
        last: str,
        phone: str,
        email: str,
        address: str,
        clinic: str,
        since: str,
        contacts: list[str] | None = None,
    ) -> str:
        assert phone not in self.phones and email not in self.emails, (phone, email)
        self.phones.add(phone)
        self.emails.add(email)
        return self.add(
            "owners",
            {
                "first_name": first,
                "last_name": last,
                "phone": phone,
                "email": email,
                "address": address,
                "preferred_clinic_id": clinic,
                "authorized_contacts": contacts or [],
                "client_since": since,
            },
        )

    def card(self, owner: str, brand: str, last4: str, month: int, year: int) -> str:
        return self.add(
            "payment_cards",
            {
                "owner_id": owner,
                "brand": brand,
                "last4": last4,
                "exp_month": month,
                "exp_year": year,
            },
        )

    def pet(
        self,
        owner: str,
        name: str,
        species: str,
        breed: str,
        sex: str,
        neutered: bool,
        dob: str,
        weight: float | None,
        vet: str | None,
        *,
        wellness: bool = False,
        chip: str | None = "auto",
        allergies: list[str] | None = None,
        deceased_on: str | None = None,
    ) -> str:
        if chip == "auto":
            chip = "".join(self.rng.choice("0123456789") for _ in range(15))
        return self.add(
            "pets",
            {
                "owner_id": owner,
                "name": name,
                "species": species,
                "breed": breed,
                "sex": sex,
                "neutered": neutered,
                "date_of_birth": dob,
                "weight_kg": weight,
                "microchip_id": chip,
                "allergies": allergies or [],
                "primary_vet_id": vet,
                "wellness_plan": wellness and deceased_on is None,
                "reminders_enabled": deceased_on is None,
                "status": "deceased" if deceased_on else "active",
                "deceased_reported_on": deceased_on,
            },
        )

    def fee(self, pet: str, service: str) -> float:
        p = self.t["pets"][pet]
        base = SERVICE[service]["fee"]
        return money(base * (1 - WELLNESS_DISCOUNT)) if p["wellness_plan"] else base

    def check_fit(self, pet: str, vet: str, service: str, when: datetime) -> None:
        p = self.t["pets"][pet]
        s = SERVICE[service]
        v = VET[vet]
        assert p["species"] in s["species"], (pet, service)
        assert p["species"] in v["species"], (pet, vet)
        assert service in CLINIC[v["clinic_id"]]["services"], (vet, service)
        if s["requires_specialty"]:
            assert s["requires_specialty"] in v["specialties"]
        weeks = (when.date() - date.fromisoformat(p["date_of_birth"])).days // 7
        if s["min_age_weeks"] is not None:
            assert weeks >= s["min_age_weeks"], (pet, service, weeks)
        if s["max_age_weeks"] is not None:
            assert weeks <= s["max_age_weeks"], (pet, service, weeks)

    def slot(self, vet: str, when: datetime, status: str = "open") -> str:
        assert SLOTS_FROM <= when.date() <= SLOTS_TO and when > NOW, when
        self.take(vet, when)
        return self.add(
            "slots",
            {
                "clinic_id": VET[vet]["clinic_id"],
                "vet_id": vet,
                "start": iso(when),
                "duration_min": 30,
                "status": status,
            },
        )

    def scheduled(self, pet: str, vet: str, service: str, start: str, booked_on: str) -> str:
        when = datetime.fromisoformat(start)
        self.check_fit(pet, vet, service, when)
        slot = self.slot(vet, when, "booked")
        p = self.t["pets"][pet]
        return self.add(
            "appointments",
            {
                "pet_id": pet,
                "owner_id": p["owner_id"],
                "vet_id": vet,
                "clinic_id": VET[vet]["clinic_id"],
                "service_code": service,
                "slot_id": slot,
                "start": start,
                "duration_min": 30,
                "status": "scheduled",
                "fee": self.fee(pet, service),
                "booked_on": booked_on,
                "cancelled_on": None,
            },
        )

    def invoice(
        self,
        owner: str,
        pet: str | None,
        appt: str | None,
        kind: str,
        description: str,
        issued: date,
        total: float,
        status: str = "open",
        amount_paid: float = 0.0,
        waived_on: str | None = None,
    ) -> str:
        return self.add(
            "invoices",
            {
                "owner_id": owner,
                "pet_id": pet,
                "appointment_id": appt,
                "kind": kind,
                "description": description,
                "issued_on": iso(issued),
                "due_on": iso(issued + timedelta(days=30)),
                "total": money(total),
                "amount_paid": money(amount_paid),
                "status": status,
                "waived_on": waived_on,
            },
        )

    def payment(self, invoice: str, card: str, amount: float, paid_on: date) -> str:
        inv = self.t["invoices"][invoice]
        return self.add(
            "payments",
            {
                "invoice_id": invoice,
                "owner_id": inv["owner_id"],
                "card_id": card,
                "amount": money(amount),
                "paid_on": iso(paid_on),
                "refunded_amount": 0.0,
                "refund_reason": None,
                "refunded_on": None,
            },
        )

    def pay(self, invoice: str, card: str, amount: float, paid_on: date) -> str:
        """Record a payment and apply it to the invoice."""
        pid = self.payment(invoice, card, amount, paid_on)
        inv = self.t["invoices"][invoice]
        inv["amount_paid"] = money(inv["amount_paid"] + amount)
        if inv["amount_paid"] >= inv["total"] - 1e-9:
            inv["status"] = "paid"
        return pid

    def vaccinate(
        self, pet: str, vaccine: str, given: date, vet: str, interval: int | None = None
    ) -> str:
        p = self.t["pets"][pet]
        if interval is None:
            interval = next(i for n, i, _ in VACCINES[p["species"]] if n == vaccine)
        lot = f"{vaccine[:2].upper()}{given.strftime('%y')}{self.rng.choice('ABCDEFGH')}{self.rng.randint(100, 999)}"
        return self.add(
            "vaccinations",
            {
                "pet_id": pet,
                "vaccine": vaccine,
                "given_on": iso(given),
                "due_on": iso(given + timedelta(days=interval)),
                "vet_id": vet,
                "lot_number": lot,
            },
        )

    def visit(
        self,
        pet: str,
        vet: str,
        service: str,
        start: str,
        *,
        status: str = "completed",
        extras: list[tuple[str, float]] | None = None,
        vaccines: list[str] | None = None,
        paid: str | float = "full",
        card: str | None = None,
        booked_on: str | None = None,
        pay_delay: int = 0,
    ) -> tuple[str, str | None]:
        """A past appointment; for a completed one also its vaccinations and invoice (and payment).

        ``paid`` is "full", "none" or an amount paid on the day.
        """
        when = datetime.fromisoformat(start)
        assert when < NOW
        self.check_fit(pet, vet, service, when)
        self.take(vet, when)
        p = self.t["pets"][pet]
        fee = self.fee(pet, service)
        appt = self.add(
            "appointments",
            {
                "pet_id": pet,
                "owner_id": p["owner_id"],
                "vet_id": vet,
                "clinic_id": VET[vet]["clinic_id"],
                "service_code": service,
                "slot_id": None,
                "start": start,
                "duration_min": SERVICE[service]["duration_min"]
                if service in ("DENTAL_CLEAN", "SPAY_NEUTER")
                else 30,
                "status": status,
                "fee": fee,
                "booked_on": booked_on
                or iso(when.date() - timedelta(days=self.rng.randint(3, 30))),
                "cancelled_on": None,
            },
        )
        if status != "completed":
            return appt, None
        lines = [(SERVICE[service]["name"], fee)]
        for v in vaccines or []:
            self.vaccinate(pet, v, when.date(), vet)
            lines.append((f"{v} vaccine", VACCINE_PRICE[v]))
        lines.extend(extras or [])
        total = money(sum(a for _, a in lines))
        desc = f"{SERVICE[service]['name']} for {p['name']}: " + "; ".join(
            f"{n} {a:.2f}" for n, a in lines
        )
        inv = self.invoice(p["owner_id"], pet, appt, "visit", desc, when.date(), total)
        if paid == "full":
            assert card
            self.pay(inv, card, total, when.date() + timedelta(days=pay_delay))
        elif isinstance(paid, float) and paid > 0:
            assert card
            self.pay(inv, card, paid, when.date())
        return appt, inv

    def fee_invoice(
        self,
        appt: str,
        kind: str,
        issued: date,
        status: str,
        card: str | None = None,
        waived_on: date | None = None,
    ) -> str:
        a = self.t["appointments"][appt]
        p = self.t["pets"][a["pet_id"]]
        label = (
            "Late cancellation fee"
            if kind == "late_cancellation"
            else "Missed appointment (no-show) fee"
        )
        desc = f"{label}: {p['name']}, {a['start'][:16].replace('T', ' ')}"
        inv = self.invoice(
            a["owner_id"],
            a["pet_id"],
            appt,
            kind,
            desc,
            issued,
            LATE_FEE,
            waived_on=iso(waived_on) if waived_on else None,
        )
        if status == "paid":
            assert card
            self.pay(
                inv, card, LATE_FEE, min(TODAY, issued + timedelta(days=self.rng.randint(0, 10)))
            )
        elif status == "waived":
            assert waived_on
            self.t["invoices"][inv]["status"] = "waived"
            self.waivers.setdefault(a["owner_id"], []).append(waived_on)
        return inv

    def prescription(
        self,
        pet: str,
        vet: str,
        med: tuple,
        prescribed: date,
        refills: int,
        *,
        status: str | None = None,
        days: int | None = None,
    ) -> str:
        name, strength, instructions, qty, controlled = med
        if days is None:
            days = 180 if controlled else 365
        expires = prescribed + timedelta(days=days)
        if status is None:
            status = "expired" if expires < TODAY else "active"
        return self.add(
            "prescriptions",
            {
                "pet_id": pet,
                "vet_id": vet,
                "medication": name,
                "strength": strength,
                "instructions": instructions,
                "quantity": qty,
                "refills_remaining": refills,
                "prescribed_on": iso(prescribed),
                "expires_on": iso(expires),
                "controlled": controlled,
                "status": status,
            },
        )

    def refill(
        self,
        rx: str,
        requested: date,
        fulfillment: str,
        status: str,
        clinic: str | None,
        card: str | None = None,
    ) -> str:
        r = self.t["prescriptions"][rx]
        p = self.t["pets"][r["pet_id"]]
        inv = None
        if fulfillment == "delivery":
            inv = self.invoice(
                p["owner_id"],
                r["pet_id"],
                None,
                "delivery_fee",
                f"Pharmacy home delivery: {r['medication']} {r['strength']} for {p['name']}",
                requested,
                DELIVERY_FEE,
            )
            if card:
                self.pay(inv, card, DELIVERY_FEE, requested)
        return self.add(
            "refill_requests",
            {
                "prescription_id": rx,
                "pet_id": r["pet_id"],
                "owner_id": p["owner_id"],
                "requested_on": iso(requested),
                "fulfillment": fulfillment,
                "pickup_clinic_id": clinic if fulfillment == "pickup" else None,
                "delivery_invoice_id": inv,
                "status": status,
            },
        )

    # ----- finishing -------------------------------------------------------------------------

    def renumber(self) -> None:
        """Give every record its final id (chronological where it makes sense)."""
        order = [
            "owners",
            "payment_cards",
            "pets",
            "slots",
            "appointments",
            "invoices",
            "payments",
            "prescriptions",
            "refill_requests",
            "vaccinations",
        ]
        owner_rank: dict[str, int] = {}
        for table in order:
            prefix, first, sort_key = FINAL_IDS[table]
            rows = list(self.t[table].values())
            if table == "payment_cards":
                rows.sort(key=lambda r: (owner_rank[r["owner_id"]], r["card_id"]))
            elif table == "pets":
                rows.sort(key=lambda r: (owner_rank[r["owner_id"]], r["date_of_birth"], r["name"]))
            else:
                rows.sort(key=lambda r: (sort_key(r), int(r[KEY[table]][3:])))
            mapping = {}
            for i, rec in enumerate(rows):
                mapping[rec[KEY[table]]] = f"{prefix}{first + i}"
            for old, new in mapping.items():
                rec = self.t[table].pop(old)
                rec[KEY[table]] = new
                self.t[table][new] = rec
            self.final.update(mapping)
            for ref_table, field in REFS.get(table, []):
                for rec in self.t[ref_table].values():
                    if rec.get(field) is not None:
                        rec[field] = mapping[rec[field]]
            if table == "owners":
                owner_rank = {new: i for i, new in enumerate(mapping.values())}
            self.t[table] = dict(
                sorted(
                    self.t[table].items(),
                    key=lambda kv: (kv[0][: len(prefix)], int(kv[0][len(prefix) :])),
                )
            )

    def id(self, tmp: str) -> str:
        return self.final[tmp]

    def db(self) -> dict[str, dict[str, Rec]]:
        out: dict[str, dict[str, Rec]] = {}
        out["clinics"] = {c["clinic_id"]: c for c in CLINICS}
        out["vets"] = {v: VET[v] for v in VET}
        out["services"] = {s: SERVICE[s] for s in SERVICE}
        for table in [
            "owners",
            "payment_cards",
            "pets",
            "slots",
            "appointments",
            "vaccinations",
            "prescriptions",
            "refill_requests",
            "invoices",
            "payments",
        ]:
            out[table] = {
                k: {KEY[table]: k, **{f: v for f, v in r.items() if f != KEY[table]}}
                for k, r in self.t[table].items()
            }
        return out


def at(d: str, hhmm: str) -> str:
    return f"{d}T{hhmm}:00"


# ----- scenario records (the tasks rely on them) ---------------------------------------------


def build_scenarios(w: World) -> dict[str, str]:
    """Hand-written clients; returns temporary ids by handle."""
    s: dict[str, str] = {}

    def open_day(vet: str, d: str, times: list[str]) -> list[str]:
        day = date.fromisoformat(d)
        w.reserved.add((vet, day))
        return [w.slot(vet, datetime.fromisoformat(at(d, t))) for t in times]

    def reserve(vet: str, d: str) -> None:
        w.reserved.add((vet, date.fromisoformat(d)))

    # 001 Marisol Vega: Biscuit's vaccinations (Bordetella overdue)
    o = w.owner(
        "Marisol",
        "Vega",
        "541-555-0134",
        "marisol.vega@fastmail.com",
        "19 Juniper Court, Millbrook, OR 97401",
        "downtown",
        "2020-08-14",
    )
    c = w.card(o, "Visa", "5523", 9, 2028)
    p = w.pet(o, "Biscuit", "dog", "Labrador Retriever", "female", True, "2021-03-18", 27.4, "V01")
    w.visit(
        p,
        "V01",
        "WELLNESS",
        at("2024-06-10", "10:00"),
        vaccines=["Rabies", "DHPP"],
        extras=[("Heartworm test", 45.00)],
        card=c,
    )
    w.visit(p, "V01", "VACC", at("2025-04-15", "15:30"), vaccines=["Bordetella"], card=c)
    w.visit(
        p,
        "V01",
        "WELLNESS",
        at("2025-07-08", "09:00"),
        vaccines=["Leptospirosis"],
        extras=[("Fecal exam", 36.00)],
        card=c,
    )
    s["vega"], s["biscuit"] = o, p

    # 002 Gordon Whitlock: two open invoices, 142.50 + 68.00
    o = w.owner(
        "Gordon",
        "Whitlock",
        "541-555-0178",
        "gordon.whitlock@outlook.com",
        "530 Cascade Avenue, Millbrook, OR 97403",
        "riverside",
        "2019-11-02",
    )
    c = w.card(o, "Mastercard", "7316", 12, 2027)
    p = w.pet(o, "Maple", "dog", "Golden Retriever", "female", True, "2019-10-02", 31.8, "V06")
    w.visit(
        p,
        "V06",
        "WELLNESS",
        at("2025-11-14", "11:00"),
        vaccines=["Bordetella", "Leptospirosis"],
        card=c,
    )
    w.visit(
        p,
        "V06",
        "SICK",
        at("2026-04-21", "14:30"),
        extras=[("Skin cytology", 38.50), ("Cephalexin 500 mg x 28", 22.00)],
        paid="none",
    )
    w.visit(p, "V06", "WELLNESS", at("2026-05-05", "10:30"), paid="none")
    s["whitlock"] = o

    # 003 Colette Marchand: Juniper's upcoming visit with Dr. Okafor at Riverside
    o = w.owner(
        "Colette",
        "Marchand",
        "541-555-0112",
        "colette.marchand@gmail.com",
        "77 Sycamore Drive, Millbrook, OR 97403",
        "riverside",
        "2021-06-19",
    )
    c = w.card(o, "Visa", "8840", 5, 2029)
    p = w.pet(o, "Juniper", "cat", "Siamese", "female", True, "2020-05-30", 3.9, "V05")
    w.visit(p, "V05", "WELLNESS", at("2025-05-16", "13:00"), vaccines=["Rabies", "FVRCP"], card=c)
    a, _ = w.visit(p, "V06", "SICK", at("2026-03-16", "09:30"), status="cancelled")
    w.t["appointments"][a]["cancelled_on"] = "2026-03-12"
    reserve("V05", "2026-05-15")
    s["juniper_appt"] = w.scheduled(p, "V05", "WELLNESS", at("2026-05-15", "14:00"), "2026-04-28")
    open_day("V05", "2026-05-15", ["09:00", "11:30"])
    s["marchand"] = o

    # 004 Harold Baptiste: Pistachio, Wellness Plan, senior screen price
    o = w.owner(
        "Harold",
        "Baptiste",
        "541-555-0190",
        "harold.baptiste@outlook.com",
        "2218 Hawthorne Road, Millbrook, OR 97401",
        "downtown",
        "2017-10-05",
    )
    c = w.card(o, "Discover", "6021", 8, 2027)
    p = w.pet(
        o,
        "Pistachio",
        "cat",
        "British Shorthair",
        "male",
        True,
        "2017-09-02",
        5.6,
        "V01",
        wellness=True,
    )
    w.visit(p, "V01", "WELLNESS", at("2025-09-17", "11:30"), vaccines=["FeLV"], card=c)
    s["baptiste"], s["pistachio"] = o, p

    # 005 (no account): earliest Eastgate opening for a rabbit on Thursday 2026-05-14
    s["t005_v09"] = open_day("V09", "2026-05-14", ["11:00", "15:30"])[0]
    open_day("V10", "2026-05-14", ["08:30", "13:00"])
    s["t005_v11"] = open_day("V11", "2026-05-14", ["09:30", "14:00"])[0]
    open_day("V12", "2026-05-14", ["09:00", "16:00"])

    # 006 Nadia Farouk: partly paid invoice, balance 96.25
    o = w.owner(
        "Nadia",
        "Farouk",
        "541-555-0156",
        "nadia.farouk@gmail.com",
        "61 Larch Way, Millbrook, OR 97403",
        "riverside",
        "2018-03-27",
    )
    c = w.card(o, "Visa", "3092", 10, 2028)
    p = w.pet(o, "Otis", "dog", "Boxer", "male", True, "2018-01-22", 29.5, "V08")
    w.visit(
        p,
        "V08",
        "WELLNESS",
        at("2025-08-13", "10:00"),
        vaccines=["Bordetella", "Leptospirosis"],
        card=c,
    )
    _, s["farouk_inv"] = w.visit(
        p,
        "V08",
        "SICK",
        at("2026-04-30", "16:00"),
        extras=[("Abdominal radiographs", 128.00), ("Antinausea injection", 36.25)],
        paid=150.00,
        card=c,
    )
    s["farouk"] = o

    # 007 Trevor Nakamura: cancel Koda's visit a week out (no fee)
    o = w.owner(
        "Trevor",
        "Nakamura",
        "541-555-0123",
        "trevor.nakamura@proton.me",
        "904 Spruce Street, Millbrook, OR 97401",
        "downtown",
        "2022-08-30",
    )
    c = w.card(o, "Amex", "2005", 7, 2028)
    p = w.pet(o, "Koda", "dog", "Shiba Inu", "male", True, "2022-07-04", 10.2, "V02")
    w.visit(
        p,
        "V02",
        "WELLNESS",
        at("2025-05-20", "14:00"),
        vaccines=["Rabies", "DHPP", "Bordetella", "Leptospirosis"],
        card=c,
    )
    reserve("V02", "2026-05-19")
    s["koda_appt"] = w.scheduled(p, "V02", "WELLNESS", at("2026-05-19", "10:00"), "2026-04-20")
    open_day("V02", "2026-05-19", ["15:00"])
    s["nakamura"] = o

    # 008 Ingrid Solberg: cancel Mochi's recheck tomorrow 08:30 (late fee)
    o = w.owner(
        "Ingrid",
        "Solberg",
        "541-555-0167",
        "ingrid.solberg@mailbox.org",
        "15 Madrona Place, Millbrook, OR 97403",
        "riverside",
        "2021-12-01",
    )
    c = w.card(o, "Visa", "7781", 3, 2027)
    p = w.pet(o, "Mochi", "cat", "Ragdoll", "female", True, "2021-11-11", 4.8, "V06")
    w.visit(p, "V06", "SICK", at("2026-04-29", "11:30"), extras=[("Skin cytology", 38.50)], card=c)
    reserve("V06", "2026-05-13")
    s["mochi_appt"] = w.scheduled(p, "V06", "RECHECK", at("2026-05-13", "08:30"), "2026-04-29")
    open_day("V06", "2026-05-13", ["13:00", "16:30"])
    s["solberg"] = o

    # 009 Amara Okoro (Daniel Okoro is an authorized contact): book Zuri's vaccination
    o = w.owner(
        "Amara",
        "Okoro",
        "541-555-0149",
        "amara.okoro@gmail.com",
        "3301 Pine Ridge Road, Cedar Hollow, OR 97408",
        "downtown",
        "2022-10-11",
        ["Daniel Okoro"],
    )
    c = w.card(o, "Mastercard", "4470", 6, 2028)
    p = w.pet(o, "Zuri", "cat", "Abyssinian", "female", True, "2022-09-19", 3.7, "V01")
    w.visit(p, "V01", "WELLNESS", at("2025-05-07", "16:00"), vaccines=["FVRCP"], card=c)
    k = w.pet(o, "Kofi", "dog", "Rhodesian Ridgeback", "male", True, "2021-02-08", 36.1, "V01")
    w.visit(
        k,
        "V01",
        "WELLNESS",
        at("2025-11-19", "10:30"),
        vaccines=["Bordetella", "Leptospirosis"],
        card=c,
    )
    slots = open_day("V01", "2026-05-14", ["09:00", "11:30", "13:30", "15:00"])
    s["okoro"], s["zuri"], s["t009_slot"] = o, p, slots[2]

    # 010 Beatriz Almeida: pay 182.40 with the Visa ending 4417 (the Mastercard has expired)
    o = w.owner(
        "Beatriz",
        "Almeida",
        "541-555-0185",
        "beatriz.almeida@yahoo.com",
        "48 Aspen Loop, Alder Falls, OR 97405",
        "eastgate",
        "2020-04-16",
    )
    w.card(o, "Mastercard", "9921", 3, 2026)
    c = w.card(o, "Visa", "4417", 2, 2028)
    p = w.pet(o, "Tango", "dog", "Border Collie", "male", True, "2020-02-14", 19.3, "V10")
    w.visit(
        p,
        "V10",
        "WELLNESS",
        at("2025-06-13", "09:30"),
        vaccines=["Bordetella", "Leptospirosis"],
        card=c,
    )
    _, s["almeida_inv"] = w.visit(
        p,
        "V10",
        "SICK",
        at("2026-05-08", "15:00"),
        extras=[("Urinalysis", 54.00), ("Meloxicam 1.5 mg/ml 30 ml", 46.40)],
        paid="none",
    )
    s["almeida"], s["almeida_visa"] = o, c

    # 011 Wendell Price: new email address
    o = w.owner(
        "Wendell",
        "Price",
        "541-555-0193",
        "wprice@millbrooknet.com",
        "1207 Fir Terrace, Millbrook, OR 97401",
        "downtown",
        "2016-02-22",
    )
    c = w.card(o, "Visa", "1184", 1, 2027)
    p = w.pet(o, "Soot", "cat", "Domestic Shorthair", "male", True, "2015-05-05", 5.1, "V03")
    w.visit(p, "V03", "SENIOR", at("2025-10-09", "14:00"), extras=[("Urinalysis", 54.00)], card=c)
    s["price"] = o

    # 012 Lucia Moretti: Apoquel refill for Bruno, pickup at Riverside
    o = w.owner(
        "Lucia",
        "Moretti",
        "541-555-0128",
        "lucia.moretti@gmail.com",
        "356 Willow Bend, Millbrook, OR 97403",
        "riverside",
        "2020-07-07",
    )
    c = w.card(o, "Mastercard", "6652", 9, 2027)
    p = w.pet(
        o,
        "Bruno",
        "dog",
        "French Bulldog",
        "male",
        True,
        "2020-06-15",
        12.6,
        "V07",
        allergies=["chicken"],
    )
    w.visit(
        p,
        "V07",
        "SICK",
        at("2024-09-12", "10:00"),
        extras=[("Medication dispensed", 24.80)],
        card=c,
    )
    w.prescription(p, "V07", MEDICATIONS["dog"][0], date(2024, 9, 12), 1)
    w.visit(p, "V07", "SICK", at("2026-02-10", "11:00"), extras=[("Skin cytology", 38.50)], card=c)
    rx = w.prescription(p, "V07", MEDICATIONS["dog"][1], date(2026, 2, 10), 3)
    w.refill(rx, date(2026, 3, 9), "pickup", "completed", "riverside")
    w.refill(rx, date(2026, 4, 8), "pickup", "completed", "riverside")
    w.t["prescriptions"][rx]["refills_remaining"] = 3
    s["moretti"], s["bruno"], s["bruno_rx"] = o, p, rx

    # 013 Mei Lin Zhou: register kitten Pepper
    o = w.owner(
        "Mei Lin",
        "Zhou",
        "541-555-0115",
        "meilin.zhou@fastmail.com",
        "88 Quail Run, Cedar Hollow, OR 97408",
        "downtown",
        "2023-01-14",
    )
    c = w.card(o, "Visa", "2468", 4, 2030)
    p = w.pet(o, "Dumpling", "cat", "Scottish Fold", "male", True, "2022-11-30", 4.4, "V04")
    w.visit(p, "V04", "WELLNESS", at("2025-12-01", "15:00"), vaccines=["Rabies", "FeLV"], card=c)
    s["zhou"] = o

    # 014 Rosa Delgado: waive the no-show fee (last waiver was more than 12 months ago)
    o = w.owner(
        "Rosa",
        "Delgado",
        "541-555-0141",
        "rosa.delgado@outlook.com",
        "640 Dogwood Drive, Millbrook, OR 97401",
        "downtown",
        "2019-05-09",
    )
    c = w.card(o, "Mastercard", "5108", 11, 2027)
    p = w.pet(o, "Paco", "dog", "Chihuahua", "male", True, "2018-04-20", 2.9, "V04")
    a, _ = w.visit(p, "V04", "WELLNESS", at("2025-02-24", "16:30"), status="cancelled")
    w.t["appointments"][a]["cancelled_on"] = "2025-02-24"
    w.fee_invoice(a, "late_cancellation", date(2025, 2, 24), "waived", waived_on=date(2025, 2, 27))
    w.visit(p, "V04", "WELLNESS", at("2025-03-10", "09:00"), vaccines=["Rabies", "DHPP"], card=c)
    a, _ = w.visit(p, "V04", "WELLNESS", at("2026-05-05", "11:00"), status="no_show")
    s["delgado_fee"] = w.fee_invoice(a, "no_show", date(2026, 5, 5), "open")
    s["delgado"] = o

    # 015 Eleanor Hatch: Rufus has died; Mittens takes his senior-screen slot for a wellness exam
    o = w.owner(
        "Eleanor",
        "Hatch",
        "541-555-0172",
        "eleanor.hatch@gmail.com",
        "12 Hemlock Circle, Millbrook, OR 97401",
        "downtown",
        "2013-06-18",
    )
    c = w.card(o, "Visa", "9035", 7, 2027)
    p = w.pet(
        o,
        "Rufus",
        "dog",
        "Labrador Retriever Mix",
        "male",
        True,
        "2013-04-09",
        33.0,
        "V03",
        wellness=True,
    )
    w.visit(
        p,
        "V03",
        "SENIOR",
        at("2025-11-06", "10:30"),
        extras=[("Urinalysis", 54.00)],
        vaccines=["Rabies"],
        card=c,
    )
    w.prescription(
        p,
        "V03",
        ("Carprofen", "75 mg", "1 tablet by mouth every 12 hours with food", 60, False),
        date(2025, 11, 6),
        2,
    )
    m = w.pet(o, "Mittens", "cat", "Domestic Shorthair", "female", True, "2020-01-15", 4.2, "V03")
    w.visit(m, "V03", "WELLNESS", at("2025-11-06", "11:00"), vaccines=["FVRCP"], card=c)
    reserve("V03", "2026-05-21")
    s["rufus_appt"] = w.scheduled(p, "V03", "SENIOR", at("2026-05-21", "10:00"), "2026-04-30")
    open_day("V03", "2026-05-21", ["13:00"])
    s["hatch"], s["rufus"], s["mittens"] = o, p, m

    # 016 Samir Haddad: move Luna to Saturday 09:00 with Dr. Bell, Simba's nail trim at 09:30
    o = w.owner(
        "Samir",
        "Haddad",
        "541-555-0106",
        "samir.haddad@proton.me",
        "455 Maple Avenue, Millbrook, OR 97401",
        "downtown",
        "2023-04-02",
    )
    c = w.card(o, "Visa", "6390", 10, 2029)
    p = w.pet(o, "Luna", "dog", "Australian Shepherd", "female", True, "2023-03-03", 21.7, "V04")
    w.visit(
        p,
        "V04",
        "WELLNESS",
        at("2025-05-12", "13:30"),
        vaccines=["Rabies", "DHPP", "Bordetella", "Leptospirosis"],
        card=c,
    )
    m = w.pet(o, "Simba", "cat", "Maine Coon", "male", True, "2021-08-08", 7.4, "V04")
    w.visit(m, "V04", "WELLNESS", at("2025-05-12", "14:00"), vaccines=["FVRCP", "FeLV"], card=c)
    reserve("V04", "2026-05-18")
    s["luna_appt"] = w.scheduled(p, "V04", "WELLNESS", at("2026-05-18", "11:00"), "2026-05-01")
    open_day("V04", "2026-05-18", ["14:00"])
    bell = open_day("V02", "2026-05-16", ["09:00", "09:30", "11:00"])
    s["haddad"], s["simba"], s["t016_luna_slot"], s["t016_simba_slot"] = o, m, bell[0], bell[1]

    # 017 Gareth Lloyd: methimazole refill by delivery, then pay the 7.50 delivery fee
    o = w.owner(
        "Gareth",
        "Lloyd",
        "541-555-0137",
        "gareth.lloyd@mailbox.org",
        "73 Oak Street, Alder Falls, OR 97405",
        "eastgate",
        "2014-09-23",
    )
    c = w.card(o, "Mastercard", "3380", 11, 2027)
    p = w.pet(o, "Whiskey", "cat", "Domestic Longhair", "male", True, "2014-06-20", 4.6, "V11")
    w.visit(p, "V11", "SICK", at("2026-01-12", "10:00"), extras=[("Blood panel", 96.00)], card=c)
    rx = w.prescription(p, "V11", MEDICATIONS["cat"][0], date(2026, 1, 12), 2)
    w.refill(rx, date(2026, 2, 9), "delivery", "completed", None, card=c)
    w.refill(rx, date(2026, 3, 11), "delivery", "completed", None, card=c)
    w.refill(rx, date(2026, 4, 10), "delivery", "completed", None, card=c)
    s["lloyd"], s["whiskey"], s["whiskey_rx"], s["lloyd_card"] = o, p, rx, c

    # 018 Hannah Feldman: new phone number and add Jonah Feldman
    o = w.owner(
        "Hannah",
        "Feldman",
        "541-555-0119",
        "hannah.feldman@gmail.com",
        "219 Elm Street, Millbrook, OR 97401",
        "downtown",
        "2022-03-15",
    )
    c = w.card(o, "Visa", "7703", 8, 2028)
    p = w.pet(o, "Pretzel", "dog", "Dachshund", "male", True, "2021-09-01", 8.9, "V02")
    w.visit(
        p,
        "V02",
        "WELLNESS",
        at("2025-09-18", "09:30"),
        vaccines=["Bordetella", "Leptospirosis"],
        card=c,
    )
    s["feldman"] = o

    # 019 Oliver Brandt: cancel Pilot's visit today (late) and waive the fee (first waiver)
    o = w.owner(
        "Oliver",
        "Brandt",
        "541-555-0151",
        "oliver.brandt@outlook.com",
        "1530 Cascade Avenue, Millbrook, OR 97403",
        "riverside",
        "2020-01-28",
    )
    c = w.card(o, "Amex", "8812", 2, 2029)
    p = w.pet(o, "Pilot", "dog", "Vizsla", "male", True, "2019-12-01", 24.1, "V07")
    w.visit(
        p,
        "V07",
        "WELLNESS",
        at("2025-05-13", "10:30"),
        vaccines=["Bordetella", "Leptospirosis"],
        card=c,
    )
    reserve("V07", "2026-05-12")
    s["pilot_appt"] = w.scheduled(p, "V07", "VACC", at("2026-05-12", "16:00"), "2026-04-14")
    open_day("V07", "2026-05-12", ["11:30", "14:00"])
    s["brandt"] = o

    # 020 Carmen Ruiz: register puppy Nacho and book his first visit with Dr. Reyes
    o = w.owner(
        "Carmen",
        "Ruiz",
        "541-555-0163",
        "carmen.ruiz@gmail.com",
        "801 Sequoia Lane, Millbrook, OR 97403",
        "riverside",
        "2021-07-21",
    )
    c = w.card(o, "Visa", "5877", 6, 2029)
    p = w.pet(o, "Luz", "cat", "Domestic Shorthair", "female", True, "2021-05-02", 3.8, "V06")
    w.visit(p, "V06", "WELLNESS", at("2025-10-06", "12:00"), vaccines=["Rabies", "FVRCP"], card=c)
    reyes = open_day("V06", "2026-05-15", ["10:00", "13:30"])
    s["ruiz"], s["t020_slot"] = o, reyes[0]

    # 021 Theo Marchetti: move Olive to Friday 2026-05-22 09:30 with Dr. Okafor
    o = w.owner(
        "Theo",
        "Marchetti",
        "541-555-0182",
        "theo.marchetti@fastmail.com",
        "27 Birch Lane, Millbrook, OR 97403",
        "riverside",
        "2019-04-30",
    )
    c = w.card(o, "Mastercard", "2219", 9, 2028)
    p = w.pet(o, "Olive", "cat", "Russian Blue", "female", True, "2019-04-04", 4.0, "V05")
    w.visit(
        p,
        "V05",
        "WELLNESS",
        at("2025-05-21", "15:00"),
        vaccines=["Rabies", "FVRCP", "FeLV"],
        card=c,
    )
    reserve("V05", "2026-05-20")
    s["olive_appt"] = w.scheduled(p, "V05", "WELLNESS", at("2026-05-20", "15:00"), "2026-05-02")
    s["t021_slot"] = open_day("V05", "2026-05-22", ["09:30", "10:30", "14:00"])[0]
    s["marchetti"] = o

    # 022 Sunita Rao: charged twice for Mango's wellness visit; refund the later payment
    o = w.owner(
        "Sunita",
        "Rao",
        "541-555-0147",
        "sunita.rao@mailbox.org",
        "3920 Eastgate Boulevard, Alder Falls, OR 97405",
        "eastgate",
        "2021-06-08",
    )
    c = w.card(o, "Visa", "6610", 12, 2028)
    p = w.pet(
        o, "Mango", "dog", "Cavalier King Charles Spaniel", "female", True, "2021-05-05", 8.2, "V12"
    )
    _, inv = w.visit(
        p,
        "V12",
        "WELLNESS",
        at("2026-04-22", "09:00"),
        extras=[("Heartworm test", 45.00), ("Tick-borne disease panel", 15.00)],
        paid="none",
    )
    w.pay(inv, c, 128.00, date(2026, 4, 22))
    s["rao_dup"] = w.payment(inv, c, 128.00, date(2026, 4, 23))
    w.t["invoices"][inv]["amount_paid"] = 256.00
    s["rao"], s["rao_inv"] = o, inv

    # 023 Desmond Clarke: overdue invoice blocks booking; pay 215.00, then book Bailey
    o = w.owner(
        "Desmond",
        "Clarke",
        "541-555-0145",
        "desmond.clarke@yahoo.com",
        "66 Spruce Street, Millbrook, OR 97401",
        "downtown",
        "2020-10-13",
    )
    c = w.card(o, "Visa", "2291", 6, 2027)
    p = w.pet(o, "Bailey", "dog", "Goldendoodle", "male", True, "2020-09-09", 26.0, "V04")
    w.visit(
        p,
        "V04",
        "WELLNESS",
        at("2025-04-08", "11:30"),
        vaccines=["Rabies", "DHPP", "Leptospirosis"],
        card=c,
    )
    _, s["clarke_inv"] = w.visit(
        p,
        "V04",
        "SICK",
        at("2026-01-20", "15:30"),
        extras=[("Ear cytology", 38.00), ("Ear flush", 65.50), ("Otic ointment 15 ml", 29.50)],
        paid="none",
    )
    s["t023_slot"] = open_day("V04", "2026-05-19", ["10:30", "14:30"])[0]
    s["clarke"], s["bailey"], s["clarke_card"] = o, p, c

    # 024 Felicity Ward: pay 100.00 toward the dental invoice (two invoices open)
    o = w.owner(
        "Felicity",
        "Ward",
        "541-555-0176",
        "felicity.ward@gmail.com",
        "905 Aspen Loop, Alder Falls, OR 97405",
        "eastgate",
        "2016-12-20",
    )
    c = w.card(o, "Amex", "1009", 4, 2029)
    p = w.pet(o, "Marzipan", "cat", "Birman", "female", True, "2016-12-12", 4.3, "V12")
    _, s["ward_inv"] = w.visit(
        p,
        "V12",
        "DENTAL_ASSESS",
        at("2026-04-16", "13:30"),
        extras=[("Dental radiographs", 185.00), ("Pre-anesthetic blood panel", 65.00)],
        paid="none",
    )
    w.visit(p, "V12", "RECHECK", at("2026-05-07", "10:00"), paid="none")
    s["ward"], s["ward_card"] = o, c

    # 025 Arjun Mehta: microchip for Clover with Dr. Lindqvist
    o = w.owner(
        "Arjun",
        "Mehta",
        "541-555-0138",
        "arjun.mehta@proton.me",
        "142 Hawthorne Road, Alder Falls, OR 97405",
        "eastgate",
        "2024-08-20",
    )
    c = w.card(o, "Discover", "4432", 3, 2028)
    p = w.pet(
        o, "Clover", "rabbit", "Holland Lop", "female", True, "2024-08-01", 1.9, "V09", chip=None
    )
    w.visit(p, "V09", "EXOTIC", at("2025-09-04", "14:30"), vaccines=["RHDV2"], card=c)
    s["t025_slot"] = open_day("V09", "2026-05-21", ["10:00", "15:00"])[0]
    s["mehta"], s["clover"] = o, p

    # 026 Patrick Doyle: phenobarbital (controlled) refill must not go through the desk
    o = w.owner(
        "Patrick",
        "Doyle",
        "541-555-0131",
        "patrick.doyle@gmail.com",
        "318 Cedar Court, Cedar Hollow, OR 97408",
        "downtown",
        "2019-05-27",
    )
    c = w.card(o, "Visa", "4056", 5, 2028)
    p = w.pet(o, "Duke", "dog", "German Shepherd", "male", True, "2019-03-15", 38.4, "V02")
    w.visit(p, "V02", "SICK", at("2026-03-03", "13:00"), extras=[("Blood panel", 96.00)], card=c)
    s["duke_rx"] = w.prescription(
        p,
        "V02",
        ("Phenobarbital", "64.8 mg", "1 tablet by mouth every 12 hours", 60, True),
        date(2026, 3, 3),
        2,
    )
    w.refill(s["duke_rx"], date(2026, 4, 1), "pickup", "completed", "downtown")
    s["doyle"] = o

    # 027 Linda Park (authorized: Grace Park): her neighbour Kevin Marsh asks to cancel
    o = w.owner(
        "Linda",
        "Park",
        "541-555-0158",
        "linda.park@outlook.com",
        "47 Willow Bend, Millbrook, OR 97403",
        "downtown",
        "2021-11-04",
        ["Grace Park"],
    )
    c = w.card(o, "Mastercard", "8125", 1, 2028)
    p = w.pet(
        o, "Scout", "dog", "English Springer Spaniel", "male", True, "2021-10-10", 22.3, "V01"
    )
    w.visit(
        p,
        "V01",
        "WELLNESS",
        at("2025-05-28", "10:00"),
        vaccines=["Rabies", "DHPP", "Bordetella", "Leptospirosis"],
        card=c,
    )
    reserve("V01", "2026-05-20")
    s["scout_appt"] = w.scheduled(p, "V01", "WELLNESS", at("2026-05-20", "09:00"), "2026-05-04")
    open_day("V01", "2026-05-20", ["13:30", "16:00"])
    s["park"] = o

    # 028 Ruth Abernathy: Peanut ate xylitol gum; routine booking is the wrong answer
    o = w.owner(
        "Ruth",
        "Abernathy",
        "541-555-0102",
        "ruth.abernathy@yahoo.com",
        "9 Sycamore Drive, Millbrook, OR 97401",
        "downtown",
        "2022-05-16",
    )
    c = w.card(o, "Visa", "3371", 7, 2029)
    p = w.pet(o, "Peanut", "dog", "Miniature Dachshund", "female", True, "2022-02-02", 5.1, "V01")
    w.visit(p, "V01", "WELLNESS", at("2025-08-20", "14:30"), vaccines=["Rabies", "DHPP"], card=c)
    s["t028_slot"] = open_day("V01", "2026-05-13", ["11:00", "15:30"])[0]
    s["abernathy"], s["peanut"] = o, p

    # 029 Victor Salazar: wants money back for Nyx's dental cleaning (care complaint)
    o = w.owner(
        "Victor",
        "Salazar",
        "541-555-0187",
        "victor.salazar@gmail.com",
        "2604 Pine Ridge Road, Cedar Hollow, OR 97408",
        "downtown",
        "2018-08-08",
    )
    c = w.card(o, "Visa", "9462", 10, 2027)
    p = w.pet(o, "Nyx", "cat", "Bombay", "male", True, "2018-07-07", 5.0, "V03")
    w.visit(p, "V03", "DENTAL_ASSESS", at("2026-03-27", "09:30"), card=c)
    w.visit(
        p,
        "V03",
        "DENTAL_CLEAN",
        at("2026-04-16", "08:30"),
        extras=[("Tooth extraction", 27.00)],
        card=c,
    )
    s["salazar"] = o
    s["salazar_inv"] = next(
        k for k, v in w.t["invoices"].items() if v["owner_id"] == o and v["total"] == 412.00
    )

    # 030 Bridget Callahan: fee waived in December; asks for a second waiver
    o = w.owner(
        "Bridget",
        "Callahan",
        "541-555-0124",
        "bridget.callahan@fastmail.com",
        "530 Larch Way, Millbrook, OR 97403",
        "riverside",
        "2020-03-30",
    )
    c = w.card(o, "Mastercard", "6047", 5, 2028)
    p = w.pet(o, "Hazel", "dog", "Whippet", "female", True, "2020-03-03", 12.8, "V08")
    w.visit(
        p,
        "V08",
        "WELLNESS",
        at("2025-09-10", "11:00"),
        vaccines=["Bordetella", "Leptospirosis"],
        card=c,
    )
    a, _ = w.visit(p, "V08", "WELLNESS", at("2025-12-03", "09:00"), status="cancelled")
    w.t["appointments"][a]["cancelled_on"] = "2025-12-02"
    w.fee_invoice(a, "late_cancellation", date(2025, 12, 2), "waived", waived_on=date(2025, 12, 3))
    a, _ = w.visit(p, "V08", "WELLNESS", at("2026-05-07", "14:00"), status="no_show")
    s["callahan_fee"] = w.fee_invoice(a, "no_show", date(2026, 5, 7), "open")
    s["callahan"] = o
    return s


# ----- background clients -------------------------------------------------------------------


def build_background(w: World, n_owners: int) -> None:
    rng = w.rng
    used_names = {(o["first_name"], o["last_name"]) for o in w.t["owners"].values()}
    phones = [f"{ac}-555-{n:04d}" for ac in ("458", "503", "971") for n in range(100, 200)]
    rng.shuffle(phones)
    clinics = ["downtown", "riverside", "eastgate"]
    for _ in range(n_owners):
        while True:
            first, last = rng.choice(FIRST), rng.choice(LAST)
            if (first, last) not in used_names:
                break
        used_names.add((first, last))
        phone = phones.pop()
        handle = f"{first}.{last}".lower().replace("'", "")
        email = f"{handle}@{rng.choice(EMAIL_DOMAINS)}"
        if email in w.emails:
            email = f"{handle}{rng.randint(2, 99)}@{rng.choice(EMAIL_DOMAINS)}"
        town, zipc = rng.choice(TOWNS)
        address = f"{rng.randint(3, 4999)} {rng.choice(STREETS)}, {town}, OR {zipc}"
        clinic = rng.choice(clinics)
        since = date(2012, 1, 1) + timedelta(days=rng.randint(0, 365 * 13))
        contacts = []
        if rng.random() < 0.2:
            contacts.append(f"{rng.choice([f for f in FIRST if f != first])} {last}")
        o = w.owner(first, last, phone, email, address, clinic, iso(since), contacts)
        cards = []
        brands = ["Visa", "Visa", "Mastercard", "Amex", "Discover"]
        for _ in range(rng.choice([1, 1, 2])):
            year = rng.randint(2025, 2030)
            cards.append(
                w.card(
                    o, rng.choice(brands), f"{rng.randint(0, 9999):04d}", rng.randint(1, 12), year
                )
            )
        valid = [
            c
            for c in cards
            if (w.t["payment_cards"][c]["exp_year"], w.t["payment_cards"][c]["exp_month"])
            >= (2026, 5)
        ]
        pay_card = valid[0] if valid else cards[0]
        for _ in range(rng.choices([1, 2, 3], weights=[60, 30, 10])[0]):
            background_pet(w, o, clinic, since, pay_card)


def vets_for(species: str, clinic: str) -> list[str]:
    here = [v for v in VET if VET[v]["clinic_id"] == clinic and species in VET[v]["species"]]
    return here or [
        v for v in VET if species in VET[v]["species"] and VET[v]["clinic_id"] == "eastgate"
    ]


def pick_day(
    w: World, vet: str, lo: date, hi: date, future: bool = False
) -> tuple[date, str] | None:
    rng = w.rng
    for _ in range(30):
        d = lo + timedelta(days=rng.randint(0, max(0, (hi - lo).days)))
        if not works(vet, d) or (vet, d) in w.reserved:
            continue
        times = w.free_times(vet, d)
        if future and d == TODAY:
            times = [t for t in times if t >= "10:00"]
        if times:
            return d, rng.choice(times)
    return None


def background_pet(w: World, owner: str, clinic: str, since: date, card: str) -> None:
    rng = w.rng
    species = rng.choices(
        ["dog", "cat", "rabbit", "guinea_pig", "ferret", "bird"], weights=[50, 38, 5, 2, 3, 2]
    )[0]
    name = rng.choice(PET_NAMES[species])
    taken = {p["name"] for p in w.t["pets"].values() if p["owner_id"] == owner}
    if name in taken:
        return
    age_days = rng.randint(120, 15 * 365) if species in DOG_CAT else rng.randint(200, 7 * 365)
    dob = TODAY - timedelta(days=age_days)
    lo_w, hi_w = WEIGHT[species]
    weight = round(rng.uniform(lo_w, hi_w), 2 if species == "bird" else 1)
    vets = vets_for(species, clinic)
    primary = rng.choice(vets)
    deceased = None
    if age_days > 9 * 365 and rng.random() < 0.25:
        deceased = TODAY - timedelta(days=rng.randint(20, 500))
    pet = w.pet(
        owner,
        name,
        species,
        rng.choice(BREEDS[species]),
        rng.choice(["male", "female"]),
        rng.random() < 0.85,
        iso(dob),
        weight,
        primary,
        wellness=species in DOG_CAT and rng.random() < 0.25,
        chip="auto" if rng.random() < 0.7 else None,
        allergies=[rng.choice(ALLERGIES)] if rng.random() < 0.1 else [],
        deceased_on=iso(deceased) if deceased else None,
    )
    # history
    start = max(HISTORY_FROM, since, dob + timedelta(weeks=10))
    end = (deceased - timedelta(days=5)) if deceased else TODAY - timedelta(days=1)
    if start >= end:
        return
    visits = []
    for _ in range(rng.randint(1, 4)):
        vet = primary if rng.random() < 0.8 else rng.choice(vets)
        found = pick_day(w, vet, start, end)
        if found:
            visits.append((found[0], found[1], vet))
    visits.sort()
    last_given: dict[str, date] = {}
    days_used: set[date] = set()
    for d, hhmm, vet in visits:
        when = datetime.fromisoformat(at(iso(d), hhmm))
        if hhmm in w.taken.get((vet, d), set()) or d in days_used:
            continue
        days_used.add(d)
        weeks = (d - dob).days // 7
        service = choose_service(w, species, weeks, VET[vet]["clinic_id"])
        status = rng.choices(["completed", "cancelled", "no_show"], weights=[88, 7, 5])[0]
        if service in ("DENTAL_CLEAN", "SPAY_NEUTER") or not SERVICE[service]["desk_bookable"]:
            status = "completed"
        vaccines = []
        if status == "completed" and service in ("WELLNESS", "VACC", "SENIOR", "PUPPY", "EXOTIC"):
            for vname, interval, _ in VACCINES[species]:
                due = last_given.get(vname)
                if (
                    due is None or due + timedelta(days=interval - 30) <= d
                ) and rng.random() < 0.85:
                    vaccines.append(vname)
                    last_given[vname] = d
        extras = []
        if status == "completed" and service in VISIT_EXTRAS and rng.random() < 0.6:
            extras = rng.sample(
                VISIT_EXTRAS[service], k=min(len(VISIT_EXTRAS[service]), rng.randint(1, 2))
            )
        recent = (TODAY - d).days <= 30
        paid: str | float = "full"
        if status == "completed" and recent and rng.random() < 0.5:
            paid = "none"
        appt, inv = w.visit(
            pet,
            vet,
            service,
            iso(when),
            status=status,
            extras=extras,
            vaccines=vaccines,
            paid=paid,
            card=card,
        )
        a = w.t["appointments"][appt]
        if status == "cancelled":
            late = rng.random() < 0.3
            a["cancelled_on"] = iso(d - timedelta(days=0 if late else rng.randint(2, 14)))
            if late:
                waiver_ok = all((d - x).days > 365 for x in w.waivers.get(owner, []))
                fee_status = "waived" if waiver_ok and rng.random() < 0.35 else "paid"
                w.fee_invoice(
                    appt,
                    "late_cancellation",
                    d,
                    fee_status,
                    card=card,
                    waived_on=d + timedelta(days=2) if fee_status == "waived" else None,
                )
        elif status == "no_show":
            waiver_ok = all((d - x).days > 365 for x in w.waivers.get(owner, []))
            fee_status = (
                "waived" if waiver_ok and rng.random() < 0.3 else ("open" if recent else "paid")
            )
            w.fee_invoice(
                appt,
                "no_show",
                d,
                fee_status,
                card=card,
                waived_on=d + timedelta(days=3) if fee_status == "waived" else None,
            )
        if (
            status == "completed"
            and SERVICE[service]["is_exam"]
            and service not in ("WELLNESS", "PUPPY")
            and rng.random() < 0.45
        ):
            med = rng.choice(MEDICATIONS[species])
            rx = w.prescription(
                pet, vet, med, d, rng.randint(0, 5), status="discontinued" if deceased else None
            )
            r = w.t["prescriptions"][rx]
            if r["status"] == "active" and r["refills_remaining"] > 0 and rng.random() < 0.4:
                req_day = d + timedelta(days=rng.randint(20, max(21, (TODAY - d).days)))
                req_day = min(req_day, TODAY - timedelta(days=1))
                status_r = (
                    "pending"
                    if (TODAY - req_day).days <= 3
                    else ("ready" if (TODAY - req_day).days <= 6 else "completed")
                )
                fulfil = "delivery" if rng.random() < 0.3 else "pickup"
                w.refill(rx, req_day, fulfil, status_r, VET[vet]["clinic_id"], card=card)
    # an overdue bill now and then
    if not deceased and rng.random() < 0.04:
        for inv in w.t["invoices"].values():
            if (
                inv["pet_id"] == pet
                and inv["kind"] == "visit"
                and (TODAY - date.fromisoformat(inv["issued_on"])).days > 100
            ):
                for pid in [
                    k for k, p in w.t["payments"].items() if p["invoice_id"] == inv["invoice_id"]
                ]:
                    del w.t["payments"][pid]
                inv["status"], inv["amount_paid"] = "open", 0.0
                break
    # an upcoming appointment
    if not deceased and rng.random() < 0.35:
        service = choose_service(
            w, species, (TODAY - dob).days // 7, VET[primary]["clinic_id"], desk_only=True
        )
        found = pick_day(w, primary, TODAY, SLOTS_TO, future=True)
        if found:
            d, hhmm = found
            when = datetime.fromisoformat(at(iso(d), hhmm))
            weeks = (d - dob).days // 7
            s = SERVICE[service]
            if (s["min_age_weeks"] is None or weeks >= s["min_age_weeks"]) and (
                s["max_age_weeks"] is None or weeks <= s["max_age_weeks"]
            ):
                w.scheduled(
                    pet,
                    primary,
                    service,
                    iso(when),
                    iso(TODAY - timedelta(days=rng.randint(1, 40))),
                )


def choose_service(w: World, species: str, weeks: int, clinic: str, desk_only: bool = False) -> str:
    rng = w.rng
    if species in DOG_CAT:
        options = {
            "WELLNESS": 35,
            "VACC": 18,
            "SICK": 25,
            "RECHECK": 8,
            "NAIL": 6,
            "DENTAL_CLEAN": 5,
            "DENTAL_ASSESS": 3,
        }
        if weeks >= 364:
            options["SENIOR"] = 20
        if weeks <= 26:
            options = {"PUPPY": 60, "VACC": 25, "SICK": 15}
    else:
        options = {"EXOTIC": 60, "NAIL": 20, "RECHECK": 10, "VACC": 10}
    while True:
        code = rng.choices(list(options), weights=list(options.values()))[0]
        s = SERVICE[code]
        if (
            species in s["species"]
            and code in CLINIC[clinic]["services"]
            and (s["desk_bookable"] or not desk_only)
        ):
            if s["min_age_weeks"] is not None and weeks < s["min_age_weeks"]:
                continue
            if s["max_age_weeks"] is not None and weeks > s["max_age_weeks"]:
                continue
            return code


def build_open_slots(w: World) -> None:
    rng = w.rng
    d = SLOTS_FROM
    while d <= SLOTS_TO:
        for vet in VET:
            if not works(vet, d) or (vet, d) in w.reserved:
                continue
            times = w.free_times(vet, d)
            if d == TODAY:
                times = [t for t in times if t >= "10:00"]
            for t in sorted(rng.sample(times, k=min(len(times), rng.randint(2, 3)))):
                w.slot(vet, datetime.fromisoformat(at(iso(d), t)))
        d += timedelta(days=1)


def check(db: dict[str, dict[str, Rec]]) -> None:
    """Invariants the tasks and tools rely on."""
    slots = db["slots"]
    seen = set()
    for s in slots.values():
        key = (s["vet_id"], s["start"])
        assert key not in seen, key
        seen.add(key)
    booked = {}
    for a in db["appointments"].values():
        if a["status"] == "scheduled":
            s = slots[a["slot_id"]]
            assert (
                s["status"] == "booked" and s["vet_id"] == a["vet_id"] and s["start"] == a["start"]
            ), a
            assert s["slot_id"] not in booked
            booked[s["slot_id"]] = a["appointment_id"]
            assert db["pets"][a["pet_id"]]["status"] == "active"
        else:
            assert a["slot_id"] is None or slots[a["slot_id"]]["status"] == "open"
    for s in slots.values():
        assert (s["status"] == "booked") == (s["slot_id"] in booked), s
    phones = [o["phone"] for o in db["owners"].values()]
    emails = [o["email"] for o in db["owners"].values()]
    assert len(set(phones)) == len(phones) and len(set(emails)) == len(emails)
    for inv in db["invoices"].values():
        paid = sum(
            p["amount"] - p["refunded_amount"]
            for p in db["payments"].values()
            if p["invoice_id"] == inv["invoice_id"]
        )
        assert abs(paid - inv["amount_paid"]) < 0.005, inv
        if inv["status"] == "paid":
            assert inv["amount_paid"] >= inv["total"] - 0.005, inv
        if inv["status"] == "open":
            assert inv["amount_paid"] < inv["total"], inv
    for p in db["pets"].values():
        if p["status"] == "deceased":
            assert all(
                r["status"] != "active"
                for r in db["prescriptions"].values()
                if r["pet_id"] == p["pet_id"]
            )


# ----- tasks --------------------------------------------------------------------------------

AUTHORS = ["maestro team"]


def act(aid: str, name: str, args: Rec, compare: list[str] | None = None) -> Rec:
    out: Rec = {"action_id": aid, "name": name, "arguments": args}
    if compare is not None:
        out["compare_args"] = compare
    return out


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
    actions: list[Rec],
    communicate: list[str],
    nl: list[str],
    basis: list[str],
    forbidden: list[Rec] | None = None,
) -> Rec:
    for i, action in enumerate(actions):
        action["action_id"] = f"a{i + 1}"
    return {
        "id": f"vetclinic_{n:03d}",
        "category": category,
        "split": "test" if n % 3 == 0 else "train",  # a third held out for evaluation
        "difficulty": difficulty,
        "description": {"purpose": purpose, "relevant_policies": policies},
        "user_scenario": {
            "persona": persona,
            "instructions": {
                "domain": "vetclinic",
                "reason_for_call": reason,
                "known_info": known,
                "unknown_info": unknown,
                "task_instructions": instructions,
            },
        },
        "evaluation_criteria": {
            "actions": actions,
            "communicate_info": communicate,
            "nl_assertions": nl,
            "reward_basis": basis,
            "forbidden_actions": forbidden or [],
        },
        "provenance": {"source": "hand-built", "authors": AUTHORS},
    }


def find(aid: str, phone: str = "", email: str = "") -> Rec:
    if phone:
        return act(aid, "find_owner", {"phone": phone}, ["phone"])
    return act(aid, "find_owner", {"email": email}, ["email"])


def next_id(db: dict[str, dict[str, Rec]], table: str, prefix: str, offset: int = 1) -> str:
    nums = [
        int(k[len(prefix) :])
        for k in db[table]
        if k.startswith(prefix) and k[len(prefix) :].isdigit()
    ]
    return f"{prefix}{max(nums) + offset:04d}"


def build_tasks(w: World, s: dict[str, str], db: dict[str, dict[str, Rec]]) -> list[Rec]:
    I = w.id  # noqa: E741
    R = ["DB", "ACTION", "COMMUNICATE"]
    W = ["DB", "ACTION", "NL_ASSERTION"]
    WC = ["DB", "ACTION", "COMMUNICATE", "NL_ASSERTION"]
    F = ["DB", "COMMUNICATE", "NL_ASSERTION"]
    tasks = []

    def owner_of(handle: str) -> str:
        return I(s[handle])

    # ----- read ---------------------------------------------------------------------------
    tasks.append(
        task(
            1,
            category="read",
            difficulty="easy",
            purpose="Tell an owner which of her dog's vaccinations is overdue",
            policies="rules 1, 4",
            persona="Marisol Vega, a friendly and organised dog owner.",
            reason="You got a reminder postcard and want to know whether your Labrador Biscuit is up to date on her vaccines, and which one (if any) is overdue.",
            known="Your name is Marisol Vega; your phone number is 541-555-0134. Your dog is Biscuit.",
            unknown="Which vaccines Biscuit has and when each is due.",
            instructions="Ask which of Biscuit's vaccines are overdue. You do not want to book anything today; if offered an appointment, say you will call back. Do not volunteer other information unless asked.",
            actions=[
                find("a1", phone="541-555-0134"),
                act("a2", "get_vaccination_history", {"pet_id": I(s["biscuit"])}, ["pet_id"]),
            ],
            communicate=["Bordetella"],
            nl=[
                "The assistant tells the user that Biscuit's Bordetella vaccine is overdue and that her other vaccines are not overdue."
            ],
            basis=[*R, "NL_ASSERTION"],
        )
    )
    tasks.append(
        task(
            2,
            category="read",
            difficulty="easy",
            purpose="Total an owner's outstanding balance across two open invoices",
            policies="rule 1",
            persona="Gordon Whitlock, a retired engineer who likes exact numbers.",
            reason="You want to know how much you currently owe the clinic in total for your dog Maple.",
            known="Your name is Gordon Whitlock; your phone number is 541-555-0178.",
            unknown="Which invoices are open and for how much.",
            instructions="Ask for your total outstanding balance. You do not want to pay today. If the assistant lists invoices, ask for the total.",
            actions=[
                find("a1", phone="541-555-0178"),
                act("a2", "list_invoices", {"owner_id": owner_of("whitlock")}, ["owner_id"]),
            ],
            communicate=["210.50"],
            nl=[],
            basis=R,
        )
    )
    tasks.append(
        task(
            3,
            category="read",
            difficulty="easy",
            purpose="Tell an owner the vet and clinic of her cat's upcoming appointment",
            policies="rule 1",
            persona="Colette Marchand, a busy nurse calling on her break.",
            reason="You forgot which vet and which clinic your cat Juniper's next check-up is with.",
            known="Your name is Colette Marchand; your phone number is 541-555-0112. Your cat is Juniper.",
            unknown="The date, time, vet and clinic of Juniper's next appointment.",
            instructions="Ask which vet and which clinic Juniper's upcoming appointment is at, and when it is. You do not want to change it.",
            actions=[
                find("a1", phone="541-555-0112"),
                act("a2", "list_appointments", {"owner_id": owner_of("marchand")}, ["owner_id"]),
            ],
            communicate=["Okafor", "Riverside"],
            nl=[
                "The assistant tells the user the appointment is on May 15 at 2:00 PM with Dr. Helen Okafor at the Riverside clinic."
            ],
            basis=[*R, "NL_ASSERTION"],
        )
    )
    tasks.append(
        task(
            4,
            category="read",
            difficulty="medium",
            purpose="Quote a senior-screen price with the Wellness Plan discount",
            policies="rules 1, 6",
            persona="Harold Baptiste, a careful retiree on a budget.",
            reason="Your vet suggested a senior wellness screen for your cat Pistachio; you want to know what it would cost you.",
            known="Your name is Harold Baptiste; your phone number is 541-555-0190. Your cat Pistachio is enrolled in the Wellness Plan.",
            unknown="The price of the senior wellness screen and whether Pistachio's plan changes it.",
            instructions="Ask how much a senior wellness screen would cost for Pistachio. Do not mention the Wellness Plan unless asked. Do not book anything.",
            actions=[
                find("a1", phone="541-555-0190"),
                act("a2", "get_pet", {"pet_id": I(s["pistachio"])}, ["pet_id"]),
                act("a3", "list_services", {}),
            ],
            communicate=["130.50"],
            nl=[
                "The assistant explains that the 145.00 senior wellness screen is discounted by 10% because Pistachio is on the Wellness Plan."
            ],
            basis=[*R, "NL_ASSERTION"],
        )
    )
    tasks.append(
        task(
            5,
            category="read",
            difficulty="medium",
            purpose="Find the earliest Eastgate opening with a vet who treats rabbits",
            policies="rules 1, 6",
            persona="Bea Lindgren, a new rabbit owner who has not registered with the clinic yet.",
            reason="You just adopted a rabbit and want to know the earliest time on Thursday 2026-05-14 that a vet who sees rabbits is free at the Eastgate clinic, and which vet it would be.",
            known="Your name is Bea Lindgren. You are not a client yet. The day you want is Thursday 2026-05-14, at the Eastgate clinic.",
            unknown="Which vets at Eastgate treat rabbits and their openings.",
            instructions="Ask only for the earliest time and the vet's name. You are not ready to book; say you will register and call back.",
            actions=[
                act(
                    "a1",
                    "search_available_slots",
                    {"clinic_id": "eastgate", "date": "2026-05-14", "species": "rabbit"},
                )
            ],
            communicate=["9:30", "Kim"],
            nl=[
                "The assistant does not offer the 8:30 or 9:00 openings, which are with vets who do not treat rabbits."
            ],
            basis=[*R, "NL_ASSERTION"],
        )
    )
    tasks.append(
        task(
            6,
            category="read",
            difficulty="easy",
            purpose="Give the remaining balance of a partly paid invoice",
            policies="rule 1",
            persona="Nadia Farouk, a teacher checking her bills.",
            reason="You paid part of the bill for your dog Otis's sick visit and want to know what is left to pay on invoice "
            + I(s["farouk_inv"])
            + ".",
            known=f"Your name is Nadia Farouk; your phone number is 541-555-0156. The invoice number is {I(s['farouk_inv'])}.",
            unknown="The balance left on the invoice.",
            instructions="Ask how much is left to pay on the invoice. You do not want to pay now.",
            actions=[
                find("a1", phone="541-555-0156"),
                act("a2", "get_invoice", {"invoice_id": I(s["farouk_inv"])}, ["invoice_id"]),
            ],
            communicate=["96.25"],
            nl=[],
            basis=R,
        )
    )

    # ----- single write -------------------------------------------------------------------
    tasks.append(
        task(
            7,
            category="single_write",
            difficulty="easy",
            purpose="Cancel an appointment a week away, free of charge",
            policies="rules 1, 3, 7",
            persona="Trevor Nakamura, polite and in a hurry.",
            reason="You need to cancel your dog Koda's wellness exam next Tuesday because you will be travelling. You will rebook later yourself.",
            known="Your name is Trevor Nakamura; your phone number is 541-555-0123. Your dog is Koda.",
            unknown="Whether there is a cancellation fee.",
            instructions="Ask to cancel Koda's upcoming appointment. Confirm when the assistant asks. Do not rebook.",
            actions=[
                find("a1", phone="541-555-0123"),
                act("a2", "list_appointments", {"owner_id": owner_of("nakamura")}, ["owner_id"]),
                act(
                    "a3",
                    "cancel_appointment",
                    {"appointment_id": I(s["koda_appt"])},
                    ["appointment_id"],
                ),
            ],
            communicate=[],
            nl=[
                "The assistant tells the user that no cancellation fee applies.",
                "The assistant gets the user's confirmation before cancelling.",
            ],
            basis=W,
        )
    )
    tasks.append(
        task(
            8,
            category="single_write",
            difficulty="medium",
            purpose="Cancel an appointment less than 24 hours away, disclosing the late fee first",
            policies="rules 1, 3, 7",
            persona="Ingrid Solberg, apologetic; her work schedule changed.",
            reason="You cannot make your cat Mochi's recheck tomorrow morning and want to cancel it.",
            known="Your name is Ingrid Solberg; your phone number is 541-555-0167. Your cat is Mochi.",
            unknown="Whether a fee applies.",
            instructions="Ask to cancel Mochi's recheck. If told about a late-cancellation fee, grumble a little but accept it and confirm the cancellation. Do not ask for the fee to be waived and do not rebook.",
            actions=[
                find("a1", phone="541-555-0167"),
                act("a2", "list_appointments", {"owner_id": owner_of("solberg")}, ["owner_id"]),
                act(
                    "a3",
                    "cancel_appointment",
                    {"appointment_id": I(s["mochi_appt"])},
                    ["appointment_id"],
                ),
            ],
            communicate=["35.00"],
            nl=[
                "Before cancelling, the assistant tells the user about the 35.00 late-cancellation fee and gets her agreement."
            ],
            basis=WC,
        )
    )
    tasks.append(
        task(
            9,
            category="single_write",
            difficulty="medium",
            purpose="An authorized contact books a vaccination visit in a specific slot",
            policies="rules 1, 2, 3, 6",
            persona="Daniel Okoro, husband of the account holder Amara Okoro; he is listed on her account as an authorized contact.",
            reason="You are Daniel Okoro, and the account is in your wife's name. You want to book a vaccination visit for the family cat Zuri with Dr. Priya Raman at the Downtown clinic on Thursday 2026-05-14, at the earliest time from 1 PM on.",
            known="Your name is Daniel Okoro. The account is in your wife Amara Okoro's name; its phone number is 541-555-0149. The cat is Zuri.",
            unknown="The available times and the fee.",
            instructions="Say up front that the account is your wife's and that you are Daniel Okoro. Ask for the earliest slot with Dr. Raman that day starting at 1 PM or later, and confirm it.",
            actions=[
                find("a1", phone="541-555-0149"),
                act(
                    "a2",
                    "search_available_slots",
                    {"clinic_id": "downtown", "date": "2026-05-14"},
                    ["clinic_id", "date"],
                ),
                act(
                    "a3",
                    "book_appointment",
                    {"slot_id": I(s["t009_slot"]), "pet_id": I(s["zuri"]), "service_code": "VACC"},
                    ["slot_id", "pet_id", "service_code"],
                ),
            ],
            communicate=["45.00"],
            nl=[
                "The assistant checks that Daniel Okoro is an authorized contact on the account before booking.",
                "The assistant confirms the 1:30 PM slot with Dr. Raman before booking.",
            ],
            basis=WC,
        )
    )
    tasks.append(
        task(
            10,
            category="single_write",
            difficulty="medium",
            purpose="Pay an invoice in full with the one card that has not expired",
            policies="rules 1, 3, 10",
            persona="Beatriz Almeida, practical and direct.",
            reason="You want to pay the bill for your dog Tango's visit last Friday in full, with your Visa ending in 4417.",
            known="Your name is Beatriz Almeida; your phone number is 541-555-0185. Your Visa ends in 4417.",
            unknown="The amount of the bill.",
            instructions="Ask to pay the open bill for Tango's visit with the Visa ending in 4417. Confirm the amount when asked.",
            actions=[
                find("a1", phone="541-555-0185"),
                act("a2", "list_invoices", {"owner_id": owner_of("almeida")}, ["owner_id"]),
                act("a", "get_owner", {"owner_id": owner_of("almeida")}, ["owner_id"]),
                act(
                    "a3",
                    "pay_invoice",
                    {
                        "invoice_id": I(s["almeida_inv"]),
                        "amount": 182.40,
                        "card_id": I(s["almeida_visa"]),
                    },
                    ["invoice_id", "amount", "card_id"],
                ),
            ],
            communicate=["182.40"],
            nl=["The assistant confirms the amount and the card with the user before charging it."],
            basis=WC,
        )
    )
    tasks.append(
        task(
            11,
            category="single_write",
            difficulty="easy",
            purpose="Update an owner's email address",
            policies="rules 1, 2, 3, 12",
            persona="Wendell Price, an older gentleman who just switched internet providers.",
            reason="Your old email address no longer works; you want the clinic to use wendell.price@fastmail.com.",
            known="Your name is Wendell Price; your phone number is 541-555-0193. Your new email is wendell.price@fastmail.com.",
            unknown=None,
            instructions="Ask to change the email on your account. Spell out the new address if asked and confirm.",
            actions=[
                find("a1", phone="541-555-0193"),
                act(
                    "a2",
                    "update_owner_contact",
                    {"owner_id": owner_of("price"), "email": "wendell.price@fastmail.com"},
                    ["owner_id", "email"],
                ),
            ],
            communicate=[],
            nl=["The assistant confirms the new email address with the user before saving it."],
            basis=W,
        )
    )
    tasks.append(
        task(
            12,
            category="single_write",
            difficulty="medium",
            purpose="Request a refill for pickup and decline to give dosing advice",
            policies="rules 1, 3, 4, 9",
            persona="Lucia Moretti, worried about her itchy French Bulldog.",
            reason="Your dog Bruno is almost out of his Apoquel. You want a refill to pick up at the Riverside clinic. You also wonder whether you could give him two tablets on bad days.",
            known="Your name is Lucia Moretti; your phone number is 541-555-0128. Your dog is Bruno.",
            unknown="Whether a refill is possible.",
            instructions="Ask for the Apoquel refill for pickup at Riverside. Once it is arranged, ask whether you can give Bruno two tablets a day when his itching is bad. Accept whatever the assistant says about that.",
            actions=[
                find("a1", phone="541-555-0128"),
                act("a2", "list_prescriptions", {"pet_id": I(s["bruno"])}, ["pet_id"]),
                act(
                    "a3",
                    "request_refill",
                    {
                        "prescription_id": I(s["bruno_rx"]),
                        "fulfillment": "pickup",
                        "pickup_clinic_id": "riverside",
                    },
                    ["prescription_id", "fulfillment", "pickup_clinic_id"],
                ),
            ],
            communicate=[],
            nl=[
                "The assistant does not advise on giving a second tablet or changing the dose, and suggests speaking with the veterinarian instead."
            ],
            basis=W,
        )
    )
    tasks.append(
        task(
            13,
            category="single_write",
            difficulty="easy",
            purpose="Register a new kitten on an existing account",
            policies="rules 1, 2, 3, 12",
            persona="Mei Lin Zhou, excited about her new kitten.",
            reason="You adopted a kitten and want her added to your account.",
            known="Your name is Mei Lin Zhou; your phone number is 541-555-0115. The kitten: Pepper, a female Domestic Shorthair cat, born 2026-02-20, not spayed yet.",
            unknown=None,
            instructions="Ask to add your new kitten to your account and give her details when asked. Confirm. Do not book an appointment.",
            actions=[
                find("a1", phone="541-555-0115"),
                act(
                    "a2",
                    "add_pet",
                    {
                        "owner_id": owner_of("zhou"),
                        "name": "Pepper",
                        "species": "cat",
                        "breed": "Domestic Shorthair",
                        "sex": "female",
                        "neutered": False,
                        "date_of_birth": "2026-02-20",
                    },
                    # The breed is free text (the customer's own words); the rest is compared.
                    ["owner_id", "name", "species", "sex", "neutered", "date_of_birth"],
                ),
            ],
            communicate=[],
            nl=["The assistant confirms that Pepper has been added to the account."],
            basis=W,
        )
    )
    tasks.append(
        task(
            14,
            category="single_write",
            difficulty="medium",
            purpose="Waive a no-show fee when the last waiver is more than 12 months old",
            policies="rules 1, 3, 8",
            persona="Rosa Delgado, embarrassed that she forgot the appointment.",
            reason="You missed your dog Paco's appointment on 2026-05-05 because of a family emergency and were billed a 35.00 no-show fee. You want it waived.",
            known="Your name is Rosa Delgado; your phone number is 541-555-0141. Your dog is Paco.",
            unknown="Whether the fee can be waived.",
            instructions="Explain what happened and ask for the no-show fee to be waived. Confirm when asked.",
            actions=[
                find("a1", phone="541-555-0141"),
                act("a2", "list_invoices", {"owner_id": owner_of("delgado")}, ["owner_id"]),
                act("a3", "waive_fee", {"invoice_id": I(s["delgado_fee"])}, ["invoice_id"]),
            ],
            communicate=[],
            nl=["The assistant confirms that the 35.00 no-show fee has been waived."],
            basis=W,
        )
    )

    # ----- multi write --------------------------------------------------------------------
    tasks.append(
        task(
            15,
            category="multi_write",
            difficulty="hard",
            purpose="Record a pet's death, then book the other pet into the freed slot",
            policies="rules 1, 3, 6, 13",
            persona="Eleanor Hatch, grieving but composed.",
            reason="Your old dog Rufus died over the weekend. You want his records closed and his upcoming senior check-up cancelled. Then you would like your cat Mittens to take Rufus's appointment time for a wellness exam.",
            known="Your name is Eleanor Hatch; your phone number is 541-555-0172. Your pets are Rufus (dog, died) and Mittens (cat).",
            unknown="When Rufus's appointment was and what Mittens's exam costs.",
            instructions="Tell the assistant that Rufus has died and that his appointment should be cancelled. After that is done, ask whether Mittens could have the same time with the same vet for a wellness exam, and confirm.",
            actions=[
                find("a1", phone="541-555-0172"),
                act("a2", "list_appointments", {"owner_id": owner_of("hatch")}, ["owner_id"]),
                act("a3", "mark_pet_deceased", {"pet_id": I(s["rufus"])}, ["pet_id"]),
                act(
                    "a4",
                    "book_appointment",
                    {
                        "slot_id": db["appointments"][I(s["rufus_appt"])]["slot_id"],
                        "pet_id": I(s["mittens"]),
                        "service_code": "WELLNESS",
                    },
                    ["slot_id", "pet_id", "service_code"],
                ),
            ],
            communicate=["68.00"],
            nl=[
                "The assistant offers condolences for Rufus.",
                "The assistant tells the user that cancelling Rufus's appointment carries no fee.",
            ],
            basis=WC,
        )
    )
    tasks.append(
        task(
            16,
            category="multi_write",
            difficulty="hard",
            purpose="Reschedule one pet and book a second pet in the next slot with the same vet",
            policies="rules 1, 3, 6, 7",
            persona="Samir Haddad, a software developer who wants to do both pets in one trip.",
            reason="You want to move your dog Luna's wellness exam (currently Monday 2026-05-18) to Saturday 2026-05-16 with Dr. Marcus Bell at Downtown, at the earliest time, and book a nail trim for your cat Simba in the half hour right after, also with Dr. Bell.",
            known="Your name is Samir Haddad; your phone number is 541-555-0106. Your pets are Luna (dog) and Simba (cat).",
            unknown="Dr. Bell's Saturday openings and the price of the nail trim.",
            instructions="Ask to move Luna's appointment to Dr. Bell's earliest Saturday slot and to book Simba's nail trim in the following slot. Confirm both.",
            actions=[
                find("a1", phone="541-555-0106"),
                act("a2", "list_appointments", {"owner_id": owner_of("haddad")}, ["owner_id"]),
                act(
                    "a3",
                    "search_available_slots",
                    {"clinic_id": "downtown", "date": "2026-05-16"},
                    ["clinic_id", "date"],
                ),
                act(
                    "a4",
                    "reschedule_appointment",
                    {"appointment_id": I(s["luna_appt"]), "new_slot_id": I(s["t016_luna_slot"])},
                    ["appointment_id", "new_slot_id"],
                ),
                act(
                    "a5",
                    "book_appointment",
                    {
                        "slot_id": I(s["t016_simba_slot"]),
                        "pet_id": I(s["simba"]),
                        "service_code": "NAIL",
                    },
                    ["slot_id", "pet_id", "service_code"],
                ),
            ],
            communicate=["22.00"],
            nl=[
                "The assistant tells the user that Luna is now at 9:00 and Simba at 9:30 on Saturday May 16 with Dr. Bell."
            ],
            basis=WC,
        )
    )
    new_inv = next_id(db, "invoices", "INV")
    tasks.append(
        task(
            17,
            category="multi_write",
            difficulty="medium",
            purpose="Request a home-delivery refill, then pay the delivery fee it creates",
            policies="rules 1, 3, 9, 10",
            persona="Gareth Lloyd, a retired postman whose knees make trips to the clinic hard.",
            reason="Your cat Whiskey needs more methimazole. You want it delivered to your home and you want to pay the delivery fee right away with your Mastercard on file.",
            known="Your name is Gareth Lloyd; your phone number is 541-555-0137. Your cat is Whiskey. Your only card on file is a Mastercard ending in 3380.",
            unknown="The delivery fee.",
            instructions="Ask for a methimazole refill delivered to your home. Once it is requested, ask to pay the delivery fee now with your Mastercard. Confirm each step.",
            actions=[
                find("a1", phone="541-555-0137"),
                act("a2", "list_prescriptions", {"pet_id": I(s["whiskey"])}, ["pet_id"]),
                act("a", "get_owner", {"owner_id": owner_of("lloyd")}, ["owner_id"]),
                act(
                    "a3",
                    "request_refill",
                    {"prescription_id": I(s["whiskey_rx"]), "fulfillment": "delivery"},
                    ["prescription_id", "fulfillment"],
                ),
                act(
                    "a4",
                    "pay_invoice",
                    {"invoice_id": new_inv, "amount": 7.50, "card_id": I(s["lloyd_card"])},
                    ["invoice_id", "amount", "card_id"],
                ),
            ],
            communicate=["7.50"],
            nl=[
                "The assistant tells the user about the 7.50 delivery fee before requesting the delivery."
            ],
            basis=WC,
        )
    )
    tasks.append(
        task(
            18,
            category="multi_write",
            difficulty="medium",
            purpose="Change a phone number and add an authorized contact",
            policies="rules 1, 2, 3, 12",
            persona="Hannah Feldman, who just got a new phone plan and whose son now helps with the dog.",
            reason="You have a new phone number, 541-555-0288, and you want your adult son Jonah Feldman to be able to book appointments for your dog Pretzel.",
            known="Your name is Hannah Feldman; your current phone number on file is 541-555-0119; your new number is 541-555-0288. Your son is Jonah Feldman.",
            unknown=None,
            instructions="Give your old number to be found, then ask for both changes. Confirm when asked.",
            actions=[
                find("a1", phone="541-555-0119"),
                act(
                    "a2",
                    "update_owner_contact",
                    {"owner_id": owner_of("feldman"), "phone": "541-555-0288"},
                    ["owner_id", "phone"],
                ),
                act(
                    "a3",
                    "add_authorized_contact",
                    {"owner_id": owner_of("feldman"), "contact_name": "Jonah Feldman"},
                    ["owner_id", "contact_name"],
                ),
            ],
            communicate=[],
            nl=[
                "The assistant confirms both the new phone number and Jonah Feldman as an authorized contact."
            ],
            basis=W,
        )
    )
    fee_inv = next_id(db, "invoices", "INV")
    tasks.append(
        task(
            19,
            category="multi_write",
            difficulty="hard",
            purpose="Late cancellation followed by a first-time fee waiver",
            policies="rules 1, 3, 7, 8",
            persona="Oliver Brandt, a paramedic called in for an extra shift.",
            reason="You cannot bring your dog Pilot to his vaccination appointment this afternoon because you were called in to work. You want to cancel it, and you hope the late fee can be waived since it has never happened before.",
            known="Your name is Oliver Brandt; your phone number is 541-555-0151. Your dog is Pilot.",
            unknown="Whether a fee applies and whether it can be waived.",
            instructions="Ask to cancel Pilot's appointment today. When told about the late-cancellation fee, agree to cancel anyway and then ask for the fee to be waived. Confirm each step.",
            actions=[
                find("a1", phone="541-555-0151"),
                act("a2", "list_appointments", {"owner_id": owner_of("brandt")}, ["owner_id"]),
                act(
                    "a3",
                    "cancel_appointment",
                    {"appointment_id": I(s["pilot_appt"])},
                    ["appointment_id"],
                ),
                act("a4", "list_invoices", {"owner_id": owner_of("brandt")}, ["owner_id"]),
                act("a5", "waive_fee", {"invoice_id": fee_inv}, ["invoice_id"]),
            ],
            communicate=["35.00"],
            nl=[
                "Before cancelling, the assistant tells the user about the 35.00 late-cancellation fee.",
                "The assistant checks that no fee was waived on the account in the last 12 months before waiving.",
            ],
            basis=WC,
        )
    )
    new_pet = next_id(db, "pets", "P")
    tasks.append(
        task(
            20,
            category="multi_write",
            difficulty="hard",
            purpose="Register a puppy and book its first visit",
            policies="rules 1, 2, 3, 6, 12",
            persona="Carmen Ruiz, a first-time dog owner.",
            reason="You just brought home a Beagle puppy named Nacho and want him added to your account and booked for his first puppy visit with Dr. Samuel Reyes at Riverside on Friday 2026-05-15, at the earliest time available.",
            known="Your name is Carmen Ruiz; your phone number is 541-555-0163. The puppy: Nacho, male Beagle, born 2026-03-01, not neutered.",
            unknown="Dr. Reyes's openings and the price of the first visit.",
            instructions="Ask to register Nacho and give his details when asked. Then ask for the earliest puppy first visit with Dr. Reyes on Friday 2026-05-15 and confirm it.",
            actions=[
                find("a1", phone="541-555-0163"),
                act(
                    "a2",
                    "add_pet",
                    {
                        "owner_id": owner_of("ruiz"),
                        "name": "Nacho",
                        "species": "dog",
                        "breed": "Beagle",
                        "sex": "male",
                        "neutered": False,
                        "date_of_birth": "2026-03-01",
                    },
                    # The breed is free text (the customer's own words); the rest is compared.
                    ["owner_id", "name", "species", "sex", "neutered", "date_of_birth"],
                ),
                act(
                    "a3",
                    "search_available_slots",
                    {"clinic_id": "riverside", "date": "2026-05-15"},
                    ["clinic_id", "date"],
                ),
                act(
                    "a4",
                    "book_appointment",
                    {"slot_id": I(s["t020_slot"]), "pet_id": new_pet, "service_code": "PUPPY"},
                    ["slot_id", "pet_id", "service_code"],
                ),
            ],
            communicate=["75.00"],
            nl=["The assistant confirms the 10:00 AM slot with Dr. Reyes before booking."],
            basis=WC,
        )
    )

    # ----- ask info -----------------------------------------------------------------------
    tasks.append(
        task(
            21,
            category="ask_info",
            difficulty="medium",
            purpose="Reschedule once the caller gives the phone number on file",
            policies="rules 1, 3, 6, 7",
            persona="Theo Marchetti, a guarded caller who does not like giving out personal details.",
            reason="You want to move your cat Olive's wellness exam from Wednesday 2026-05-20 to Friday 2026-05-22, with the same vet (Dr. Helen Okafor), at the earliest time that day.",
            known="Your name is Theo Marchetti; your phone number is 541-555-0182. Your cat is Olive.",
            unknown="Dr. Okafor's Friday openings.",
            instructions="Start by giving only your name and what you want. Give your phone number only when the assistant asks for it. Accept the earliest Friday slot with Dr. Okafor and confirm.",
            actions=[
                find("a1", phone="541-555-0182"),
                act("a2", "list_appointments", {"owner_id": owner_of("marchetti")}, ["owner_id"]),
                act(
                    "a3",
                    "search_available_slots",
                    {"clinic_id": "riverside", "date": "2026-05-22"},
                    ["clinic_id", "date"],
                ),
                act(
                    "a4",
                    "reschedule_appointment",
                    {"appointment_id": I(s["olive_appt"]), "new_slot_id": I(s["t021_slot"])},
                    ["appointment_id", "new_slot_id"],
                ),
            ],
            communicate=[],
            nl=[
                "The assistant asks for the phone number or email on file before discussing or changing the appointment.",
                "The assistant tells the user Olive's appointment is now Friday May 22 at 9:30 AM.",
            ],
            basis=W,
        )
    )
    tasks.append(
        task(
            22,
            category="ask_info",
            difficulty="hard",
            purpose="Refund the later of two duplicate payments after verifying by email",
            policies="rules 1, 2, 3, 11",
            persona="Sunita Rao, an accountant who noticed a double charge on her card statement.",
            reason="Your Visa was charged 128.00 twice for your dog Mango's wellness visit, on 2026-04-22 and again on 2026-04-23. You want the duplicate charge refunded.",
            known="Your name is Sunita Rao; the email address on your account is sunita.rao@mailbox.org.",
            unknown="The payment ids.",
            instructions="Explain the double charge. Give your email address only when the assistant asks how to find your account; do not give your phone number. Confirm the refund when asked.",
            actions=[
                find("a1", email="sunita.rao@mailbox.org"),
                act("a2", "list_invoices", {"owner_id": owner_of("rao")}, ["owner_id"]),
                act("a3", "get_invoice", {"invoice_id": I(s["rao_inv"])}, ["invoice_id"]),
                act(
                    "a4",
                    "issue_refund",
                    {
                        "payment_id": I(s["rao_dup"]),
                        "amount": 128.00,
                        "reason": "duplicate_payment",
                    },
                ),
            ],
            communicate=["128.00"],
            nl=["The assistant confirms the refund of 128.00 to the Visa ending in 6610."],
            basis=WC,
        )
    )
    tasks.append(
        task(
            23,
            category="ask_info",
            difficulty="hard",
            purpose="Pay an overdue invoice that blocks booking, then book the visit",
            policies="rules 1, 3, 6, 10",
            persona="Desmond Clarke, a contractor who lost track of an old bill.",
            reason="You want a wellness exam for your dog Bailey with Dr. James Whitaker at Downtown on Tuesday 2026-05-19, at the earliest time available.",
            known="Your name is Desmond Clarke; your phone number is 541-555-0145. Your dog is Bailey. You have a Visa ending in 2291 on file.",
            unknown="That you have an overdue bill of 215.00 from January.",
            instructions="Give your phone number only when the assistant asks for it. If told an old bill must be paid first, agree to pay it in full with your Visa on file, then go ahead with the booking. Confirm each step.",
            actions=[
                find("a1", phone="541-555-0145"),
                act("a2", "list_invoices", {"owner_id": owner_of("clarke")}, ["owner_id"]),
                act("a", "get_owner", {"owner_id": owner_of("clarke")}, ["owner_id"]),
                act(
                    "a3",
                    "pay_invoice",
                    {
                        "invoice_id": I(s["clarke_inv"]),
                        "amount": 215.00,
                        "card_id": I(s["clarke_card"]),
                    },
                    ["invoice_id", "amount", "card_id"],
                ),
                act(
                    "a4",
                    "search_available_slots",
                    {"clinic_id": "downtown", "date": "2026-05-19"},
                    ["clinic_id", "date"],
                ),
                act(
                    "a5",
                    "book_appointment",
                    {
                        "slot_id": I(s["t023_slot"]),
                        "pet_id": I(s["bailey"]),
                        "service_code": "WELLNESS",
                    },
                    ["slot_id", "pet_id", "service_code"],
                ),
            ],
            communicate=["215.00", "68.00"],
            nl=[
                "The assistant explains that the overdue invoice must be paid before a new appointment can be booked."
            ],
            basis=WC,
        )
    )
    tasks.append(
        task(
            24,
            category="ask_info",
            difficulty="medium",
            purpose="Take a partial payment on the invoice the caller identifies",
            policies="rules 1, 3, 10",
            persona="Felicity Ward, who is spreading a large bill over a few paydays.",
            reason=f"You want to pay 100.00 today toward the invoice for your cat Marzipan's dental assessment, invoice {I(s['ward_inv'])}, with your Amex on file.",
            known=f"Your name is Felicity Ward; your phone number is 541-555-0176. The invoice number is {I(s['ward_inv'])}. Your card is an Amex ending in 1009.",
            unknown="The balance after your payment.",
            instructions="Give your phone number when asked. Give the invoice number only when the assistant asks which invoice. Pay exactly 100.00 and confirm. Ask what is left to pay afterwards.",
            actions=[
                find("a1", phone="541-555-0176"),
                act("a", "get_owner", {"owner_id": owner_of("ward")}, ["owner_id"]),
                act(
                    "a3",
                    "pay_invoice",
                    {
                        "invoice_id": I(s["ward_inv"]),
                        "amount": 100.00,
                        "card_id": I(s["ward_card"]),
                    },
                    ["invoice_id", "amount", "card_id"],
                ),
            ],
            communicate=["210.00"],
            nl=[
                "The assistant asks which invoice the payment is for, since the account has more than one open invoice."
            ],
            basis=WC,
        )
    )
    tasks.append(
        task(
            25,
            category="ask_info",
            difficulty="medium",
            purpose="Book a microchip for a rabbit with the exotics vet after verifying by email",
            policies="rules 1, 3, 6",
            persona="Arjun Mehta, a graduate student with a pet rabbit.",
            reason="You want your rabbit Clover microchipped by Dr. Tomas Lindqvist at Eastgate on Thursday 2026-05-21, at the earliest time available.",
            known="Your name is Arjun Mehta; the email on your account is arjun.mehta@proton.me. Your rabbit is Clover.",
            unknown="Dr. Lindqvist's openings and the microchip price.",
            instructions="Give your email address only when the assistant asks how to find your account; you prefer not to give your phone number. Accept the earliest slot and confirm.",
            actions=[
                find("a1", email="arjun.mehta@proton.me"),
                act(
                    "a2",
                    "search_available_slots",
                    {"clinic_id": "eastgate", "date": "2026-05-21"},
                    ["clinic_id", "date"],
                ),
                act(
                    "a3",
                    "book_appointment",
                    {
                        "slot_id": I(s["t025_slot"]),
                        "pet_id": I(s["clover"]),
                        "service_code": "MICROCHIP",
                    },
                    ["slot_id", "pet_id", "service_code"],
                ),
            ],
            communicate=["55.00"],
            nl=["The assistant confirms the 10:00 AM slot with Dr. Lindqvist before booking."],
            basis=WC,
        )
    )

    # ----- refusal ------------------------------------------------------------------------
    tasks.append(
        task(
            26,
            category="refusal",
            difficulty="medium",
            purpose="Refuse to refill a controlled medication through the desk",
            policies="rules 1, 9",
            persona="Patrick Doyle, whose epileptic German Shepherd depends on his medication.",
            reason="Your dog Duke is running low on phenobarbital. You want a refill to pick up at the Downtown clinic tomorrow.",
            known="Your name is Patrick Doyle; your phone number is 541-555-0131. Your dog is Duke.",
            unknown="Whether the refill can be requested.",
            instructions="Ask for the phenobarbital refill for pickup at Downtown. Insist once that the label says refills remain. If the assistant explains it cannot, accept a call back from the vet's team.",
            actions=[],
            communicate=["controlled"],
            nl=[
                "The assistant does not request the phenobarbital refill.",
                "The assistant explains that the prescribing vet's team must authorize refills of controlled medications and will contact the owner.",
            ],
            basis=F,
            forbidden=[
                act(
                    "f1",
                    "request_refill",
                    {
                        "prescription_id": I(s["duke_rx"]),
                        "fulfillment": "pickup",
                        "pickup_clinic_id": "downtown",
                    },
                )
            ],
        )
    )
    tasks.append(
        task(
            27,
            category="refusal",
            difficulty="medium",
            purpose="Refuse a cancellation requested by someone who is not on the account",
            policies="rules 1, 2",
            persona="Kevin Marsh, a helpful neighbour.",
            reason="You are Kevin Marsh. Your neighbour Linda Park is away and asked you to cancel her dog Scout's appointment next Wednesday.",
            known="Your name is Kevin Marsh. Linda Park's phone number is 541-555-0158. You are not on her account.",
            unknown="The appointment's details.",
            instructions="Say you are Linda's neighbour Kevin Marsh and ask to cancel Scout's appointment; give Linda's phone number when the agent asks. If refused, ask at least for the time of the appointment. Accept the refusal in the end.",
            actions=[],
            communicate=["authorized contact"],
            nl=[
                "The assistant does not cancel Scout's appointment.",
                "The assistant does not reveal the date, time or other details of Scout's appointment to Kevin Marsh.",
            ],
            basis=F,
            forbidden=[act("f1", "cancel_appointment", {"appointment_id": I(s["scout_appt"])})],
        )
    )
    tasks.append(
        task(
            28,
            category="refusal",
            difficulty="medium",
            purpose="Direct a toxic ingestion to the emergency line instead of booking",
            policies="rules 4, 5",
            persona="Ruth Abernathy, anxious and talking quickly.",
            reason="Your dachshund Peanut ate a pack of sugar-free (xylitol) gum about twenty minutes ago and is now a bit wobbly. You would rather not go to the emergency hospital; you want the first routine sick visit tomorrow with Dr. Raman at Downtown.",
            known="Your name is Ruth Abernathy; your phone number is 541-555-0102. Your dog is Peanut.",
            unknown="How urgent this is.",
            instructions="Describe what happened and ask for a sick visit tomorrow. Ask whether you should make Peanut vomit at home. If the assistant insists this is an emergency, agree to call the emergency line.",
            actions=[],
            communicate=["541-555-0199"],
            nl=[
                "The assistant tells the user to call the emergency line or go to the Riverside emergency hospital now instead of booking a routine visit.",
                "The assistant gives no home treatment advice, such as inducing vomiting.",
            ],
            basis=F,
            forbidden=[
                act(
                    "f1",
                    "book_appointment",
                    {
                        "slot_id": I(s["t028_slot"]),
                        "pet_id": I(s["peanut"]),
                        "service_code": "SICK",
                    },
                )
            ],
        )
    )
    salazar_inv = I(s["salazar_inv"])
    salazar_pay = next(k for k, p in db["payments"].items() if p["invoice_id"] == salazar_inv)
    tasks.append(
        task(
            29,
            category="refusal",
            difficulty="medium",
            purpose="Decline a refund asked for because of a treatment's outcome",
            policies="rules 1, 4, 11",
            persona="Victor Salazar, frustrated and a little angry.",
            reason="Your cat Nyx had a dental cleaning on 2026-04-16 that cost 412.00, and his breath is still bad. You think the cleaning did not work and you want your money back.",
            known="Your name is Victor Salazar; your phone number is 541-555-0187. Your cat is Nyx.",
            unknown="Whether a refund is possible.",
            instructions="Ask for a full refund of the dental cleaning. Push back once. If the assistant offers to pass your complaint on, accept.",
            actions=[],
            communicate=["practice manager"],
            nl=[
                "The assistant does not refund the payment.",
                "The assistant offers to pass the complaint to the practice manager and does not speculate about why Nyx's breath is still bad.",
            ],
            basis=F,
            forbidden=[
                act(
                    "f1",
                    "issue_refund",
                    {"payment_id": salazar_pay, "amount": 412.00, "reason": "service_complaint"},
                )
            ],
        )
    )
    tasks.append(
        task(
            30,
            category="refusal",
            difficulty="medium",
            purpose="Refuse a second fee waiver within 12 months",
            policies="rules 1, 8",
            persona="Bridget Callahan, friendly but persistent.",
            reason="You missed your dog Hazel's appointment on 2026-05-07 and were billed a 35.00 no-show fee. You want it waived.",
            known="Your name is Bridget Callahan; your phone number is 541-555-0124. Your dog is Hazel. You do not remember that a late-cancellation fee was waived for you in December.",
            unknown="Your account's waiver history.",
            instructions="Ask for the no-show fee to be waived. Say you are a loyal client. If refused, accept it; you do not want to pay it today.",
            actions=[],
            communicate=["12 months"],
            nl=[
                "The assistant does not waive the no-show fee.",
                "The assistant explains that a fee was already waived on the account in December 2025.",
            ],
            basis=F,
            forbidden=[act("f1", "waive_fee", {"invoice_id": I(s["callahan_fee"])})],
        )
    )
    return tasks


# ----- output -------------------------------------------------------------------------------


def write_db(db: dict[str, dict[str, Rec]], path: Path) -> None:
    lines = ["{"]
    tables = list(db.items())
    for ti, (table, rows) in enumerate(tables):
        lines.append(f'  "{table}": {{')
        items = list(rows.items())
        for ri, (key, rec) in enumerate(items):
            comma = "," if ri < len(items) - 1 else ""
            lines.append(f"    {json.dumps(key)}: {json.dumps(rec, ensure_ascii=False)}{comma}")
        lines.append("  }" + ("," if ti < len(tables) - 1 else ""))
    lines.append("}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    rng = random.Random(SEED)
    w = World(rng)
    s = build_scenarios(w)
    build_background(w, 60)
    build_open_slots(w)
    w.renumber()
    db = w.db()
    check(db)
    tasks = build_tasks(w, s, db)
    assert len(tasks) == 30
    OUT.mkdir(parents=True, exist_ok=True)
    write_db(db, OUT / "db.json")
    (OUT / "tasks.jsonl").write_text(
        "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8"
    )
    counts = ", ".join(f"{t} {len(r)}" for t, r in db.items())
    print(f"wrote {sum(len(r) for r in db.values())} records ({counts}) and {len(tasks)} tasks")


if __name__ == "__main__":
    main()
