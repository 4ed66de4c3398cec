"""``maestro tables`` and ``maestro query`` as console scripts over a lake in a temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from maestro.storage import Lake, LakeSettings

MAESTRO = str(Path(sys.executable).with_name("maestro"))


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MAESTRO_LAKE_ROOT": str(root), "COLUMNS": "200"}
    return subprocess.run([MAESTRO, *args], capture_output=True, text=True, timeout=120, env=env)


def test_tables_and_query(tmp_path: Path) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path)))
    lake.write(
        "scores",
        [{"episode_id": f"e{i}", "domain_id": "hotel", "reward": float(i % 2)} for i in range(4)],
        "run-1",
    )
    lake.write("scores", [{"episode_id": "e9", "domain_id": "energy", "reward": 1.0}], "run-2")
    proc = run(tmp_path, "tables", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["table"]: r for r in json.loads(proc.stdout)}
    assert rows["scores"] == {"table": "scores", "version": 2, "rows": 5, "files": 2}
    assert rows["episodes"]["version"] is None and rows["episodes"]["rows"] == 0
    proc = run(
        tmp_path,
        "query",
        "select domain_id, avg(reward) as pass_rate from scores group by domain_id order by domain_id",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        {"domain_id": "energy", "pass_rate": 1.0},
        {"domain_id": "hotel", "pass_rate": 0.5},
    ]
    proc = run(tmp_path, "query", "select count(*) as n from scores")
    assert proc.returncode == 0 and "5" in proc.stdout
    proc = run(tmp_path, "tables")
    assert proc.returncode == 0 and "scores" in proc.stdout


def test_a_bad_query_says_why(tmp_path: Path) -> None:
    proc = run(tmp_path, "query", "select nothing from nowhere")
    assert proc.returncode == 2
    assert "no table 'nowhere'; the lake's tables are" in proc.stderr
    proc = run(tmp_path, "query", "select nothing from scores")
    assert proc.returncode == 1
    assert "query failed" in proc.stderr and "nothing" in proc.stderr


def test_a_query_reaching_for_a_file_is_refused_with_exit_2(tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\ns3cr3t\n")
    proc = run(tmp_path / "lake", "query", f"select * from read_csv('{secret}')")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: query refused: line 1, column 15: read_csv(...)")
    assert "s3cr3t" not in proc.stdout + proc.stderr
    assert not (tmp_path / "lake").exists()  # nothing written


def test_a_query_that_panics_polars_or_runs_too_long_is_one_line_never_a_traceback(
    tmp_path: Path,
) -> None:
    Lake(LakeSettings(root=str(tmp_path))).write(
        "blueprints", [{"blueprint_id": f"b{i}", "brief": "x"} for i in range(20)], "run-1"
    )
    proc = run(
        tmp_path, "query", "select split_part(brief, 'x', -9223372036854775808) from blueprints"
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("query failed: PanicException") and "Traceback" not in proc.stderr
    joins = ", ".join(f"blueprints b{i}" for i in range(8))
    proc = run(tmp_path, "query", f"select count(*) from {joins}", "--timeout-s", "1")
    assert proc.returncode == 1 and "ran past its deadline of 1 s" in proc.stderr
    for bad in ("nan", "0", "-1"):
        proc = run(tmp_path, "query", "select 1", "--timeout-s", bad)
        assert proc.returncode == 2 and "--timeout-s" in proc.stderr


def test_a_lake_root_that_is_a_file_is_refused_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "passwd").write_text("root:x:0:0\n")
    for command in (["tables"], ["query", "select count(*) from scores"]):
        proc = run(tmp_path / "passwd", *command)
        assert proc.returncode == 2
        assert proc.stderr.startswith("error: the lake root") and "is not a folder" in proc.stderr
