"""``maestro serve-mcp``, ``export tau2`` and ``annotate``: bad input is one clear line and exit
code 2, with nothing started or written."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

MAESTRO = str(Path(sys.executable).with_name("maestro"))
TOY = str(Path(__file__).parent.parent / "fixtures" / "toy")


def run(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MAESTRO, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **env},
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--port", "99999"], "'--port': Input should be less than or equal to 65535"),
        (["--port", "0"], "'--port': Input should be greater than or equal to 1"),
        (["--host", "0.0.0.0"], "0.0.0.0 is not a loopback address"),
        (["--host", "example.invalid"], "example.invalid is not a loopback address"),
        (["--token", "short"], "--token: use at least 16 characters"),
        (["--idle-timeout-s", "nan"], "nan is not a finite number"),
        (["--idle-timeout-s", "-5"], "-5 is out of range"),
        (["--max-sessions", "0"], "'--max-sessions': Input should be greater than or equal"),
        (["--transport", "carrier-pigeon"], "must be 'http' or 'stdio'"),
    ],
)
def test_serve_mcp_refuses_bad_options_before_serving(args: list[str], says: str) -> None:
    proc = run("serve-mcp", TOY, *args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr and "serving" not in proc.stderr


def test_serve_mcp_on_a_taken_port_says_so() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run("serve-mcp", TOY, "--port", str(port))
    assert proc.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in proc.stderr


def test_serve_mcp_on_a_public_address_with_a_token_gets_past_the_check() -> None:
    """With a token the public bind is allowed: the run reaches the port check (taken here)."""
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run(
            "serve-mcp",
            TOY,
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            MAESTRO_MCP_TOKEN="x" * 24,
        )
    assert proc.returncode == 2
    assert "Address already in use" in proc.stderr


def test_export_tau2_refuses_an_occupied_or_impossible_target(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep")
    proc = run("export", "tau2", TOY, str(tmp_path))
    assert proc.returncode == 2
    assert "is not empty (1 entry); give --force" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
    proc = run("export", "tau2", TOY, "/proc/1/x")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: cannot create /proc/1/x: No such file or directory"
    proc = run("export", "tau2", TOY, str(tmp_path), "--force")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "mine.txt").read_text() == "keep"
    assert (tmp_path / "data" / "tau2" / "domains" / "toy" / "db.json").is_file()
