"""People and places for generated worlds: what a data generator (``generate.py`` of the
synthesis's data stage, run in the sandbox) may import besides its header.

Every value agrees with the others of its record: a place is a real city with its own state, a
ZIP code (or UK postcode) of that city, and the city's telephone area code; a person's email is
made from their name at a real provider. Names and company names come from Faker, seeded from
the generator's ``rng`` so the same seed gives the same world.

    p = place(rng)                    # {"city": "Denver", "state": "CO", "zip": "80218", ...}
    who = person(rng)                 # {"first_name", "last_name", "full_name", "email"}
    phone(rng, p)                     # "303-482-3391": the city's area code
    street_address(rng)               # "1842 Maple Avenue"
    fake(rng).company()               # any Faker provider, seeded from rng
    road_miles(p, q)                  # 1184: about how far one drives from p to q
"""

from __future__ import annotations

import math
import random
from typing import Any

from faker import Faker

__all__ = [
    "CITIES",
    "EMAIL_PROVIDERS",
    "UK_CITIES",
    "birth_date",
    "email_for",
    "fake",
    "person",
    "phone",
    "place",
    "postcode",
    "road_miles",
    "street_address",
]

# Built once when the module is imported (the sandbox imports it before any package code).
_FAKERS = {"US": Faker("en_US"), "GB": Faker("en_GB")}

EMAIL_PROVIDERS = ("gmail.com", "outlook.com", "yahoo.com", "icloud.com", "hotmail.com", "aol.com")

