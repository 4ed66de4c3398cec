"""BFCL's own multi-turn checker on a maestro trajectory, run in the sandbox.

The trajectory is turned into what BFCL's eval runner hands ``multi_turn_checker``: per user
turn, per assistant step (a message with tool calls), the calls as BFCL writes them
(``name(arg=repr(value),...)``, its ``convert_to_function_call``). A step whose arguments are
not a JSON object is dropped, as BFCL's runner drops a step it cannot decode; a text-only
message is not a step. The runner's own pre-check comes first: a trajectory with fewer turns
than the ground truth was cut short ("force_terminated") and fails. Then the checker, with
the test entry and ground truth read from BFCL's data files, runs in a sandbox child (BFCL
executes both sides' calls natively there), and its verdict comes back as plain JSON.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from maestro.conversation import Trajectory
from maestro.domains.errors import Problem
from maestro.domains.files import read_text
from maestro.domains.importers.bfcl import BfclService, bfcl_service, long_context, read_category
from maestro.domains.importers.bfcl_package import (
    BENCHMARK,
    DISTRIBUTION,
    BfclDataError,
    bfcl_version,
    classes_of,
)
from maestro.domains.models import Task
from maestro.domains.package import Domain


@dataclass(frozen=True)
class BfclCheck:
    """BFCL's verdict on one trajectory: ``valid`` None when its checker itself failed."""

    valid: bool | None
    error_type: str | None = None
    message: str | None = None
    details: str | None = None

    @property
    def status(self) -> Literal["pass", "fail", "error"]:
        return "error" if self.valid is None else "pass" if self.valid else "fail"


def call_string(name: str, arguments: dict[str, Any]) -> str:
    """A call as BFCL's ``convert_to_function_call`` writes it."""
    return f"{name}({','.join(f'{k}={v!r}' for k, v in arguments.items())})"


def bfcl_turns(trajectory: Trajectory) -> list[list[list[str]]]:
    """The trajectory as BFCL's decoded model result: turns, then steps, then call strings."""
    turns: list[list[list[str]]] = []
    for message in trajectory.messages:
        if message.role == "user":
            turns.append([])
        elif message.role == "assistant" and message.tool_calls and turns:
            calls = message.tool_calls
            if all(isinstance(c.arguments, dict) for c in calls):
                turns[-1].append([call_string(c.name, c.arguments) for c in calls])  # type: ignore[arg-type]
    return turns


@cache
def _entries(category: str) -> tuple[dict[str, dict[str, Any]], dict[str, list[list[str]]]]:
    entries, answers = read_category(category)
    return {e["id"]: e for e in entries}, answers


def entry_of(task: Task) -> tuple[str, dict[str, Any], list[list[str]]]:
    """(category, test entry, ground truth) of an imported BFCL task, from BFCL's files."""
    origin = task.provenance.imported_from
    if origin is None or origin.benchmark != BENCHMARK or not origin.category:
        raise BfclDataError(f"task {task.id} was not imported from {BENCHMARK}")
    installed = bfcl_version()
    if origin.version != installed:
        raise BfclDataError(
            f"task {task.id} was imported from {DISTRIBUTION} {origin.version}; {installed} is installed"
        )
    entries, answers = _entries(origin.category)
    item = origin.item_id or task.id
    if item not in entries:
        raise BfclDataError(f"{origin.category} has no entry {item!r}")
    entry = entries[item]
    slim = {k: entry[k] for k in ("id", "initial_config", "involved_classes")}
    return origin.category, slim, answers[item]


class BfclChecker:
    """BFCL's checker for one imported domain's tasks; its sandbox child starts on the first
    check and stops on :meth:`close`."""

    def __init__(self, domain: Domain) -> None:
        if domain.path is None:
            raise BfclDataError(f"domain {domain.id} has no package folder")
        # Read as the load reads it (no link, one name, capped); classes_of admits BFCL's
        # own classes and modules only, so no other module reaches the service's grant.
        problems: list[Problem] = []
        source = read_text(domain.path, "tools.py", problems)
        if source is None:
            raise BfclDataError("; ".join(map(str, problems)) or f"{domain.path}: no tools.py")
        self.modules = [c.module for c in classes_of(source)]
        self.name = f"{DISTRIBUTION}=={bfcl_version()} multi_turn_checker"
        self._stack = contextlib.ExitStack()
        self._service: BfclService | None = None

    def _ask(self, tool: str, **arguments: Any) -> Any:
        if self._service is None:
            self._service = self._stack.enter_context(bfcl_service(self.modules))
        return self._service.ask(tool, **arguments)

    def check(self, task: Task, trajectory: Trajectory) -> BfclCheck:
        """BFCL's verdict on the trajectory; an error verdict when BFCL's data or code fail."""
        try:
            category, entry, ground_truth = entry_of(task)
            turns = bfcl_turns(trajectory)
            if len(turns) != len(ground_truth):
                return BfclCheck(
                    False,
                    "multi_turn:force_terminated",
                    f"the model result has {len(turns)} turns; the ground truth"
                    f" {len(ground_truth)}",
                )
            out = self._ask(
                "check",
                entry=entry,
                ground_truth=ground_truth,
                answer_turns=turns,
                category=category,
            )
        except (BfclDataError, OSError, ValueError) as exc:
            return BfclCheck(None, "maestro:checker_unavailable", str(exc))
        return BfclCheck(out["valid"], out["error_type"], out["error_message"], out.get("details"))

    def execute(self, task: Task, turns: list[list[str]]) -> dict[str, Any]:
        """BFCL's executor on call strings, per turn: result texts and final state (for the
        fidelity check of maestro's tools against BFCL's)."""
        category, entry, _ = entry_of(task)
        result: dict[str, Any] = self._ask(
            "execute", entry=entry, turns=turns, long_context=long_context(category)
        )
        return result

    def close(self) -> None:
        self._stack.close()
        self._service = None


def ground_truth_strings(task: Task) -> list[list[str]]:
    """BFCL's ground-truth call strings of an imported task, per turn."""
    return entry_of(task)[2]
