"""maestro CLI: interop commands: ``serve-mcp``, ``export tau2`` and ``annotate``."""

from __future__ import annotations

from pathlib import Path

import typer

from maestro.cli.domains import load_or_exit

export_app = typer.Typer(help="Write a domain in another harness's format.", no_args_is_help=True)


def serve_mcp(
    domain_id: str = typer.Argument(..., metavar="DOMAIN", help="Library id or package folder."),
    transport: str = typer.Option("http", help="http (streamable HTTP at /mcp) or stdio."),
    host: str = typer.Option("127.0.0.1", help="HTTP: interface to listen on."),
    port: int = typer.Option(8765, help="HTTP: port to listen on."),
    task: str | None = typer.Option(None, help="Start every session at this task's state."),
    reset_tool: bool = typer.Option(True, help="List the maestro_reset_session control tool."),
) -> None:
    """Serve a domain's tools over MCP, one copy-on-write session per client."""
    import anyio

    from maestro.domains.mcp_server import MCPOptions, MCPServerError, serve_http, serve_stdio

    if transport not in ("http", "stdio"):
        raise typer.BadParameter("must be 'http' or 'stdio'", param_hint="--transport")
    domain = load_or_exit(domain_id)
    options = MCPOptions(task_id=task, reset_tool=reset_tool)
    try:
        if transport == "stdio":
            anyio.run(serve_stdio, domain, options)
        else:
            typer.echo(f"serving {domain.id} at http://{host}:{port}/mcp", err=True)
            serve_http(domain, options, host=host, port=port)
    except MCPServerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


@export_app.command("tau2")
def export_tau2_cmd(
    domain_id: str = typer.Argument(..., metavar="DOMAIN", help="Library id or package folder."),
    out: Path = typer.Argument(..., help="Folder to write data/tau2/... and src/tau2/... under."),
) -> None:
    """Write a domain in tau2-bench's layout (db.json, policy.md, tasks.json, toolkit module)."""
    from maestro.domains.tau2_export import Tau2ExportError, export_tau2

    domain = load_or_exit(domain_id)
    try:
        result = export_tau2(domain, out)
    except Tau2ExportError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for path in result.files:
        typer.echo(str(path))
    for warning in result.warnings:
        typer.echo(f"note: {warning}", err=True)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("serve-mcp")(serve_mcp)
    app.add_typer(export_app, name="export")
