"""Record types of the Cedar Hollow Veterinary Group's customer-service desk."""

from typing import Annotated, ClassVar, Literal

from maestro.domains.sdk import Record, Ref

Species = Literal["dog", "cat", "rabbit", "guinea_pig", "ferret", "bird"]
Weekday = Literal["Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]


class Clinic(Record):
    key_field: ClassVar[str] = "clinic_id"
    clinic_id: str
    name: str
    address: str
    phone: str
    hours: str
    emergency_24h: bool
    services: list[Annotated[str, Ref("services")]]


class Vet(Record):
    key_field: ClassVar[str] = "vet_id"
    vet_id: str
    name: str
    clinic_id: Annotated[str, Ref("clinics")]
    species: list[Species]
    specialties: list[str]
    working_days: list[Weekday]


class Service(Record):
    key_field: ClassVar[str] = "service_code"
    service_code: str
    name: str
    fee: float
    duration_min: int
    species: list[Species]
    desk_bookable: bool
    is_exam: bool
    min_age_weeks: int | None = None
    max_age_weeks: int | None = None
    requires_specialty: str | None = None


class Owner(Record):
    key_field: ClassVar[str] = "owner_id"
    owner_id: str
    first_name: str
    last_name: str
    phone: str
    email: str
    address: str
    preferred_clinic_id: Annotated[str, Ref("clinics")]
    authorized_contacts: list[str]
    client_since: str


class PaymentCard(Record):
    key_field: ClassVar[str] = "card_id"
    card_id: str
    owner_id: Annotated[str, Ref("owners")]
    brand: Literal["Visa", "Mastercard", "Amex", "Discover"]
    last4: str
    exp_month: int
    exp_year: int


class Pet(Record):
    key_field: ClassVar[str] = "pet_id"
    pet_id: str
    owner_id: Annotated[str, Ref("owners")]
    name: str
    species: Species
    breed: str
    sex: Literal["male", "female"]
    neutered: bool
    date_of_birth: str
    weight_kg: float | None = None
    microchip_id: str | None = None
    allergies: list[str]
    primary_vet_id: Annotated[str, Ref("vets")] | None = None
    wellness_plan: bool
    reminders_enabled: bool
    status: Literal["active", "deceased"]
    deceased_reported_on: str | None = None


class Slot(Record):
    key_field: ClassVar[str] = "slot_id"
    slot_id: str
    clinic_id: Annotated[str, Ref("clinics")]
    vet_id: Annotated[str, Ref("vets")]
    start: str
    duration_min: int
    status: Literal["open", "booked"]


class Appointment(Record):
    key_field: ClassVar[str] = "appointment_id"
    appointment_id: str
    pet_id: Annotated[str, Ref("pets")]
    owner_id: Annotated[str, Ref("owners")]
    vet_id: Annotated[str, Ref("vets")]
    clinic_id: Annotated[str, Ref("clinics")]
    service_code: Annotated[str, Ref("services")]
    slot_id: Annotated[str, Ref("slots")] | None = None
    start: str
    duration_min: int
    status: Literal["scheduled", "completed", "cancelled", "no_show"]
    fee: float
    booked_on: str
    cancelled_on: str | None = None


class Vaccination(Record):
    key_field: ClassVar[str] = "vaccination_id"
    vaccination_id: str
    pet_id: Annotated[str, Ref("pets")]
    vaccine: str
    given_on: str
    due_on: str
    vet_id: Annotated[str, Ref("vets")]
    lot_number: str


class Prescription(Record):
    key_field: ClassVar[str] = "prescription_id"
    prescription_id: str
    pet_id: Annotated[str, Ref("pets")]
    vet_id: Annotated[str, Ref("vets")]
    medication: str
    strength: str
    instructions: str
    quantity: int
    refills_remaining: int
    prescribed_on: str
    expires_on: str
    controlled: bool
    status: Literal["active", "expired", "discontinued"]


class Invoice(Record):
    key_field: ClassVar[str] = "invoice_id"
    invoice_id: str
    owner_id: Annotated[str, Ref("owners")]
    pet_id: Annotated[str, Ref("pets")] | None = None
    appointment_id: Annotated[str, Ref("appointments")] | None = None
    kind: Literal["visit", "late_cancellation", "no_show", "delivery_fee"]
    description: str
    issued_on: str
    due_on: str
    total: float
    amount_paid: float
    status: Literal["open", "paid", "waived"]
    waived_on: str | None = None


class Payment(Record):
    key_field: ClassVar[str] = "payment_id"
    payment_id: str
    invoice_id: Annotated[str, Ref("invoices")]
    owner_id: Annotated[str, Ref("owners")]
    card_id: Annotated[str, Ref("payment_cards")]
    amount: float
    paid_on: str
    refunded_amount: float
    refund_reason: (
        Literal["duplicate_payment", "overpayment", "service_complaint", "other"] | None
    ) = None
    refunded_on: str | None = None


class RefillRequest(Record):
    key_field: ClassVar[str] = "request_id"
    request_id: str
    prescription_id: Annotated[str, Ref("prescriptions")]
    pet_id: Annotated[str, Ref("pets")]
    owner_id: Annotated[str, Ref("owners")]
    requested_on: str
    fulfillment: Literal["pickup", "delivery"]
    pickup_clinic_id: Annotated[str, Ref("clinics")] | None = None
    delivery_invoice_id: Annotated[str, Ref("invoices")] | None = None
    status: Literal["pending", "ready", "completed", "cancelled"]


TABLES = {
    "clinics": Clinic,
    "vets": Vet,
    "services": Service,
    "owners": Owner,
    "payment_cards": PaymentCard,
    "pets": Pet,
    "slots": Slot,
    "appointments": Appointment,
    "vaccinations": Vaccination,
    "prescriptions": Prescription,
    "invoices": Invoice,
    "payments": Payment,
    "refill_requests": RefillRequest,
}
