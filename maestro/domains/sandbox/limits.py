"""How much a sandbox child may use and send: CPU, memory, processes, time, replies, writes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SandboxLimits(BaseModel):
    """Limits of one sandbox child process; every field has a safe default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_timeout_s: float = Field(
        5.0, gt=0, description="wall time of one tool call (a call's own deadline_s overrides it)"
    )
    kill_grace_s: float = Field(
        1.0, gt=0, description="past the deadline, how long before the child is killed"
    )
    cpu_s: float = Field(10.0, gt=0, description="CPU seconds one tool call may use (RLIMIT_CPU)")
    memory_mb: int = Field(1024, ge=256, description="address space of the child (RLIMIT_AS)")
    max_processes: int = Field(
        0, ge=0, description="processes the child may start (RLIMIT_NPROC); 0 means none"
    )
    startup_timeout_s: float = Field(
        60.0, gt=0, description="wall time to start the child and load the package"
    )
    max_reply_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        description=(
            "largest answer text of one call the host accepts, in bytes on the wire and in bytes"
            " the decoded text holds (4 a character once one character is past U+FFFF)"
        ),
    )
    max_writes: int = Field(
        1000, ge=1, description="most records one call may write (insert, change or delete)"
    )
    max_write_bytes: int = Field(
        1024 * 1024, ge=1024, description="largest size of one call's writes, as JSON"
    )
    max_write_nodes: int = Field(
        100_000, ge=100, description="most JSON values in one call's writes (host memory)"
    )
    max_session_write_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1024,
        description="largest size of all the writes one session accepts, as JSON",
    )
    max_session_write_nodes: int = Field(
        1_000_000, ge=100, description="most JSON values in all the writes one session accepts"
    )
    max_session_held_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description=(
            "most memory the host holds for one session's answers and writes, counted as Python"
            " holds them (a replay, an episode, an MCP session)"
        ),
    )
    max_held_bytes: int = Field(
        512 * 1024 * 1024,
        ge=1024,
        description=(
            "most memory the host holds for the answers and writes of all the live sessions of"
            " one sandboxed domain (a server's sessions), counted as Python holds them"
        ),
    )
    max_package_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description="largest description of the package (schemas and the normalized database)",
    )
    uid: int = Field(65534, ge=1, description="the unprivileged user the child runs as (nobody)")
    gid: int = Field(65534, ge=1, description="the unprivileged group the child runs as")
