"""``maestro llm``: run the embedded model alone, and check every role's endpoint."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

from maestro.agents.client import Endpoints, ProviderError
from maestro.agents.embedded import EmbeddedServer, serve
from maestro.agents.settings import ROLES, LLMSettings, load_llm_settings
from maestro.cli.inputs import (
    allow_public_option,
    host_option,
    listen_or_exit,
    seconds,
    writable_file,
)
from maestro.cli.output import echo
from maestro.settings import RunSettings

app = typer.Typer(help="The LLM roles and the embedded local model.", no_args_is_help=True)


@app.command("serve")
def serve_cmd(
    host: str = host_option(),
    port: int = typer.Option(8901, min=0, max=65535, help="Port (0 picks a free one)."),
    ready_file: Path | None = typer.Option(None, help="Write the base URL here once serving."),
    allow_public: bool = allow_public_option("the model endpoint"),
    exit_with_parent: bool = typer.Option(
        False, help="Stop when the process that started this one is gone."
    ),
) -> None:
    """Serve the embedded model on an OpenAI-compatible endpoint until interrupted."""
    # Before the model is extracted (400 MB) and loaded: a bad address or file is said at once.
    listen_or_exit(host, port, allow_public=allow_public, what="the model endpoint")
    if ready_file is not None:
        writable_file(ready_file, "--ready-file")
    settings = load_llm_settings().embedded
    serve(settings, host, port, ready_file, exit_with_parent=exit_with_parent)


@app.command("check")
def check(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    timeout_s: float = typer.Option(
        120.0, parser=seconds, metavar="SECONDS", help="Deadline for each role's test call."
    ),
) -> None:
    """Say which endpoint and model each role uses, and whether it answers."""
    settings = load_llm_settings()
    embedded: EmbeddedServer | None = None
    rows = []
    try:
        if settings.uses_embedded():
            embedded = EmbeddedServer(settings.embedded, RunSettings().dir).start()
        rows = asyncio.run(_probe(settings, embedded.base_url if embedded else None, timeout_s))
    finally:
        if embedded is not None:
            embedded.stop()
    if as_json:
        echo(json.dumps(rows, indent=2))
    else:
        for r in rows:
            status = f"answers in {r['latency_s']:.2f} s" if r["ok"] else f"FAILS: {r['error']}"
            echo(f"{r['role']:<9} {r['endpoint']:<40} {r['model']:<40} {status}")
    if not all(r["ok"] for r in rows):
        raise typer.Exit(1)


async def _probe(
    settings: LLMSettings, embedded_url: str | None, timeout_s: float
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    async with Endpoints() as endpoints:
        for role in ROLES:
            rs = settings.role(role).model_copy(update={"deadline_s": timeout_s, "max_retries": 1})
            url = rs.base_url or embedded_url
            model = rs.model or (settings.embedded.model_name if rs.base_url is None else "default")
            row: dict[str, object] = {
                "role": role,
                "endpoint": url if rs.base_url else f"embedded ({url})",
                "model": model,
            }
            try:
                client = endpoints.client(role, rs.model_copy(update={"model": model}), url)
                out = await client.complete([{"role": "user", "content": "Say OK."}])
                row.update(ok=True, latency_s=out.latency_s, error=None)
            except (ProviderError, ValueError) as exc:
                row.update(ok=False, latency_s=None, error=str(exc))
            rows.append(row)
    return rows
