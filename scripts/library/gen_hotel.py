"""Generate the `hotel` library domain's db.json and tasks.jsonl (deterministic).

Run from the repository root:  .venv/bin/python scripts/library/gen_hotel.py

The database mixes hand-built scenario records (the guests, reservations and folios the tasks are
about, with fixed ids) and seeded random background records (other guests and their stays).
Tasks are kept here as Python data; ids that only exist after generation (cards, folio charges,
the next loyalty number) are looked up in the generated database.
"""

import json
import random
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "maestro" / "domains" / "library" / "hotel"
TODAY = date(2026, 7, 8)
SEED = 20260708
N_GUESTS = 140
N_RESERVATIONS = 240
AUTHORS = ["maestro team"]


def money(value: float | Decimal) -> float:
    return float(Decimal(str(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def D(value: float | int) -> Decimal:
    return Decimal(str(value))


def iso(d: date) -> str:
    return d.isoformat()


# ----- hotels, room types, rooms ------------------------------------------------------------------

HOTELS = [
    # id, name, address, city, state, phone, tax, breakfast, parking fee, parking notes, amenities
    (
        "BOS",
        "Larkspur Boston Seaport",
        "240 Northern Avenue",
        "Boston",
        "MA",
        "+1-617-555-0100",
        0.1445,
        24.0,
        55.0,
        "Valet parking only, 55.00 per night with in-and-out privileges.",
        ["fitness center", "harbor-view restaurant", "meeting rooms", "pet friendly"],
    ),
    (
        "CHI",
        "Larkspur Chicago Riverwalk",
        "318 East Wacker Drive",
        "Chicago",
        "IL",
        "+1-312-555-0100",
        0.174,
        26.0,
        62.0,
        "Valet parking only, 62.00 per night.",
        ["fitness center", "rooftop bar", "business center"],
    ),
    (
        "DEN",
        "Larkspur Denver Union Station",
        "1710 Wynkoop Street",
        "Denver",
        "CO",
        "+1-303-555-0100",
        0.1475,
        21.0,
        30.0,
        "Self-parking garage attached to the hotel, 30.00 per night.",
        ["fitness center", "ski storage", "restaurant", "EV charging"],
    ),
    (
        "AUS",
        "Larkspur Austin Congress Avenue",
        "905 Congress Avenue",
        "Austin",
        "TX",
        "+1-512-555-0100",
        0.17,
        22.0,
        35.0,
        "Self-parking garage, 35.00 per night.",
        ["outdoor pool", "Congress Grill restaurant", "live-music lounge", "fitness center"],
    ),
    (
        "SEA",
        "Larkspur Seattle Pike Place",
        "1523 Western Avenue",
        "Seattle",
        "WA",
        "+1-206-555-0100",
        0.157,
        25.0,
        None,
        "No on-site parking; the public Western Avenue garage next door charges about 38.00 a day"
        " and cannot be reserved through the hotel.",
        ["fitness center", "sound-view lounge", "bike rental"],
    ),
    (
        "SAN",
        "Larkspur San Diego Bayside",
        "1250 Harbor Drive",
        "San Diego",
        "CA",
        "+1-619-555-0100",
        0.125,
        23.0,
        38.0,
        "Self-parking lot, 38.00 per night.",
        ["outdoor pool", "bayfront restaurant", "beach cruiser bikes", "fitness center"],
    ),
]

ROOM_TYPES = [
    # code, name, rank, beds, max occupancy, size, rooms per hotel, description
    (
        "CLK",
        "Classic King",
        1,
        "1 king bed",
        2,
        300,
        8,
        "Our standard room with a king bed and a work desk.",
    ),
    (
        "CDQ",
        "Classic Double Queen",
        1,
        "2 queen beds",
        4,
        360,
        6,
        "Standard room with two queen beds, good for families.",
    ),
    (
        "DLK",
        "Deluxe King",
        2,
        "1 king bed and a sofa bed",
        3,
        400,
        6,
        "Larger corner room with a king bed, sofa bed and city views.",
    ),
    (
        "JRS",
        "Junior Suite",
        3,
        "1 king bed and a sofa bed",
        3,
        520,
        3,
        "Open-plan suite with a separate sitting area.",
    ),
    (
        "1BS",
        "One-Bedroom Suite",
        4,
        "1 king bed and a double sofa bed",
        4,
        780,
        2,
        "Suite with a separate bedroom, living room and second bathroom.",
    ),
]

RATES = {
    "BOS": [279, 299, 339, 469, 629],
    "CHI": [249, 269, 309, 429, 589],
    "DEN": [189, 209, 239, 329, 449],
    "AUS": [219, 239, 269, 369, 499],
    "SEA": [259, 279, 319, 439, 599],
    "SAN": [239, 259, 299, 409, 559],
}


def points_per_night(rate: float) -> int:
    return round(rate * 100 / 2500) * 2500


def build_hotels() -> tuple[dict, dict, dict]:
    hotels, room_types, rooms = {}, {}, {}
    for hid, name, addr, city, state, phone, tax, bfast, pfee, pnotes, amen in HOTELS:
        hotels[hid] = {
            "hotel_id": hid,
            "name": name,
            "address": addr,
            "city": city,
            "state": state,
            "phone": phone,
            "check_in_time": "15:00",
            "check_out_time": "11:00",
            "tax_rate": tax,
            "breakfast_price": bfast,
            "parking_fee": pfee,
            "parking_notes": pnotes,
            "amenities": amen,
        }
        floor, slot = 2, 1
        for (code, rname, rank, beds, occ, size, count, desc), rate in zip(
            ROOM_TYPES, RATES[hid], strict=True
        ):
            rtid = f"{hid}-{code}"
            room_types[rtid] = {
                "room_type_id": rtid,
                "hotel_id": hid,
                "name": rname,
                "category_rank": rank,
                "beds": beds,
                "max_occupancy": occ,
                "size_sqft": size,
                "nightly_rate": float(rate),
                "points_per_night": points_per_night(rate),
                "description": desc,
            }
            for i in range(count):
                room_id = f"{hid}-{floor}{slot:02d}"
                rooms[room_id] = {
                    "room_id": room_id,
                    "hotel_id": hid,
                    "room_type_id": rtid,
                    "floor": floor,
                    "accessible": i == 0 and code in ("CLK", "CDQ"),
                    "out_of_service_until": "2026-07-16" if rtid == "BOS-1BS" else None,
                }
                slot += 1
                if slot > 8:
                    floor, slot = floor + 1, 1
    return hotels, room_types, rooms


# ----- people -------------------------------------------------------------------------------------

FIRST = [
    "James",
    "Mary",
    "John",
    "Patricia",
    "Michael",
    "Jennifer",
    "David",
    "Linda",
    "William",
    "Elizabeth",
    "Richard",
    "Barbara",
    "Joseph",
    "Susan",
    "Thomas",
    "Jessica",
    "Charles",
    "Sarah",
    "Christopher",
    "Karen",
    "Daniel",
    "Lisa",
    "Matthew",
    "Nancy",
    "Anthony",
    "Betty",
    "Mark",
    "Sandra",
    "Steven",
    "Ashley",
    "Andrew",
    "Kimberly",
    "Joshua",
    "Emily",
    "Kenneth",
    "Donna",
    "Brian",
    "Michelle",
    "Wei",
    "Mei",
    "Arjun",
    "Ananya",
    "Carlos",
    "Lucia",
    "Diego",
    "Valentina",
    "Hiroshi",
    "Yuki",
    "Omar",
    "Layla",
    "Mateo",
    "Sofia",
    "Kwame",
    "Ama",
    "Ivan",
    "Olga",
    "Liam",
    "Zoe",
    "Rafael",
    "Ingrid",
    "Tariq",
    "Nia",
    "Pedro",
    "Ximena",
    "Dmitri",
    "Leah",
    "Andre",
    "Keisha",
    "Raj",
    "Deepa",
]
LAST = [
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Hernandez",
    "Lopez",
    "Gonzalez",
    "Wilson",
    "Anderson",
    "Taylor",
    "Thomas",
    "Moore",
    "Jackson",
    "White",
    "Harris",
    "Clark",
    "Lewis",
    "Robinson",
    "Walker",
    "Young",
    "Allen",
    "King",
    "Wright",
    "Scott",
    "Torres",
    "Nguyen",
    "Hill",
    "Flores",
    "Adams",
    "Nelson",
    "Baker",
    "Hall",
    "Rivera",
    "Campbell",
    "Mitchell",
    "Carter",
    "Roberts",
    "Patel",
    "Shah",
    "Kim",
    "Park",
    "Tanaka",
    "Sato",
    "Haddad",
    "Mensah",
    "Novak",
    "Kowalski",
    "Lindqvist",
    "Rossi",
    "Bianchi",
    "Dubois",
    "Schmidt",
    "Weber",
    "Fischer",
    "Ahmed",
    "Singh",
    "Iyer",
    "Okonkwo",
    "Castillo",
    "Reyes",
    "Ortega",
]
CITIES = [
    ("Boston", "MA", "021"),
    ("Cambridge", "MA", "021"),
    ("Providence", "RI", "029"),
    ("Chicago", "IL", "606"),
    ("Naperville", "IL", "605"),
    ("Denver", "CO", "802"),
    ("Austin", "TX", "787"),
    ("Houston", "TX", "770"),
    ("Seattle", "WA", "981"),
    ("Tacoma", "WA", "984"),
    ("San Diego", "CA", "921"),
    ("Los Angeles", "CA", "900"),
    ("San Francisco", "CA", "941"),
    ("New York", "NY", "100"),
    ("Brooklyn", "NY", "112"),
    ("Atlanta", "GA", "303"),
    ("Miami", "FL", "331"),
    ("Phoenix", "AZ", "850"),
    ("Minneapolis", "MN", "554"),
    ("Portland", "OR", "972"),
    ("Salt Lake City", "UT", "841"),
    ("Nashville", "TN", "372"),
    ("Raleigh", "NC", "276"),
    ("Columbus", "OH", "432"),
]
AREA = {
    "MA": "617",
    "RI": "401",
    "IL": "312",
    "CO": "303",
    "TX": "512",
    "WA": "206",
    "CA": "619",
    "NY": "212",
    "GA": "404",
    "FL": "305",
    "AZ": "602",
    "MN": "612",
    "OR": "503",
    "UT": "801",
    "TN": "615",
    "NC": "919",
    "OH": "614",
    "WI": "414",
    "CT": "860",
    "PA": "215",
    "NM": "505",
}
STREETS = [
    "Maple Street",
    "Oak Avenue",
    "Cedar Lane",
    "Elm Street",
    "Park Avenue",
    "Lakeview Drive",
    "Hillside Road",
    "Washington Street",
    "Pine Street",
    "Sunset Boulevard",
    "River Road",
    "Highland Avenue",
    "Chestnut Street",
    "Willow Way",
    "Magnolia Court",
    "Birch Drive",
]
MAIL = ["gmail.com", "outlook.com", "yahoo.com", "icloud.com", "hotmail.com", "proton.me"]
PREFS = [
    "",
    "",
    "",
    "High floor",
    "Quiet room away from the elevator",
    "Feather-free pillows",
    "King bed when possible",
    "Extra towels",
    "Near the elevator",
    "Late arrival, usually after 21:00",
]
REQUESTS = [
    "",
    "",
    "",
    "",
    "High floor please",
    "Crib in the room",
    "Early check-in if possible",
    "Celebrating an anniversary",
    "Quiet room",
    "Extra pillows",
    "Arriving late, around 23:00",
]

# Scenario guests: id, first, last, email, phone, dob, address, city, state, zip,
# loyalty (id, tier, balance, nights ytd, enrolled) or None, cards [(brand, last4, mm, yyyy)],
# authorized contacts, preferences
SCENARIO_GUESTS = [
    (
        "G1006",
        "Mia",
        "Johansson",
        "mia.johansson@gmail.com",
        "+1-612-555-0131",
        "1989-02-14",
        "48 Lake Harriet Parkway",
        "Minneapolis",
        "MN",
        "55409",
        None,
        [("Visa", "2290", 10, 2028)],
        [],
        "",
    ),
    (
        "G1014",
        "Priya",
        "Raman",
        "priya.raman@gmail.com",
        "+1-408-555-0162",
        "1988-03-22",
        "1150 Saratoga Avenue",
        "San Jose",
        "CA",
        "95129",
        ("LK3305718", "silver", 22400, 12, "2023-04-02"),
        [("Visa", "4821", 5, 2029)],
        [],
        "High floor",
    ),
    (
        "G1023",
        "Fatima",
        "Khan",
        "fatima.khan@gmail.com",
        "+1-949-555-0175",
        "1992-10-21",
        "27 Sandpiper Court",
        "Irvine",
        "CA",
        "92604",
        None,
        [("Mastercard", "5512", 8, 2028)],
        [],
        "",
    ),
    (
        "G1031",
        "Marcus",
        "Bell",
        "marcus.bell@outlook.com",
        "+1-312-555-0118",
        "1979-11-02",
        "2204 North Clark Street",
        "Chicago",
        "IL",
        "60614",
        ("LK2290443", "silver", 48250, 19, "2019-09-15"),
        [("Amex", "3007", 1, 2029)],
        [],
        "",
    ),
    (
        "G1036",
        "Nadia",
        "Petrova",
        "nadia.petrova@gmail.com",
        "+1-503-555-0190",
        "1983-12-12",
        "7730 SE Division Street",
        "Portland",
        "OR",
        "97206",
        ("LK5518602", "gold", 120000, 31, "2018-06-20"),
        [("Visa", "7741", 11, 2027)],
        [],
        "Quiet room",
    ),
    (
        "G1042",
        "Elena",
        "Vasquez",
        "elena.vasquez@yahoo.com",
        "+1-505-555-0127",
        "1991-07-15",
        "610 Central Avenue SW",
        "Albuquerque",
        "NM",
        "87102",
        ("LK4170935", "member", 9350, 3, "2025-02-11"),
        [("Mastercard", "6604", 3, 2028)],
        [],
        "",
    ),
    (
        "G1048",
        "William",
        "Foster",
        "william.foster@fosterlaw.com",
        "+1-415-555-0144",
        "1971-02-25",
        "88 Jackson Street",
        "San Francisco",
        "CA",
        "94111",
        ("LK1862274", "gold", 74300, 27, "2016-01-09"),
        [("Amex", "1190", 9, 2027)],
        [],
        "",
    ),
    (
        "G1052",
        "Laura",
        "Bennett",
        "laura.bennett@gmail.com",
        "+1-608-555-0153",
        "1989-06-06",
        "15 Langdon Street",
        "Madison",
        "WI",
        "53703",
        None,
        [("Visa", "9036", 4, 2029)],
        [],
        "",
    ),
    (
        "G1056",
        "Daniel",
        "Okafor",
        "daniel.okafor@gmail.com",
        "+1-404-555-0108",
        "1984-01-30",
        "341 Peachtree Place",
        "Atlanta",
        "GA",
        "30308",
        ("LK6631487", "silver", 31800, 11, "2021-08-30"),
        [("Visa", "1183", 7, 2028)],
        [],
        "",
    ),
    (
        "G1063",
        "Hannah",
        "Schultz",
        "hannah.schultz@icloud.com",
        "+1-215-555-0196",
        "1993-09-09",
        "902 Spruce Street",
        "Philadelphia",
        "PA",
        "19107",
        None,
        [("Discover", "6011", 12, 2027)],
        [],
        "",
    ),
    (
        "G1067",
        "Benjamin",
        "Ortiz",
        "benjamin.ortiz@gmail.com",
        "+1-860-555-0139",
        "1980-09-14",
        "19 Asylum Hill Road",
        "Hartford",
        "CT",
        "06105",
        ("LK7045128", "silver", 15600, 14, "2022-03-18"),
        [("Mastercard", "2477", 6, 2028)],
        [],
        "",
    ),
    (
        "G1071",
        "Tomasz",
        "Nowak",
        "tomasz.nowak@gmail.com",
        "+1-414-555-0171",
        "1986-05-18",
        "2630 North Downer Avenue",
        "Milwaukee",
        "WI",
        "53211",
        None,
        [("Visa", "5058", 2, 2028)],
        [],
        "",
    ),
    (
        "G1075",
        "Chloe",
        "Dubois",
        "chloe.dubois@gmail.com",
        "+1-847-555-0120",
        "1994-01-08",
        "1402 Chicago Avenue",
        "Evanston",
        "IL",
        "60201",
        ("LK3907716", "member", 4200, 4, "2024-11-05"),
        [("Visa", "8832", 10, 2027)],
        [],
        "",
    ),
    (
        "G1078",
        "Aisha",
        "Mohammed",
        "aisha.mohammed@outlook.com",
        "+1-602-555-0186",
        "1990-12-04",
        "4410 North 7th Street",
        "Phoenix",
        "AZ",
        "85014",
        ("LK8120557", "member", 6750, 5, "2025-05-22"),
        [("Mastercard", "4410", 9, 2029)],
        [],
        "",
    ),
    (
        "G1081",
        "Richard",
        "Stanton",
        "richard.stanton@stantongroup.com",
        "+1-214-555-0102",
        "1965-05-05",
        "3300 Turtle Creek Boulevard",
        "Dallas",
        "TX",
        "75219",
        ("LK2741093", "gold", 96400, 29, "2014-10-12"),
        [("Amex", "2006", 3, 2029)],
        ["Paul Greer"],
        "Junior Suite when available",
    ),
    (
        "G1085",
        "Robert",
        "Chen",
        "robert.chen@chenarch.com",
        "+1-503-555-0165",
        "1975-06-27",
        "1200 NW Marshall Street",
        "Portland",
        "OR",
        "97209",
        ("LK4456210", "gold", 58900, 26, "2017-02-14"),
        [("Visa", "6120", 6, 2028)],
        [],
        "Extra towels",
    ),
    (
        "G1088",
        "Isabel",
        "Moreno",
        "isabel.moreno@gmail.com",
        "+1-210-555-0149",
        "1990-03-27",
        "512 King William Street",
        "San Antonio",
        "TX",
        "78204",
        None,
        [("Visa", "3391", 1, 2028)],
        [],
        "",
    ),
    (
        "G1090",
        "Grace",
        "Liu",
        "grace.liu@gmail.com",
        "+1-206-555-0143",
        "1995-02-11",
        "2201 Eastlake Avenue East",
        "Seattle",
        "WA",
        "98102",
        ("LK5093381", "member", 2800, 2, "2025-12-01"),
        [("Mastercard", "7209", 5, 2030)],
        [],
        "",
    ),
    (
        "G1094",
        "Gregory",
        "Shaw",
        "greg.shaw@shawconsulting.com",
        "+1-206-555-0111",
        "1977-07-07",
        "4520 Fremont Avenue North",
        "Seattle",
        "WA",
        "98103",
        ("LK1508846", "platinum", 210000, 54, "2012-05-30"),
        [("Amex", "4005", 8, 2028)],
        [],
        "",
    ),
    (
        "G1097",
        "Samuel",
        "Adeyemi",
        "samuel.adeyemi@gmail.com",
        "+1-713-555-0158",
        "1982-08-08",
        "1815 Westheimer Road",
        "Houston",
        "TX",
        "77098",
        ("LK6387724", "silver", 27150, 16, "2020-07-07"),
        [("Visa", "9914", 12, 2028)],
        [],
        "",
    ),
    (
        "G1102",
        "Olivia",
        "Martin",
        "olivia.martin@proton.me",
        "+1-720-555-0180",
        "1998-04-19",
        "3021 Tejon Street",
        "Denver",
        "CO",
        "80211",
        None,
        [("Visa", "0452", 11, 2029)],
        [],
        "",
    ),
    (
        "G1105",
        "Thomas",
        "Reed",
        "thomas.reed@gmail.com",
        "+1-919-555-0124",
        "1985-10-10",
        "700 Glenwood Avenue",
        "Raleigh",
        "NC",
        "27603",
        ("LK2204619", "member", 5100, 3, "2024-06-14"),
        [("Mastercard", "8861", 7, 2027)],
        [],
        "",
    ),
    (
        "G1110",
        "Victoria",
        "Hale",
        "victoria.hale@halecapital.com",
        "+1-212-555-0166",
        "1969-10-03",
        "145 Central Park West",
        "New York",
        "NY",
        "10023",
        ("LK9012377", "member", 8800, 6, "2025-01-20"),
        [("Amex", "7313", 4, 2029)],
        ["Jordan Pierce"],
        "Feather-free pillows",
    ),
    (
        "G1112",
        "Noah",
        "Fischer",
        "noah.fischer@gmail.com",
        "+1-310-555-0137",
        "1991-11-30",
        "1017 Montana Avenue",
        "Santa Monica",
        "CA",
        "90403",
        None,
        [("Visa", "2648", 9, 2028)],
        [],
        "",
    ),
    (
        "G1117",
        "Kevin",
        "Doyle",
        "kevin.doyle@gmail.com",
        "+1-303-555-0192",
        "1987-03-03",
        "2040 Pearl Street",
        "Boulder",
        "CO",
        "80302",
        None,
        [("Mastercard", "3370", 10, 2028)],
        [],
        "",
    ),
    (
        "G1119",
        "Sophie",
        "Laurent",
        "sophie.laurent@gmail.com",
        "+1-970-555-0119",
        "1987-08-17",
        "318 Remington Street",
        "Fort Collins",
        "CO",
        "80524",
        ("LK7760215", "member", 3900, 4, "2025-09-03"),
        [("Visa", "5906", 6, 2029)],
        [],
        "",
    ),
    (
        "G1124",
        "Ethan",
        "Brooks",
        "ethan.brooks@gmail.com",
        "+1-509-555-0104",
        "1996-05-02",
        "1121 West Riverside Avenue",
        "Spokane",
        "WA",
        "99201",
        None,
        [("Visa", "4417", 3, 2029), ("Amex", "1009", 11, 2028)],
        [],
        "",
    ),
    (
        "G1128",
        "Alan",
        "Price",
        "alan.price@shawconsulting.com",
        "+1-206-555-0170",
        "1983-01-19",
        "6311 Phinney Avenue North",
        "Seattle",
        "WA",
        "98103",
        ("LK3381950", "silver", 12600, 10, "2021-04-11"),
        [("Visa", "6677", 2, 2029)],
        [],
        "",
    ),
    (
        "G1136",
        "Lucas",
        "Moreau",
        "lucas.moreau@gmail.com",
        "+1-512-555-0128",
        "1981-04-04",
        "2506 Windsor Road",
        "Austin",
        "TX",
        "78703",
        ("LK4829316", "gold", 86500, 28, "2015-03-03"),
        [("Visa", "3141", 8, 2028)],
        [],
        "",
    ),
    (
        "G1137",
        "Camille",
        "Moreau",
        "camille.moreau@gmail.com",
        "+1-512-555-0129",
        "1983-09-22",
        "2506 Windsor Road",
        "Austin",
        "TX",
        "78703",
        ("LK4829324", "member", 7400, 2, "2024-02-17"),
        [("Mastercard", "2718", 5, 2029)],
        [],
        "",
    ),
]

# Scenario reservations: id, guest, room type, check-in, check-out, adults, children, plan,
# status, add-ons, booked on, extras {special_requests, notes, late_checkout, incidentals...}
SCENARIO_RESERVATIONS = [
    (
        "R30006",
        "G1006",
        "DEN-CLK",
        "2026-03-03",
        "2026-03-05",
        1,
        0,
        "flexible",
        "checked_out",
        [],
        "2026-02-10",
        {},
    ),
    (
        "R30019",
        "G1042",
        "DEN-DLK",
        "2026-06-22",
        "2026-06-25",
        2,
        0,
        "flexible",
        "checked_out",
        ["breakfast"],
        "2026-05-28",
        {
            "incidentals": [
                (0, "restaurant", "Union Table: dinner for two", 64.20),
                (1, "minibar", "Minibar: wine and snacks", 38.50),
            ]
        },
    ),
    (
        "R30027",
        "G1006",
        "CHI-CLK",
        "2026-06-08",
        "2026-06-10",
        1,
        0,
        "flexible",
        "checked_out",
        [],
        "2026-05-20",
        {"incidentals": [(1, "bar", "Rooftop bar", 27.00)]},
    ),
    (
        "R30034",
        "G1052",
        "CHI-CLK",
        "2026-06-28",
        "2026-07-01",
        1,
        0,
        "flexible",
        "checked_out",
        ["parking"],
        "2026-06-02",
        {"duplicate_parking_night": 1},
    ),
    (
        "R30039",
        "G1006",
        "BOS-DLK",
        "2026-06-24",
        "2026-06-26",
        1,
        0,
        "flexible",
        "checked_out",
        ["breakfast"],
        "2026-06-01",
        {"incidentals": [(0, "laundry", "Laundry: pressing service", 22.00)]},
    ),
    (
        "R30045",
        "G1088",
        "AUS-DLK",
        "2026-06-18",
        "2026-06-21",
        2,
        0,
        "flexible",
        "checked_out",
        [],
        "2026-05-15",
        {
            "incidentals": [
                (1, "restaurant", "Congress Grill: dinner for two", 86.40),
                (2, "bar", "Live-music lounge", 31.00),
            ]
        },
    ),
    (
        "R30008",
        "G1056",
        "BOS-CLK",
        "2026-04-13",
        "2026-04-15",
        1,
        0,
        "flexible",
        "checked_out",
        [],
        "2026-03-30",
        {},
    ),
    (
        "R30057",
        "G1014",
        "SAN-DLK",
        "2026-07-10",
        "2026-07-13",
        2,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-05-30",
        {},
    ),
    (
        "R30092",
        "G1071",
        "AUS-CDQ",
        "2026-07-09",
        "2026-07-11",
        2,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-06-12",
        {},
    ),
    (
        "R30097",
        "G1067",
        "BOS-1BS",
        "2026-07-09",
        "2026-07-12",
        2,
        2,
        "flexible",
        "confirmed",
        [],
        "2026-04-20",
        {
            "notes": [
                "2026-07-07 Front office: water damage in the One-Bedroom Suites; suites are out of service"
                " until 2026-07-16. Hotel cannot honor this booking; offer the guest free cancellation"
                " or a different room type."
            ]
        },
    ),
    (
        "R30110",
        "G1078",
        "SAN-DLK",
        "2026-07-30",
        "2026-08-02",
        2,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-06-05",
        {},
    ),
    (
        "R30120",
        "G1117",
        "DEN-CLK",
        "2026-07-20",
        "2026-07-22",
        1,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-06-25",
        {},
    ),
    (
        "R30126",
        "G1075",
        "CHI-CLK",
        "2026-07-22",
        "2026-07-25",
        1,
        0,
        "advance_purchase",
        "confirmed",
        [],
        "2026-06-10",
        {},
    ),
    (
        "R30133",
        "G1056",
        "AUS-CLK",
        "2026-08-03",
        "2026-08-06",
        1,
        0,
        "flexible",
        "confirmed",
        ["parking"],
        "2026-06-18",
        {},
    ),
    (
        "R30135",
        "G1112",
        "SAN-CDQ",
        "2026-08-08",
        "2026-08-11",
        2,
        1,
        "flexible",
        "confirmed",
        [],
        "2026-06-21",
        {"special_requests": "Crib in the room"},
    ),
    (
        "R30140",
        "G1097",
        "BOS-DLK",
        "2026-08-20",
        "2026-08-23",
        2,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-06-28",
        {},
    ),
    (
        "R30144",
        "G1119",
        "DEN-CLK",
        "2026-08-01",
        "2026-08-03",
        1,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-06-15",
        {},
    ),
    (
        "R30148",
        "G1063",
        "BOS-CLK",
        "2026-07-24",
        "2026-07-26",
        1,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-06-19",
        {},
    ),
    (
        "R30155",
        "G1036",
        "SEA-DLK",
        "2026-08-05",
        "2026-08-07",
        2,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-06-30",
        {},
    ),
    (
        "R30162",
        "G1048",
        "SAN-DLK",
        "2026-07-18",
        "2026-07-21",
        2,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-06-08",
        {},
    ),
    (
        "R30166",
        "G1119",
        "DEN-CLK",
        "2026-09-12",
        "2026-09-14",
        1,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-07-01",
        {},
    ),
    (
        "R30171",
        "G1056",
        "SEA-DLK",
        "2026-09-15",
        "2026-09-18",
        1,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-07-02",
        {},
    ),
    (
        "R30177",
        "G1081",
        "AUS-JRS",
        "2026-07-28",
        "2026-07-31",
        1,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-06-22",
        {},
    ),
    (
        "R30183",
        "G1110",
        "CHI-JRS",
        "2026-07-15",
        "2026-07-17",
        1,
        0,
        "flexible",
        "confirmed",
        [],
        "2026-06-26",
        {},
    ),
    (
        "R30201",
        "G1085",
        "DEN-DLK",
        "2026-07-06",
        "2026-07-09",
        1,
        0,
        "flexible",
        "checked_in",
        [],
        "2026-06-11",
        {"incidentals": [(0, "restaurant", "Union Table: dinner", 48.75)]},
    ),
]
SCENARIO_RES_IDS = {r[0] for r in SCENARIO_RESERVATIONS}
SCENARIO_GUEST_IDS = {g[0] for g in SCENARIO_GUESTS}


def phone_for(rng: random.Random, state: str) -> str:
    return f"+1-{AREA.get(state, '555')}-555-{rng.randint(100, 199):04d}"


def build_people(rng: random.Random) -> tuple[dict, dict, dict]:
    guests, cards, accounts = {}, {}, {}
    used_emails = {g[3] for g in SCENARIO_GUESTS}
    used_loyalty = {g[10][0] for g in SCENARIO_GUESTS if g[10]}
    scenario = {g[0]: g for g in SCENARIO_GUESTS}
    pm_counter = 1
    for n in range(1, N_GUESTS + 1):
        gid = f"G{1000 + n}"
        if gid in scenario:
            (
                _,
                first,
                last,
                email,
                phone,
                dob,
                addr,
                city,
                state,
                zipc,
                loyalty,
                gcards,
                auth,
                prefs,
            ) = scenario[gid]
            created = "2019-05-01" if loyalty is None else loyalty[4]
            country = "US"
        else:
            first, last = rng.choice(FIRST), rng.choice(LAST)
            base = f"{first}.{last}".lower()
            email = f"{base}@{rng.choice(MAIL)}"
            k = 2
            while email in used_emails:
                email = f"{base}{k}@{rng.choice(MAIL)}"
                k += 1
            used_emails.add(email)
            city, state, zp = rng.choice(CITIES)
            zipc = f"{zp}{rng.randint(0, 99):02d}"
            phone = phone_for(rng, state)
            dob = iso(date(rng.randint(1948, 2003), rng.randint(1, 12), rng.randint(1, 28)))
            addr = f"{rng.randint(10, 9800)} {rng.choice(STREETS)}"
            prefs = rng.choice(PREFS)
            auth = []
            country = "US"
            created = iso(date(2015, 1, 1) + timedelta(days=rng.randint(0, 4000)))
            loyalty = None
            if rng.random() < 0.62:
                tier = rng.choices(["member", "silver", "gold", "platinum"], [50, 28, 15, 7])[0]
                lid = f"LK{rng.randint(1000000, 9899999)}"
                while lid in used_loyalty:
                    lid = f"LK{rng.randint(1000000, 9899999)}"
                used_loyalty.add(lid)
                band = {
                    "member": (0, 9),
                    "silver": (6, 24),
                    "gold": (18, 49),
                    "platinum": (40, 80),
                }[tier]
                loyalty = (lid, tier, None, rng.randint(*band), created)
            gcards = []
            for k in range(rng.choice([1, 1, 1, 2])):
                brand = rng.choices(["Visa", "Mastercard", "Amex", "Discover"], [45, 30, 18, 7])[0]
                gcards.append(
                    (
                        brand,
                        f"{rng.randint(0, 9999):04d}",
                        rng.randint(1, 12),
                        # the main card is current; a second card may have lapsed
                        rng.randint(2027, 2031) if k == 0 else rng.randint(2025, 2030),
                    )
                )
        guests[gid] = {
            "guest_id": gid,
            "first_name": first,
            "last_name": last,
            "email": email,
            "phone": phone,
            "date_of_birth": dob,
            "address_line": addr,
            "city": city,
            "state": state,
            "postal_code": zipc,
            "country": country,
            "loyalty_id": loyalty[0] if loyalty else None,
            "preferences": prefs,
            "marketing_opt_in": (n % 3 == 0),
            "authorized_contacts": list(auth),
            "created_on": created,
        }
        for brand, last4, mm, yyyy in gcards:
            pmid = f"PM{pm_counter:04d}"
            pm_counter += 1
            cards[pmid] = {
                "payment_method_id": pmid,
                "guest_id": gid,
                "brand": brand,
                "last4": last4,
                "exp_month": mm,
                "exp_year": yyyy,
                "holder_name": f"{first} {last}",
            }
        if loyalty:
            lid, tier, balance, nights, enrolled = loyalty
            accounts[lid] = {
                "loyalty_id": lid,
                "guest_id": gid,
                "tier": tier,
                "points_balance": balance,  # None for background: computed from transactions
                "qualifying_nights_ytd": nights,
                "lifetime_points": 0,
                "enrolled_on": enrolled,
            }
    return guests, cards, accounts


# ----- reservations -------------------------------------------------------------------------------


class Allocator:
    """Assigns physical rooms so that no room is ever double-booked."""

    def __init__(self, rooms: dict) -> None:
        self.by_type: dict[str, list[str]] = {}
        self.busy: dict[str, set[date]] = {}
        for rid, room in rooms.items():
            self.by_type.setdefault(room["room_type_id"], []).append(rid)
            blocked = set()
            if room["out_of_service_until"]:
                until = date.fromisoformat(room["out_of_service_until"])
                d = date(2026, 7, 1)
                while d < until:
                    blocked.add(d)
                    d += timedelta(days=1)
            self.busy[rid] = blocked

    def take(self, rtid: str, start: date, end: date) -> str | None:
        nights = {start + timedelta(days=i) for i in range((end - start).days)}
        for rid in self.by_type[rtid]:
            if not (self.busy[rid] & nights):
                self.busy[rid] |= nights
                return rid
        return None


def plan_rate(rate: float, plan: str) -> float:
    if plan == "points":
        return 0.0
    if plan == "advance_purchase":
        return money(D(rate) * D("0.85"))
    return float(rate)


def build_reservations(rng, guests, cards, accounts, hotels, room_types, rooms):
    alloc = Allocator(rooms)
    reservations = {}
    extras = {}
    cards_by_guest: dict[str, list[str]] = {}
    for pmid, pm in cards.items():
        cards_by_guest.setdefault(pm["guest_id"], []).append(pmid)

    def card_for(gid: str, co: date) -> str:
        for pmid in cards_by_guest[gid]:
            if (cards[pmid]["exp_year"], cards[pmid]["exp_month"]) >= (co.year, co.month):
                return pmid
        return cards_by_guest[gid][0]

    def make(rid, gid, rtid, ci, co, adults, children, plan, status, add_ons, booked, extra):
        rt = room_types[rtid]
        res = {
            "reservation_id": rid,
            "guest_id": gid,
            "hotel_id": rt["hotel_id"],
            "room_type_id": rtid,
            "booked_room_type_id": rtid,
            "check_in": iso(ci),
            "check_out": iso(co),
            "adults": adults,
            "children": children,
            "rate_plan": plan,
            "nightly_rate": plan_rate(rt["nightly_rate"], plan),
            "points_per_night": rt["points_per_night"] if plan == "points" else 0,
            "status": status,
            "add_ons": [a for a in ("breakfast", "parking") if a in add_ons],
            "late_checkout": extra.get("late_checkout"),
            "late_checkout_fee": extra.get("late_checkout_fee", 0.0),
            "upgrade": None,
            "room_id": None,
            "payment_method_id": card_for(gid, co),
            "booked_on": iso(booked),
            "special_requests": extra.get("special_requests", ""),
            "notes": extra.get("notes", []),
            "cancelled_on": None,
            "cancel_reason": None,
            "cancellation_fee": 0.0,
            "fee_waived": False,
            "folio_emailed_to": None,
            "folio_emailed_at": None,
        }
        return res

    for (
        rid,
        gid,
        rtid,
        ci,
        co,
        adults,
        children,
        plan,
        status,
        add_ons,
        booked,
        extra,
    ) in SCENARIO_RESERVATIONS:
        ci_d, co_d = date.fromisoformat(ci), date.fromisoformat(co)
        res = make(
            rid,
            gid,
            rtid,
            ci_d,
            co_d,
            adults,
            children,
            plan,
            status,
            add_ons,
            date.fromisoformat(booked),
            extra,
        )
        room = alloc.take(rtid, ci_d, co_d)
        if room is None and rid != "R30097":
            raise SystemExit(f"scenario reservation {rid} does not fit")
        if status in ("checked_in", "checked_out"):
            res["room_id"] = room
        reservations[rid] = res
        extras[rid] = extra

    # Background stays for background guests only, so the scenarios stay exactly as written.
    pool = sorted(g for g in guests if g not in SCENARIO_GUEST_IDS)
    weights_rt = [34, 24, 22, 12, 8]
    free_ids = [f"R{30000 + n}" for n in range(1, N_RESERVATIONS + 1)]
    free_ids = [r for r in free_ids if r not in SCENARIO_RES_IDS]
    drafts = []
    while len(drafts) < len(free_ids):
        gid = rng.choice(pool)
        hid = rng.choice(list(hotels))
        code = rng.choices([c[0] for c in ROOM_TYPES], weights_rt)[0]
        rtid = f"{hid}-{code}"
        rt = room_types[rtid]
        if rng.random() < 0.12:  # guests in house or arriving in the next days
            ci = TODAY + timedelta(days=rng.randint(-5, 3))
        else:
            ci = date(2026, 1, 5) + timedelta(days=rng.randint(0, 345))
        nights = rng.choices([1, 2, 3, 4, 5, 7], [18, 30, 25, 13, 9, 5])[0]
        co = ci + timedelta(days=nights)
        adults = 1 if rt["max_occupancy"] == 2 and rng.random() < 0.4 else rng.choice([1, 2, 2])
        children = 0
        if rt["max_occupancy"] >= 4 and adults == 2 and rng.random() < 0.5:
            children = rng.randint(1, 2)
        member = guests[gid]["loyalty_id"] is not None
        plan = rng.choices(
            ["flexible", "advance_purchase", "points"], [65, 25, 10 if member else 0]
        )[0]
        lead = rng.randint(8 if plan == "advance_purchase" else 1, 110)
        booked = ci - timedelta(days=lead)
        if booked > TODAY:
            booked = TODAY - timedelta(days=rng.randint(0, 20))
            if plan == "advance_purchase" and (ci - booked).days < 7:
                plan = "flexible"
        if booked < date(2025, 10, 1):
            booked = date(2025, 10, 1) + timedelta(days=rng.randint(0, 30))
        if co <= TODAY:
            status = rng.choices(["checked_out", "cancelled", "no_show"], [88, 9, 3])[0]
        elif ci < TODAY:
            status = "checked_in"
        else:
            status = rng.choices(["confirmed", "cancelled"], [91, 9])[0]
        if status == "cancelled" and booked >= ci:
            continue
        if status in ("cancelled", "no_show"):
            plan = "flexible"  # non-refundable and points cancellations would carry fees or refunds
        room = None
        if status != "cancelled":
            room = alloc.take(rtid, ci, co)
            if room is None:
                continue
        add_ons = []
        if rng.random() < 0.3:
            add_ons.append("breakfast")
        if hotels[hid]["parking_fee"] is not None and rng.random() < 0.25:
            add_ons.append("parking")
        extra: dict = {"special_requests": rng.choice(REQUESTS)}
        if status in ("checked_out", "checked_in", "confirmed") and rng.random() < 0.12:
            extra["late_checkout"] = rng.choice(["12:00", "13:00", "14:00"])
        drafts.append(
            (booked, gid, rtid, ci, co, adults, children, plan, status, add_ons, extra, room)
        )
    drafts.sort(key=lambda d: (d[0], d[3], d[1]))
    for rid, (
        booked,
        gid,
        rtid,
        ci,
        co,
        adults,
        children,
        plan,
        status,
        add_ons,
        extra,
        room,
    ) in zip(free_ids, drafts, strict=True):
        res = make(rid, gid, rtid, ci, co, adults, children, plan, status, add_ons, booked, extra)
        if status in ("checked_in", "checked_out"):
            res["room_id"] = room
        if status == "cancelled":
            res["cancelled_on"] = iso(
                min(booked + timedelta(days=rng.randint(1, 20)), ci - timedelta(days=3), TODAY)
            )
            if res["cancelled_on"] < res["booked_on"]:
                res["cancelled_on"] = res["booked_on"]
            res["cancel_reason"] = rng.choice(
                [
                    "Change of plans",
                    "Trip postponed",
                    "Meeting cancelled",
                    "Found a closer hotel",
                    "Family emergency",
                    "Flight cancelled",
                ]
            )
        reservations[rid] = res
        extras[rid] = extra
    return dict(sorted(reservations.items())), extras


def tier_of(guests, accounts, gid):
    lid = guests[gid]["loyalty_id"]
    return accounts[lid]["tier"] if lid else "none"


LATE_FEES = {
    "none": {"12:00": 20.0, "13:00": 30.0, "14:00": 45.0},
    "member": {"12:00": 20.0, "13:00": 30.0, "14:00": 45.0},
    "silver": {"12:00": 0.0, "13:00": 30.0, "14:00": 45.0},
    "gold": {"12:00": 0.0, "13:00": 0.0, "14:00": 0.0},
    "platinum": {"12:00": 0.0, "13:00": 0.0, "14:00": 0.0},
}
INCIDENTALS = [
    ("restaurant", "Hotel restaurant", 24, 145),
    ("bar", "Lobby bar", 12, 68),
    ("minibar", "Minibar", 6, 42),
    ("spa", "Spa treatment", 95, 220),
    ("laundry", "Laundry service", 14, 38),
]


def build_folios(rng, reservations, extras, guests, accounts, hotels):
    charges = {}
    counter = [0]

    def post(rid, day, category, description, amount, tax_rate):
        counter[0] += 1
        cid = f"FC{counter[0]:06d}"
        charges[cid] = {
            "charge_id": cid,
            "reservation_id": rid,
            "posted_on": iso(day),
            "category": category,
            "description": description,
            "amount": money(amount),
            "tax": money(D(amount) * D(tax_rate)),
            "reversed": False,
            "reversal_reason": None,
        }

    for rid, res in reservations.items():
        hotel = hotels[res["hotel_id"]]
        tax = hotel["tax_rate"]
        ci, co = date.fromisoformat(res["check_in"]), date.fromisoformat(res["check_out"])
        extra = extras[rid]
        tier = tier_of(guests, accounts, res["guest_id"])
        if res["late_checkout"]:
            res["late_checkout_fee"] = LATE_FEES[tier][res["late_checkout"]]
        if res["status"] == "no_show":
            post(rid, ci, "no_show", "No-show charge (one night)", res["nightly_rate"], tax)
            continue
        if res["status"] not in ("checked_in", "checked_out"):
            continue
        last = co if res["status"] == "checked_out" else TODAY
        nights = (last - ci).days
        for i in range(nights):
            day = ci + timedelta(days=i)
            if res["rate_plan"] != "points":
                post(
                    rid,
                    day,
                    "room",
                    f"Room charge ({res['rate_plan'].replace('_', ' ')} rate)",
                    res["nightly_rate"],
                    tax,
                )
            if "breakfast" in res["add_ons"] and tier != "platinum":
                post(
                    rid,
                    day,
                    "breakfast",
                    f"Breakfast for {res['adults']}",
                    hotel["breakfast_price"] * res["adults"],
                    tax,
                )
            if "parking" in res["add_ons"]:
                post(rid, day, "parking", "Parking", hotel["parking_fee"], tax)
                if extra.get("duplicate_parking_night") == i:
                    post(rid, day, "parking", "Parking", hotel["parking_fee"], tax)
            if rid in SCENARIO_RES_IDS:
                for offset, cat, desc, amount in extra.get("incidentals", []):
                    if offset == i:
                        post(rid, day, cat, desc, amount, tax)
            elif rng.random() < 0.35:
                cat, desc, lo, hi = rng.choice(INCIDENTALS)
                post(rid, day, cat, desc, rng.randint(lo * 100, hi * 100) / 100, tax)
        if res["status"] == "checked_out" and res["late_checkout_fee"]:
            post(
                rid,
                co,
                "late_checkout",
                f"Late checkout {res['late_checkout']}",
                res["late_checkout_fee"],
                0,
            )
    return charges


def build_loyalty(rng, accounts, reservations, guests, hotels):
    txns = []
    by_account: dict[str, list] = {lid: [] for lid in accounts}
    bonus = {"member": 0, "silver": 10, "gold": 25, "platinum": 50}
    for rid, res in reservations.items():
        lid = guests[res["guest_id"]]["loyalty_id"]
        if not lid:
            continue
        nights = (date.fromisoformat(res["check_out"]) - date.fromisoformat(res["check_in"])).days
        if res["rate_plan"] == "points" and res["status"] != "cancelled":
            by_account[lid].append(
                (
                    res["booked_on"],
                    "redeem",
                    -res["points_per_night"] * nights,
                    rid,
                    f"Reward stay {res['hotel_id']} {res['check_in']} to {res['check_out']}",
                )
            )
        if res["status"] == "checked_out" and res["rate_plan"] != "points":
            tier = accounts[lid]["tier"]
            pts = int(res["nightly_rate"] * nights * 10 * (100 + bonus[tier]) / 100)
            by_account[lid].append(
                (res["check_out"], "earn", pts, rid, f"Stay at {hotels[res['hotel_id']]['name']}")
            )
    for lid in sorted(accounts):
        acct = accounts[lid]
        entries = sorted(by_account[lid])
        moves = sum(e[2] for e in entries)
        spent = -sum(e[2] for e in entries if e[2] < 0)
        if acct["points_balance"] is None:
            opening = rng.randint(0, 60) * 500 + spent
            acct["points_balance"] = opening + moves
        else:
            opening = acct["points_balance"] - moves
            if opening < spent:
                raise SystemExit(f"scenario loyalty account {lid} cannot cover its redemptions")
        start = max(date.fromisoformat(acct["enrolled_on"]), date(2026, 1, 1))
        txns.append((iso(start), lid, "opening_balance", opening, None, "Balance carried forward"))
        for posted, kind, pts, rid, note in entries:
            txns.append((posted, lid, kind, pts, rid, note))
        acct["lifetime_points"] = acct["points_balance"] + rng.randint(2, 40) * 2500
    txns.sort(key=lambda t: (t[0], t[1]))
    out = {}
    for n, (posted, lid, kind, pts, rid, note) in enumerate(txns, start=1):
        tid = f"LT{n:06d}"
        out[tid] = {
            "txn_id": tid,
            "loyalty_id": lid,
            "posted_on": posted,
            "kind": kind,
            "points": pts,
            "reservation_id": rid,
            "note": note,
        }
    return out


def build_db() -> dict:
    rng = random.Random(SEED)
    hotels, room_types, rooms = build_hotels()
    guests, cards, accounts = build_people(rng)
    reservations, extras = build_reservations(
        rng, guests, cards, accounts, hotels, room_types, rooms
    )
    charges = build_folios(rng, reservations, extras, guests, accounts, hotels)
    txns = build_loyalty(rng, accounts, reservations, guests, hotels)
    return {
        "hotels": hotels,
        "room_types": room_types,
        "rooms": rooms,
        "guests": guests,
        "payment_methods": cards,
        "loyalty_accounts": dict(sorted(accounts.items())),
        "reservations": reservations,
        "folio_charges": charges,
        "loyalty_transactions": txns,
    }


# ----- tasks --------------------------------------------------------------------------------------


def card_of(db: dict, gid: str, last4: str) -> str:
    for pmid, pm in db["payment_methods"].items():
        if pm["guest_id"] == gid and pm["last4"] == last4:
            return pmid
    raise SystemExit(f"no card {last4} for {gid}")


def charges_of(db: dict, rid: str, category: str) -> list[str]:
    return sorted(
        c
        for c, ch in db["folio_charges"].items()
        if ch["reservation_id"] == rid and ch["category"] == category
    )


def next_loyalty_id(db: dict) -> str:
    return f"LK{max(int(k[2:]) for k in db['loyalty_accounts']) + 1:07d}"


def next_reservation_id(db: dict) -> str:
    return f"R{max(int(k[1:]) for k in db['reservations']) + 1:05d}"


def act(name: str, args: dict, compare: list[str] | None = None) -> dict:
    a = {"name": name, "arguments": args}
    if compare is not None:
        a["compare_args"] = compare
    return a


def lookup(email: str, gid: str) -> list[dict]:
    return [
        act("find_guest", {"email": email}, ["email"]),
        act("get_guest_profile", {"guest_id": gid}, ["guest_id"]),
    ]


def by_res(rid: str, gid: str) -> list[dict]:
    return [
        act("get_reservation", {"reservation_id": rid}, ["reservation_id"]),
        act("get_guest_profile", {"guest_id": gid}, ["guest_id"]),
    ]


def make_task(
    n,
    category,
    difficulty,
    purpose,
    policies,
    persona,
    reason,
    known,
    unknown,
    instructions,
    actions=(),
    communicate=(),
    nl=(),
    basis=None,
    forbidden=(),
):
    if basis is None:
        basis = {
            "read": ["DB", "ACTION", "COMMUNICATE"],
            "refusal": ["DB", "COMMUNICATE", "NL_ASSERTION"],
        }.get(category, ["DB", "ACTION"])
        if category in ("single_write", "multi_write", "ask_info"):
            if communicate:
                basis = [*basis, "COMMUNICATE"]
            if nl:
                basis = [*basis, "NL_ASSERTION"]
        elif category == "read" and nl:
            basis = [*basis, "NL_ASSERTION"]
    acts = []
    for i, a in enumerate(actions, start=1):
        acts.append({"action_id": f"a{i}", **a})
    forb = []
    for i, a in enumerate(forbidden, start=1):
        forb.append({"action_id": f"f{i}", **a})
    return {
        "id": f"hotel_{n:03d}",
        "category": category,
        "split": "test" if n % 3 == 0 else "train",  # a third held out for evaluation
        "difficulty": difficulty,
        "description": {"purpose": purpose, "relevant_policies": policies},
        "user_scenario": {
            "persona": persona,
            "instructions": {
                "domain": "hotel",
                "reason_for_call": reason,
                "known_info": known,
                "unknown_info": unknown,
                "task_instructions": instructions,
            },
        },
        "evaluation_criteria": {
            "actions": acts,
            "communicate_info": list(communicate),
            "nl_assertions": list(nl),
            "reward_basis": basis,
            "forbidden_actions": forb,
        },
        "provenance": {"source": "hand-built", "authors": AUTHORS},
    }


def build_tasks(db: dict) -> list[dict]:
    new_lk = next_loyalty_id(db)
    new_res = next_reservation_id(db)
    dup_parking = charges_of(db, "R30034", "parking")
    # R30034 posts parking on its first night, twice on the second (the duplicate), and the third.
    dup_second = sorted(
        c for c in dup_parking if db["folio_charges"][c]["posted_on"] == "2026-06-29"
    )[-1]
    grill = next(c for c in charges_of(db, "R30045", "restaurant"))
    t = []

    # ---- read ---------------------------------------------------------------------------------
    t.append(
        make_task(
            1,
            "read",
            "easy",
            "Quote the free-cancellation deadline and the later fee without cancelling",
            "rules 1, 6",
            "A careful planner who likes exact times.",
            "You have a Flexible-rate booking at the San Diego hotel arriving 2026-07-10 and might have to"
            " cancel. You want to know until when cancelling is free and what it would cost after that.",
            "Your name is Priya Raman, email priya.raman@gmail.com, date of birth 1988-03-22. Your"
            " reservation number is R30057.",
            "The cancellation deadline and fee.",
            "Ask until when you can cancel for free and how much it would cost after that. Do NOT cancel:"
            " you only want the information; once you have the deadline and the fee, thank the agent and end"
            " the call.",
            actions=[
                *by_res("R30057", "G1014"),
                act("get_cancellation_quote", {"reservation_id": "R30057"}, ["reservation_id"]),
            ],
            communicate=["15:00", "336.38"],
            nl=[
                "The assistant tells the guest that cancelling is free only until 15:00 today (2026-07-08) and does not cancel the reservation."
            ],
        )
    )
    t.append(
        make_task(
            2,
            "read",
            "easy",
            "Report the points balance and the nights still needed for the next tier",
            "rule 1, loyalty facts",
            "A frequent business traveller, brisk and friendly.",
            "You want to know your Larkspur Rewards points balance and how many more nights you need this"
            " year to reach Gold.",
            "Your name is Marcus Bell, email marcus.bell@outlook.com, date of birth 1979-11-02.",
            "Your balance and the nights to Gold.",
            "Ask for your points balance and how many more qualifying nights you need for Gold. You do not"
            " want to book anything.",
            actions=[
                *lookup("marcus.bell@outlook.com", "G1031"),
                act("get_loyalty_account", {"loyalty_id": "LK2290443"}, ["loyalty_id"]),
            ],
            communicate=["48250"],
            nl=["The assistant tells the guest he needs 6 more qualifying nights to reach Gold."],
        )
    )
    t.append(
        make_task(
            3,
            "read",
            "easy",
            "Search availability and quote both cash rate plans for a suite",
            "rate plans, taxes",
            "A leisure traveller comparing options before booking online.",
            "You are planning a long weekend in Chicago, arriving 2026-08-14 and leaving 2026-08-17, two"
            " adults, and want a Junior Suite.",
            "Dates 2026-08-14 to 2026-08-17, 2 adults, Junior Suite at the Chicago hotel.",
            None,
            "Ask whether a Junior Suite is available and what the total including tax would be on the"
            " Flexible rate and on the Advance Purchase rate. Do not book: you will decide later. You do not"
            " need to give your name.",
            actions=[
                act(
                    "search_availability",
                    {
                        "hotel_id": "CHI",
                        "check_in": "2026-08-14",
                        "check_out": "2026-08-17",
                        "adults": 2,
                    },
                )
            ],
            communicate=["1510.94", "1284.30"],
            nl=["The assistant explains that the Advance Purchase rate is non-refundable."],
        )
    )
    t.append(
        make_task(
            4,
            "read",
            "medium",
            "Read a past stay's folio: its total and an unfamiliar charge",
            "rules 1, 10",
            "A guest reconciling an expense report.",
            "You stayed at the Denver hotel from 2026-06-22 to 2026-06-25 and need the invoice total for your"
            " expense report. You also don't recognise a 38.50 charge on it.",
            "Your name is Elena Vasquez, email elena.vasquez@yahoo.com, date of birth 1991-07-15."
            " Reservation R30019.",
            "The invoice total and what the 38.50 charge was.",
            "Ask for the total of your invoice and what the 38.50 charge was for. When you hear it was the"
            " minibar, you remember the wine and accept it; do not ask for any change.",
            actions=[
                *by_res("R30019", "G1042"),
                act("get_folio", {"reservation_id": "R30019"}, ["reservation_id"]),
            ],
            communicate=["1085.20", "minibar"],
        )
    )
    t.append(
        make_task(
            5,
            "read",
            "easy",
            "Find the right upcoming reservation among several",
            "rule 1",
            "A busy consultant on the move.",
            "You have a trip to Austin coming up and lost the confirmation email. You want the confirmation"
            " number and the arrival date.",
            "Your name is Daniel Okafor, email daniel.okafor@gmail.com, date of birth 1984-01-30.",
            "Your Austin reservation number and dates.",
            "Ask for the confirmation number of your Austin stay and its check-in date, and whether parking is"
            " included. Make no changes.",
            actions=[
                *lookup("daniel.okafor@gmail.com", "G1056"),
                act("list_guest_reservations", {"guest_id": "G1056"}, ["guest_id"]),
            ],
            communicate=["R30133", "2026-08-03"],
            nl=["The assistant confirms that parking is included in the Austin reservation."],
        )
    )
    t.append(
        make_task(
            6,
            "read",
            "easy",
            "Answer hotel facts: parking and breakfast at a property without parking",
            "hotel facts",
            "A traveller planning a road trip.",
            "You are thinking of driving to Seattle and staying at the Larkspur there. You want to know if you"
            " can park at the hotel and what breakfast costs.",
            "You are not a guest yet and have no reservation.",
            None,
            "Ask whether the Seattle hotel has parking you can book and how much breakfast costs per person."
            " Do not book anything.",
            actions=[act("get_hotel", {"hotel_id": "SEA"}, ["hotel_id"])],
            communicate=["25.00"],
            nl=["The assistant says the Seattle hotel has no on-site parking that can be booked."],
        )
    )

    # ---- single write -------------------------------------------------------------------------
    t.append(
        make_task(
            7,
            "single_write",
            "easy",
            "Cancel a Flexible reservation free of charge before the deadline",
            "rules 1, 3, 6",
            "A polite guest whose conference was called off.",
            "Your Boston conference was cancelled, so you want to cancel your hotel stay (2026-07-24 to"
            " 2026-07-26).",
            "Your name is Hannah Schultz, email hannah.schultz@icloud.com, date of birth 1993-09-09."
            " Reservation R30148.",
            None,
            "Ask to cancel; the reason is that your conference was cancelled. Confirm when the agent asks.",
            actions=[
                *by_res("R30148", "G1063"),
                act(
                    "cancel_reservation",
                    {"reservation_id": "R30148", "reason": "conference cancelled"},
                    ["reservation_id"],
                ),
            ],
            nl=[
                "The assistant tells the guest the cancellation is free of charge and confirms it is cancelled."
            ],
        )
    )
    t.append(
        make_task(
            8,
            "single_write",
            "medium",
            "Cancel inside the 48-hour window after disclosing the fee",
            "rules 1, 3, 6",
            "A traveller whose trip fell through at the last minute.",
            "Your Austin trip tomorrow (arriving 2026-07-09) is off. You want to cancel the hotel.",
            "Your name is Tomasz Nowak, email tomasz.nowak@gmail.com, date of birth 1986-05-18. Reservation"
            " R30092.",
            "Whether there is a fee.",
            "Ask to cancel because your trip is off. When told there is a fee, grumble a little, do not ask"
            " for a waiver, and agree to cancel with the fee.",
            actions=[
                *by_res("R30092", "G1071"),
                act(
                    "cancel_reservation",
                    {"reservation_id": "R30092", "reason": "trip is off"},
                    ["reservation_id"],
                ),
            ],
            communicate=["279.63"],
            nl=[
                "The assistant tells the guest the cancellation fee before cancelling and cancels only after the guest agrees."
            ],
        )
    )
    t.append(
        make_task(
            9,
            "single_write",
            "easy",
            "Add breakfast to an upcoming stay and quote its price",
            "rules 1, 3, 8",
            "A guest treating her partner to a relaxed weekend.",
            "You want breakfast included for both of you during your San Diego stay (2026-07-30 to"
            " 2026-08-02).",
            "Your name is Aisha Mohammed, email aisha.mohammed@outlook.com, date of birth 1990-12-04."
            " Reservation R30110.",
            "What breakfast costs.",
            "Ask to add breakfast for the stay and ask what it will cost. Agree to the price.",
            actions=[
                *by_res("R30110", "G1078"),
                act(
                    "add_add_on",
                    {"reservation_id": "R30110", "add_on": "breakfast"},
                    ["reservation_id", "add_on"],
                ),
            ],
            communicate=["138.00"],
            nl=[
                "The assistant quotes the breakfast price before adding it and gets the guest's agreement."
            ],
        )
    )
    t.append(
        make_task(
            10,
            "single_write",
            "medium",
            "Late checkout: decline a Platinum-only time, grant the Gold benefit",
            "rules 1, 3, 9",
            "An architect staying in Denver with an afternoon flight.",
            "You are staying at the Denver hotel and check out tomorrow (2026-07-09). Your flight is in the"
            " evening and you would like to check out at 16:00.",
            "Your name is Robert Chen, email robert.chen@chenarch.com, date of birth 1975-06-27. You are a"
            " Gold member. Reservation R30201.",
            None,
            "Ask for a 16:00 checkout. If 16:00 is not possible, ask for the latest time you can get at no"
            " charge and accept it.",
            actions=[
                *by_res("R30201", "G1085"),
                act(
                    "request_late_checkout",
                    {"reservation_id": "R30201", "checkout_time": "14:00"},
                    ["reservation_id", "checkout_time"],
                ),
            ],
            communicate=["14:00"],
            nl=[
                "The assistant explains that 16:00 checkout is reserved for Platinum members.",
                "The assistant tells the guest the 14:00 late checkout is free for Gold members.",
            ],
        )
    )
    t.append(
        make_task(
            11,
            "single_write",
            "easy",
            "Update the phone number on a verified profile",
            "rules 1, 3, 12",
            "A guest who just switched mobile carriers.",
            "You changed your mobile number to +1-206-555-0187 and want your Larkspur profile updated.",
            "Your name is Grace Liu, email grace.liu@gmail.com, date of birth 1995-02-11. Your new number is"
            " +1-206-555-0187.",
            None,
            "Ask to update your phone number to +1-206-555-0187. Confirm when asked.",
            actions=[
                *lookup("grace.liu@gmail.com", "G1090"),
                act(
                    "update_guest_profile",
                    {"guest_id": "G1090", "phone": "+1-206-555-0187"},
                    ["phone", "guest_id"],
                ),
            ],
            nl=["The assistant confirms the phone number was updated."],
        )
    )
    t.append(
        make_task(
            12,
            "single_write",
            "medium",
            "Paid upgrade: quote the price difference, then upgrade",
            "rules 1, 3, 7",
            "A guest planning a special anniversary trip.",
            "For your Boston stay (2026-08-20 to 2026-08-23) you would like a Junior Suite instead of your"
            " Deluxe King, if the price is reasonable.",
            "Your name is Samuel Adeyemi, email samuel.adeyemi@gmail.com, date of birth 1982-08-08."
            " Reservation R30140. You are a Silver member.",
            "What the upgrade costs; whether it can be free.",
            "Ask if you can get a free upgrade to a Junior Suite. When told it is paid, ask the price"
            " difference for the stay before tax and accept it.",
            actions=[
                *by_res("R30140", "G1097"),
                act(
                    "upgrade_room",
                    {"reservation_id": "R30140", "new_room_type_id": "BOS-JRS"},
                    ["new_room_type_id", "reservation_id"],
                ),
            ],
            communicate=["390.00"],
            nl=[
                "The assistant explains that complimentary upgrades are for Gold and Platinum members."
            ],
        )
    )
    t.append(
        make_task(
            13,
            "single_write",
            "easy",
            "Enroll a guest in the loyalty program",
            "rules 1, 3, 11",
            "A new guest who travels for work a few times a year.",
            "You want to join Larkspur Rewards.",
            "Your name is Olivia Martin, email olivia.martin@proton.me, date of birth 1998-04-19.",
            "Your new membership number.",
            "Ask to join the loyalty program and for your membership number.",
            actions=[
                *lookup("olivia.martin@proton.me", "G1102"),
                act("enroll_loyalty", {"guest_id": "G1102"}, ["guest_id"]),
            ],
            communicate=[new_lk],
        )
    )
    t.append(
        make_task(
            14,
            "single_write",
            "medium",
            "Authorized contact books late checkout (with fee) for the guest",
            "rules 2, 3, 9",
            "An efficient executive assistant.",
            "You are Jordan Pierce, executive assistant to Victoria Hale. She checks out of the Chicago hotel"
            " on 2026-07-17 and needs a 13:00 checkout.",
            "Your name is Jordan Pierce. Your boss is Victoria Hale; her reservation is R30183 and her email"
            " is victoria.hale@halecapital.com. You do not know her date of birth.",
            None,
            "Say up front that you are Victoria Hale's assistant. Ask for a 13:00 checkout on her Chicago"
            " stay. Accept the fee.",
            actions=[
                *by_res("R30183", "G1110"),
                act(
                    "request_late_checkout",
                    {"reservation_id": "R30183", "checkout_time": "13:00"},
                    ["reservation_id", "checkout_time"],
                ),
            ],
            communicate=["30.00"],
            nl=[
                "The assistant checks that Jordan Pierce is an authorized contact on Victoria Hale's profile before making the change."
            ],
        )
    )

    # ---- multi write --------------------------------------------------------------------------
    t.append(
        make_task(
            15,
            "multi_write",
            "medium",
            "Move a Flexible stay to new dates and add parking",
            "rules 1, 3, 5, 8",
            "A driver whose ski-gear trip got pushed back a week.",
            "Your Denver stay (2026-07-20 to 2026-07-22) needs to move to 2026-07-27 to 2026-07-30, and you"
            " will be driving, so you need parking.",
            "Your name is Kevin Doyle, email kevin.doyle@gmail.com, date of birth 1987-03-03. Reservation"
            " R30120.",
            "What parking costs.",
            "Ask to move the dates to 2026-07-27 through 2026-07-30 and to add parking. Ask the parking price"
            " and agree.",
            actions=[
                *by_res("R30120", "G1117"),
                act(
                    "change_reservation_dates",
                    {
                        "reservation_id": "R30120",
                        "new_check_in": "2026-07-27",
                        "new_check_out": "2026-07-30",
                    },
                    ["reservation_id", "new_check_in", "new_check_out"],
                ),
                act(
                    "add_add_on",
                    {"reservation_id": "R30120", "add_on": "parking"},
                    ["reservation_id", "add_on"],
                ),
            ],
            communicate=["90.00"],
            nl=[
                "The assistant confirms the new dates 2026-07-27 to 2026-07-30 and that parking was added."
            ],
        )
    )
    t.append(
        make_task(
            16,
            "multi_write",
            "medium",
            "Enroll a guest, then book a Flexible stay with breakfast",
            "rules 1, 3, 4, 8, 11",
            "A nurse planning a beach getaway who wants to earn points.",
            "You want to book a Classic King at the San Diego hotel from 2026-08-14 to 2026-08-16 for two"
            " adults on the Flexible rate with breakfast, and you want to join the rewards program first so"
            " the stay earns points.",
            "Your name is Fatima Khan, email fatima.khan@gmail.com, date of birth 1992-10-21. Pay with your"
            " Mastercard ending 5512.",
            "The total and the confirmation number.",
            "Ask to join the rewards program and then to book the room as described. Confirm when the agent"
            " summarises the booking and price.",
            actions=[
                *lookup("fatima.khan@gmail.com", "G1023"),
                act("enroll_loyalty", {"guest_id": "G1023"}, ["guest_id"]),
                act(
                    "search_availability",
                    {
                        "hotel_id": "SAN",
                        "check_in": "2026-08-14",
                        "check_out": "2026-08-16",
                        "adults": 2,
                    },
                ),
                act(
                    "create_reservation",
                    {
                        "guest_id": "G1023",
                        "hotel_id": "SAN",
                        "room_type_id": "SAN-CLK",
                        "check_in": "2026-08-14",
                        "check_out": "2026-08-16",
                        "adults": 2,
                        "rate_plan": "flexible",
                        "payment_method_id": card_of(db, "G1023", "5512"),
                        "add_ons": ["breakfast"],
                    },
                ),
            ],
            communicate=[new_res, "641.25"],
        )
    )
    t.append(
        make_task(
            17,
            "multi_write",
            "hard",
            "Switch a cash booking to points: book a reward stay, cancel the original",
            "rules 1, 3, 4, 5, 6",
            "A Gold member sitting on a pile of points.",
            "You booked the Seattle hotel (2026-08-05 to 2026-08-07, Deluxe King) with cash but would rather"
            " pay with points.",
            "Your name is Nadia Petrova, email nadia.petrova@gmail.com, date of birth 1983-12-12. Reservation"
            " R30155. Your Visa ends 7741.",
            "How many points it costs; whether the booking can just be switched.",
            "Ask to switch the reservation to points. If told it must be rebooked, agree to book the same room"
            " and dates on points and cancel the cash booking. Confirm both.",
            actions=[
                *by_res("R30155", "G1036"),
                act(
                    "create_reservation",
                    {
                        "guest_id": "G1036",
                        "hotel_id": "SEA",
                        "room_type_id": "SEA-DLK",
                        "check_in": "2026-08-05",
                        "check_out": "2026-08-07",
                        "adults": 2,
                        "rate_plan": "points",
                        "payment_method_id": card_of(db, "G1036", "7741"),
                    },
                ),
                act(
                    "cancel_reservation",
                    {"reservation_id": "R30155", "reason": "rebooked on points"},
                    ["reservation_id"],
                ),
            ],
            communicate=["65000"],
            nl=[
                "The assistant explains that the rate plan of an existing booking cannot be switched and offers to rebook on points and cancel the original."
            ],
        )
    )
    t.append(
        make_task(
            18,
            "multi_write",
            "medium",
            "Gold benefits: complimentary upgrade plus free 14:00 checkout",
            "rules 1, 3, 7, 9",
            "A lawyer who knows his status benefits.",
            "For your San Diego stay (2026-07-18 to 2026-07-21) you want your Gold complimentary upgrade and a"
            " 14:00 checkout.",
            "Your name is William Foster, email william.foster@fosterlaw.com, date of birth 1971-02-25."
            " Reservation R30162.",
            None,
            "Ask for your complimentary upgrade and a 14:00 checkout. Accept the room the agent offers if it"
            " is free. Confirm both.",
            actions=[
                *by_res("R30162", "G1048"),
                act(
                    "upgrade_room",
                    {
                        "reservation_id": "R30162",
                        "new_room_type_id": "SAN-JRS",
                        "complimentary": True,
                    },
                    ["new_room_type_id", "reservation_id", "complimentary"],
                ),
                act(
                    "request_late_checkout",
                    {"reservation_id": "R30162", "checkout_time": "14:00"},
                    ["reservation_id", "checkout_time"],
                ),
            ],
            communicate=["Junior Suite"],
            nl=[
                "The assistant tells the guest both the upgrade and the 14:00 checkout are free of charge."
            ],
        )
    )
    t.append(
        make_task(
            19,
            "multi_write",
            "medium",
            "Reverse a duplicate posting and email the corrected invoice",
            "rules 1, 3, 10",
            "A guest checking her expense report carefully.",
            "Your Chicago folio (stay 2026-06-28 to 2026-07-01) shows parking charged twice on 2026-06-29."
            " You want the duplicate removed and the corrected invoice emailed to you.",
            "Your name is Laura Bennett, email laura.bennett@gmail.com, date of birth 1989-06-06. Reservation"
            " R30034.",
            "The corrected total.",
            "Point out the double parking charge on 2026-06-29 and ask to remove the duplicate, then ask for"
            " the corrected invoice by email. Confirm when asked.",
            actions=[
                *by_res("R30034", "G1052"),
                act("get_folio", {"reservation_id": "R30034"}, ["reservation_id"]),
                act(
                    "reverse_folio_charge",
                    {
                        "reservation_id": "R30034",
                        "charge_id": dup_second,
                        "reason": "duplicate parking posting",
                    },
                    ["charge_id", "reservation_id"],
                ),
                act("email_folio", {"reservation_id": "R30034"}, ["reservation_id"]),
            ],
            communicate=["1095.36"],
        )
    )
    t.append(
        make_task(
            20,
            "multi_write",
            "hard",
            "Hotel at fault: waive the fee and rebook a room that fits the family",
            "rules 1, 3, 4, 6",
            "A father of two whose suite is out of service.",
            "The Boston hotel emailed that your One-Bedroom Suite (2026-07-09 to 2026-07-12) is out of service."
            " You still want to stay there, in a room for two adults and two children, and you refuse to pay"
            " any fee for the hotel's problem.",
            "Your name is Benjamin Ortiz, email benjamin.ortiz@gmail.com, date of birth 1980-09-14."
            " Reservation R30097. Pay with your Mastercard ending 2477.",
            "Which room fits; whether there is a fee.",
            "Ask what the hotel can do. Accept cancelling the suite with no fee and booking a Classic Double"
            " Queen for the same dates on the Flexible rate. Confirm.",
            actions=[
                *by_res("R30097", "G1067"),
                act(
                    "cancel_reservation",
                    {
                        "reservation_id": "R30097",
                        "reason": "suite out of service (hotel)",
                        "waive_fee": True,
                    },
                    ["reservation_id", "waive_fee"],
                ),
                act(
                    "create_reservation",
                    {
                        "guest_id": "G1067",
                        "hotel_id": "BOS",
                        "room_type_id": "BOS-CDQ",
                        "check_in": "2026-07-09",
                        "check_out": "2026-07-12",
                        "adults": 2,
                        "children": 2,
                        "rate_plan": "flexible",
                        "payment_method_id": card_of(db, "G1067", "2477"),
                    },
                ),
            ],
            communicate=[new_res],
            nl=[
                "The assistant waives the cancellation fee because the hotel cannot provide the suite."
            ],
        )
    )

    # ---- refusal ------------------------------------------------------------------------------
    t.append(
        make_task(
            21,
            "refusal",
            "medium",
            "Refuse to waive the fee on a non-refundable rate for a guest-side reason",
            "rule 6",
            "A consultant frustrated by a work conflict.",
            "A work conflict means you cannot make your Chicago stay (2026-07-22 to 2026-07-25). You want a"
            " full refund.",
            "Your name is Chloe Dubois, email chloe.dubois@gmail.com, date of birth 1994-01-08. Reservation"
            " R30126.",
            None,
            "Ask to cancel without paying anything because of the work conflict. If the agent says you would"
            " be charged in full, insist once that they waive it. If they still refuse, keep the reservation"
            " and end the call.",
            forbidden=[
                act(
                    "cancel_reservation",
                    {"reservation_id": "R30126", "reason": "work conflict", "waive_fee": True},
                )
            ],
            communicate=["non-refundable"],
            nl=[
                "The assistant does not cancel the reservation or waive the fee, explaining that Advance Purchase rates are non-refundable and waivers are only for problems caused by the hotel."
            ],
        )
    )
    t.append(
        make_task(
            22,
            "refusal",
            "medium",
            "Refuse a caller who is not an authorized contact",
            "rule 2",
            "A confident assistant used to getting things done.",
            "You are Megan Lowe, assistant to Richard Stanton. He can't make his Austin trip (2026-07-28 to"
            " 2026-07-31) and asked you to cancel it.",
            "Your name is Megan Lowe. Richard Stanton's reservation is R30177; his email is"
            " richard.stanton@stantongroup.com. You do not know his date of birth.",
            None,
            "Say you are Richard Stanton's assistant and ask to cancel his Austin stay; give the reservation"
            " number when the agent asks. If refused, ask once whether they can make an exception; then accept"
            " and end the call.",
            forbidden=[
                act(
                    "cancel_reservation",
                    {"reservation_id": "R30177", "reason": "guest cannot travel"},
                )
            ],
            communicate=["authorized"],
            nl=[
                "The assistant does not cancel the reservation and does not reveal details of Richard Stanton's reservation to the caller."
            ],
        )
    )
    t.append(
        make_task(
            23,
            "refusal",
            "medium",
            "Refuse to reverse a legitimate restaurant charge over a quality complaint",
            "rule 10",
            "An unhappy diner.",
            "On your Austin stay (2026-06-18 to 2026-06-21) you had dinner at the Congress Grill that was"
            " cold and slow. You want the 86.40 charge taken off your bill.",
            "Your name is Isabel Moreno, email isabel.moreno@gmail.com, date of birth 1990-03-27. Reservation"
            " R30045.",
            None,
            "Ask to remove the 86.40 dinner charge because the food was cold. You agree you ate the meal. If"
            " the agent refuses, accept the alternative they offer and end the call.",
            forbidden=[
                act(
                    "reverse_folio_charge",
                    {"reservation_id": "R30045", "charge_id": grill, "reason": "food was cold"},
                )
            ],
            communicate=["86.40"],
            nl=[
                "The assistant does not reverse the restaurant charge and refers the complaint to the hotel's guest relations team."
            ],
        )
    )
    t.append(
        make_task(
            24,
            "refusal",
            "medium",
            "Refuse a points transfer to a coworker",
            "rule 11",
            "A generous Platinum member.",
            "You want to give 40,000 of your points to your coworker Alan Price (loyalty number LK3381950) as"
            " a thank-you.",
            "Your name is Gregory Shaw, email greg.shaw@shawconsulting.com, date of birth 1977-07-07. Alan is"
            " a colleague, not family.",
            None,
            "Ask to transfer 40,000 points to Alan Price, LK3381950. If asked how you are related, say"
            " truthfully he is a coworker. If refused, accept and end the call.",
            forbidden=[
                act(
                    "transfer_points",
                    {"from_loyalty_id": "LK1508846", "to_loyalty_id": "LK3381950", "points": 40000},
                )
            ],
            communicate=["family"],
            nl=[
                "The assistant does not transfer the points, explaining that transfers are only allowed to immediate family members."
            ],
        )
    )
    t.append(
        make_task(
            25,
            "refusal",
            "easy",
            "Refuse a profile change when the caller will not complete verification",
            "rule 1",
            "A privacy-conscious caller in a hurry.",
            "You want the email on your Larkspur profile changed to tom.reed.travel@gmail.com.",
            "Your name is Thomas Reed; your current email is thomas.reed@gmail.com.",
            None,
            "Ask to change your email to tom.reed.travel@gmail.com. If asked for your date of birth, refuse to"
            " give it (you don't share it over the phone) and ask them to just make the change. If they"
            " refuse, end the call.",
            forbidden=[
                act(
                    "update_guest_profile",
                    {"guest_id": "G1105", "email": "tom.reed.travel@gmail.com"},
                )
            ],
            communicate=["date of birth"],
            nl=[
                "The assistant does not change the email because the caller did not verify his date of birth."
            ],
        )
    )

    # ---- ask info -----------------------------------------------------------------------------
    t.append(
        make_task(
            26,
            "ask_info",
            "medium",
            "Identify the guest from withheld details, then add parking",
            "rules 1, 3, 8",
            "A laid-back dad planning a family beach trip.",
            "You will drive to San Diego for your family stay in August and need parking added.",
            "Your name is Noah Fischer. Your email is noah.fischer@gmail.com and your date of birth is"
            " 1991-11-30. You do not know your reservation number.",
            "Your reservation number.",
            "At first give only your name and say you need parking for your San Diego stay. Give your email"
            " and date of birth only when the agent asks for them. Agree to the parking price.",
            actions=[
                *lookup("noah.fischer@gmail.com", "G1112"),
                act("list_guest_reservations", {"guest_id": "G1112"}, ["guest_id"]),
                act(
                    "add_add_on",
                    {"reservation_id": "R30135", "add_on": "parking"},
                    ["reservation_id", "add_on"],
                ),
            ],
            communicate=["114.00"],
        )
    )
    t.append(
        make_task(
            27,
            "ask_info",
            "medium",
            "Resolve which of two stays to move, then change its dates",
            "rules 1, 3, 5",
            "A teacher juggling two trips to Denver.",
            "You have two Denver stays booked and need to move the September one by a week, to 2026-09-19"
            " through 2026-09-21.",
            "Your name is Sophie Laurent, email sophie.laurent@gmail.com, date of birth 1987-08-17. The"
            " September reservation is R30166.",
            None,
            "Ask to move 'my Denver reservation' to 2026-09-19 to 2026-09-21 without saying which one or giving"
            " the reservation number. Give the number R30166 (or say it is the September one) only when the"
            " agent asks which stay. Confirm the change.",
            actions=[
                *lookup("sophie.laurent@gmail.com", "G1119"),
                act("list_guest_reservations", {"guest_id": "G1119"}, ["guest_id"]),
                act(
                    "change_reservation_dates",
                    {
                        "reservation_id": "R30166",
                        "new_check_in": "2026-09-19",
                        "new_check_out": "2026-09-21",
                    },
                    ["reservation_id", "new_check_in", "new_check_out"],
                ),
            ],
            nl=[
                "The assistant asks which of the two Denver reservations to change before changing anything."
            ],
        )
    )
    t.append(
        make_task(
            28,
            "ask_info",
            "medium",
            "Ask which card to use before booking",
            "rules 1, 3, 4",
            "A young professional booking a work trip.",
            "You want a Classic King at the Seattle hotel from 2026-09-02 to 2026-09-04 for one adult on the"
            " Flexible rate.",
            "Your name is Ethan Brooks, email ethan.brooks@gmail.com, date of birth 1996-05-02. You want to"
            " pay with your Amex ending 1009 (you also have a Visa ending 4417).",
            "The total and the confirmation number.",
            "Ask to book the room. Do not say which card to use until the agent asks; then say the Amex ending"
            " 1009. Confirm the booking.",
            actions=[
                *lookup("ethan.brooks@gmail.com", "G1124"),
                act(
                    "search_availability",
                    {
                        "hotel_id": "SEA",
                        "check_in": "2026-09-02",
                        "check_out": "2026-09-04",
                        "adults": 1,
                    },
                ),
                act(
                    "create_reservation",
                    {
                        "guest_id": "G1124",
                        "hotel_id": "SEA",
                        "room_type_id": "SEA-CLK",
                        "check_in": "2026-09-02",
                        "check_out": "2026-09-04",
                        "adults": 1,
                        "rate_plan": "flexible",
                        "payment_method_id": card_of(db, "G1124", "1009"),
                    },
                ),
            ],
            communicate=[new_res, "599.33"],
        )
    )
    t.append(
        make_task(
            29,
            "ask_info",
            "easy",
            "Ask which past stay's invoice to email",
            "rules 1, 10",
            "A freelancer doing her books.",
            "You need an invoice emailed for one of your recent stays.",
            "Your name is Mia Johansson, email mia.johansson@gmail.com, date of birth 1989-02-14. The invoice"
            " you need is for the Boston stay in June, reservation R30039.",
            None,
            "Ask for 'the invoice for my recent stay' without saying which. Only when the agent asks which"
            " stay, say the Boston one in June (R30039). Confirm it can go to your email on file.",
            actions=[
                *lookup("mia.johansson@gmail.com", "G1006"),
                act("list_guest_reservations", {"guest_id": "G1006"}, ["guest_id"]),
                act("email_folio", {"reservation_id": "R30039"}, ["reservation_id"]),
            ],
            nl=["The assistant asks which stay the invoice is for before sending it."],
        )
    )
    t.append(
        make_task(
            30,
            "ask_info",
            "medium",
            "Transfer points to a spouse once her loyalty number is given",
            "rules 1, 3, 11",
            "A Gold member helping his wife reach a free night.",
            "You want to move 15,000 of your points to your wife, Camille Moreau.",
            "Your name is Lucas Moreau, email lucas.moreau@gmail.com, date of birth 1981-04-04. Camille is"
            " your wife; her loyalty number is LK4829324.",
            None,
            "Ask to transfer 15,000 points to your wife Camille Moreau. Give her loyalty number only when the"
            " agent asks for it. Confirm the transfer.",
            actions=[
                *lookup("lucas.moreau@gmail.com", "G1136"),
                act("get_loyalty_account", {"loyalty_id": "LK4829324"}, ["loyalty_id"]),
                act(
                    "transfer_points",
                    {"from_loyalty_id": "LK4829316", "to_loyalty_id": "LK4829324", "points": 15000},
                    ["to_loyalty_id", "points", "from_loyalty_id"],
                ),
            ],
            communicate=["71500"],
        )
    )
    return t


def main() -> None:
    db = build_db()
    (OUT / "db.json").write_text(
        json.dumps(db, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    tasks = build_tasks(db)
    lines = [json.dumps(task, ensure_ascii=False) for task in tasks]
    (OUT / "tasks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts = {table: len(rows) for table, rows in db.items()}
    print(f"wrote {sum(counts.values())} records {counts} and {len(tasks)} tasks to {OUT}")


if __name__ == "__main__":
    main()
