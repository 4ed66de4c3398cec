"""The synthesis team's stages: one LangGraph node each, over :class:`SynthesisState`.

Every node runs one attempt of its stage and returns the state update, with one event that says
what the attempt cost and how it ended. A failed check sends the synthesis back to the stage that
owns it, with the error as that stage's feedback, until the stage has used its attempts; then
the synthesis is rejected with the last error as the reason.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maestro.agents.client import CallLog, ChatClient
from maestro.agents.codegen import prompts
from maestro.agents.codegen.blueprint import Blueprint, BlueprintError, parse_blueprint
from maestro.agents.codegen.checks import operation_tests, run_tests
from maestro.agents.codegen.prompts import ParseError, extract_code, extract_json
from maestro.agents.codegen.render import (
    db_json,
    fill_database,
    manifest_json,
    models_source,
    validate_records,
)
from maestro.agents.codegen.scenarios import synthesize_tasks, tasks_jsonl
from maestro.agents.codegen.state import Outcome, SynthesisConfig, SynthesisEvent, SynthesisState
from maestro.agents.codegen.tools_code import normalise_tool, tools_source
from maestro.domains.errors import DomainLoadError
from maestro.domains.sandbox import (
    SandboxLimits,
    check_models_source,
    check_tools_source,
    load_sandboxed_domain,
)

Update = dict[str, Any]

#: What each stage leaves in the package; a stage is due when its files are missing.
_OUTPUT = {"data": "db.json", "policy": "policy.md", "tasks": "tasks.jsonl"}
#: Files a stage invalidates when it is redone (what was built on top of it).
_DOWNSTREAM = {
    "blueprint": ("models.py", "db.json", "domain.json", "policy.md", "tasks.jsonl"),
    "data": ("db.json", "tasks.jsonl"),
    "tools": ("tasks.jsonl",),
    "policy": ("policy.md", "tasks.jsonl"),
    "tasks": ("tasks.jsonl",),
}


@dataclass
class _Attempt:
    stage: str
    number: int
    started: float
    calls_before: int


def next_stage(state: SynthesisState) -> str:
    """The first stage whose output is missing; review once everything is there."""
    files = state.get("files", {})
    if state.get("blueprint") is None:
        return "blueprint"
    if "db.json" not in files:
        return "data"
    ops = Blueprint.model_validate(state["blueprint"]).operations
    if any(op.name not in state.get("tools", {}) for op in ops):
        return "tools"
    for stage in ("policy", "tasks"):
        if _OUTPUT[stage] not in files:
            return stage
    return "review"


class SynthesisTeam:
    """The nodes of the graph, sharing one codegen client and one sandbox configuration."""

    def __init__(
        self,
        client: ChatClient,
        log: CallLog,
        config: SynthesisConfig,
        work_dir: Path,
        packages_dir: Path,
        limits: SandboxLimits | None = None,
    ) -> None:
        self.client = client
        self.log = log
        self.config = config
        self.work_dir = work_dir
        self.packages_dir = packages_dir
        self.limits = limits

    # ----- bookkeeping -------------------------------------------------------------------------

    def _begin(self, state: SynthesisState, key: str) -> tuple[_Attempt, dict[str, int]]:
        attempts = dict(state.get("attempts", {}))
        attempts[key] = attempts.get(key, 0) + 1
        return _Attempt(key, attempts[key], time.perf_counter(), len(self.log.calls)), attempts

    def _event(self, state: SynthesisState, att: _Attempt, outcome: Outcome, detail: str) -> Update:
        calls = self.log.calls[att.calls_before :]
        event = SynthesisEvent(
            synthesis_id=state["synthesis_id"],
            stage=att.stage,
            attempt=att.number,
            outcome=outcome,
            detail=detail[:4000],
            llm_calls=len(calls),
            tokens=sum(c.prompt_tokens + c.completion_tokens for c in calls),
            duration_s=round(time.perf_counter() - att.started, 3),
        )
        return event.model_dump()

    def _ok(self, state: SynthesisState, att: _Attempt, detail: str, **update: Any) -> Update:
        feedback = {k: v for k, v in state.get("feedback", {}).items() if k != att.stage}
        merged: SynthesisState = {**state, **update}  # type: ignore[typeddict-item]
        route = update.pop("route", None) or next_stage(merged)
        return {
            **update,
            "feedback": feedback,
            "events": [self._event(state, att, "ok", detail)],
            "route": route,
        }

    def _failed(
        self, state: SynthesisState, att: _Attempt, owner: str, error: str, **update: Any
    ) -> Update:
        """Send the error back to the stage that owns it, or reject when it has no attempts left."""
        used = {**state.get("attempts", {}), **update.get("attempts", {})}.get(owner, 0)
        if used >= self.config.max_iterations:
            reason = (
                f"stage {owner} failed {used} time(s), the bound is "
                f"{self.config.max_iterations}; last error: {error}"
            )
            event = self._event(state, att, "rejected", error)
            return {**update, "events": [event], "route": "reject", "reason": reason}
        feedback = {**state.get("feedback", {}), owner: error}
        target = owner.split(":")[0]
        files = {
            k: v
            for k, v in update.get("files", state.get("files", {})).items()
            if k not in _DOWNSTREAM.get(target, ())
        }
        return {
            **update,
            "files": files,
            "feedback": feedback,
            "events": [self._event(state, att, "failed", error)],
            "route": target,
        }

    async def _ask(self, state: SynthesisState, messages: list[dict[str, str]]) -> str:
        done = await self.client.complete(messages, episode=state["synthesis_id"])
        return done.message.content or ""

    def _package(self, state: SynthesisState, files: dict[str, str]) -> Path:
        """Write the package as it stands to the work folder (for the sandbox to load)."""
        root = self.work_dir / "package"
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        defaults = {"policy.md": "# Policy\n1. Pending.\n", "tasks.jsonl": ""}
        for name, text in {**defaults, **files}.items():
            (root / name).write_text(text, encoding="utf-8")
        return root

    # ----- stages ------------------------------------------------------------------------------

    async def blueprint(self, state: SynthesisState) -> Update:
        """The LLM designs the domain; the blueprint must validate and render to a safe models.py."""
        att, attempts = self._begin(state, "blueprint")
        feedback = state.get("feedback", {}).get("blueprint")
        text = await self._ask(
            state, prompts.blueprint_messages(state["brief"], state.get("industry"), feedback)
        )
        try:
            bp = parse_blueprint(extract_json(text), industry=state.get("industry"))
        except (ParseError, BlueprintError) as exc:
            return self._failed(state, att, "blueprint", str(exc), attempts=attempts)
        models = models_source(bp)
        problems = check_models_source(models, "models.py")
        if problems:
            error = "; ".join(str(p) for p in problems)
            return self._failed(state, att, "blueprint", error, attempts=attempts)
        digest = hashlib.sha256(state["synthesis_id"].encode()).hexdigest()[:6]
        return self._ok(
            state,
            att,
            f"{len(bp.entities)} entities, {len(bp.operations)} operations, {len(bp.rules)} rules",
            attempts=attempts,
            blueprint=bp.model_dump(mode="json"),
            domain_id=f"{bp.domain_id[:32]}_{digest}",
            files={"models.py": models},
            tools={},
        )

    async def data(self, state: SynthesisState) -> Update:
        """LLM-written records that fit the models, filled programmatically to size."""
        att, attempts = self._begin(state, "data")
        bp = Blueprint.model_validate(state["blueprint"])
        cfg = self.config
        db: dict[str, dict[str, Any]] = {e.table: {} for e in bp.entities}
        dropped: list[str] = []
        if cfg.llm_records_per_table:
            feedback = state.get("feedback", {}).get("data")
            text = await self._ask(
                state, prompts.data_messages(bp, cfg.llm_records_per_table, feedback)
            )
            try:
                db, dropped = validate_records(bp, extract_json(text))
            except ParseError as exc:
                return self._failed(state, att, "data", str(exc), attempts=attempts)
            if not any(db.values()):
                error = "no record fits the models: " + "; ".join(dropped[:6])
                return self._failed(state, att, "data", error, attempts=attempts)
        written = sum(len(rows) for rows in db.values())
        repaired = fill_database(bp, db, size=cfg.records_per_table, seed=cfg.seed)
        manifest = manifest_json(
            bp,
            domain_id=state["domain_id"] or bp.domain_id,
            synthesis_id=state["synthesis_id"],
            run_id=state.get("run_id"),
        )
        files = {"models.py": state["files"]["models.py"]}
        files.update({"db.json": db_json(db), "domain.json": manifest})
        detail = (
            f"{written} LLM records kept, {len(dropped)} dropped, "
            f"{len(repaired)} references repaired; tables hold {cfg.records_per_table}+ each"
        )
        if dropped:
            detail += "; dropped: " + "; ".join(dropped[:5])
        return self._ok(state, att, detail, attempts=attempts, files=files, tools={})

    async def tools(self, state: SynthesisState) -> Update:
        """One tool per visit: the LLM writes it, the blueprint's effects test it in the sandbox."""
        bp = Blueprint.model_validate(state["blueprint"])
        done = state.get("tools", {})
        op = next(o for o in bp.operations if o.name not in done)
        key = f"tools:{op.name}"
        att, attempts = self._begin(state, key)
        drafts = dict(state.get("drafts", {}))
        feedback = state.get("feedback", {}).get(key)
        text = await self._ask(
            state,
            prompts.tool_messages(bp, op, drafts.get(op.name) if feedback else None, feedback),
        )
        try:
            code = extract_code(text)
            drafts[op.name] = code
            function = normalise_tool(bp, op, code)
        except ParseError as exc:
            return self._failed(state, att, key, str(exc), attempts=attempts, drafts=drafts)
        error = self._test_tool(state, bp, {**done, op.name: function}, op.name)
        if error:
            return self._failed(state, att, key, error, attempts=attempts, drafts=drafts)
        tools = {**done, op.name: function}
        files = dict(state["files"])
        files["tools.py"] = tools_source(bp, tools)
        n = len(operation_tests(bp, op, json.loads(files["db.json"])))
        return self._ok(
            state,
            att,
            f"{n} tests pass",
            attempts=attempts,
            tools=tools,
            files=files,
            drafts=drafts,
        )

    def _test_tool(
        self, state: SynthesisState, bp: Blueprint, functions: dict[str, str], name: str
    ) -> str | None:
        """Static checks, then the tool's unit tests in the sandbox; the error text, or None."""
        source = tools_source(bp, functions)
        problems = check_tools_source(source, "tools.py")
        if problems:
            return "static check: " + "; ".join(str(p) for p in problems)
        root = self._package(state, {**state["files"], "tools.py": source})
        db = json.loads(state["files"]["db.json"])
        tests = operation_tests(bp, bp.operation(name), db)
        try:
            with load_sandboxed_domain(root, self.limits, check_gold=False) as domain:
                failures = run_tests(domain, tests)
        except DomainLoadError as exc:
            return "; ".join(str(p) for p in exc.problems)
        return "; ".join(failures[:5]) if failures else None

    async def policy(self, state: SynthesisState) -> Update:
        """policy.md from the blueprint's rules: a title and one numbered item per rule."""
        att, attempts = self._begin(state, "policy")
        bp = Blueprint.model_validate(state["blueprint"])
        feedback = state.get("feedback", {}).get("policy")
        text = await self._ask(state, prompts.policy_messages(bp, feedback))
        policy = _unfence(text)
        error = policy_problem(policy, len(bp.rules))
        if error:
            return self._failed(state, att, "policy", error, attempts=attempts)
        files = {**state["files"], "policy.md": policy}
        return self._ok(state, att, f"{len(policy)} characters", attempts=attempts, files=files)

    async def tasks(self, state: SynthesisState) -> Update:
        """Tasks grounded in the database by walks over the tools (run in the sandbox)."""
        att, attempts = self._begin(state, "tasks")
        cfg = self.config
        root = self._package(state, state["files"])
        seed = cfg.seed + attempts["tasks"] - 1  # a retry samples other walks
        try:
            with load_sandboxed_domain(root, self.limits, check_gold=False) as domain:
                found = await synthesize_tasks(
                    domain, self.client, n=cfg.n_tasks, seed=seed, refusals=cfg.refusals
                )
        except DomainLoadError as exc:
            error = "; ".join(str(p) for p in exc.problems)
            return self._failed(state, att, "tasks", error, attempts=attempts)
        rejected = [f"{reason}: {detail}" for reason, detail in found.rejected]
        if len(found.tasks) < cfg.min_tasks:
            error = f"{len(found.tasks)} task(s) survived, {cfg.min_tasks} needed; " + "; ".join(
                rejected[:4]
            )
            return self._failed(
                state, att, "tasks", error, attempts=attempts, rejected_tasks=rejected
            )
        files = {**state["files"], "tasks.jsonl": tasks_jsonl(found.tasks)}
        detail = f"{len(found.tasks)} tasks from {found.walks} walks, {len(rejected)} rejected"
        return self._ok(state, att, detail, attempts=attempts, files=files, rejected_tasks=rejected)

    async def review(self, state: SynthesisState) -> Update:
        """An LLM critic checks policy, tools and tasks against each other."""
        att, attempts = self._begin(state, "review")
        if not self.config.review:
            return self._ok(state, att, "review turned off", attempts=attempts, route="finalize")
        bp = Blueprint.model_validate(state["blueprint"])
        files = state["files"]
        tools = [f"{op.name} ({op.kind}): {op.description}" for op in bp.operations]
        tasks = [_task_line(line) for line in files["tasks.jsonl"].splitlines() if line.strip()]
        text = await self._ask(state, prompts.review_messages(files["policy.md"], tools, tasks))
        try:
            verdict = parse_review(text, [op.name for op in bp.operations])
        except ParseError as exc:
            return self._failed(state, att, "review", str(exc), attempts=attempts)
        if verdict is None:
            return self._ok(
                state, att, "policy, tools and tasks agree", attempts=attempts, route="finalize"
            )
        owner, problem = verdict
        update: Update = {"attempts": attempts}
        if owner.startswith("tools:"):
            name = owner.split(":", 1)[1]
            update["tools"] = {k: v for k, v in state["tools"].items() if k != name}
        return self._failed(state, att, owner, f"the reviewer found: {problem}", **update)

    async def finalize(self, state: SynthesisState) -> Update:
        """Write the package under the run folder and check it once more in the sandbox."""
        att, attempts = self._begin(state, "finalize")
        root = self.packages_dir / str(state["domain_id"])
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        for name, text in state["files"].items():
            (root / name).write_text(text, encoding="utf-8")
        try:
            with load_sandboxed_domain(root, self.limits) as domain:
                n = len(domain.tasks)
        except DomainLoadError as exc:
            reason = "the finished package does not load: " + "; ".join(
                str(p) for p in exc.problems
            )
            shutil.rmtree(root)
            event = self._event(state, att, "rejected", reason)
            return {"attempts": attempts, "events": [event], "route": "reject", "reason": reason}
        event = self._event(state, att, "ok", f"{root} ({n} tasks)")
        return {"attempts": attempts, "events": [event], "status": "accepted", "route": "end"}

    async def reject(self, state: SynthesisState) -> Update:
        """The end of a synthesis that ran out of attempts: the reason is kept."""
        return {"status": "rejected", "route": "end"}