#: City, state, state name, ZIP code range of the city, area codes.
CITIES: tuple[tuple[str, str, str, tuple[int, int], tuple[str, ...]], ...] = (
    ("New York", "NY", "New York", (10001, 10040), ("212", "646", "917")),
    ("Brooklyn", "NY", "New York", (11201, 11239), ("718", "347", "929")),
    ("Buffalo", "NY", "New York", (14201, 14227), ("716",)),
    ("Albany", "NY", "New York", (12202, 12211), ("518",)),
    ("Los Angeles", "CA", "California", (90001, 90089), ("213", "323", "310")),
    ("San Diego", "CA", "California", (92101, 92140), ("619", "858")),
    ("San Francisco", "CA", "California", (94102, 94134), ("415", "628")),
    ("San Jose", "CA", "California", (95110, 95139), ("408", "669")),
    ("Sacramento", "CA", "California", (95811, 95838), ("916",)),
    ("Chicago", "IL", "Illinois", (60601, 60661), ("312", "773", "872")),
    ("Houston", "TX", "Texas", (77002, 77099), ("713", "281", "832")),
    ("Dallas", "TX", "Texas", (75201, 75254), ("214", "469", "972")),
    ("Austin", "TX", "Texas", (78701, 78759), ("512", "737")),
    ("San Antonio", "TX", "Texas", (78201, 78261), ("210",)),
    ("Phoenix", "AZ", "Arizona", (85003, 85054), ("602", "480", "623")),
    ("Tucson", "AZ", "Arizona", (85701, 85750), ("520",)),
    ("Philadelphia", "PA", "Pennsylvania", (19102, 19154), ("215", "267")),
    ("Pittsburgh", "PA", "Pennsylvania", (15201, 15235), ("412",)),
    ("Jacksonville", "FL", "Florida", (32202, 32258), ("904",)),
    ("Miami", "FL", "Florida", (33125, 33186), ("305", "786")),
    ("Tampa", "FL", "Florida", (33602, 33647), ("813",)),
    ("Orlando", "FL", "Florida", (32801, 32839), ("407", "689")),
    ("Columbus", "OH", "Ohio", (43201, 43235), ("614", "380")),
    ("Cleveland", "OH", "Ohio", (44102, 44135), ("216",)),
    ("Cincinnati", "OH", "Ohio", (45202, 45239), ("513",)),
    ("Charlotte", "NC", "North Carolina", (28202, 28277), ("704", "980")),
    ("Raleigh", "NC", "North Carolina", (27601, 27617), ("919", "984")),
    ("Indianapolis", "IN", "Indiana", (46201, 46260), ("317",)),
    ("Seattle", "WA", "Washington", (98101, 98126), ("206",)),
    ("Spokane", "WA", "Washington", (99201, 99224), ("509",)),
    ("Denver", "CO", "Colorado", (80202, 80249), ("303", "720")),
    ("Boston", "MA", "Massachusetts", (2108, 2136), ("617", "857")),
    ("Nashville", "TN", "Tennessee", (37201, 37221), ("615", "629")),
    ("Memphis", "TN", "Tennessee", (38103, 38141), ("901",)),
    ("Portland", "OR", "Oregon", (97201, 97236), ("503", "971")),
    ("Las Vegas", "NV", "Nevada", (89101, 89149), ("702", "725")),
    ("Reno", "NV", "Nevada", (89501, 89523), ("775",)),
    ("Detroit", "MI", "Michigan", (48201, 48239), ("313",)),
    ("Baltimore", "MD", "Maryland", (21201, 21239), ("410", "443")),
    ("Milwaukee", "WI", "Wisconsin", (53202, 53233), ("414",)),
    ("Madison", "WI", "Wisconsin", (53703, 53719), ("608",)),
    ("Albuquerque", "NM", "New Mexico", (87102, 87123), ("505",)),
    ("Atlanta", "GA", "Georgia", (30303, 30350), ("404", "470", "678")),
    ("Savannah", "GA", "Georgia", (31401, 31419), ("912",)),
    ("Minneapolis", "MN", "Minnesota", (55401, 55419), ("612",)),
    ("Kansas City", "MO", "Missouri", (64105, 64158), ("816",)),
    ("St. Louis", "MO", "Missouri", (63101, 63139), ("314",)),
    ("Omaha", "NE", "Nebraska", (68102, 68164), ("402",)),
    ("New Orleans", "LA", "Louisiana", (70112, 70131), ("504",)),
    ("Salt Lake City", "UT", "Utah", (84101, 84121), ("801", "385")),
    ("Richmond", "VA", "Virginia", (23219, 23236), ("804",)),
    ("Hartford", "CT", "Connecticut", (6103, 6120), ("860",)),
    ("Providence", "RI", "Rhode Island", (2903, 2909), ("401",)),
    ("Burlington", "VT", "Vermont", (5401, 5408), ("802",)),
    ("Boise", "ID", "Idaho", (83702, 83716), ("208",)),
    ("Anchorage", "AK", "Alaska", (99501, 99518), ("907",)),
    ("Honolulu", "HI", "Hawaii", (96813, 96826), ("808",)),
    ("Des Moines", "IA", "Iowa", (50309, 50321), ("515",)),
    ("Louisville", "KY", "Kentucky", (40202, 40245), ("502",)),
    ("Oklahoma City", "OK", "Oklahoma", (73102, 73159), ("405",)),
    ("Charleston", "SC", "South Carolina", (29401, 29414), ("843",)),
    ("Birmingham", "AL", "Alabama", (35203, 35244), ("205",)),
    ("Little Rock", "AR", "Arkansas", (72201, 72227), ("501",)),
    ("Wichita", "KS", "Kansas", (67202, 67235), ("316",)),
    ("Newark", "NJ", "New Jersey", (7102, 7114), ("973", "862")),
    ("Wilmington", "DE", "Delaware", (19801, 19810), ("302",)),
    ("Manchester", "NH", "New Hampshire", (3101, 3104), ("603",)),
    ("Fargo", "ND", "North Dakota", (58102, 58104), ("701",)),
    ("Sioux Falls", "SD", "South Dakota", (57103, 57110), ("605",)),
    ("Billings", "MT", "Montana", (59101, 59106), ("406",)),
    ("Cheyenne", "WY", "Wyoming", (82001, 82009), ("307",)),
)

#: City, country, postcode districts, dialling code.
UK_CITIES: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    (
        "London",
        "England",
        ("E1", "E8", "N1", "N7", "NW1", "SE1", "SE15", "SW2", "SW11", "W2", "W12"),
        "020",
    ),
    ("Manchester", "England", ("M1", "M4", "M14", "M20", "M21"), "0161"),
    ("Birmingham", "England", ("B1", "B5", "B13", "B15", "B29"), "0121"),
    ("Leeds", "England", ("LS1", "LS6", "LS8", "LS11"), "0113"),
    ("Liverpool", "England", ("L1", "L8", "L15", "L17"), "0151"),
    ("Bristol", "England", ("BS1", "BS3", "BS6", "BS7"), "0117"),
    ("Newcastle upon Tyne", "England", ("NE1", "NE2", "NE4", "NE6"), "0191"),
    ("Sheffield", "England", ("S1", "S7", "S10", "S11"), "0114"),
    ("Nottingham", "England", ("NG1", "NG5", "NG7"), "0115"),
    ("Glasgow", "Scotland", ("G1", "G3", "G12", "G41"), "0141"),
    ("Edinburgh", "Scotland", ("EH1", "EH3", "EH6", "EH10"), "0131"),
    ("Cardiff", "Wales", ("CF10", "CF11", "CF14", "CF24"), "029"),
    ("Belfast", "Northern Ireland", ("BT1", "BT7", "BT9"), "028"),
)

