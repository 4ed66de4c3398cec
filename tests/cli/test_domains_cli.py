"""The ``maestro domains`` commands, run as the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

MAESTRO = str(Path(sys.executable).with_name("maestro"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([MAESTRO, *args], capture_output=True, text=True, timeout=300, env=env)


def test_validate_all_prints_the_three_numbers_last() -> None:
    proc = run("domains", "validate", "--all", "--json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["domains"] == 3
    assert result["tasks"] == 90
    assert result["gold_pass"] == result["null_fail"] == result["perturbed_fail"] == 90
    assert result["problems"] == []
    assert set(result["per_domain"]) == {"energy", "hotel", "vetclinic"}
    # What each domain's tasks cover: the tools in some gold, the kinds of task.
    hotel = result["per_domain"]["hotel"]["coverage"]
    assert hotel["tools"] == 22 and hotel["tools_in_gold"] == 20
    assert hotel["tools_never_in_gold"] == ["list_hotels", "remove_add_on"]
    assert sum(hotel["task_kinds"].values()) == 30 and hotel["task_kinds"]["refusal"] == 5
    assert sum(hotel["refusals_by_rule"].values()) == 5


def test_validate_a_package_folder(tmp_path: Path) -> None:
    proc = run("domains", "validate", str(Path(__file__).parents[1] / "fixtures" / "toy"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "toy: 3 tasks; gold scores 1: 3/3" in proc.stdout


def test_validate_reports_a_broken_package_and_exits_one(tmp_path: Path) -> None:
    pkg = tmp_path / "toy"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "toy", pkg)
    db = json.loads((pkg / "db.json").read_text())
    db["orders"]["O1"]["customer_id"] = "C404"
    (pkg / "db.json").write_text(json.dumps(db))
    with (pkg / "tasks.jsonl").open("a") as f:
        f.write("{broken\n")
    proc = run("domains", "validate", str(pkg), "--json")
    assert proc.returncode == 1
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (
        "toy: db.json:orders/O1.customer_id: refers to missing customers 'C404'"
        in result["problems"]
    )
    assert any(p.startswith("toy: tasks.jsonl:line 4: invalid JSON") for p in result["problems"])


def test_validate_needs_one_target() -> None:
    proc = run("domains", "validate")
    assert proc.returncode == 2
    assert "give one ID or --all" in proc.stderr
    proc = run("domains", "validate", "no_such_domain")
    assert proc.returncode == 2
    assert "no library domain 'no_such_domain'" in proc.stderr


def test_list_and_show() -> None:
    proc = run("domains", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["id"]: r for r in json.loads(proc.stdout)}
    assert set(rows) == {"energy", "hotel", "vetclinic"}
    assert all(r["tasks"] == 30 and r["records"] >= 300 for r in rows.values())
    proc = run("domains", "show", "hotel", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["id"] == "hotel" and info["policy_rules"] >= 8
    assert {t["kind"] for t in info["tool_list"]} == {"read", "write"}
    proc = run("domains", "show", "hotel")
    assert proc.returncode == 0 and "hotel" in proc.stdout


def test_problems_are_printed_literally_not_as_rich_markup(tmp_path: Path) -> None:
    """Rich read ``:id:`` as an emoji code and ``[a-z]`` as a style tag: the id-pattern error
    printed as ``domain.json🆔 ... '^{1,39}$'``."""
    pkg = tmp_path / "toy"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "toy", pkg)
    manifest = json.loads((pkg / "domain.json").read_text())
    manifest["id"] = "Bad Id [red]x[/red] :smile:"
    manifest["name"] = "[bold]Shop[/bold] :id:"
    (pkg / "domain.json").write_text(json.dumps(manifest))
    proc = run("domains", "validate", str(pkg))
    assert proc.returncode == 1
    assert "domain.json:id: String should match pattern '^[a-z][a-z0-9_]{1,39}$'" in proc.stdout
    assert "🆔" not in proc.stdout and "😄" not in proc.stdout
    proc = run("domains", "validate", str(Path(__file__).parents[1] / "fixtures" / "toy"))
    assert "toy: 3 tasks" in proc.stdout and "[bold]" not in proc.stdout
