"""``maestro domains``: list, show and validate domain packages."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from maestro.cli.inputs import seconds
from maestro.cli.output import console, echo, styled
from maestro.domains import (
    Domain,
    DomainLoadError,
    Problem,
    domain_path,
    inspect_package,
    library_ids,
    library_path,
    load_domain,
)
from maestro.scoring import DomainCheck, check_domain
from maestro.scoring.conformance import DOMAIN_CHECK_S, TASK_CHECK_S

app = typer.Typer(help="List, show and validate domain packages.", no_args_is_help=True)


def resolve(target: str) -> Path:
    """A library domain id, or a package folder written as a path (``./hotel``): a bare name
    is never a folder, so the folder a command runs from cannot change what it means."""
    try:
        return domain_path(target)
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0]), param_hint="ID") from None


def load_or_exit(target: str) -> Domain:
    """The domain named by an id or folder, without gold replay; its problems and exit 1 if broken."""
    try:
        return load_domain(resolve(target), check_gold=False)
    except DomainLoadError as exc:
        echo(str(exc), err=True)
        raise typer.Exit(1) from None


def _console() -> Console:
    return console()


def _overview(domain: Domain) -> dict[str, Any]:
    kinds = Counter(s.kind for s in domain.toolkit.specs.values())
    return {
        "id": domain.id,
        "name": domain.manifest.name,
        "version": domain.manifest.version,
        "industry": domain.manifest.industry,
        "tools": len(domain.toolkit.specs),
        "write_tools": kinds.get("write", 0),
        "records": domain.initial.count(),
        "tasks": len(domain.tasks),
    }


@app.command("list")
def list_domains(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The library's domains."""
    rows = []
    for domain_id in library_ids():
        try:
            rows.append(_overview(load_domain(library_path(domain_id), check_gold=False)))
        except DomainLoadError as exc:
            rows.append(
                {
                    "id": domain_id,
                    "error": f"{len(exc.problems)} problem(s); run maestro domains validate {domain_id}",
                }
            )
    if as_json:
        echo(json.dumps(rows, indent=2))
        return
    table = Table("id", "name", "version", "industry", "tools (write)", "records", "tasks")
    for r in rows:
        if "error" in r:
            table.add_row(r["id"], styled((r["error"], "red")), "", "", "", "", "")
        else:
            table.add_row(
                r["id"],
                r["name"],
                r["version"],
                r["industry"] or "",
                f"{r['tools']} ({r['write_tools']})",
                str(r["records"]),
                str(r["tasks"]),
            )
    _console().print(table)


def _policy_rules(policy: str) -> int:
    return len(re.findall(r"^[ \t]*\d+\.\s", policy, flags=re.MULTILINE))


