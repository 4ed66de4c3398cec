"""Every CLI line that can carry package or lake text is printed through the escaping printer.

A key of a package's ``db.json`` holding escape sequences reached the terminal raw from
``domains show``, ``serve-mcp``, ``export tau2`` and ``simulate``: their shared loader printed its
problems with plain ``typer.echo``. Now the CLI has one way to print (``maestro.cli.output``), and
a source check keeps it that way.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MAESTRO = str(Path(sys.executable).with_name("maestro"))
CLI = Path(__file__).parents[2] / "maestro" / "cli"
TOY = Path(__file__).parents[1] / "fixtures" / "toy"

#: OSC 52 (clipboard write), OSC 0 (window title), erase line, cursor up, colour, a C1 CSI and a
#: right-to-left override.
ESCAPES = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;all good\x07\x1b[2K\x1b[1A\x1b[32mok\x1b[0m\x9b2J\u202e"
RAW = ("\x1b]52", "\x1b]0;", "\x1b[2K", "\x1b[1A", "\x9b", "\u202e")


def _printing_calls(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = (
            f.id
            if isinstance(f, ast.Name)
            else f"{ast.unparse(f.value)}.{f.attr}"
            if isinstance(f, ast.Attribute)
            else ""
        )
        if name in {"print", "typer.echo", "click.echo", "typer.secho", "click.secho"} or (
            name.endswith((".stdout.write", ".stderr.write"))
        ):
            found.append((node.lineno, name))
    return found


def test_the_cli_prints_only_through_the_escaping_printer() -> None:
    offenders = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "output.py":
            continue
        for line, name in _printing_calls(ast.parse(path.read_text())):
            offenders.append(f"{path.name}:{line}: {name}")
    assert offenders == [], "print through maestro.cli.output.echo or console():\n" + "\n".join(
        offenders
    )


def test_the_source_check_finds_a_plain_print() -> None:
    tree = ast.parse("import typer, sys\nprint('x')\ntyper.echo('y')\nsys.stderr.write('z')\n")
    assert [n for _, n in _printing_calls(tree)] == ["print", "typer.echo", "sys.stderr.write"]


@pytest.fixture(scope="module")
def hostile_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy package with an order whose key carries escapes and refers to no customer."""
    pkg = tmp_path_factory.mktemp("escapes") / "toy"
    shutil.copytree(TOY, pkg)
    db = json.loads((pkg / "db.json").read_text())
    order = dict(next(iter(db["orders"].values())))
    order["order_id"] = "O" + ESCAPES
    order["customer_id"] = "C" + ESCAPES
    db["orders"]["O" + ESCAPES] = order
    (pkg / "db.json").write_text(json.dumps(db))
    return pkg


@pytest.mark.parametrize(
    "command",
    [
        ["domains", "show", "{pkg}"],
        ["domains", "validate", "{pkg}"],
        ["serve-mcp", "{pkg}", "--port", "18999"],
        ["export", "tau2", "{pkg}", "{out}"],
        ["simulate", "--domain", "{pkg}"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_hostile_key_reaches_no_command_raw(
    hostile_package: Path, tmp_path: Path, command: list[str]
) -> None:
    args = [a.format(pkg=hostile_package, out=tmp_path / "out") for a in command]
    proc = subprocess.run(
        [MAESTRO, *args],
        capture_output=True,
        timeout=300,
        env={**os.environ, "TERM": "xterm-256color", "FORCE_COLOR": "1", "COLUMNS": "200"},
    )
    shown = (proc.stdout + proc.stderr).decode("utf-8", "surrogateescape")
    assert proc.returncode == 1, shown[-2000:]
    assert "refers to missing customers" in shown, shown[-2000:]
    for sequence in RAW:
        assert sequence not in shown, (sequence, shown[-2000:])
    assert "\\x1b]52;c;" in shown and "\\u202e" in shown  # shown escaped, for the operator
