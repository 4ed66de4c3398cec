"""Record types of the Larkspur Hotels reservations and guest-services desk."""

from datetime import date, datetime
from typing import Annotated, ClassVar, Literal

from maestro.domains.sdk import Record, Ref

Tier = Literal["member", "silver", "gold", "platinum"]
RatePlan = Literal["flexible", "advance_purchase", "points"]
ReservationStatus = Literal["confirmed", "checked_in", "checked_out", "cancelled", "no_show"]
AddOn = Literal["breakfast", "parking"]
ChargeCategory = Literal[
    "room",
    "breakfast",
    "parking",
    "restaurant",
    "bar",
    "minibar",
    "spa",
    "laundry",
    "late_checkout",
    "cancellation_fee",
    "no_show",
]


class Hotel(Record):
    key_field: ClassVar[str] = "hotel_id"
    hotel_id: str
    name: str
    address: str
    city: str
    state: str
    phone: str
    check_in_time: str
    check_out_time: str
    tax_rate: float
    breakfast_price: float
    parking_fee: float | None
    parking_notes: str
    amenities: list[str]


class RoomType(Record):
    key_field: ClassVar[str] = "room_type_id"
    room_type_id: str
    hotel_id: Annotated[str, Ref("hotels")]
    name: str
    category_rank: int
    beds: str
    max_occupancy: int
    size_sqft: int
    nightly_rate: float
    points_per_night: int
    description: str


class Room(Record):
    key_field: ClassVar[str] = "room_id"
    room_id: str
    hotel_id: Annotated[str, Ref("hotels")]
    room_type_id: Annotated[str, Ref("room_types")]
    floor: int
    accessible: bool
    out_of_service_until: date | None = None


class Guest(Record):
    key_field: ClassVar[str] = "guest_id"
    guest_id: str
    first_name: str
    last_name: str
    email: str
    phone: str
    date_of_birth: date
    address_line: str
    city: str
    state: str
    postal_code: str
    country: str
    loyalty_id: Annotated[str, Ref("loyalty_accounts")] | None = None
    preferences: str = ""
    marketing_opt_in: bool = False
    authorized_contacts: list[str] = []  # noqa: RUF012 (pydantic copies defaults)
    created_on: date


class PaymentMethod(Record):
    key_field: ClassVar[str] = "payment_method_id"
    payment_method_id: str
    guest_id: Annotated[str, Ref("guests")]
    brand: Literal["Visa", "Mastercard", "Amex", "Discover"]
    last4: str
    exp_month: int
    exp_year: int
    holder_name: str


class LoyaltyAccount(Record):
    key_field: ClassVar[str] = "loyalty_id"
    loyalty_id: str
    guest_id: Annotated[str, Ref("guests")]
    tier: Tier
    points_balance: int
    qualifying_nights_ytd: int
    lifetime_points: int
    enrolled_on: date


class Reservation(Record):
    key_field: ClassVar[str] = "reservation_id"
    reservation_id: str
    guest_id: Annotated[str, Ref("guests")]
    hotel_id: Annotated[str, Ref("hotels")]
    room_type_id: Annotated[str, Ref("room_types")]
    booked_room_type_id: Annotated[str, Ref("room_types")]
    check_in: date
    check_out: date
    adults: int
    children: int
    rate_plan: RatePlan
    nightly_rate: float
    points_per_night: int
    status: ReservationStatus
    add_ons: list[AddOn] = []  # noqa: RUF012
    late_checkout: str | None = None
    late_checkout_fee: float = 0.0
    upgrade: Literal["paid", "complimentary"] | None = None
    room_id: Annotated[str, Ref("rooms")] | None = None
    payment_method_id: Annotated[str, Ref("payment_methods")] | None = None
    booked_on: date
    special_requests: str = ""
    notes: list[str] = []  # noqa: RUF012
    cancelled_on: date | None = None
    cancel_reason: str | None = None
    cancellation_fee: float = 0.0
    fee_waived: bool = False
    folio_emailed_to: str | None = None
    folio_emailed_at: datetime | None = None


class FolioCharge(Record):
    key_field: ClassVar[str] = "charge_id"
    charge_id: str
    reservation_id: Annotated[str, Ref("reservations")]
    posted_on: date
    category: ChargeCategory
    description: str
    amount: float
    tax: float
    reversed: bool = False
    reversal_reason: str | None = None


class LoyaltyTransaction(Record):
    key_field: ClassVar[str] = "txn_id"
    txn_id: str
    loyalty_id: Annotated[str, Ref("loyalty_accounts")]
    posted_on: date
    kind: Literal[
        "opening_balance",
        "earn",
        "redeem",
        "refund",
        "transfer_in",
        "transfer_out",
        "bonus",
    ]
    points: int
    reservation_id: Annotated[str, Ref("reservations")] | None = None
    note: str = ""


TABLES = {
    "hotels": Hotel,
    "room_types": RoomType,
    "rooms": Room,
    "guests": Guest,
    "payment_methods": PaymentMethod,
    "loyalty_accounts": LoyaltyAccount,
    "reservations": Reservation,
    "folio_charges": FolioCharge,
    "loyalty_transactions": LoyaltyTransaction,
}
