"""Command-line input checked before anything starts (red-team findings on the CLI): an unknown
task set or model, a host that cannot be served or is public without ``--allow-public``, a
ready file that cannot be written, a cron line, an empty task list, an unknown MCP task and a
lake root that is a file are each one line naming the problem and exit code 2, with no Prefect
server launched, no model extracted and nothing written. Before, each was a traceback and
exit 1 after a Prefect server (and for ``llm serve`` the 400 MB model) had started, or, for
``simulate --tasks ','``, a run of every task."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from pydantic import ValidationError

from maestro.cli.inputs import cron, listen_or_exit
from maestro.storage import Lake, LakeSettings
from maestro.storage.records import task_set_row

MAESTRO = str(Path(sys.executable).with_name("maestro"))


def _run(cwd: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "200", "MAESTRO_LAKE_ROOT": str(cwd / "lake"), **env}
    for name in ("PREFECT_API_URL", "PREFECT_HOME", "MAESTRO_RUN_DIR"):
        full.pop(name, None)  # so the default Prefect home and run folder would be made here
    return subprocess.run(
        [MAESTRO, *args], capture_output=True, text=True, timeout=300, env=full, cwd=cwd
    )


def _refused(proc: subprocess.CompletedProcess[str], says: str) -> None:
    assert proc.returncode == 2, proc.stdout[-1000:] + proc.stderr[-2000:]
    assert says in " ".join(proc.stderr.split()), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Prefect UI" not in proc.stderr


TRAIN = ["train", "--method", "sft", "--domain", "hotel"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([*TRAIN, "--task-set", "nope"], "the lake has no task_sets table yet"),
        (["llm", "serve", "--host", "bad host", "--port", "1"], "'bad host' is not a host"),
        (["llm", "serve", "--host", "no-such-host.invalid"], "cannot listen on no-such-host"),
        (["llm", "serve", "--host", "0.0.0.0"], "not a loopback address"),
        (
            ["llm", "serve", "--port", "0", "--ready-file", "/nonexistent/dir/url"],
            "not an existing",
        ),
        (["ui", "--host", "bad host", "--port", "4299"], "'bad host' is not a host"),
        (["ui", "--host", "0.0.0.0"], "--allow-public"),
        (["view", "--host", "0.0.0.0"], "--allow-public"),
        (["deploy", "--cron", "nope"], "a cron line has 5"),
        (["deploy", "--cron", "61 * * * *"], "minute '61': 61 is not from 0 to 59"),
        (["deploy", "--name", "a/b"], "--name"),
        (["simulate", "--domain", "hotel", "--tasks", ","], "',' names no task id"),
        (["serve-mcp", "hotel", "--task", "nope"], "domain hotel has no task 'nope'"),
    ],
)
def test_bad_input_is_refused_before_anything_starts(
    tmp_path: Path, args: list[str], says: str
) -> None:
    _refused(_run(tmp_path, args), says)
    assert list(tmp_path.iterdir()) == []  # no runs/ (Prefect home, models), no lake


@pytest.fixture
def lake_with_a_task_set(tmp_path: Path) -> Path:
    root = tmp_path / "lake"
    row = task_set_row("ts1", "one task", [("hotel", "hotel_001")], [("tasks", 0)])
    Lake(LakeSettings(root=str(root))).write(row.TABLE, [row], "test")
    return root


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([*TRAIN, "--task-set", "nope"], "task set 'nope' is not in the task_sets table"),
        (
            ["evaluate", "--model", "nope", "--task-set", "ts1", "--domain", "hotel"],
            "model 'nope' is not in the models table",
        ),
    ],
)
def test_unknown_ids_are_refused_before_prefect_starts(
    lake_with_a_task_set: Path, args: list[str], says: str
) -> None:
    cwd = lake_with_a_task_set.parent
    _refused(_run(cwd, args), says)
    assert sorted(p.name for p in cwd.iterdir()) == ["lake"]  # no runs/


@pytest.mark.parametrize("inside", [False, True])
@pytest.mark.parametrize(
    "args", [["tables"], ["query", "select count(*) from episodes"], ["annotate", "export"]]
)
def test_a_lake_root_that_is_a_file_is_an_error_not_an_empty_lake(
    tmp_path: Path, args: list[str], inside: bool
) -> None:
    """``MAESTRO_LAKE_ROOT=/etc/passwd`` listed every table as empty and answered queries."""
    (tmp_path / "passwd").write_text("root:x:0:0\n")
    root = tmp_path / "passwd" / "lake" if inside else tmp_path / "passwd"
    proc = _run(tmp_path, args, MAESTRO_LAKE_ROOT=str(root))
    _refused(proc, "a file" if inside else "is not a folder")
    assert proc.stdout == ""


def test_a_public_address_is_served_only_when_asked() -> None:
    with pytest.raises(typer.BadParameter, match="--allow-public"):
        listen_or_exit("0.0.0.0", 0, allow_public=False, what="x")
    listen_or_exit("0.0.0.0", 0, allow_public=True, what="x")
    listen_or_exit("127.0.0.2", 0, allow_public=False, what="x")  # loopback, any of /8


VALID = ["0 2 * * *", "*/15 0-6 1,15 jan-mar mon-fri", "@daily", "0 0 L * *", "0 9 * * fri#2"]
INVALID = ["nope", "61 * * * *", "0 0 * * 8", "* * * *", "0 0 */0 * *", "0 0 1-x * *"]


def test_the_cron_check_agrees_with_prefect() -> None:
    """What ``--cron`` refuses at parse time Prefect refuses too, and what it lets through
    Prefect accepts (its check runs again before it serves)."""
    from prefect.client.schemas.schedules import CronSchedule

    for line in VALID:
        assert cron(line) == line
        CronSchedule(cron=line)
    for line in INVALID:
        with pytest.raises(typer.BadParameter):
            cron(line)
        with pytest.raises(ValidationError):
            CronSchedule(cron=line)
