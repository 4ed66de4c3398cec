"""The synthesis graph's state, its settings, and the events each stage attempt leaves.

The state holds only JSON values (the blueprint as its dict, files as text) so the LangGraph
checkpointer can store it and a crashed synthesis resumes from its last finished stage.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, TypedDict

from pydantic import BaseModel, Field

#: The stages in order; a fix sends the synthesis back to a stage, which redoes what follows it.
STAGES = ("blueprint", "data", "tools", "policy", "tasks", "review")
Stage = Literal["blueprint", "data", "tools", "policy", "tasks", "review"]
Status = Literal["running", "accepted", "rejected"]
Outcome = Literal["ok", "failed", "rejected", "error"]


class SynthesisConfig(BaseModel):
    """Bounds and sizes of one synthesis."""

    #: Attempts per stage (per tool for the tools stage) before the synthesis is rejected.
    max_iterations: int = Field(3, ge=1, le=20)
    #: Records the LLM writes per table; the rest are filled programmatically.
    llm_records_per_table: int = Field(3, ge=0, le=20)
    records_per_table: int = Field(6, ge=1, le=10_000)
    n_tasks: int = Field(4, ge=1, le=200)
    refusals: int = Field(1, ge=0, le=50)
    #: Fewest tasks whose gold replay succeeds for the domain to be kept.
    min_tasks: int = Field(1, ge=1)
    seed: int = 0
    review: bool = True
    #: Deadline of one run of the graph; past it the synthesis stops as a crash (resumable).
    deadline_s: float = Field(7200.0, gt=0)


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
    #: The model's last code per operation, shown back to it with the error to fix.
    drafts: dict[str, str]
    #: Attempts so far, by stage (``tools:<operation>`` for one tool).
    attempts: dict[str, int]
    #: The error a stage's next attempt must fix, by stage.
    feedback: dict[str, str]
    #: Tasks the task synthesis rejected, with why.
    rejected_tasks: list[str]
    events: Annotated[list[dict[str, Any]], operator.add]
    #: The node to run next.
    route: str
    status: Status
    reason: str | None
    domain_id: str | None
