"""Tools of the Brightwater Energy customer-service desk."""

import re
from datetime import date, timedelta
from typing import Literal

from maestro.domains.sdk import Database, ToolError, tool

VAT_RATE = 0.05
#: No exit fee is charged in the last days of a fixed term.
EXIT_FEE_FREE_DAYS = 49
#: Most a manual reading may add per day before it is treated as a likely misread.
MAX_DAILY_USE = {"kWh": 60, "m3": 30}
MAX_GOODWILL_CREDIT = 30.00
MIN_PLAN_BALANCE = 50.00
MIN_INSTALMENT = 10.00
MOVE_OUT_BACKDATE_DAYS = 14
MOVE_OUT_AHEAD_DAYS = 60
VISIT_MIN_NOTICE_DAYS = 2
VISIT_MAX_AHEAD_DAYS = 30

_POSTCODE = re.compile(r"^([A-Z]{1,2}[0-9][A-Z0-9]?) ?([0-9][A-Z]{2})$")
_EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")


# ----- helpers ----------------------------------------------------------------------------------


def _money(x: float) -> float:
    return round(x + 0.0, 2)


def _parse_date(value: str, what: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ToolError(f"{what} {value!r} is not a date in YYYY-MM-DD form") from None


def _add_months(d: date, months: int) -> date:
    month_index = d.month - 1 + months
    year, month = d.year + month_index // 12, month_index % 12 + 1
    day = d.day
    while True:
        try:
            return date(year, month, day)
        except ValueError:
            day -= 1


def _district(postcode: str) -> str:
    return postcode.strip().upper().split(" ")[0]


def _active_account(db: Database, account_id: str) -> dict:
    account = db.require("accounts", account_id)
    if account["status"] != "active":
        raise ToolError(
            f"account {account_id} is {account['status'].replace('_', ' ')}; "
            "this change is only possible on an active account"
        )
    return account


def _readings(db: Database, meter_id: str) -> list[dict]:
    """The meter's readings, newest first."""
    rows = db.find("readings", meter_id=meter_id)
    return sorted(rows, key=lambda r: (r["read_on"], r["reading_id"]), reverse=True)


def _last_actual(db: Database, meter_id: str) -> dict | None:
    for r in _readings(db, meter_id):
        if r["source"] != "estimated":
            return r
    return None


def _manually_read(meter: dict) -> bool:
    return not (meter["meter_type"] == "smart" and meter["smart_comms"] == "ok")


def _exit_fee(db: Database, meter: dict, tariff: dict) -> float:
    if tariff["tariff_type"] != "fixed" or not meter["tariff_end"]:
        return 0.0
    days_left = (date.fromisoformat(meter["tariff_end"]) - db.today()).days
    if days_left <= EXIT_FEE_FREE_DAYS:
        return 0.0
    return _money(tariff["exit_fee"])


def _annual_cost(meter: dict, tariff: dict) -> float:
    net = meter["annual_consumption_kwh"] * tariff["unit_rate"] + 365 * tariff["standing_charge"]
    return _money(net * (1 + VAT_RATE))


def _recommended_dd(db: Database, account_id: str) -> float:
    total = 0.0
    for meter in db.find("meters", account_id=account_id):
        if meter["status"] == "active":
            total += _annual_cost(meter, db.require("tariffs", meter["tariff_id"]))
    return float(round(total / 12))


def _check_switch(db: Database, meter_id: str, new_tariff_id: str) -> tuple[dict, dict, dict]:
    meter = db.require("meters", meter_id)
    if meter["status"] != "active":
        raise ToolError(f"meter {meter_id} is not active")
    _active_account(db, meter["account_id"])
    current = db.require("tariffs", meter["tariff_id"])
    new = db.require("tariffs", new_tariff_id)
    if new_tariff_id == meter["tariff_id"]:
        raise ToolError(f"meter {meter_id} is already on {new['name']} ({new_tariff_id})")
    if new["fuel"] != meter["fuel"]:
        raise ToolError(
            f"{new_tariff_id} is a {new['fuel']} tariff; meter {meter_id} measures {meter['fuel']}"
        )
    if not new["open_to_switch"]:
        raise ToolError(f"{new['name']} ({new_tariff_id}) is closed to new switches")
    if new["requires_smart_meter"] and meter["meter_type"] != "smart":
        raise ToolError(f"{new['name']} needs a smart meter; meter {meter_id} is a standard meter")
    return meter, current, new


def _validate_dd(
    db: Database, account: dict, monthly_amount: float | None, payment_day: int | None
) -> None:
    if payment_day is not None and not 1 <= payment_day <= 28:
        raise ToolError("the payment day must be between 1 and 28")
    if monthly_amount is not None:
        recommended = account["recommended_dd"]
        low, high = _money(0.8 * recommended), _money(2 * recommended)
        if monthly_amount < low:
            raise ToolError(
                f"{monthly_amount:.2f} is below the lowest monthly amount allowed for this account "
                f"({low:.2f}, 80% of the recommended {recommended:.2f})"
            )
        if monthly_amount > high:
            raise ToolError(
                f"{monthly_amount:.2f} is more than twice the recommended {recommended:.2f}; "
                "check the amount with the customer"
            )


def _normalise_postcode(postcode: str) -> str:
    m = _POSTCODE.match(postcode.strip().upper())
    if not m:
        raise ToolError(f"{postcode!r} is not a valid UK postcode")
    return f"{m.group(1)} {m.group(2)}"


def _normalise_phone(phone: str) -> str:
    digits = re.sub(r"[\s()-]", "", phone)
    if digits.startswith("+44"):
        digits = "0" + digits[3:]
    if not re.fullmatch(r"0[1237]\d{9}", digits):
        raise ToolError(f"{phone!r} is not a valid UK phone number (11 digits starting with 0)")
    return f"{digits[:5]} {digits[5:]}"


def _account_view(db: Database, account: dict) -> dict:
    customer = db.require("customers", account["customer_id"])
    meters = []
    for m in db.find("meters", account_id=account["account_id"]):
        t = db.require("tariffs", m["tariff_id"])
        meters.append(
            {
                "meter_id": m["meter_id"],
                "fuel": m["fuel"],
                "meter_type": m["meter_type"],
                "smart_comms": m["smart_comms"],
                "units": m["units"],
                "location": m["location"],
                "status": m["status"],
                "tariff_id": t["tariff_id"],
                "tariff_name": t["name"],
                "tariff_type": t["tariff_type"],
                "tariff_start": m["tariff_start"],
                "tariff_end": m["tariff_end"],
            }
        )
    plans = sorted(
        db.find("payment_plans", account_id=account["account_id"]), key=lambda p: p["created_on"]
    )
    return {
        **account,
        "holder": {
            "customer_id": customer["customer_id"],
            "name": f"{customer['first_name']} {customer['last_name']}",
            "date_of_birth": customer["date_of_birth"],
            "priority_services": customer["priority_services"],
            "psr_reason": customer["psr_reason"],
            "authorised_contacts": customer["authorised_contacts"],
        },
        "meters": meters,
        "payment_plans": plans,
    }


# ----- read tools -------------------------------------------------------------------------------


@tool("read")
def find_customer(db: Database, email: str = "", phone: str = "") -> dict:
    """Find a customer by the email address or phone number on file; give one of them.

    Args:
        email: The email address on the customer's record.
        phone: The phone number on the customer's record, such as "07700 900123".
    """
    if bool(email) == bool(phone):
        raise ToolError("give exactly one of email or phone")
    if email:
        matches = db.find("customers", email=email.strip().lower())
    else:
        try:
            number = _normalise_phone(phone)
        except ToolError:
            matches = []
        else:
            matches = db.find("customers", phone=number)
    if not matches:
        raise ToolError("no customer has that " + ("email address" if email else "phone number"))
    return get_customer(db, matches[0]["customer_id"])


@tool("read")
def get_customer(db: Database, customer_id: str) -> dict:
    """Get a customer's record and a summary of their accounts.

    Args:
        customer_id: The customer's id, such as "CU1001".
    """
    customer = db.require("customers", customer_id)
    accounts = [
        {
            "account_id": a["account_id"],
            "address": f"{a['address_line']}, {a['city']} {a['postcode']}",
            "status": a["status"],
        }
        for a in db.find("accounts", customer_id=customer_id)
    ]
    return {**customer, "accounts": accounts}


@tool("read")
def get_account(db: Database, account_id: str) -> dict:
    """Get an account: address, status, balance, direct debit, the holder's identity details,
    authorised contacts, meters with their tariffs, and payment plans.

    Args:
        account_id: The account number, such as "EA20014".
    """
    return _account_view(db, db.require("accounts", account_id))


@tool("read")
def list_bills(db: Database, account_id: str) -> list:
    """List an account's bills, newest first, with their charges per meter.

    Args:
        account_id: The account number.
    """
    db.require("accounts", account_id)
    return sorted(
        db.find("bills", account_id=account_id), key=lambda b: b["period_start"], reverse=True
    )


@tool("read")
def get_meter(db: Database, meter_id: str) -> dict:
    """Get a meter, its tariff and all its readings (newest first).

    Args:
        meter_id: The meter's serial number, such as "E21K04821" or "G4B301922".
    """
    meter = db.require("meters", meter_id)
    last = _last_actual(db, meter_id)
    return {
        **meter,
        "tariff": db.require("tariffs", meter["tariff_id"]),
        "last_actual_reading": last,
        "readings": _readings(db, meter_id),
    }


@tool("read")
def list_tariffs(db: Database, fuel: Literal["electricity", "gas"] | None = None) -> list:
    """List the tariffs open to switching, with rates before VAT and exit fees.

    Args:
        fuel: Only tariffs for this fuel; all fuels when omitted.
    """
    return db.scan("tariffs", lambda t: t["open_to_switch"] and (fuel is None or t["fuel"] == fuel))


@tool("read")
def quote_tariff_switch(db: Database, meter_id: str, new_tariff_id: str) -> dict:
    """Quote a tariff switch for one meter: the exit fee it would cost today, both tariffs' rates,
    estimated annual costs including VAT, and the new tariff's end date. Changes nothing.

    Args:
        meter_id: The meter's serial number.
        new_tariff_id: The tariff to quote, such as "E-FIX12".
    """
    meter, current, new = _check_switch(db, meter_id, new_tariff_id)
    end = _add_months(db.today(), new["term_months"]) if new["tariff_type"] == "fixed" else None
    return {
        "meter_id": meter_id,
        "current_tariff": {
            "tariff_id": current["tariff_id"],
            "name": current["name"],
            "unit_rate": current["unit_rate"],
            "standing_charge": current["standing_charge"],
            "tariff_end": meter["tariff_end"],
            "estimated_annual_cost": _annual_cost(meter, current),
        },
        "new_tariff": {
            "tariff_id": new["tariff_id"],
            "name": new["name"],
            "unit_rate": new["unit_rate"],
            "standing_charge": new["standing_charge"],
            "tariff_end": end.isoformat() if end else None,
            "exit_fee_if_left_early": new["exit_fee"],
            "estimated_annual_cost": _annual_cost(meter, new),
        },
        "exit_fee_today": _exit_fee(db, meter, current),
    }


@tool("read")
def check_outages(db: Database, account_id: str) -> dict:
    """Check for known power cuts, not yet restored, in the postcode district of an account's address.

    Args:
        account_id: The account number.
    """
    account = db.require("accounts", account_id)
    district = _district(account["postcode"])
    outages = db.scan(
        "outages", lambda o: o["postcode_district"] == district and o["status"] != "restored"
    )
    return {"postcode_district": district, "known_outages": outages}


@tool("read")
def list_service_requests(db: Database, account_id: str) -> list:
    """List an account's power-cut reports and engineer visits, newest first.

    Args:
        account_id: The account number.
    """
    db.require("accounts", account_id)
    return sorted(
        db.find("service_requests", account_id=account_id),
        key=lambda r: r["created_at"],
        reverse=True,
    )


# ----- write tools ------------------------------------------------------------------------------


@tool("write")
def submit_meter_reading(db: Database, meter_id: str, reading: int) -> dict:
    """Record a reading the customer took today from a meter.

    Args:
        meter_id: The meter's serial number.
        reading: The reading shown on the meter, whole units (kWh for electricity, cubic metres for gas), ignoring any red digits or decimals.
    """
    meter = db.require("meters", meter_id)
    if meter["status"] != "active":
        raise ToolError(f"meter {meter_id} is not active")
    account = db.require("accounts", meter["account_id"])
    if account["status"] == "closed":
        raise ToolError(f"account {account['account_id']} is closed")
    if not _manually_read(meter):
        raise ToolError(
            f"meter {meter_id} is a smart meter that is sending readings automatically; no manual reading is needed"
        )
    today = db.today().isoformat()
    if any(
        r["read_on"] == today and r["source"] == "customer"
        for r in db.find("readings", meter_id=meter_id)
    ):
        raise ToolError(f"a reading for meter {meter_id} was already taken today")
    last = _last_actual(db, meter_id)
    if last is not None:
        if reading < last["value"]:
            raise ToolError(
                f"{reading} is lower than the last actual reading ({last['value']} on {last['read_on']}); "
                "ask the customer to check the reading"
            )
        days = max((db.today() - date.fromisoformat(last["read_on"])).days, 1)
        limit = MAX_DAILY_USE[meter["units"]] * days
        if reading - last["value"] > limit:
            raise ToolError(
                f"{reading} would mean {reading - last['value']} {meter['units']} used since {last['read_on']}, "
                "far more than is plausible; ask the customer to check the reading"
            )
    record = db.insert(
        "readings",
        {
            "reading_id": db.new_id("readings", "RD", width=6),
            "meter_id": meter_id,
            "read_on": today,
            "value": reading,
            "source": "customer",
        },
    )
    used = None if last is None else reading - last["value"]
    return {**record, "units": meter["units"], "used_since_last_actual": used}


@tool("write")
def switch_tariff(db: Database, meter_id: str, new_tariff_id: str) -> dict:
    """Move one meter to another tariff from today, charging the exit fee of the current
    tariff if one applies.

    Args:
        meter_id: The meter's serial number.
        new_tariff_id: The tariff to switch to, such as "E-FIX12".
    """
    meter, current, new = _check_switch(db, meter_id, new_tariff_id)
    fee = _exit_fee(db, meter, current)
    today = db.today()
    end = _add_months(today, new["term_months"]) if new["tariff_type"] == "fixed" else None
    updated = db.update(
        "meters",
        meter_id,
        tariff_id=new_tariff_id,
        tariff_start=today.isoformat(),
        tariff_end=end.isoformat() if end else None,
    )
    account_id = meter["account_id"]
    if fee:
        db.insert(
            "adjustments",
            {
                "adjustment_id": db.new_id("adjustments", "ADJ", width=5),
                "account_id": account_id,
                "created_on": today.isoformat(),
                "kind": "exit_fee",
                "amount": fee,
                "meter_id": meter_id,
                "note": f"Exit fee for leaving {current['name']} early",
            },
        )
        account = db.require("accounts", account_id)
        db.update("accounts", account_id, balance=_money(account["balance"] + fee))
    account = db.update("accounts", account_id, recommended_dd=_recommended_dd(db, account_id))
    return {
        "meter": updated,
        "new_tariff": new["name"],
        "exit_fee_charged": fee,
        "account_balance": account["balance"],
        "recommended_dd": account["recommended_dd"],
    }


@tool("write")
def set_up_direct_debit(
    db: Database,
    account_id: str,
    sort_code: str,
    bank_account_number: str,
    monthly_amount: float,
    payment_day: int,
) -> dict:
    """Set up a monthly direct debit on an account that pays on receipt of bills.

    Args:
        account_id: The account number.
        sort_code: The bank's sort code, six digits such as "20-45-12".
        bank_account_number: The bank account number, eight digits.
        monthly_amount: The fixed amount to collect each month, in pounds.
        payment_day: The day of the month to collect it, 1 to 28.
    """
    account = _active_account(db, account_id)
    if account["payment_method"] == "direct_debit":
        raise ToolError(f"account {account_id} already pays by direct debit; change it instead")
    digits = re.sub(r"[\s-]", "", sort_code)
    if not re.fullmatch(r"\d{6}", digits):
        raise ToolError(f"{sort_code!r} is not a sort code (six digits)")
    number = re.sub(r"\s", "", bank_account_number)
    if not re.fullmatch(r"\d{8}", number):
        raise ToolError("the bank account number must be eight digits")
    _validate_dd(db, account, monthly_amount, payment_day)
    return db.update(
        "accounts",
        account_id,
        payment_method="direct_debit",
        dd_monthly_amount=_money(monthly_amount),
        dd_payment_day=payment_day,
        dd_sort_code=f"{digits[:2]}-{digits[2:4]}-{digits[4:]}",
        dd_account_last4=number[-4:],
    )


@tool("write")
def change_direct_debit(
    db: Database,
    account_id: str,
    monthly_amount: float | None = None,
    payment_day: int | None = None,
) -> dict:
    """Change the monthly amount and/or the payment day of an existing direct debit.

    Args:
        account_id: The account number.
        monthly_amount: The new monthly amount in pounds; unchanged when omitted.
        payment_day: The new day of the month, 1 to 28; unchanged when omitted.
    """
    account = _active_account(db, account_id)
    if account["payment_method"] != "direct_debit":
        raise ToolError(f"account {account_id} has no direct debit to change")
    if monthly_amount is None and payment_day is None:
        raise ToolError("give a new monthly amount, a new payment day, or both")
    _validate_dd(db, account, monthly_amount, payment_day)
    changes: dict = {}
    if monthly_amount is not None:
        changes["dd_monthly_amount"] = _money(monthly_amount)
    if payment_day is not None:
        changes["dd_payment_day"] = payment_day
    return db.update("accounts", account_id, **changes)


@tool("write")
def create_payment_plan(db: Database, account_id: str, instalments: int) -> dict:
    """Spread an account's whole outstanding balance over monthly instalments, starting on the
    first day of next month. The bills it covers are marked as in the plan.

    Args:
        account_id: The account number.
        instalments: How many monthly instalments, 2 to 12.
    """
    account = _active_account(db, account_id)
    balance = account["balance"]
    if balance < MIN_PLAN_BALANCE:
        raise ToolError(
            f"the balance is {balance:.2f}; a payment plan needs at least {MIN_PLAN_BALANCE:.2f} owed"
        )
    if any(p["status"] == "active" for p in db.find("payment_plans", account_id=account_id)):
        raise ToolError(f"account {account_id} already has an active payment plan")
    if not 2 <= instalments <= 12:
        raise ToolError("a payment plan has 2 to 12 monthly instalments")
    amount = _money(balance / instalments)
    if amount < MIN_INSTALMENT:
        raise ToolError(
            f"instalments of {amount:.2f} would be below the minimum of {MIN_INSTALMENT:.2f}"
        )
    final = _money(balance - amount * (instalments - 1))
    today = db.today()
    first = date(today.year + today.month // 12, today.month % 12 + 1, 1)
    plan = db.insert(
        "payment_plans",
        {
            "plan_id": db.new_id("payment_plans", "PP", width=4),
            "account_id": account_id,
            "created_on": today.isoformat(),
            "total": _money(balance),
            "instalments": instalments,
            "instalment_amount": amount,
            "final_instalment_amount": final,
            "first_payment_date": first.isoformat(),
            "instalments_paid": 0,
            "status": "active",
            "ended_on": None,
        },
    )
    for bill in db.find("bills", account_id=account_id):
        if bill["status"] in ("unpaid", "overdue"):
            db.update("bills", bill["bill_id"], status="in_plan")
    return plan


@tool("write")
def schedule_move_out(
    db: Database, account_id: str, move_out_date: str, forwarding_postcode: str
) -> dict:
    """Record that the customer is leaving the address: the account is closed on the move-out
    date and the final bill goes to the forwarding address.

    Args:
        account_id: The account number.
        move_out_date: The day the customer leaves, YYYY-MM-DD.
        forwarding_postcode: The postcode of the customer's new address, for the final bill.
    """
    _active_account(db, account_id)
    when = _parse_date(move_out_date, "move-out date")
    today = db.today()
    if when < today - timedelta(days=MOVE_OUT_BACKDATE_DAYS):
        raise ToolError(f"a move-out date can be at most {MOVE_OUT_BACKDATE_DAYS} days in the past")
    if when > today + timedelta(days=MOVE_OUT_AHEAD_DAYS):
        raise ToolError(f"a move-out date can be at most {MOVE_OUT_AHEAD_DAYS} days ahead")
    postcode = _normalise_postcode(forwarding_postcode)
    if when <= today:
        missing = [
            m["meter_id"]
            for m in db.find("meters", account_id=account_id)
            if m["status"] == "active"
            and _manually_read(m)
            and not any(
                r["read_on"] == today.isoformat() and r["source"] == "customer"
                for r in db.find("readings", meter_id=m["meter_id"])
            )
        ]
        if missing:
            raise ToolError(
                "a final reading taken today is needed first for meter(s) " + ", ".join(missing)
            )
    return db.update(
        "accounts",
        account_id,
        status="moving_out",
        move_out_date=when.isoformat(),
        forwarding_postcode=postcode,
    )


@tool("write")
def report_power_cut(
    db: Database, account_id: str, priority: Literal["standard", "urgent"]
) -> dict:
    """Report a power cut at an account's address to the network operator.

    Args:
        account_id: The account number.
        priority: "urgent" or "standard", as the policy decides.
    """
    account = _active_account(db, account_id)
    if not any(
        m["fuel"] == "electricity" and m["status"] == "active"
        for m in db.find("meters", account_id=account_id)
    ):
        raise ToolError(f"account {account_id} has no electricity supply with us")
    district = _district(account["postcode"])
    known = db.scan(
        "outages", lambda o: o["postcode_district"] == district and o["status"] != "restored"
    )
    if known:
        raise ToolError(
            f"known outage {known[0]['outage_id']} already covers {district}; no separate report is needed"
        )
    if any(
        r["kind"] == "power_cut" and r["status"] == "open"
        for r in db.find("service_requests", account_id=account_id)
    ):
        raise ToolError(f"account {account_id} already has an open power-cut report")
    return db.insert(
        "service_requests",
        {
            "request_id": db.new_id("service_requests", "SR", width=5),
            "account_id": account_id,
            "meter_id": None,
            "kind": "power_cut",
            "status": "open",
            "priority": priority,
            "created_at": db.now().isoformat(),
            "visit_date": None,
            "visit_slot": None,
            "outage_id": None,
        },
    )


@tool("write")
def book_engineer_visit(
    db: Database,
    meter_id: str,
    visit_date: str,
    slot: Literal["am", "pm"],
    reason: Literal["meter_fault", "smart_meter_install", "meter_exchange"],
) -> dict:
    """Book an engineer to visit a meter.

    Args:
        meter_id: The meter's serial number.
        visit_date: The day of the visit, YYYY-MM-DD: a weekday 2 to 30 days from today.
        slot: "am" (8:00 to 12:00) or "pm" (12:00 to 18:00).
        reason: meter_fault (a faulty meter or a smart meter that stopped sending readings), smart_meter_install (replace a standard meter by a smart one) or meter_exchange (replace a meter for another reason).
    """
    meter = db.require("meters", meter_id)
    if meter["status"] != "active":
        raise ToolError(f"meter {meter_id} is not active")
    account = _active_account(db, meter["account_id"])
    when = _parse_date(visit_date, "visit date")
    today = db.today()
    if when.weekday() >= 5:
        raise ToolError(
            f"{visit_date} is a {when.strftime('%A')}; engineers visit on weekdays only"
        )
    if when < today + timedelta(days=VISIT_MIN_NOTICE_DAYS):
        raise ToolError(
            f"the earliest visit date is {(today + timedelta(days=VISIT_MIN_NOTICE_DAYS)).isoformat()}"
        )
    if when > today + timedelta(days=VISIT_MAX_AHEAD_DAYS):
        raise ToolError(f"visits can be booked at most {VISIT_MAX_AHEAD_DAYS} days ahead")
    if reason == "smart_meter_install" and meter["meter_type"] == "smart":
        raise ToolError(f"meter {meter_id} is already a smart meter")
    for r in db.find("service_requests", account_id=account["account_id"]):
        if r["meter_id"] == meter_id and r["status"] in ("open", "scheduled"):
            raise ToolError(
                f"meter {meter_id} already has a visit booked ({r['request_id']} on {r['visit_date']})"
            )
    return db.insert(
        "service_requests",
        {
            "request_id": db.new_id("service_requests", "SR", width=5),
            "account_id": account["account_id"],
            "meter_id": meter_id,
            "kind": reason,
            "status": "scheduled",
            "priority": "standard",
            "created_at": db.now().isoformat(),
            "visit_date": when.isoformat(),
            "visit_slot": slot,
            "outage_id": None,
        },
    )


@tool("write")
def apply_account_credit(db: Database, account_id: str, amount: float, request_id: str) -> dict:
    """Credit an account as goodwill for a service failure recorded as a service request.

    Args:
        account_id: The account number.
        amount: The credit in pounds, at most 30.00.
        request_id: The service request the credit is for, such as "SR70012".
    """
    account = db.require("accounts", account_id)
    if account["status"] == "closed":
        raise ToolError(f"account {account_id} is closed")
    if amount <= 0:
        raise ToolError("the credit must be a positive amount")
    if amount > MAX_GOODWILL_CREDIT:
        raise ToolError(f"a goodwill credit can be at most {MAX_GOODWILL_CREDIT:.2f}")
    request = db.require("service_requests", request_id)
    if request["account_id"] != account_id:
        raise ToolError(f"service request {request_id} is not on account {account_id}")
    if db.find("adjustments", request_id=request_id):
        raise ToolError(f"a credit has already been given for {request_id}")
    credit = db.insert(
        "adjustments",
        {
            "adjustment_id": db.new_id("adjustments", "ADJ", width=5),
            "account_id": account_id,
            "created_on": db.today().isoformat(),
            "kind": "goodwill_credit",
            "amount": -_money(amount),
            "request_id": request_id,
            "meter_id": None,
            "note": f"Goodwill credit for {request_id}",
        },
    )
    updated = db.update("accounts", account_id, balance=_money(account["balance"] - amount))
    return {**credit, "account_balance": updated["balance"]}


@tool("write")
def update_contact_details(
    db: Database, customer_id: str, email: str | None = None, phone: str | None = None
) -> dict:
    """Change a customer's email address and/or phone number.

    Args:
        customer_id: The customer's id, such as "CU1001".
        email: The new email address; unchanged when omitted.
        phone: The new phone number; unchanged when omitted.
    """
    db.require("customers", customer_id)
    if email is None and phone is None:
        raise ToolError("give a new email, a new phone number, or both")
    changes: dict = {}
    if email is not None:
        email = email.strip().lower()
        if not _EMAIL.match(email):
            raise ToolError(f"{email!r} is not a valid email address")
        if any(c["customer_id"] != customer_id for c in db.find("customers", email=email)):
            raise ToolError("that email address is already used by another customer")
        changes["email"] = email
    if phone is not None:
        changes["phone"] = _normalise_phone(phone)
    return db.update("customers", customer_id, **changes)
