"""Record an outside benchmark's imported domains and tasks in the lake, as a task set.

A plain composition (no logic of its own): the nightly's ``ingest`` writes the domains and
tasks; the task set names every imported task and the table versions it was built from, so
``maestro evaluate --task-set`` runs a model on it like on any curated set.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from maestro.domains.loader import load_domain
from maestro.domains.package import Domain
from maestro.flows.stages import ingest
from maestro.scoring.external import YardstickRow, external_checker, yardstick_agreement
from maestro.storage import Lake
from maestro.storage.records import task_set_row


def record_import(
    lake: Lake, run_id: str, domains: Sequence[Domain], task_set_id: str, name: str
) -> dict[str, Any]:
    """Write the domains, their tasks, and a task set of all of them; what was written."""
    counts = ingest(lake, run_id, domains)
    tasks = [(d.id, t.id) for d in domains for t in d.tasks]
    built_from = lake.versions(["domains", "tasks"])
    row = task_set_row(task_set_id, name, tasks, [(v["table"], v["version"]) for v in built_from])
    lake.write(row.TABLE, [row], run_id)
    return {**counts, "task_set_id": task_set_id, "built_from": built_from}


def yardsticks_both_ways(packages: Sequence[Path]) -> list[YardstickRow]:
    """Every task's gold, do-nothing and perturbed conversations, scored by maestro's card and
    by the benchmark's own checker (the agreement table of an import)."""
    rows: list[YardstickRow] = []
    for path in packages:
        domain = load_domain(path, check_gold=False)
        checker = external_checker(domain)
        try:
            if checker is not None:
                rows += yardstick_agreement(domain, checker)
        finally:
            if checker is not None:
                checker.close()
            domain.close()
    return rows
