"""A scripted codegen model for synthesis tests: a small bike-rental domain, stage by stage.

Each helper returns the replies one stage's calls get, in order; tests queue them on the
scripted server under the synthesis id (the team's calls) and under the task synthesis's
episodes (``synthesis/<domain id>/walk-<i>``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from maestro.agents.scripted_server import Reply, ScriptedServer

BLUEPRINT: dict[str, Any] = {
    "domain_id": "bike_rental",
    "name": "Bike rental",
    "description": "Customers rent bikes by the day and return or cancel rentals.",
    "entities": [
        {
            "name": "Customer",
            "table": "customers",
            "key": "customer_id",
            "prefix": "C",
            "fields": {"name": "str", "email": "str"},
        },
        {
            "name": "Rental",
            "table": "rentals",
            "key": "rental_id",
            "prefix": "R",
            "fields": {
                "customer_id": "ref:customers",
                "status": "enum:active|returned|cancelled",
                "days": "int",
            },
        },
    ],
    "operations": [
        {
            "name": "get_rental",
            "kind": "read",
            "table": "rentals",
            "description": "Look up a rental.",
            "params": {"rental_id": "str"},
        },
        {
            "name": "return_rental",
            "kind": "write",
            "table": "rentals",
            "description": "Mark an active rental as returned.",
            "params": {"rental_id": "str"},
            "requires": {"status": ["active"]},
            "sets": {"status": "returned"},
        },
        {
            "name": "cancel_rental",
            "kind": "write",
            "table": "rentals",
            "description": "Cancel an active rental.",
            "params": {"rental_id": "str"},
            "requires": {"status": ["active"]},
            "sets": {"status": "cancelled"},
        },
    ],
    "rules": ["Only active rentals can be returned.", "Only active rentals can be cancelled."],
}

RECORDS = {
    "customers": [
        {"customer_id": "C1", "name": "Ada Byron", "email": "ada@example.com"},
        {"customer_id": "C2", "name": "Bo Chen", "email": "bo@example.com"},
    ],
    "rentals": [
        {"rental_id": "R1", "customer_id": "C1", "status": "active", "days": 3},
        # dropped: days is not an int
        {"rental_id": "R2", "customer_id": "C2", "status": "returned", "days": "two"},
    ],
}

GET = """```python
@tool("read")
def get_rental(db: Database, rental_id: str) -> dict:
    return db.require("rentals", rental_id)
```"""

RETURN = """Here is the function:
```python
@tool("write")
def return_rental(db: Database, rental_id: str) -> dict:
    rental = db.require("rentals", rental_id)
    if rental["status"] != "active":
        raise ToolError(f"rental {rental_id} is {rental['status']}, not active")
    return db.update("rentals", rental_id, status="returned")
```"""

CANCEL = '''```python
def cancel_rental(db: Database, rental_id: str) -> dict:
    """Cancel."""
    rental = db.require("rentals", rental_id)
    if rental["status"] != "active":
        raise ToolError("only active rentals can be cancelled")
    return db.update("rentals", rental_id, status="cancelled")
```'''

#: The bug: no precondition check, and the wrong status.
CANCEL_BUGGY = """```python
@tool("write")
def cancel_rental(db: Database, rental_id: str) -> dict:
    return db.update("rentals", rental_id, status="returned")
```"""

POLICY = """```markdown
# Bike rental policy
You help customers with their bike rentals.
1. Only active rentals can be returned.
2. Only active rentals can be cancelled.
```"""

OK = '{"verdict": "ok"}'


def domain_id(synthesis_id: str) -> str:
    """The id the team gives the scripted domain in a synthesis (unique per synthesis)."""
    return f"bike_rental_{hashlib.sha256(synthesis_id.encode()).hexdigest()[:6]}"


def scenario(i: int) -> str:
    """A task scenario whose known_info states every key the customer could be asked for."""
    keys = " ".join([f"C{1000 + n}" for n in range(1, 7)] + [f"R{1000 + n}" for n in range(1, 7)])
    return json.dumps(
        {
            "persona": "A calm customer.",
            "reason_for_call": f"You want help with a rental (scenario {i}).",
            "known_info": f"Your ids: C1 C2 R1 R2 {keys}.",
            "unknown_info": None,
            "task_instructions": "Answer the agent's questions.",
            "nl_assertions": ["The agent confirms the change."],
        }
    )


def team_replies(*, cancel: list[str] | None = None, review: str = OK) -> list[str]:
    """The team's replies for a whole synthesis, in call order."""
    return [
        json.dumps(BLUEPRINT),
        json.dumps(RECORDS),
        GET,
        RETURN,
        *(cancel or [CANCEL]),
        POLICY,
        review,
    ]


def queue(server: ScriptedServer, episode: str, replies: list[str]) -> None:
    server.script(episode, "codegen", [Reply(content=r) for r in replies])


def queue_tasks(server: ScriptedServer, synthesis_id: str, n: int) -> None:
    for i in range(n):
        queue(server, f"synthesis/{domain_id(synthesis_id)}/walk-{i}", [scenario(i)])
