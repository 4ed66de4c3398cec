"""The ``maestro`` command line: one module per subcommand, composed here."""

from __future__ import annotations

import typer

from maestro.cli import (
    domains,
    imports,
    interop,
    lake,
    llm,
    nightly,
    prefect_api,
    sandbox,
    simulate,
    synthesize,
    train,
    view,
)

app = typer.Typer(
    name="maestro",
    help="maestro: verified environments for tool-calling agents, and training on them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(domains.app, name="domains")
app.add_typer(llm.app, name="llm")
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(imports.app, name="import")
app.command("simulate")(simulate.simulate)
app.command("tables")(lake.tables)
app.command("query")(lake.query)
app.command("nightly")(nightly.nightly)
app.command("stage")(nightly.stage)
app.command("deploy")(nightly.deploy)
app.command("ui")(prefect_api.ui)
app.command("view")(view.view)
# Each of these modules adds its own commands.
synthesize.register(app)
train.register(app)
interop.register(app)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
