"""The checks that replay package code end in time as a whole, not only call by call: a
package whose tools each ran just under their deadline stalled ``domains validate`` for about
27 s a gold action (six replays a task, up to 1,000 actions; the fourth red team's case 09)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from maestro.domains.sandbox import SandboxLimits
from maestro.scoring import check_domain
from maestro.scoring.conformance import check_task
from tests.domains.sandbox_support import TOY_TOOLS, make_package, tool_source, unchecked

# The call's own deadline (20 s) is far beyond the checks' budgets below.
SLOW_LIMITS = SandboxLimits(call_timeout_s=20, cpu_s=60, kill_grace_s=0.5, memory_mb=1024)
SPIN = tool_source("spin", "while True:\n    pass")


def slow_package(tmp_path: Path, tasks: int) -> Path:
    root = make_package(tmp_path, "toy", TOY_TOOLS + SPIN)
    first = json.loads((root / "tasks.jsonl").read_text().splitlines()[0])
    lines = []
    for i in range(tasks):
        task = {**first, "id": f"toy_spin_{i}"}
        task["evaluation_criteria"] = {
            "actions": [
                {"action_id": f"a{j}", "name": "spin", "arguments": {"target": str(j)}}
                for j in range(3)
            ],
            "reward_basis": ["ACTION"],
        }
        lines.append(json.dumps(task))
    (root / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_a_tasks_tool_calls_end_within_its_budget_and_it_fails_saying_so(tmp_path: Path) -> None:
    with unchecked(slow_package(tmp_path, 1), SLOW_LIMITS) as domain:
        started = time.monotonic()
        check = check_task(domain, domain.tasks[0], deadline_s=2.0)
        elapsed = time.monotonic() - started
    assert elapsed < 15, f"{elapsed:.1f} s"
    assert not check.gold_pass
    assert any("its checks ran out of time" in p and "2 s in all" in p for p in check.problems)
    assert any(
        "not run: the check's 2 s for all its tool calls ran out" in p for p in check.problems
    )


def test_a_domains_checks_end_within_its_budget_and_the_rest_are_reported(tmp_path: Path) -> None:
    with unchecked(slow_package(tmp_path, 4), SLOW_LIMITS) as domain:
        started = time.monotonic()
        check = check_domain(domain, deadline_s=2.0, task_deadline_s=60)
        elapsed = time.monotonic() - started
    assert elapsed < 20, f"{elapsed:.1f} s"
    summary = check.summary()
    assert summary["tasks"] == 4 and summary["gold_pass"] == 0
    assert any("3 of 4 task(s) not checked, from toy_spin_1 on" in p for p in summary["problems"])


def test_a_budget_leaves_quick_tasks_alone(tmp_path: Path) -> None:
    root = make_package(tmp_path, "toy", TOY_TOOLS)
    with unchecked(root) as domain:
        check = check_domain(domain, deadline_s=120, task_deadline_s=60)
    assert check.summary()["gold_pass"] == len(domain.tasks) > 0
