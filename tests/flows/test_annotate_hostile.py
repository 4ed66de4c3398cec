"""The annotation commands against what the third red team tried (findings 13 and 15): an
item id of escape sequences reached Prefect's exception log raw, and ``annotate export`` on an
empty lake printed Prefect's traceback before its one-line error."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from maestro.flows.annotate import AnnotationError
from maestro.flows.annotations import REQUIRED_COLUMNS, import_labels
from maestro.storage import Lake, LakeSettings

MAESTRO = str(Path(sys.executable).with_name("maestro"))
#: OSC 0 (window title), OSC 52 (clipboard), CSI as ESC [ and as the one byte C1 CSI.
FORGED = "\x1b]0;owned\x07\x1b]52;c;ZWNobyBvd25lZA==\x07\x1b[2J\x9b31mok"
RAW = ("\x1b", "\x07", "\x9b")


def _sheet(path: Path, item_id: str = FORGED) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(REQUIRED_COLUMNS))
        writer.writeheader()
        writer.writerow(
            {"item_id": item_id, "episode_id": "e1", "assertion_index": "0", "label": "met"}
        )
    return path


def _run(lake_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MAESTRO_LAKE_ROOT": str(lake_root), "COLUMNS": "200"}
    return subprocess.run([MAESTRO, *args], capture_output=True, text=True, timeout=180, env=env)


def test_an_item_id_of_escape_sequences_is_quoted_and_escaped_in_the_error(
    tmp_path: Path,
) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    with pytest.raises(AnnotationError) as caught:
        import_labels(lake, _sheet(tmp_path / "s.csv"), "me", "a1")
    message = str(caught.value)
    assert not any(c in message for c in RAW), repr(message)
    assert "item '\\x1b]0;owned\\x07" in message and "\\x9b31mok'" in message
    assert "is not a judged assertion in the lake" in message


def test_every_annotation_error_escapes_what_it_quotes() -> None:
    error = AnnotationError("sheet\x1b[31m.csv: row 2: label '\u202eevil'\nforged line")
    assert str(error) == "sheet\\x1b[31m.csv: row 2: label '\\u202eevil'\\nforged line"
    assert str(AnnotationError(str(error))) == str(error)  # escaping twice changes nothing


def test_cli_import_of_forged_item_ids_is_one_escaped_line_before_any_server(
    tmp_path: Path,
) -> None:
    proc = _run(
        tmp_path / "lake",
        "annotate",
        "import",
        str(_sheet(tmp_path / "s.csv")),
        "--annotator",
        "me",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-2000:]
    assert not any(c in out for c in RAW), repr(out[-2000:])
    assert "Traceback" not in out and "Prefect" not in out  # refused before a server starts
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "row 2 (line 2): item '\\x1b]0;owned\\x07" in proc.stderr


def test_cli_export_of_an_empty_lake_is_one_line_without_a_traceback(tmp_path: Path) -> None:
    proc = _run(tmp_path / "lake", "annotate", "export", "--out", str(tmp_path / "sheet"))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.strip() == "error: no judged NL assertions to annotate (nothing sampled)"
    assert not (tmp_path / "sheet").exists()


def test_cli_export_refuses_an_out_folder_the_file_system_cannot_name(tmp_path: Path) -> None:
    proc = _run(tmp_path / "lake", "annotate", "export", "--out", str(tmp_path / ("a" * 300)))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "File name too long" in proc.stderr and "--out" in proc.stderr
    assert "Traceback" not in proc.stderr
