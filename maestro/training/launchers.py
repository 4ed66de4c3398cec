"""Where a training job runs: this machine (CPU or its GPUs), or a Ray cluster as a Ray job.

Both start ``maestro.training.job`` under ``accelerate launch`` (one process per GPU). The Ray
launcher submits through Ray's job submission client with the flow run id as submission id,
asks for GPUs with ``entrypoint_num_gpus``, and polls status and logs back until the job ends
or the deadline passes (then it stops the job). Nothing waits without a deadline.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from maestro.domains.files import open_log, write_file
from maestro.training.job import TrainJob

Status = Literal["succeeded", "failed", "stopped", "timed_out"]
LogSink = Callable[[str], None]


class LaunchError(Exception):
    """A job could not be submitted, or its status could not be read."""


class LaunchResult(BaseModel):
    submission_id: str
    status: Status
    logs_tail: str
    wall_s: float


class LaunchSettings(BaseModel):
    """How a job is started; the same for both launchers."""

    #: GPUs for the job; 0 runs on CPU.
    num_gpus: int = Field(0, ge=0)
    deadline_s: float = Field(6 * 3600.0, gt=0)
    #: The Python that runs ``accelerate`` on the machine that runs the job.
    python: str = Field(default_factory=lambda: sys.executable)
    mixed_precision: Literal["no", "bf16", "fp16"] = "no"


def entrypoint(spec: Path, settings: LaunchSettings) -> list[str]:
    """``accelerate launch`` of the job module, one process per GPU (one on CPU)."""
    procs = max(1, settings.num_gpus)
    cmd = [
        settings.python,
        "-m",
        "accelerate.commands.launch",
        "--num_processes",
        str(procs),
        "--num_machines",
        "1",
        "--mixed_precision",
        settings.mixed_precision if settings.num_gpus else "no",
        "--dynamo_backend",
        "no",
    ]
    if settings.num_gpus == 0:
        cmd.append("--cpu")
    elif procs > 1:
        cmd.append("--multi_gpu")
    return [*cmd, "-m", "maestro.training.job", str(spec)]


def write_spec(job: TrainJob) -> Path:
    return write_file(Path(job.output_dir) / "job.json", job.model_dump_json(indent=2))


#: Characters of a job's output kept in :class:`LaunchResult` (and in the lake).
TAIL_CHARS = 4000
#: Bytes of a local job's log read back for ``on_logs`` (the flow relays its last lines): the
#: end of a log of gigabytes, never all of it.
RELAY_BYTES = 256 * 1024


def _tail(text: str, chars: int = TAIL_CHARS) -> str:
    return text[-chars:]


def read_log_tail(fd: int, limit: int = RELAY_BYTES) -> str:
    """The last ``limit`` bytes of the log open as ``fd``, as text (a character cut by the
    start dropped). Read through the descriptor the job wrote, never by name: ``job.log``
    swapped for a link while the job ran read any file into ``logs_tail``, which the lake
    keeps."""
    start = max(0, os.fstat(fd).st_size - limit)
    data = bytearray()
    while len(data) < limit and (chunk := os.pread(fd, limit - len(data), start + len(data))):
        data += chunk
    if start:  # the read may begin inside a character: skip its continuation bytes
        data = data.lstrip(bytes(range(0x80, 0xC0)))
    return data.decode("utf-8", errors="replace")


class LocalLauncher:
    """Runs the job as a child process of this one."""

    def __init__(self, settings: LaunchSettings | None = None) -> None:
        self.settings = settings or LaunchSettings()

    def launch(self, job: TrainJob, on_logs: LogSink | None = None) -> LaunchResult:
        spec = write_spec(job)
        started = time.perf_counter()
        log = open_log(Path(job.output_dir) / "job.log")
        try:
            status = self._run(spec, log)
            text = read_log_tail(log)
        finally:
            os.close(log)
        if on_logs is not None:
            on_logs(text)
        return LaunchResult(
            submission_id=job.training_run_id,
            status=status,
            logs_tail=_tail(text),
            wall_s=time.perf_counter() - started,
        )

    def _run(self, spec: Path, log: int) -> Status:
        """The job as a child writing to ``log``, waited for until the deadline."""
        proc = subprocess.Popen(
            entrypoint(spec, self.settings), stdout=log, stderr=subprocess.STDOUT
        )
        try:
            code = proc.wait(timeout=self.settings.deadline_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            return "timed_out"
        return "succeeded" if code == 0 else "failed"


class RaySettings(LaunchSettings):
    """A Ray cluster's job server (the dashboard address, e.g. ``http://head:8265``)."""

    address: str = "http://127.0.0.1:8265"
    poll_s: float = Field(2.0, gt=0)
    num_cpus: float = Field(1.0, gt=0)
    #: Environment variables for the job (lake credentials, HF caches, MLflow URI...).
    env_vars: dict[str, str] = Field(default_factory=dict)


class RayJobLauncher:
    """Submits the job to a Ray cluster and follows it to its end."""

    def __init__(self, settings: RaySettings) -> None:
        self.settings = settings

    def _client(self) -> object:
        from ray.job_submission import JobSubmissionClient

        try:
            return JobSubmissionClient(self.settings.address)
        except Exception as exc:  # connection refused, auth, version: all one launch error
            raise LaunchError(f"Ray job server at {self.settings.address}: {exc}") from exc

    def launch(self, job: TrainJob, on_logs: LogSink | None = None) -> LaunchResult:
        from ray.job_submission import JobStatus, JobSubmissionClient

        s = self.settings
        client = self._client()
        assert isinstance(client, JobSubmissionClient)
        spec = write_spec(job)
        started = time.perf_counter()
        try:
            sid = client.submit_job(
                entrypoint=shlex.join(entrypoint(spec, s)),
                submission_id=job.training_run_id,
                entrypoint_num_gpus=s.num_gpus,
                entrypoint_num_cpus=s.num_cpus,
                runtime_env={"env_vars": dict(s.env_vars)} if s.env_vars else None,
            )
        except Exception as exc:
            raise LaunchError(f"submitting job {job.training_run_id}: {exc}") from exc
        seen = 0
        status: Status = "timed_out"
        deadline = started + s.deadline_s
        while time.perf_counter() < deadline:
            state = client.get_job_status(sid)
            logs = client.get_job_logs(sid)
            if on_logs is not None and len(logs) > seen:
                on_logs(logs[seen:])
            seen = len(logs)
            if state.is_terminal():
                status = {
                    JobStatus.SUCCEEDED: "succeeded",
                    JobStatus.STOPPED: "stopped",
                }.get(state, "failed")  # type: ignore[assignment]
                break
            time.sleep(s.poll_s)
        else:
            client.stop_job(sid)
        logs = client.get_job_logs(sid)
        write_file(Path(job.output_dir) / "job.log", logs)
        return LaunchResult(
            submission_id=sid,
            status=status,
            logs_tail=_tail(logs),
            wall_s=time.perf_counter() - started,
        )
