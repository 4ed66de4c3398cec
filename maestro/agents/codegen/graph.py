"""The synthesis graph: a LangGraph StateGraph over the team's stages, checkpointed to SQLite.

::

    blueprint ─► data ─► tools (one per visit) ─► policy ─► tasks ─► review ─► finalize
        ▲          ▲        ▲                        ▲         ▲         │
        └──────────┴────────┴── a failed check goes back to its owner ──┘─► reject (bound hit)

Each node names the next one in the state (``route``); the checkpointer stores the state after
every node under ``thread_id = synthesis id``, so running the same synthesis id again resumes
after the last finished node without repeating its LLM calls.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field

from maestro.agents.client import CallLog, ChatClient
from maestro.agents.codegen.stages import SynthesisTeam
from maestro.agents.codegen.state import SynthesisConfig, SynthesisEvent, SynthesisState
from maestro.domains.sandbox import SandboxLimits


class SynthesisNotFoundError(ValueError):
    """Resuming a synthesis id that has no checkpoint in the run folder."""


NODES = ("blueprint", "data", "tools", "policy", "tasks", "review", "finalize", "reject")


class Brief(BaseModel):
    """What to synthesize: an industry and a few sentences."""

    text: str = Field(min_length=10, max_length=2000)
    industry: str | None = Field(None, max_length=80)


class SynthesisResult(BaseModel):
    """How one synthesis ended, with every stage attempt's event."""

    synthesis_id: str
    brief: str
    industry: str | None = None
    status: Literal["accepted", "rejected", "error"]
    reason: str | None = None
    domain_id: str | None = None
    #: The accepted package's folder.
    package: str | None = None
    blueprint: dict[str, Any] | None = None
    events: list[SynthesisEvent] = Field(default_factory=list)
    rejected_tasks: list[str] = Field(default_factory=list)
    #: True when this run continued a synthesis a crash had stopped.
    resumed: bool = False
    wall_s: float = 0.0

    @property
    def llm_calls(self) -> int:
        return sum(e.llm_calls for e in self.events)

    @property
    def tokens(self) -> int:
        return sum(e.tokens for e in self.events)


def build_graph(team: SynthesisTeam) -> StateGraph[SynthesisState]:
    """The uncompiled graph over the team's nodes."""
    graph: StateGraph[SynthesisState] = StateGraph(SynthesisState)
    for name in NODES:
        graph.add_node(name, getattr(team, name))
    graph.add_edge(START, "blueprint")
    targets: dict[str, str] = {n: n for n in NODES}
    targets["end"] = END
    for name in NODES:
        graph.add_conditional_edges(name, _route, targets)  # type: ignore[arg-type]
    return graph


def _route(state: SynthesisState) -> str:
    return state.get("route") or "end"


def synthesis_folder(run_dir: Path, synthesis_id: str) -> Path:
    """Where one synthesis keeps its checkpoints and work files."""
    return run_dir / "synthesis" / synthesis_id