#: Where each city lies (latitude, longitude), by (city, state) or (city, nation).
_COORDS: dict[tuple[str, str], tuple[float, float]] = {
    ("New York", "NY"): (40.71, -74.01), ("Brooklyn", "NY"): (40.68, -73.94),
    ("Buffalo", "NY"): (42.89, -78.88), ("Albany", "NY"): (42.65, -73.75),
    ("Los Angeles", "CA"): (34.05, -118.24), ("San Diego", "CA"): (32.72, -117.16),
    ("San Francisco", "CA"): (37.77, -122.42), ("San Jose", "CA"): (37.34, -121.89),
    ("Sacramento", "CA"): (38.58, -121.49), ("Chicago", "IL"): (41.88, -87.63),
    ("Houston", "TX"): (29.76, -95.37), ("Dallas", "TX"): (32.78, -96.80),
    ("Austin", "TX"): (30.27, -97.74), ("San Antonio", "TX"): (29.42, -98.49),
    ("Phoenix", "AZ"): (33.45, -112.07), ("Tucson", "AZ"): (32.22, -110.97),
    ("Philadelphia", "PA"): (39.95, -75.17), ("Pittsburgh", "PA"): (40.44, -80.00),
    ("Jacksonville", "FL"): (30.33, -81.66), ("Miami", "FL"): (25.76, -80.19),
    ("Tampa", "FL"): (27.95, -82.46), ("Orlando", "FL"): (28.54, -81.38),
    ("Columbus", "OH"): (39.96, -83.00), ("Cleveland", "OH"): (41.50, -81.69),
    ("Cincinnati", "OH"): (39.10, -84.51), ("Charlotte", "NC"): (35.23, -80.84),
    ("Raleigh", "NC"): (35.78, -78.64), ("Indianapolis", "IN"): (39.77, -86.16),
    ("Seattle", "WA"): (47.61, -122.33), ("Spokane", "WA"): (47.66, -117.43),
    ("Denver", "CO"): (39.74, -104.99), ("Boston", "MA"): (42.36, -71.06),
    ("Nashville", "TN"): (36.16, -86.78), ("Memphis", "TN"): (35.15, -90.05),
    ("Portland", "OR"): (45.52, -122.68), ("Las Vegas", "NV"): (36.17, -115.14),
    ("Reno", "NV"): (39.53, -119.81), ("Detroit", "MI"): (42.33, -83.05),
    ("Baltimore", "MD"): (39.29, -76.61), ("Milwaukee", "WI"): (43.04, -87.91),
    ("Madison", "WI"): (43.07, -89.40), ("Albuquerque", "NM"): (35.08, -106.65),
    ("Atlanta", "GA"): (33.75, -84.39), ("Savannah", "GA"): (32.08, -81.09),
    ("Minneapolis", "MN"): (44.98, -93.27), ("Kansas City", "MO"): (39.10, -94.58),
    ("St. Louis", "MO"): (38.63, -90.20), ("Omaha", "NE"): (41.26, -95.93),
    ("New Orleans", "LA"): (29.95, -90.07), ("Salt Lake City", "UT"): (40.76, -111.89),
    ("Richmond", "VA"): (37.54, -77.44), ("Hartford", "CT"): (41.77, -72.67),
    ("Providence", "RI"): (41.82, -71.41), ("Burlington", "VT"): (44.48, -73.21),
    ("Boise", "ID"): (43.62, -116.20), ("Anchorage", "AK"): (61.22, -149.90),
    ("Honolulu", "HI"): (21.31, -157.86), ("Des Moines", "IA"): (41.59, -93.62),
    ("Louisville", "KY"): (38.25, -85.76), ("Oklahoma City", "OK"): (35.47, -97.52),
    ("Charleston", "SC"): (32.78, -79.93), ("Birmingham", "AL"): (33.52, -86.80),
    ("Little Rock", "AR"): (34.75, -92.29), ("Wichita", "KS"): (37.69, -97.34),
    ("Newark", "NJ"): (40.74, -74.17), ("Wilmington", "DE"): (39.74, -75.55),
    ("Manchester", "NH"): (42.99, -71.46), ("Fargo", "ND"): (46.88, -96.79),
    ("Sioux Falls", "SD"): (43.55, -96.73), ("Billings", "MT"): (45.78, -108.50),
    ("Cheyenne", "WY"): (41.14, -104.82),
    ("London", "England"): (51.51, -0.13), ("Manchester", "England"): (53.48, -2.24),
    ("Birmingham", "England"): (52.49, -1.89), ("Leeds", "England"): (53.80, -1.55),
    ("Liverpool", "England"): (53.41, -2.98), ("Bristol", "England"): (51.45, -2.59),
    ("Newcastle upon Tyne", "England"): (54.98, -1.61),
    ("Sheffield", "England"): (53.38, -1.47), ("Nottingham", "England"): (52.95, -1.15),
    ("Glasgow", "Scotland"): (55.86, -4.25), ("Edinburgh", "Scotland"): (55.95, -3.19),
    ("Cardiff", "Wales"): (51.48, -3.18), ("Belfast", "Northern Ireland"): (54.60, -5.93),
}  # fmt: skip
#: Places no road joins to the rest (Hawaii, Alaska's road to Canada aside, Northern Ireland).
_ISLANDS = {"HI": "Hawaii", "AK": "Alaska", "Northern Ireland": "Northern Ireland"}
#: Roads run about a fifth longer than the great circle between two cities.
_ROAD_FACTOR = 1.2

