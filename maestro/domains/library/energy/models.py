"""Record types of the Brightwater Energy customer-service desk.

Amounts are pounds (GBP) as floats with two decimals; unit rates are pounds per kWh and standing
charges pounds per day, both before VAT (5% on domestic energy). Dates are ``YYYY-MM-DD`` strings,
times ``YYYY-MM-DDTHH:MM:SS``. An account's ``balance`` is what the customer owes now: positive
means money is owed, negative means the account is in credit.
"""

from typing import Annotated, ClassVar, Literal

from maestro.domains.sdk import Record, Ref

Fuel = Literal["electricity", "gas"]


class Customer(Record):
    """A person who holds one or more supply accounts."""

    key_field: ClassVar[str] = "customer_id"
    customer_id: str
    first_name: str
    last_name: str
    email: str
    phone: str
    date_of_birth: str
    joined_on: str
    priority_services: bool
    psr_reason: str | None = None
    #: People the holder has named to act on their behalf, as "Full Name (relationship)".
    authorised_contacts: list[str]


class Account(Record):
    """A supply account at one address."""

    key_field: ClassVar[str] = "account_id"
    account_id: str
    customer_id: Annotated[str, Ref("customers")]
    address_line: str
    city: str
    postcode: str
    status: Literal["active", "moving_out", "closed"]
    opened_on: str
    closed_on: str | None = None
    move_out_date: str | None = None
    forwarding_postcode: str | None = None
    payment_method: Literal["direct_debit", "pay_on_receipt"]
    dd_monthly_amount: float | None = None
    dd_payment_day: int | None = None
    dd_sort_code: str | None = None
    dd_account_last4: str | None = None
    recommended_dd: float
    balance: float
    paperless: bool


class Tariff(Record):
    """A tariff for one fuel."""

    key_field: ClassVar[str] = "tariff_id"
    tariff_id: str
    name: str
    fuel: Fuel
    tariff_type: Literal["variable", "fixed"]
    term_months: int | None = None
    unit_rate: float
    standing_charge: float
    exit_fee: float
    open_to_switch: bool
    requires_smart_meter: bool
    renewable: bool


class Meter(Record):
    """A meter at an account's address, and the tariff it is billed on."""

    key_field: ClassVar[str] = "meter_id"
    meter_id: str
    account_id: Annotated[str, Ref("accounts")]
    fuel: Fuel
    meter_type: Literal["smart", "standard"]
    smart_comms: Literal["ok", "not_communicating"] | None = None
    units: Literal["kWh", "m3"]
    location: str
    status: Literal["active", "inactive"]
    tariff_id: Annotated[str, Ref("tariffs")]
    tariff_start: str
    tariff_end: str | None = None
    annual_consumption_kwh: int


class Reading(Record):
    """A meter reading, in the meter's units."""

    key_field: ClassVar[str] = "reading_id"
    reading_id: str
    meter_id: Annotated[str, Ref("meters")]
    read_on: str
    value: int
    source: Literal["smart", "customer", "estimated", "engineer"]


class BillLine(Record):
    """One meter's charges on a bill (part of a bill, not a table)."""

    meter_id: str
    fuel: Fuel
    tariff_id: str
    opening_reading: int
    closing_reading: int
    kwh: int
    unit_rate: float
    energy_charge: float
    days: int
    standing_charge_rate: float
    standing_charge_total: float
    estimated: bool


class Bill(Record):
    """A monthly bill; ``amount`` includes VAT."""

    key_field: ClassVar[str] = "bill_id"
    bill_id: str
    account_id: Annotated[str, Ref("accounts")]
    period_start: str
    period_end: str
    issued_on: str
    due_date: str
    lines: list[BillLine]
    subtotal: float
    vat: float
    amount: float
    estimated: bool
    status: Literal["paid", "unpaid", "overdue", "in_plan"]


class PaymentPlan(Record):
    """An arrangement to clear a debt in monthly instalments."""

    key_field: ClassVar[str] = "plan_id"
    plan_id: str
    account_id: Annotated[str, Ref("accounts")]
    created_on: str
    total: float
    instalments: int
    instalment_amount: float
    final_instalment_amount: float
    first_payment_date: str
    instalments_paid: int
    status: Literal["active", "completed", "broken", "cancelled"]
    ended_on: str | None = None


class Outage(Record):
    """A power cut reported by the local network operator."""

    key_field: ClassVar[str] = "outage_id"
    outage_id: str
    postcode_district: str
    fuel: Literal["electricity"]
    status: Literal["investigating", "engineers_on_site", "restored"]
    reported_at: str
    restored_at: str | None = None
    cause: str
    network_operator: str
    properties_affected: int


class ServiceRequest(Record):
    """A power-cut report or an engineer visit."""

    key_field: ClassVar[str] = "request_id"
    request_id: str
    account_id: Annotated[str, Ref("accounts")]
    meter_id: Annotated[str, Ref("meters")] | None = None
    kind: Literal["power_cut", "meter_fault", "smart_meter_install", "meter_exchange"]
    status: Literal["open", "scheduled", "completed", "missed", "cancelled"]
    priority: Literal["standard", "urgent"]
    created_at: str
    visit_date: str | None = None
    visit_slot: Literal["am", "pm"] | None = None
    outage_id: Annotated[str, Ref("outages")] | None = None


class Adjustment(Record):
    """A charge or credit on an account outside the monthly bills."""

    key_field: ClassVar[str] = "adjustment_id"
    adjustment_id: str
    account_id: Annotated[str, Ref("accounts")]
    created_on: str
    kind: Literal["exit_fee", "goodwill_credit"]
    #: Positive is a charge, negative a credit.
    amount: float
    request_id: Annotated[str, Ref("service_requests")] | None = None
    meter_id: Annotated[str, Ref("meters")] | None = None
    note: str


TABLES = {
    "customers": Customer,
    "accounts": Account,
    "tariffs": Tariff,
    "meters": Meter,
    "readings": Reading,
    "bills": Bill,
    "payment_plans": PaymentPlan,
    "outages": Outage,
    "service_requests": ServiceRequest,
    "adjustments": Adjustment,
}