async def run_synthesis(
    brief: Brief | None,
    client: ChatClient,
    log: CallLog,
    *,
    run_dir: Path,
    synthesis_id: str,
    config: SynthesisConfig | None = None,
    run_id: str | None = None,
    limits: SandboxLimits | None = None,
) -> SynthesisResult:
    """Synthesize one domain, or resume the synthesis of that id where it stopped.

    ``client`` is the codegen role's; ``log`` must be its endpoints' recorder (stage events count
    the calls in it). Accepted packages go to ``run_dir/domains/<domain id>``. A crash (provider
    failure after retries, an exception in a stage) ends in status ``error`` with the state kept,
    and the next call with the same id resumes. ``brief`` may be None only to resume.
    """
    cfg = config or SynthesisConfig()
    folder = synthesis_folder(run_dir, synthesis_id)
    if brief is None and not (folder / "checkpoints.sqlite").is_file():
        raise SynthesisNotFoundError(
            f"no synthesis {synthesis_id!r} to resume under {folder.parent}"
        )
    folder.mkdir(parents=True, exist_ok=True)
    team = SynthesisTeam(client, log, cfg, folder / "work", run_dir / "domains", limits)
    started = time.perf_counter()
    thread: RunnableConfig = {
        "configurable": {"thread_id": synthesis_id},
        "recursion_limit": 40 * cfg.max_iterations + 60,
    }
    async with AsyncSqliteSaver.from_conn_string(str(folder / "checkpoints.sqlite")) as saver:
        graph = build_graph(team).compile(checkpointer=saver)
        snapshot = await graph.aget_state(thread)
        resumed = bool(snapshot.values)
        crash: SynthesisEvent | None = None
        if not resumed or snapshot.next:
            initial = _initial_state(brief, synthesis_id, run_id)
            calls_before = len(log.calls)
            try:
                async with asyncio.timeout(cfg.deadline_s):
                    await graph.ainvoke(None if resumed else initial, thread, durability="sync")
            except TimeoutError:
                late = TimeoutError(f"the synthesis ran past its deadline of {cfg.deadline_s:g} s")
                crash = await _crash_event(graph, thread, synthesis_id, late, log, calls_before)
            except Exception as exc:  # a crash is stored and resumable, not lost
                crash = await _crash_event(graph, thread, synthesis_id, exc, log, calls_before)
        final = (await graph.aget_state(thread)).values
    return _result(final, synthesis_id, crash, resumed, time.perf_counter() - started, run_dir)


def _initial_state(brief: Brief | None, synthesis_id: str, run_id: str | None) -> SynthesisState:
    return {
        "synthesis_id": synthesis_id,
        "brief": brief.text if brief else "",
        "industry": brief.industry if brief else None,
        "run_id": run_id,
        "blueprint": None,
        "files": {},
        "tools": {},
        "drafts": {},
        "attempts": {},
        "feedback": {},
        "partial_tasks": "",
        "rejected_tasks": [],
        "dropped_tasks": [],
        "task_notes": None,
        "events": [],
        "status": "running",
        "reason": None,
        "domain_id": None,
    }


async def _crash_event(
    graph: Any, thread: Any, synthesis_id: str, exc: Exception, log: CallLog, calls_before: int
) -> SynthesisEvent:
    snapshot = await graph.aget_state(thread)
    stage = snapshot.next[0] if snapshot.next else "unknown"
    attempts: dict[str, int] = snapshot.values.get("attempts", {})
    calls = log.calls[calls_before:]
    return SynthesisEvent(
        synthesis_id=synthesis_id,
        stage=stage,
        attempt=attempts.get(stage, 0) + 1,
        outcome="error",
        detail=f"{type(exc).__name__}: {exc}"[:4000],
        llm_calls=len(calls),
        tokens=sum(c.prompt_tokens + c.completion_tokens for c in calls),
    )


def _result(
    state: dict[str, Any],
    synthesis_id: str,
    crash: SynthesisEvent | None,
    resumed: bool,
    wall_s: float,
    run_dir: Path,
) -> SynthesisResult:
    events = [SynthesisEvent.model_validate(e) for e in state.get("events", [])]
    status = state.get("status", "running")
    reason = state.get("reason")
    if crash is not None:
        events.append(crash)
        status, reason = "error", f"stage {crash.stage} crashed: {crash.detail}"
    elif status == "running":  # cannot happen with the graph's routes; said loudly if it does
        status, reason = "error", "the graph stopped without accepting or rejecting"
    domain_id = state.get("domain_id")
    package = run_dir / "domains" / str(domain_id)
    return SynthesisResult(
        synthesis_id=synthesis_id,
        brief=state.get("brief", ""),
        industry=state.get("industry"),
        status=status,
        reason=reason,
        domain_id=domain_id,
        package=str(package) if status == "accepted" else None,
        blueprint=state.get("blueprint"),
        events=events,
        rejected_tasks=state.get("rejected_tasks", []),
        resumed=resumed,
        wall_s=round(wall_s, 3),
    )