_US_STREETS = (
    "Main Street",
    "Oak Street",
    "Maple Avenue",
    "Cedar Lane",
    "Park Avenue",
    "Washington Street",
    "Lake Street",
    "Hill Road",
    "Elm Street",
    "Pine Street",
    "Church Street",
    "Highland Avenue",
    "Lincoln Avenue",
    "Jefferson Street",
    "Madison Avenue",
    "Franklin Street",
    "Spring Street",
    "River Road",
    "Center Street",
    "Mill Street",
    "Broadway",
    "Walnut Street",
    "Chestnut Street",
    "Sunset Drive",
    "Jackson Street",
    "Willow Lane",
    "Forest Avenue",
    "Ridge Road",
    "2nd Street",
    "3rd Avenue",
    "5th Street",
    "Grove Street",
    "Meadow Lane",
    "Cherry Street",
)
_UK_STREETS = (
    "High Street",
    "Church Road",
    "Station Road",
    "Victoria Road",
    "Park Road",
    "London Road",
    "Mill Lane",
    "Kings Road",
    "Queens Road",
    "The Crescent",
    "Manor Road",
    "Grange Road",
    "Richmond Road",
    "York Road",
    "Albert Road",
    "Springfield Road",
    "Green Lane",
)
_POSTCODE_LETTERS = "ABDEFGHJLNPQRSTUWXYZ"


def fake(rng: random.Random, country: str = "US") -> Faker:
    """A Faker for ``country`` (US or GB), seeded from ``rng``."""
    f = _FAKERS["GB" if country.upper() in ("GB", "UK") else "US"]
    f.seed_instance(rng.randrange(2**31))
    return f


def place(rng: random.Random, country: str = "US", state: str | None = None) -> dict[str, Any]:
    """A real city with its own state, postal code and area code, and an address in it:
    ``{"city", "state", "state_name", "zip", "area_code", "street", "address", "country"}``
    (for GB: ``postcode`` and ``dialling_code``; ``state`` is the nation). ``state`` limits US
    cities to one state ("CO")."""
    if country.upper() in ("GB", "UK"):
        city, nation, districts, code = rng.choice(UK_CITIES)
        pc = postcode(rng, rng.choice(districts))
        street = street_address(rng, "GB")
        return {
            "city": city,
            "state": nation,
            "state_name": nation,
            "postcode": pc,
            "zip": pc,
            "dialling_code": code,
            "area_code": code,
            "street": street,
            "address": f"{street}, {city} {pc}",
            "country": "United Kingdom",
        }
    cities = [c for c in CITIES if state is None or c[1] == state.upper()] or list(CITIES)
    city, abbr, name, (low, high), codes = rng.choice(cities)
    zip_code = f"{rng.randint(low, high):05d}"
    street = street_address(rng)
    return {
        "city": city,
        "state": abbr,
        "state_name": name,
        "zip": zip_code,
        "area_code": rng.choice(codes),
        "street": street,
        "address": f"{street}, {city}, {abbr} {zip_code}",
        "country": "United States",
    }


