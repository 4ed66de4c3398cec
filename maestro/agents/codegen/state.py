"""The synthesis graph's state, its settings, and the events each stage attempt leaves.

The state holds only JSON values (the blueprint as its dict, files as text) so the LangGraph
checkpointer can store it and a crashed synthesis resumes from its last finished stage.
"""

from __future__ import annotations

import operator
from datetime import datetime
from typing import Annotated, Any, Literal, TypedDict

from pydantic import BaseModel, Field, model_validator

from maestro.agents.codegen.data import DataLimits

#: The stages in order; a fix sends the synthesis back to a stage, which redoes what follows it.
STAGES = ("blueprint", "data", "tools", "policy", "tasks", "review")
Stage = Literal["blueprint", "data", "tools", "policy", "tasks", "review"]
Status = Literal["running", "accepted", "rejected"]
Outcome = Literal["ok", "failed", "rejected", "error"]

#: The world's clock when none is given: a Monday morning, fixed so that episodes replay alike.
DEFAULT_CLOCK = datetime(2026, 1, 5, 9, 0)


class SynthesisConfig(BaseModel):
    """Bounds and sizes of one synthesis."""

    #: Attempts per stage (per tool for the tools stage) before the synthesis is rejected.
    max_iterations: int = Field(3, ge=1, le=20)
    #: Records the data program makes per main table (a table of one record per parent may
    #: hold fewer); each catalog is the model's whole list of about ``catalog_records``.
    records_per_table: int = Field(100, ge=1, le=10_000)
    catalog_records: int = Field(10, ge=1, le=1_000)
    #: Walk tasks and refusal tasks asked for.
    n_tasks: int = Field(10, ge=1, le=200)
    #: Walk tasks grow to one per write operation, the information requests beside them, so
    #: every operation the data allows is in some task's gold (``n_tasks`` is then the least).
    cover_operations: bool = True
    refusals: int = Field(3, ge=0, le=50)
    #: Of the walk tasks, up to this many are information requests (a quote, a status: the
    #: customer asks, the agent reads and tells, nothing changes).
    information: int = Field(2, ge=0, le=50)
    #: Refusals a tool enforces (no refills left: the tool refuses, the agent explains), beside
    #: the ``refusals`` of the agent rules.
    tool_refusals: int = Field(2, ge=0, le=50)
    #: Fewest tasks (refusals included) and fewest refusals for the domain to be kept.
    min_tasks: int = Field(8, ge=1)
    min_refusals: int = Field(1, ge=0)
    seed: int = 0
    review: bool = True
    #: The world's "now": every stage sees it, the data is dated around it, tools read it.
    clock: datetime = DEFAULT_CLOCK
    #: Deadline of one run of the graph; past it the synthesis stops as a crash (resumable).
    deadline_s: float = Field(7200.0, gt=0)

    def walk_target(self, writes: int) -> int:
        """The walk tasks asked for, for a domain of ``writes`` write operations."""
        if not self.cover_operations:
            return self.n_tasks
        return min(200, max(self.n_tasks, writes + self.information))

    @model_validator(mode="after")
    def _reachable(self) -> SynthesisConfig:
        # Never ask for more tasks to survive than are asked for: that would reject every domain.
        if self.min_tasks > self.n_tasks + self.refusals + self.tool_refusals:
            self.min_tasks = self.n_tasks + self.refusals + self.tool_refusals
        if self.min_refusals > self.refusals + self.tool_refusals:
            self.min_refusals = self.refusals + self.tool_refusals
        return self

    def limits(self) -> DataLimits:
        return DataLimits(
            main_size=self.records_per_table,
            catalog_size=self.catalog_records,
            least=min(10, self.records_per_table),
        )


class SynthesisEvent(BaseModel):
    """One stage attempt: what it cost and how it ended (a synthesis_events row)."""

    synthesis_id: str
    stage: str
    attempt: int
    outcome: Outcome
    detail: str = ""
    llm_calls: int = 0
    tokens: int = 0
    duration_s: float = 0.0

    @property
    def event_id(self) -> str:
        # A crash and the retry after it share an attempt number; both rows are kept.
        suffix = "/error" if self.outcome == "error" else ""
        return f"{self.synthesis_id}/{self.stage}/{self.attempt}{suffix}"


class SynthesisState(TypedDict, total=False):
    synthesis_id: str
    brief: str
    industry: str | None
    run_id: str | None
    #: The validated blueprint, as its JSON dict.
    blueprint: dict[str, Any] | None
    #: Package files written so far, by file name.
    files: dict[str, str]
    #: Tool code by operation name, for the operations whose tests pass.
    tools: dict[str, str]
    #: Each stage's last answer (``tools:<operation>`` for a tool), shown back with its error.
    drafts: dict[str, str]
    #: Attempts so far, by stage (``tools:<operation>`` for one tool).
    attempts: dict[str, int]
    #: The attempt at which each stage last succeeded (a reviewer's finding is bounded by the
    #: failures since, not by those before it succeeded).
    settled: dict[str, int]
    #: The error a stage's next attempt must fix, by stage.
    feedback: dict[str, str]
    #: Tasks a failed tasks attempt kept (tasks.jsonl lines); the next attempt adds to them.
    partial_tasks: str
    #: Tasks the task synthesis or the reviewer rejected, with why.
    rejected_tasks: list[str]
    #: Tasks the reviewer refused (tasks.jsonl lines): never made again.
    dropped_tasks: list[str]
    #: The reviewer's last finding on the tasks, told to the scenario writers.
    task_notes: str | None
    events: Annotated[list[dict[str, Any]], operator.add]
    #: The node to run next.
    route: str
    status: Status
    reason: str | None
    domain_id: str | None
