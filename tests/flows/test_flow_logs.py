"""Flow logs in Prefect carry maestro's messages and the libraries' warnings, not what
libraries print: a training flow's log (tiny model) read back from the server's database."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from maestro.domains import Domain
from maestro.flows.flow_logs import job_log_lines
from maestro.storage import Lake, LakeSettings

from ..conftest import FIXTURES
from ..training.conftest import TASK_SET, fill_lake

MAESTRO = str(Path(sys.executable).with_name("maestro"))
# A CPython bytecode listing (what the datasets library's hashing printed into a training
# run's log), progress bars, the source line Python echoes under a warning.
NOISE = re.compile(
    r"\b(LOAD_GLOBAL|LOAD_ATTR|LOAD_FAST|RETURN_VALUE|RESUME|PRECALL)\b|\d+%\||it/s\]|"
    r"examples/s\]|^\s*warnings\.warn\(|^\s*$"
)


def flow_log(home: Path) -> list[str]:
    """Every log line the Prefect server of ``home`` stored, oldest first."""
    db = sqlite3.connect(home / "prefect.db")
    return [m for (m,) in db.execute("select message from log order by timestamp")]


def test_a_training_flows_log_is_maestros_words_without_library_prints(
    tmp_path: Path, toy: Domain
) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    fill_lake(lake, toy, ["toy_cancel", "toy_status"])
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect")}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.run(
        [
            MAESTRO, "train", "--method", "sft", "--task-set", TASK_SET,
            "--domain", str(FIXTURES / "toy"), "--lake-root", lake.root, "--split", "all",
            "--max-steps", "1", "--batch-size", "1", "--deadline-s", "300",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = flow_log(tmp_path / "prefect")
    noisy = [m for m in lines if NOISE.search(m)]
    assert not noisy, noisy[:10]
    assert any(m.startswith("job: trained sft for 1 step(s)") for m in lines), lines
    assert any(m.startswith("the job's whole output: ") for m in lines)
    assert any("Finished in state Completed" in m for m in lines)


def test_warnings_and_maestros_loggers_reach_the_flow_log_and_prints_do_not(
    tmp_path: Path,
) -> None:
    script = (
        "import logging, warnings\n"
        "from maestro.cli.prefect_api import prefect_env\n"
        "from maestro.flows.prefect_home import use_prefect_api\n"
        "prefect_env()\n"
        "with use_prefect_api() as api:\n"
        "    api.wait_ready()\n"
        "    from prefect import flow\n"
        "    @flow(name='noisy')\n"
        "    def noisy() -> None:\n"
        "        print('a stray print  0 LOAD_GLOBAL 0 (pa)')\n"
        "        warnings.warn('a library warning', UserWarning)\n"
        "        logging.getLogger('maestro.somewhere').info('maestro says why')\n"
        "    noisy()\n"
    )
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect")}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "a stray print" in proc.stdout  # the terminal still shows it
    lines = flow_log(tmp_path / "prefect")
    assert any("UserWarning: a library warning" in m for m in lines), lines
    assert "maestro says why" in lines
    assert not [m for m in lines if "stray print" in m]


def test_a_jobs_output_is_relayed_without_bars_blanks_or_warning_echoes() -> None:
    output = "\n".join(
        [
            "/x/trl/trainer.py:12: FutureWarning: `foo` is deprecated, use `bar`",
            "  warnings.warn(f'`{old}` is deprecated', FutureWarning)",
            "",
            "Tokenizing train dataset:   0%|          | 0/4 [00:00<?, ? examples/s]"
            "\rTokenizing train dataset: 100%|██████████| 4/4 [00:00<00:00, 278.85 examples/s]",
            "Generating train split: 4 examples [00:00, 285.20 examples/s]",
            "{'loss': '10.81', 'epoch': '0.25'}",
            "trained sft for 1 step(s); model at /runs/x/model",
        ]
    )
    assert job_log_lines(output) == [
        "/x/trl/trainer.py:12: FutureWarning: `foo` is deprecated, use `bar`",
        "{'loss': '10.81', 'epoch': '0.25'}",
        "trained sft for 1 step(s); model at /runs/x/model",
    ]
    assert job_log_lines(output, limit=1) == ["trained sft for 1 step(s); model at /runs/x/model"]