@app.command("show")
def show(
    domain_id: str = typer.Argument(
        ..., metavar="ID", help="Library id, or a package folder as a path (./pkg)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """A domain's manifest, tables, tools, policy and tasks."""
    domain = load_or_exit(domain_id)
    info = {
        **_overview(domain),
        "description": domain.manifest.description,
        "clock": domain.manifest.clock.isoformat() if domain.manifest.clock else None,
        "tables": {t: domain.initial.count(t) for t in domain.initial.table_names},
        "tool_list": [
            {"name": s.name, "kind": s.kind, "description": s.description}
            for s in domain.toolkit.specs.values()
        ],
        "policy_rules": _policy_rules(domain.policy),
        "task_categories": dict(Counter(t.category or "uncategorised" for t in domain.tasks)),
    }
    if as_json:
        echo(json.dumps(info, indent=2))
        return
    con = _console()
    con.print(
        styled(
            (domain.manifest.name, "bold"),
            f" ({domain.id} {domain.manifest.version}) — {domain.manifest.industry or ''}",
        )
    )
    con.print(domain.manifest.description)
    con.print(
        f"clock: {info['clock']}   policy rules: {info['policy_rules']}   tasks: {info['task_categories']}"
    )
    tables = Table("table", "records")
    for name, n in info["tables"].items():
        tables.add_row(name, str(n))
    con.print(tables)
    tools = Table("tool", "kind", "description")
    for t in info["tool_list"]:
        tools.add_row(t["name"], t["kind"], t["description"])
    con.print(tools)


def validate_targets(
    targets: list[Path],
    *,
    deadline_s: float = DOMAIN_CHECK_S,
    task_deadline_s: float = TASK_CHECK_S,
) -> tuple[list[DomainCheck], dict[str, Any]]:
    """Load and check each package; the totals as ``maestro domains validate --json`` prints them.
    Each domain's tool calls end within ``deadline_s`` in all, each task's within
    ``task_deadline_s``."""
    checks = []
    for path in targets:
        domain, problems = inspect_package(path)
        if domain is None:
            check = DomainCheck(
                path.name, problems=problems or [Problem(str(path), "", "cannot be loaded")]
            )
        else:
            check = check_domain(
                domain, problems, deadline_s=deadline_s, task_deadline_s=task_deadline_s
            )
        checks.append(check)
    summaries = [c.summary() for c in checks]
    totals: dict[str, Any] = {
        "domains": len(checks),
        "tasks": sum(s["tasks"] for s in summaries),
        "gold_pass": sum(s["gold_pass"] for s in summaries),
        "paraphrased_pass": sum(s["paraphrased_pass"] for s in summaries),
        "null_fail": sum(s["null_fail"] for s in summaries),
        "perturbed_fail": sum(s["perturbed_fail"] for s in summaries),
        "nl_not_judged": sum(s["nl_not_judged"] for s in summaries),
        "laws": sum(s["laws"] for s in summaries),
        "law_violations": sum(s["law_violations"] for s in summaries),
        "problems": [f"{s['domain']}: {p}" for s in summaries for p in s["problems"]],
        "per_domain": {
            s["domain"]: {
                **{k: v for k, v in s.items() if k not in ("domain", "problems")},
                "law_report": c.laws,
            }
            for s, c in zip(summaries, checks, strict=True)
        },
    }
    return checks, totals


@app.command("validate")
def validate(
    domain_id: str | None = typer.Argument(
        None, metavar="[ID]", help="Library id, or a package folder as a path (./pkg)."
    ),
    all_domains: bool = typer.Option(False, "--all", help="Validate every library domain."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the result as one JSON object, last."
    ),
    deadline_s: float = typer.Option(
        DOMAIN_CHECK_S,
        parser=seconds,
        help="Seconds all tool calls of one domain's checks may take; tasks not reached fail.",
    ),
    task_deadline_s: float = typer.Option(
        TASK_CHECK_S,
        parser=seconds,
        help="Seconds all tool calls of one task's checks may take.",
    ),
) -> None:
    """Validate packages: every file, every task, and the gold / paraphrased / do-nothing /
    perturbed checks.

    Exits 1 when anything is wrong.
    """
    if all_domains == (domain_id is not None):
        raise typer.BadParameter("give one ID or --all", param_hint="ID")
    targets = (
        [library_path(i) for i in library_ids()] if all_domains else [resolve(domain_id or "")]
    )
    if not targets:
        raise typer.BadParameter("the library has no domains", param_hint="--all")
    checks, totals = validate_targets(
        targets, deadline_s=deadline_s, task_deadline_s=task_deadline_s
    )
    con = _console()
    for check, (name, s) in zip(checks, totals["per_domain"].items(), strict=True):
        n = s["tasks"]
        if not as_json:
            con.print(
                styled(
                    (name, "bold"),
                    f": {n} tasks; gold scores 1: {s['gold_pass']}/{n}; "
                    f"with free text reworded: {s['paraphrased_pass']}/{n}; "
                    f"do-nothing scores 0: {s['null_fail']}/{n}; perturbed scores 0: "
                    f"{s['perturbed_fail']}/{n}; NL assertions not yet judged: {s['nl_not_judged']}; "
                    f"laws: {s['laws']}, broken by {s['law_violations']} record(s)",
                )
            )
            cov = s.get("coverage") or {}
            if cov:
                missing = ", ".join(cov["tools_never_in_gold"]) or "none"
                kinds = ", ".join(f"{k} {v}" for k, v in cov["task_kinds"].items())
                con.print(
                    f"  tools in some task's gold: {cov['tools_in_gold']}/{cov['tools']} "
                    f"(never: {missing}); tasks by kind: {kinds}"
                )
            for p in check.summary()["problems"]:
                con.print(styled("  ", ("✗", "red"), f" {p}"))
    failed = (
        bool(totals["problems"])
        or totals["law_violations"] > 0
        or any(
            totals[k] != totals["tasks"]
            for k in ("gold_pass", "paraphrased_pass", "null_fail", "perturbed_fail")
        )
    )
    if as_json:
        echo(json.dumps(totals))
    elif not failed:
        con.print(
            styled(("ok", "green"), f": {totals['domains']} domain(s), {totals['tasks']} tasks")
        )
    if failed:
        raise typer.Exit(1)
