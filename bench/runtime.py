"""Session start and tool-call cost against database size (1k, 10k, 100k records).

Session start must not grow with the database (copy-on-write); a read tool call through the
full runtime path (argument validation, watchdog deadline, transaction, result rendering)
should cost tens of microseconds. Prints a JSON object last.

    .venv/bin/python bench/runtime.py [--sizes 1000 10000 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Annotated, ClassVar

from maestro.domains import State, TableSpec, Toolkit
from maestro.domains.runtime import spec_from_function
from maestro.domains.sdk import Database, Record, Ref, ToolError, tool


class Customer(Record):
    key_field: ClassVar[str] = "customer_id"
    customer_id: str
    name: str
    email: str
    tier: str


class Order(Record):
    key_field: ClassVar[str] = "order_id"
    order_id: str
    customer_id: Annotated[str, Ref("customers")]
    status: str
    total: float


@tool("read")
def get_customer(db: Database, customer_id: str) -> dict:
    """Look up a customer.

    Args:
        customer_id: The customer's id.
    """
    return db.require("customers", customer_id)


@tool("read")
def list_orders(db: Database, customer_id: str) -> list:
    """A customer's orders.

    Args:
        customer_id: The customer's id.
    """
    return db.find("orders", customer_id=customer_id)


@tool("write")
def cancel_order(db: Database, order_id: str) -> dict:
    """Cancel a pending order.

    Args:
        order_id: The order's id.
    """
    order = db.require("orders", order_id)
    if order["status"] != "pending":
        raise ToolError("not pending")
    return db.update("orders", order_id, status="cancelled")


def build_state(records: int) -> State:
    """Half customers, half orders (two orders per customer... on average)."""
    n_customers = records // 2
    customers = {
        f"C{i:06d}": {
            "customer_id": f"C{i:06d}",
            "name": f"Customer {i}",
            "email": f"c{i}@example.com",
            "tier": "gold" if i % 7 == 0 else "basic",
        }
        for i in range(n_customers)
    }
    orders = {
        f"O{i:06d}": {
            "order_id": f"O{i:06d}",
            "customer_id": f"C{(i * 7919) % n_customers:06d}",
            "status": "pending",
            "total": float(i % 300),
        }
        for i in range(records - n_customers)
    }
    specs = {
        "customers": TableSpec("customers", Customer, "customer_id"),
        "orders": TableSpec("orders", Order, "order_id"),
    }
    return State({"customers": customers, "orders": orders}, specs)


def per_op_us(fn: Callable[[int], object], n: int, repeat: int) -> float:
    """Median over ``repeat`` runs of the mean cost of one call, in microseconds."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


def measure(kit: Toolkit, size: int, calls: int, repeat: int) -> dict[str, float]:
    """Every figure for one database size."""
    state = build_state(size)
    state.state_hash()  # the base hash and index are computed once per state, not per session
    state.index("orders", "customer_id")
    n_cust, n_orders = state.count("customers"), state.count("orders")
    ids = [f"C{(i * 31) % n_cust:06d}" for i in range(calls)]
    order_ids = [f"O{(i * 17) % n_orders:06d}" for i in range(calls)]
    session = state.session()

    def write(i: int) -> None:
        kit.call(state.session(), "cancel_order", {"order_id": order_ids[i]})

    written = state.session()
    for oid in order_ids[:10]:
        kit.call(written, "cancel_order", {"order_id": oid})
    fig = {
        "session_start_us": per_op_us(lambda i: state.session(), calls, repeat),
        "read_call_us": per_op_us(
            lambda i: kit.call(session, "get_customer", {"customer_id": ids[i]}),
            calls,
            repeat,
        ),
        "find_call_us": per_op_us(
            lambda i: kit.call(session, "list_orders", {"customer_id": ids[i]}),
            calls,
            repeat,
        ),
        "raw_get_us": per_op_us(lambda i: session.get("customers", ids[i]), calls, repeat),
        "state_hash_after_write_us": per_op_us(lambda i: written.state_hash(), 1_000, repeat),
    }
    # A write call on a fresh session, less the session start measured above.
    fig["write_call_us"] = per_op_us(write, calls, repeat) - fig["session_start_us"]
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5_000)
    args = parser.parse_args()

    kit = Toolkit([spec_from_function(f) for f in (get_customer, list_orders, cancel_order)])
    metrics = (
        "session_start_us",
        "read_call_us",
        "find_call_us",
        "write_call_us",
        "state_hash_after_write_us",
        "raw_get_us",
    )
    figures: dict[str, dict[str, float]] = {m: {} for m in metrics}
    for size in args.sizes:
        fig = measure(kit, size, args.calls, args.repeat)
        key = str(size)
        for m, v in fig.items():
            figures[m][key] = round(v, 2)
        print(
            f"{size:>7} records: session start {fig['session_start_us']:.2f} us, read call {fig['read_call_us']:.1f} us, "
            f"find call {fig['find_call_us']:.1f} us, write call {fig['write_call_us']:.1f} us, "
            f"hash after 10 writes {fig['state_hash_after_write_us']:.1f} us",
            flush=True,
        )
    starts = figures["session_start_us"]
    first, last = str(args.sizes[0]), str(args.sizes[-1])
    result: dict[str, object] = dict(figures)
    result["session_start_ratio_largest_to_smallest"] = round(starts[last] / starts[first], 2)
    result["read_call_ratio_largest_to_smallest"] = round(
        figures["read_call_us"][last] / figures["read_call_us"][first], 2
    )
    result["machine"] = {"python": platform.python_version(), "cpu_count": os.cpu_count()}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
