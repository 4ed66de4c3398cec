"""``maestro nightly`` and ``maestro stage`` check their input before anything starts: a bad
domain, task or option is exit code 2 with no Prefect server launched and nothing written under
``runs/`` (the Prefect home and the run folder live there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MAESTRO = str(Path(sys.executable).with_name("maestro"))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nightly", "--domain", "/nope"], "'/nope' is not a folder"),
        (["nightly", "--domain", "nope"], "no library domain 'nope'"),
        (["nightly", "--domain", "hotel", "--task", "hotel_999"], "no domain has task(s)"),
        (["nightly", "--run-id", "bad id"], "run_id"),
        (["nightly", "--train", "ppo"], "train"),
        (["stage", "ingest", "--run-id", "r1", "--domain", "/nope"], "is not a folder"),
        (["stage", "explode", "--run-id", "r1", "--domain", "/nope"], "no stage 'explode'"),
    ],
)
def test_bad_input_starts_nothing_and_writes_nothing(
    tmp_path: Path, args: list[str], says: str
) -> None:
    env = {**os.environ, "COLUMNS": "200", "MAESTRO_LAKE_ROOT": str(tmp_path / "lake")}
    for name in ("PREFECT_API_URL", "PREFECT_HOME"):
        env.pop(name, None)  # so the default home, runs/prefect under the cwd, would be made
    proc = subprocess.run(
        [MAESTRO, *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert says in proc.stderr
    assert "Prefect UI" not in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # no runs/, no lake
