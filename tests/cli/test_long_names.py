"""A domain id or path the file system cannot name (a component over 255 bytes, a path over
4,096, a ``~user`` with no home) is one located error and exit code 2 from every command that
looks a domain up, never an ``OSError`` traceback (red-team finding 12: ``ENAMETOOLONG`` from
``domains show``/``validate``, ``export tau2`` and ``serve-mcp``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from maestro.domains import domain_path, library_path

MAESTRO = str(Path(sys.executable).with_name("maestro"))
LONG = "a" * 300  # one component: the file system takes 255 bytes
DEEP = "/tmp/" + "/".join(["b" * 200] * 25)  # 5,000 bytes: past PATH_MAX

#: Each way a reference cannot become a file-system name, and what the error says of it.
REFS = [(LONG, "File name too long"), (DEEP, "File name too long")]
OTHER_REFS = [(f"./{LONG}/x", "File name too long"), ("~no-such-user-here/pkg", "no home folder")]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MAESTRO, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _commands(ref: str, tmp_path: Path) -> list[list[str]]:
    return [
        ["domains", "show", ref],
        ["domains", "validate", ref],
        ["export", "tau2", ref, str(tmp_path / "out")],
        ["serve-mcp", ref, "--port", str(free_port())],
    ]


@pytest.mark.parametrize(("ref", "says"), REFS, ids=["id", "path-max"])
def test_every_command_that_looks_a_domain_up_names_the_bad_reference(
    ref: str, says: str, tmp_path: Path
) -> None:
    for args in _commands(ref, tmp_path):
        _assert_refused(args, says)
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("ref", "says"), OTHER_REFS, ids=["component", "tilde"])
def test_a_path_the_file_system_refuses_is_named_too(ref: str, says: str) -> None:
    _assert_refused(["domains", "show", ref], says)


def _assert_refused(args: list[str], says: str) -> None:
    proc = run(*args)
    shown = " ".join(args[:2])
    assert proc.returncode == 2, (shown, proc.stderr[-1500:])
    assert "Traceback" not in proc.stderr and "OSError" not in proc.stderr, shown
    assert says in proc.stderr, (shown, proc.stderr[-1500:])
    assert "DOMAIN" in proc.stderr or "ID" in proc.stderr, shown  # the argument is named


def test_the_lookup_says_why_a_name_cannot_be_a_library_domain() -> None:
    with pytest.raises(KeyError, match=r"no library domain 'aaa.*File name too long.*known: "):
        library_path(LONG)
    with pytest.raises(KeyError, match="File name too long"):
        domain_path(DEEP)
    with pytest.raises(KeyError, match="no home folder"):
        domain_path("~no-such-user-here/pkg")
    assert domain_path("hotel") == library_path("hotel")
