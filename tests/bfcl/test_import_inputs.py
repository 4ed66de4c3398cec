"""``maestro import bfcl``'s inputs: a category is an exact name, never a pattern, and an
``--out`` that cannot hold packages is one line and exit code 2, not a traceback (issue 23:
``'**'`` and ``multi_turn_bas?`` matched files, ``--out /dev/null`` raised)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from maestro.domains.importers.bfcl import import_category
from maestro.domains.importers.bfcl_package import BfclDataError

MAESTRO = str(Path(sys.executable).with_name("maestro"))


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "MAESTRO_LAKE_ROOT": str(cwd / "lake")}
    return subprocess.run(
        [MAESTRO, "import", "bfcl", *args, "--no-lake", "--limit", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


@pytest.mark.parametrize("category", ["**", "*", "multi_turn_bas?", "multi_turn_[b]ase", "../x"])
def test_a_category_is_an_exact_name_not_a_pattern(category: str, tmp_path: Path) -> None:
    with pytest.raises(
        BfclDataError, match=r"no category .*multi-turn categories: .*multi_turn_base"
    ):
        import_category(category, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("category", ["**", "multi_turn_bas?"])
def test_the_command_names_the_known_categories(category: str, tmp_path: Path) -> None:
    proc = _run(tmp_path, category, "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "multi_turn_base" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["/dev/null", "file", "file/below"])
def test_an_out_that_is_not_a_folder_is_one_line_and_exit_2(where: str, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("keep me\n")
    out = where if where.startswith("/") else str(tmp_path / where)
    proc = _run(tmp_path, "multi_turn_base", "--out", out)
    assert proc.returncode == 2, proc.stdout[-1000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--out" in lines[0] and "not a folder" in lines[0], lines
    assert (tmp_path / "file").read_text() == "keep me\n"
