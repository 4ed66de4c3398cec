"""``maestro import``: an outside benchmark's items as maestro domains and tasks in the lake."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import typer

from maestro.cli.output import echo

app = typer.Typer(
    help="Import an outside benchmark's items as domains and tasks.", no_args_is_help=True
)


@app.command("bfcl")
def bfcl(
    category: str = typer.Argument(..., help="A BFCL multi-turn category (multi_turn_base, ...)."),
    out: Path | None = typer.Option(
        None, help="Folder for the packages (default runs/bfcl/CATEGORY); replaced on re-import."
    ),
    limit: int | None = typer.Option(None, min=1, help="Import only the first N entries."),
    lake_root: str | None = typer.Option(None, help="Lake root (default MAESTRO_LAKE_ROOT)."),
    lake: bool = typer.Option(True, help="Write the domains, tasks and a task set to the lake."),
    agreement: bool = typer.Option(
        False,
        help="Then score every task's gold, do-nothing and perturbed conversations both ways"
        " (maestro's card, BFCL's checker) and print where they agree.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON, last."),
) -> None:
    """Import a BFCL multi-turn category: one package per API-class combination, each entry a
    task with scripted user turns; every package is loaded (gold replay in the sandbox) before
    anything is written to the lake."""
    from maestro.domains.files import TargetError
    from maestro.domains.importers.bfcl import check_packages, import_category
    from maestro.domains.importers.bfcl_package import BfclDataError
    from maestro.domains.loader import load_domain

    folder = out or Path("runs") / "bfcl" / category
    refused = _not_a_folder(folder)
    if refused is not None:
        echo(f"error: --out {folder}: {refused}", err=True)
        raise typer.Exit(2)
    try:
        result = import_category(category, folder, limit=limit)
    except BfclDataError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:  # the packages cannot be written there (permissions, a full disk)
        echo(f"error: --out {folder}: cannot write the packages: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None
    except TargetError as exc:  # a link or special file in the way, refused, never followed
        echo(f"error: --out {folder}: {exc}", err=True)
        raise typer.Exit(2) from None
    failures = check_packages(result.packages)
    for failure in failures:
        echo(str(failure), err=True)
    if failures:
        raise typer.Exit(1)
    summary: dict[str, object] = {
        "category": category,
        "bfcl_version": result.version,
        "packages": [str(p) for p in result.packages],
        "tasks": result.tasks,
        "skipped": result.skipped,
    }
    if lake:
        from maestro.flows.imports import record_import
        from maestro.storage import Lake, LakeSettings

        domains = [load_domain(p, check_gold=False) for p in result.packages]
        try:
            store = Lake(LakeSettings(root=lake_root) if lake_root else LakeSettings())
            summary["lake"] = record_import(
                store,
                f"import-bfcl-{uuid.uuid4().hex[:12]}",
                domains,
                f"bfcl/{category}",
                f"BFCL {category} ({result.version})",
            )
        finally:
            for d in domains:
                d.close()
    if agreement:
        summary["agreement"] = _agreement(result.packages)
    for entry, why in result.skipped.items():
        echo(f"skipped {entry}: {why}", err=True)
    if as_json:
        echo(json.dumps(summary, default=str))
        return
    echo(
        f"BFCL {category} ({result.version}): {result.tasks} task(s) in"
        f" {len(result.packages)} package(s) under {folder}"
    )
    if lake:
        echo(f"  lake: domains, tasks and task set bfcl/{category}")


def _not_a_folder(folder: Path) -> str | None:
    """Why the packages cannot go under ``folder`` (it, or the nearest part of its path that
    exists, is a file or a device: ``/dev/null``), or None."""
    for part in (folder, *folder.parents):
        if part.exists():
            return None if part.is_dir() else f"{part} is not a folder"
    return None


def _agreement(packages: list[Path]) -> dict[str, object]:
    """The agreement table, printed; returned for --json."""
    from maestro.flows.imports import yardsticks_both_ways
    from maestro.scoring.external import agreement

    rows = yardsticks_both_ways(packages)
    table: dict[str, object] = {}
    echo("trajectory   n    both pass  both fail  disagree  checker error", err=True)
    for kind in ("gold", "null", "perturbed"):
        mine = [r for r in rows if r.kind == kind]
        counts = agreement((r.card_passed, r.checker.passed) for r in mine)
        table[kind] = counts.model_dump()
        echo(
            f"{kind:<10} {counts.trajectories:>4} {counts.both_pass:>10} {counts.both_fail:>10}"
            f" {counts.disagree:>9} {counts.no_verdict:>14}",
            err=True,
        )
    disagreements = [r for r in rows if r.agree is False]
    for r in disagreements:
        side = "maestro passes, BFCL fails" if r.card_passed else "BFCL passes, maestro fails"
        echo(f"  {r.task_id} {r.kind}: {side}; {r.changed or ''}", err=True)
        echo(f"    maestro: {r.card_details[:300]}", err=True)
        echo(f"    BFCL: {r.checker.status} {r.checker.details[:300]}", err=True)
    table["disagreements"] = [r.model_dump() for r in disagreements]
    return table
