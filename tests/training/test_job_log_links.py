"""The local launcher's ``job.log`` as hostile ground (issue 23, third red team, cases 03 and
04): a hard link planted as ``job.log`` must not be written into, a ``job.log`` swapped for a
link while the job runs must not be read back, and a huge log is read back by its tail only.

The "Python" that runs the job is a small shell script standing in for ``accelerate``: a real
child process writing to the log the launcher opened, and doing what a hostile job folder's
neighbour would do while it runs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from maestro.domains.files import TargetError, open_log
from maestro.training.job import TrainJob
from maestro.training.launchers import (
    RELAY_BYTES,
    TAIL_CHARS,
    LaunchSettings,
    LocalLauncher,
    read_log_tail,
)
from maestro.training.recipes import RecipeSettings

SECRET = "a line of a file outside the run folder\n"


def _job(out: Path) -> TrainJob:
    return TrainJob(
        training_run_id="links-1",
        run_id="links-1",
        recipe=RecipeSettings(method="sft", max_steps=1),
        dataset_id="sft/none",
        dataset_uri=str(out / "none.parquet"),
        task_set_id="none",
        lake_root=str(out / "lake"),
        output_dir=str(out),
    )


def _fake_python(tmp_path: Path, body: str) -> str:
    """An executable standing in for the job's Python; ``$dir`` is the job's output folder
    (the folder of the spec, its last argument)."""
    script = tmp_path / "fake-python"
    script.write_text(f'#!/bin/bash\ndir="$(dirname "${{@: -1}}")"\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def _launch(tmp_path: Path, body: str, seen: list[str] | None = None) -> tuple[Path, str]:
    out = tmp_path / "run"
    out.mkdir(exist_ok=True)
    settings = LaunchSettings(deadline_s=60, python=_fake_python(tmp_path, body))
    result = LocalLauncher(settings).launch(_job(out), None if seen is None else seen.append)
    return out, result.logs_tail


def test_a_hard_link_planted_as_job_log_is_replaced_not_written_into(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(SECRET)
    (tmp_path / "run").mkdir()
    os.link(outside, tmp_path / "run" / "job.log")
    out, tail = _launch(tmp_path, "echo the job ran")
    assert outside.read_text() == SECRET  # it was truncated and overwritten
    assert (out / "job.log").read_text() == "the job ran\n" == tail
    assert (out / "job.log").stat().st_nlink == 1 and outside.stat().st_nlink == 1


def test_a_job_log_swapped_for_a_link_mid_job_is_not_read_back(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(SECRET)
    seen: list[str] = []
    swap = f'echo the job ran; ln -s {outside} "$dir/swap"; mv -T "$dir/swap" "$dir/job.log"'
    out, tail = _launch(tmp_path, swap, seen)
    assert (out / "job.log").is_symlink()  # the swap happened while the job ran
    assert tail == "the job ran\n" and seen == [tail]
    assert "outside the run folder" not in tail


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_link_fifo_or_folder_already_named_job_log_is_refused(kind: str, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    {"symlink": lambda: log.symlink_to(tmp_path / "elsewhere"), "fifo": lambda: os.mkfifo(log)}.get(
        kind, log.mkdir
    )()
    with pytest.raises(TargetError, match=r"job\.log: it is a (symbolic link|FIFO|folder)"):
        open_log(log)
    assert not (tmp_path / "elsewhere").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["job.log"]  # no temporary file left


def test_a_huge_log_is_read_back_by_its_tail(tmp_path: Path) -> None:
    """40 MB of output: the lake keeps the last characters, the relay gets a bounded tail."""
    seen: list[str] = []
    body = "head -c 40000000 /dev/zero | tr '\\0' 'x'; echo; echo the last line"
    out, tail = _launch(tmp_path, body, seen)
    assert (out / "job.log").stat().st_size == 40_000_000 + 15
    assert len(tail) == TAIL_CHARS and tail.endswith("x\nthe last line\n")
    assert len(seen[0]) <= RELAY_BYTES and seen[0].endswith(tail)


def test_a_tail_starting_inside_a_character_drops_the_cut_character(tmp_path: Path) -> None:
    fd = open_log(tmp_path / "job.log")
    try:
        os.write(fd, "é€😀".encode() + b"end")  # 2 + 3 + 4 bytes, then 3
        assert read_log_tail(fd, limit=8) == "😀end"  # starts inside the euro sign
        assert read_log_tail(fd, limit=100) == "é€😀end"
    finally:
        os.close(fd)
