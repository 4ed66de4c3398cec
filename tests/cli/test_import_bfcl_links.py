"""``maestro import bfcl --out DIR`` never writes through a link planted in DIR (issue 23, third
red team, case 06): the importer wrote each package file by path, so a link planted as
``policy.md`` in the 1-3 ms while it wrote got BFCL's text written outside the package.

A link is planted at the moment the package's policy is made (just before its files are
written) through the importer's own ``_policy``, and, in the race, by a thread that plants
links in every package folder while the real command runs.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from maestro.cli.app import app
from maestro.domains.files import TargetError
from maestro.domains.importers import bfcl
from maestro.domains.importers.bfcl_package import bfcl_version, known_classes

MAESTRO = str(Path(sys.executable).with_name("maestro"))
LIMITED = ("--limit", "1", "--no-lake")
FILES = ("domain.json", "models.py", "tools.py", "db.json", "policy.md", "tasks.jsonl")


def _plant_at_policy_time(monkeypatch: pytest.MonkeyPatch, package: Path, outside: Path) -> None:
    """When the importer makes a package's policy, ``package/policy.md`` becomes a link to
    ``outside`` (the folder made if the writer has not made it yet)."""
    made = bfcl._policy

    def policy_then_plant(prompts: dict[str, str]) -> str:
        package.mkdir(parents=True, exist_ok=True)
        (package / "policy.md").symlink_to(outside)
        return made(prompts)

    monkeypatch.setattr(bfcl, "_policy", policy_then_plant)


def test_a_link_planted_as_policy_md_while_the_package_is_written_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside.txt"
    root = tmp_path / "out" / "bfcl_math"
    _plant_at_policy_time(monkeypatch, root, outside)
    package = bfcl._Package("bfcl_math", [known_classes()["MathAPI"]], root, {"MathAPI": {}}, [])
    with pytest.raises(TargetError, match=r"bfcl_math/policy\.md: it is a symbolic link"):
        bfcl.write_package(package, bfcl_version(), {"task": "Do.", "behavior": "Well."})
    assert not outside.exists()  # the policy was written there


def test_the_command_refuses_the_planted_link_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside, out = tmp_path / "outside.txt", tmp_path / "out"
    _plant_at_policy_time(monkeypatch, out / "bfcl_gorilla_twitter", outside)
    result = CliRunner().invoke(
        app, ["import", "bfcl", "multi_turn_base", *LIMITED, "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --out {out}: cannot write"), lines
    assert "policy.md: it is a symbolic link" in lines[0]
    assert not outside.exists()


def test_links_planted_in_a_loop_while_the_command_runs_are_never_followed(
    tmp_path: Path,
) -> None:
    """The red team's race, against the real command: every file name of every package folder
    is planted as a link to its own file outside, as fast as a thread can, for the whole run."""
    out, outside = tmp_path / "out", tmp_path / "outside"
    outside.mkdir()
    done = threading.Event()

    def plant() -> None:
        while not done.is_set():
            for package in out.iterdir() if out.is_dir() else ():
                for name in FILES:
                    # It may exist: the importer's file, or a link planted before.
                    with contextlib.suppress(OSError):
                        os.symlink(outside / name, package / name)

    planter = threading.Thread(target=plant, daemon=True)
    planter.start()
    try:
        proc = subprocess.run(
            [MAESTRO, "import", "bfcl", "multi_turn_base", *LIMITED, "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "200"},
            cwd=tmp_path,
        )
    finally:
        done.set()
        planter.join(timeout=10)
    assert list(outside.iterdir()) == []  # nothing written through a planted link
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output[-3000:]
    assert proc.returncode in (0, 2), output[-3000:]
    if proc.returncode == 2:  # the link was there when its file's turn came
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "is a symbolic link" in lines[0], lines