def postcode(rng: random.Random, district: str) -> str:
    """A UK postcode in a district (``M14`` -> ``M14 5RT``)."""
    return f"{district} {rng.randint(1, 9)}{rng.choice(_POSTCODE_LETTERS)}{rng.choice(_POSTCODE_LETTERS)}"


def street_address(rng: random.Random, country: str = "US") -> str:
    """A house number and a common street name."""
    if country.upper() in ("GB", "UK"):
        return f"{rng.randint(1, 180)} {rng.choice(_UK_STREETS)}"
    return f"{rng.randint(10, 9899)} {rng.choice(_US_STREETS)}"


def phone(rng: random.Random, where: dict[str, Any] | None = None) -> str:
    """A telephone number with the place's area code (``303-482-3391``; UK: ``0161 496 0734``)."""
    where = where or place(rng)
    code = str(where.get("area_code") or "212")
    if code.startswith("0"):
        rest = 11 - len(code)
        digits = f"{rng.randint(2 * 10 ** (rest - 1), 10**rest - 1)}"
        return f"{code} {digits[: rest - 4]} {digits[rest - 4 :]}"
    exchange = rng.randint(200, 999)
    while exchange % 100 == 11 or exchange == 555:  # no N11 service codes, no 555
        exchange = rng.randint(200, 999)
    return f"{code}-{exchange}-{rng.randint(0, 9999):04d}"


def email_for(rng: random.Random, first: str, last: str) -> str:
    """An email made from a name at a real provider (``maria.okafor84@gmail.com``)."""

    def clean(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    style = rng.randrange(4)
    given, family = clean(first), clean(last)
    local = (
        f"{given}.{family}",
        f"{given[:1]}{family}",
        f"{given}{family}{rng.randint(1, 99)}",
        f"{given}_{family}",
    )[style]
    return f"{local}@{rng.choice(EMAIL_PROVIDERS)}"


def person(rng: random.Random, country: str = "US") -> dict[str, str]:
    """A person: ``{"first_name", "last_name", "full_name", "email"}``."""
    f = fake(rng, country)
    first, last = f.first_name(), f.last_name()
    return {
        "first_name": first,
        "last_name": last,
        "full_name": f"{first} {last}",
        "email": email_for(rng, first, last),
    }


def birth_date(rng: random.Random, today: Any, youngest: int = 18, oldest: int = 85) -> str:
    """A date of birth (``YYYY-MM-DD``) for someone ``youngest`` to ``oldest`` years old today."""
    from datetime import date, timedelta

    day = today if isinstance(today, date) else date.fromisoformat(str(today)[:10])
    days = rng.randint(youngest * 365 + 5, oldest * 365)
    return (day - timedelta(days=days)).isoformat()


def _where(p: dict[str, Any] | str) -> tuple[str, str]:
    if isinstance(p, dict):
        return str(p.get("city", "")), str(p.get("state", ""))
    city, _, state = str(p).partition(",")
    city, state = city.strip(), state.strip()
    if not state:
        found = [k for k in _COORDS if k[0] == city]
        if len(found) != 1:
            raise ValueError(
                f"road_miles: {city!r} is "
                + ("in several places: write 'City, ST'" if found else "not a known city")
            )
        return found[0]
    return city, state


def road_miles(a: dict[str, Any] | str, b: dict[str, Any] | str) -> int | None:
    """About how many miles one drives from place ``a`` to place ``b`` (two of :func:`place`'s
    dicts, or "City, ST" / "City, Nation" texts): the great-circle distance and a fifth more, 0
    within one city, None where no road joins them (Honolulu, Anchorage, Belfast to elsewhere).
    A rental returned at another branch has at least these miles on its odometer."""
    ka, kb = _where(a), _where(b)
    for k in (ka, kb):
        if k not in _COORDS:
            raise ValueError(f"road_miles: {k[0]}, {k[1]} is not a known city")
    if ka == kb:
        return 0
    if ka[1] in _ISLANDS or kb[1] in _ISLANDS:
        return None
    (lat1, lon1), (lat2, lon2) = _COORDS[ka], _COORDS[kb]
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return round(2 * 3958.8 * math.asin(math.sqrt(h)) * _ROAD_FACTOR)
