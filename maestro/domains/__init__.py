"""domains/: the package format, loader, state store, tool runtime and gold replay.

Never calls an LLM.
"""

from maestro.domains.errors import DomainLoadError, Problem, StoreError, ToolError
from maestro.domains.library import domain_path, library_ids, library_path
from maestro.domains.loader import inspect_package, load_domain
from maestro.domains.models import (
    Action,
    DomainManifest,
    EvaluationCriteria,
    ImportOrigin,
    InitialState,
    Provenance,
    RewardType,
    Task,
    UserInstructions,
    UserScenario,
    UserTurn,
)
from maestro.domains.package import Domain, ReplayResult, TaskStateError, replay_calls, replay_gold
from maestro.domains.runtime import Toolkit, ToolOutcome, ToolSpec
from maestro.domains.store import (
    RecordChange,
    Session,
    State,
    StateDiff,
    TableSpec,
    compare_sessions,
)

__all__ = [
    "Action",
    "Domain",
    "DomainLoadError",
    "DomainManifest",
    "EvaluationCriteria",
    "ImportOrigin",
    "InitialState",
    "Problem",
    "Provenance",
    "RecordChange",
    "ReplayResult",
    "RewardType",
    "Session",
    "State",
    "StateDiff",
    "StoreError",
    "TableSpec",
    "Task",
    "TaskStateError",
    "ToolError",
    "ToolOutcome",
    "ToolSpec",
    "Toolkit",
    "UserInstructions",
    "UserScenario",
    "UserTurn",
    "compare_sessions",
    "domain_path",
    "inspect_package",
    "library_ids",
    "library_path",
    "load_domain",
    "replay_calls",
    "replay_gold",
]