def _unfence(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        try:
            return extract_code(stripped)
        except ParseError:
            return stripped.strip("`").strip() + "\n"
    return stripped + "\n"


def policy_problem(policy: str, n_rules: int) -> str | None:
    """Why a policy.md is not acceptable, or None."""
    lines = [line.strip() for line in policy.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("# "):
        return "the policy must start with a '# ' title line"
    items = [line for line in lines if line[:1].isdigit() and line.split(" ", 1)[0].endswith(".")]
    if len(items) < max(1, n_rules):
        return f"the policy has {len(items)} numbered item(s); it needs one per rule ({n_rules})"
    return None


def parse_review(text: str, tools: list[str]) -> tuple[str, str] | None:
    """None when the critic approves; else the owner to send back to (``tools:<name>`` for a
    tool) and the problem. :class:`ParseError` when the verdict is not usable."""
    data = extract_json(text)
    if not isinstance(data, dict) or data.get("verdict") not in ("ok", "fix"):
        raise ParseError('the review must be JSON with "verdict": "ok" or "fix"')
    if data["verdict"] == "ok":
        return None
    stage = data.get("stage")
    problem = str(data.get("problem") or "").strip()
    if stage not in ("policy", "tools", "tasks") or not problem:
        raise ParseError('a "fix" verdict needs "stage" (policy, tools or tasks) and "problem"')
    if stage == "tools":
        tool = data.get("tool")
        if tool not in tools:
            raise ParseError(f'a tools fix must name one of the tools {tools} in "tool"')
        return f"tools:{tool}", problem
    return str(stage), problem


def _task_line(line: str) -> str:
    task = json.loads(line)
    crit = task.get("evaluation_criteria", {})
    calls = [a["name"] for a in crit.get("actions", [])]
    forbidden = [a["name"] for a in crit.get("forbidden_actions", [])]
    said = task["user_scenario"]["instructions"]["reason_for_call"]
    out = f"{task['id']}: customer says {said!r}; gold calls {calls}"
    return out + (f"; must refuse {forbidden}" if forbidden else "")
