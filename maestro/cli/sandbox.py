"""``maestro sandbox``: what holds the sandbox for untrusted domain code on this machine."""

from __future__ import annotations

import json

import typer

from maestro.cli.output import echo
from maestro.domains.errors import DomainLoadError
from maestro.domains.sandbox import check_layers
from maestro.domains.sandbox.check import WHAT
from maestro.domains.sandbox.isolation import SWITCHABLE

app = typer.Typer(help="The sandbox that runs untrusted domain code.", no_args_is_help=True)


@app.command("check")
def check(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    turn_off: list[str] = typer.Option(
        [],
        "--turn-off",
        hidden=True,  # for tests of the degraded paths
        help="Start the probe child with this layer off (repeatable).",
    ),
) -> None:
    """Start a sandbox child on a probe package and say, per layer, whether it is active.

    Exit code 0 when every layer is active and the child served a call, 1 otherwise.
    """
    unknown = sorted(set(turn_off) - SWITCHABLE)
    if unknown:
        echo(f"error: --turn-off {unknown[0]}: layers are {', '.join(sorted(SWITCHABLE))}")
        raise typer.Exit(2)
    try:
        report = check_layers(disable=turn_off)
    except DomainLoadError as exc:
        if as_json:
            echo(json.dumps({"ok": False, "error": str(exc)}))
        else:
            echo(f"the sandbox child did not start: {exc}")
        raise typer.Exit(1) from None
    if as_json:
        echo(json.dumps(report.to_json(), indent=2))
    else:
        for name, status in report.layers.items():
            echo(f"{name:<8} {status:<12.200} {WHAT[name]}")
        echo(f"{'call':<8} {'served' if report.served else 'FAILED'}")
    if not report.ok:
        raise typer.Exit(1)
