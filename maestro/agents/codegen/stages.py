"""The synthesis team's stages: one LangGraph node each, over :class:`SynthesisState`.

Every node runs one attempt of its stage and returns the state update, with one event that says
what the attempt cost and how it ended. A failed check sends the synthesis back to the stage that
owns it, with the error as that stage's feedback and its previous answer kept as its draft, so
the next attempt sees both; when the stage has used its attempts the synthesis is rejected with
the last error as the reason. JSON stages send their answer's JSON Schema as ``response_format``.
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
from maestro.agents.codegen.answers import (
    ParseError,
    ReviewAnswer,
    ReviewFinding,
    extract_code,
    extract_json,
    parse_review,
    policy_problem,
    response_format,
    unfence,
)
from maestro.agents.codegen.blueprint import Blueprint, BlueprintDraft, BlueprintError
from maestro.agents.codegen.checks import (
    ToolTest,
    effect_law_problems,
    fixture_problems,
    operation_tests,
    untestable,
)
from maestro.agents.codegen.data import Database, law_report_lines, world_problems, world_sample
from maestro.agents.codegen.example import copies_example
from maestro.agents.codegen.generator import (
    GeneratorError,
    Sizes,
    normalise_generator,
    run_generator,
)
from maestro.agents.codegen.guide import walk_guide
from maestro.agents.codegen.normalise import parse_blueprint
from maestro.agents.codegen.properties import argument_pools, check_properties
from maestro.agents.codegen.refusals import refusal_rules, tool_rules
from maestro.agents.codegen.render import db_json, laws_json, manifest_json, models_source
from maestro.agents.codegen.scenarios import (
    is_tool_refusal,
    synthesize_tasks,
    task_signature,
    tasks_jsonl,
    unrefused,
)
from maestro.agents.codegen.state import Outcome, SynthesisConfig, SynthesisEvent, SynthesisState
from maestro.agents.codegen.tools_code import normalise_tool, tools_source
from maestro.agents.codegen.verify import run_tests
from maestro.domains.errors import DomainLoadError
from maestro.domains.laws import unmet_laws
from maestro.domains.models import Task
from maestro.domains.sandbox import (
    SandboxLimits,
    check_models_source,
    check_tools_source,
    load_sandboxed_domain,
)

Update = dict[str, Any]

#: What each stage leaves in the package; a stage is due when its files are missing.
_OUTPUT = {"data": "db.json", "policy": "policy.md", "tasks": "tasks.jsonl"}
#: Files a stage invalidates when it is redone (what was built on top of it). The blueprint
#: decides itself what survives a new version (:meth:`SynthesisTeam._after_blueprint`).
_DOWNSTREAM = {
    "data": ("db.json", "tasks.jsonl"),
    "tools": ("tasks.jsonl",),
    "policy": ("policy.md", "tasks.jsonl"),
    "tasks": ("tasks.jsonl",),
}


def _what_failed(state: SynthesisState, owner: str, update: Update) -> str:
    """What a stage's attempts failed on, for the rejection's reason: each earlier failed
    attempt's error in brief and, for the tasks, the tasks not made counted by reason."""
    briefs = [
        f"attempt {e['attempt']}: {str(e.get('detail', ''))[:160]}"
        for e in state.get("events", [])
        if e.get("stage") == owner and e.get("outcome") == "failed"
    ]
    out = f"; earlier: {' | '.join(briefs)}" if briefs else ""
    if owner == "tasks":
        counts = prompts.rejections_by_reason(
            update.get("rejected_tasks", state.get("rejected_tasks", []))
        )
        if counts:
            out += "; tasks not made, by reason: " + ", ".join(
                f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])
            )
    return out


@dataclass
class _Attempt:
    stage: str
    number: int
    started: float
    calls_before: int


def next_stage(state: SynthesisState) -> str:
    """The first stage whose output is missing; review once everything is there."""
    files = state.get("files", {})
    if state.get("blueprint") is None or "models.py" not in files:
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
        given = update.pop("feedback", state.get("feedback", {}))
        feedback = {k: v for k, v in given.items() if k != att.stage}
        merged: SynthesisState = {**state, **update}  # type: ignore[typeddict-item]
        route = update.pop("route", None) or next_stage(merged)
        return {
            **update,
            "feedback": feedback,
            "settled": {**state.get("settled", {}), att.stage: att.number},
            "events": [self._event(state, att, "ok", detail)],
            "route": route,
        }

    def _failed(
        self,
        state: SynthesisState,
        att: _Attempt,
        owner: str,
        error: str,
        *,
        since_settled: bool = False,
        **update: Any,
    ) -> Update:
        """Send the error back to the stage that owns it, or reject when it has no attempts left.
        ``since_settled`` (a reviewer's finding on a stage that succeeded) counts only the
        owner's attempts since its last success: its earlier failures are not held against it."""
        used = {**state.get("attempts", {}), **update.get("attempts", {})}.get(owner, 0)
        if since_settled:
            used -= state.get("settled", {}).get(owner, 0)
        if used >= self.config.max_iterations:
            reason = (
                f"stage {owner} failed {used} time(s)"
                + (" since its last success" if since_settled else "")
                + f", the bound is {self.config.max_iterations}"
                + _what_failed(state, owner, update)
                + f"; last error: {error}"
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
        update.setdefault("partial_tasks", "")  # tasks made on what is being redone are stale
        return {
            **update,
            "files": files,
            "feedback": feedback,
            "events": [self._event(state, att, "failed", error)],
            "route": target,
        }

    async def _ask(
        self, state: SynthesisState, messages: list[dict[str, str]], fmt: dict[str, Any] | None
    ) -> str:
        done = await self.client.complete(
            messages, episode=state["synthesis_id"], response_format=fmt
        )
        return done.message.content or ""

    def _retry(self, state: SynthesisState, key: str) -> tuple[str | None, str | None]:
        """The stage's previous answer and the error it must fix (both None on a first try)."""
        feedback = state.get("feedback", {}).get(key)
        return (state.get("drafts", {}).get(key) if feedback else None), feedback

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
        """The LLM designs the domain; the blueprint must validate, allow a test of every
        operation, and render to a safe models.py."""
        att, attempts = self._begin(state, "blueprint")
        previous, feedback = self._retry(state, "blueprint")
        messages = prompts.blueprint_messages(
            state["brief"], state.get("industry"), self.config.clock, previous, feedback
        )
        text = await self._ask(state, messages, response_format("blueprint", BlueprintDraft))
        drafts = {**state.get("drafts", {}), "blueprint": text}
        try:
            bp = parse_blueprint(
                extract_json(text), clock=self.config.clock, industry=state.get("industry")
            )
        except (ParseError, BlueprintError) as exc:
            return self._failed(state, att, "blueprint", str(exc), attempts=attempts, drafts=drafts)
        problems = fixture_problems(bp)
        if copies_example(bp_tables(bp), state["brief"]):
            problems.insert(0, "it copies the example's tables: design the business of the brief")
        models = models_source(bp)
        problems += [str(p) for p in check_models_source(models, "models.py")]
        if problems:
            error = "; ".join(problems)
            return self._failed(state, att, "blueprint", error, attempts=attempts, drafts=drafts)
        digest = hashlib.sha256(state["synthesis_id"].encode()).hexdigest()[:6]
        domain_id = state.get("domain_id") or f"{bp.domain_id[:32]}_{digest}"
        kept = self._after_blueprint(state, bp, models, domain_id)
        detail = (
            f"{len(bp.entities)} tables, {len(bp.operations)} operations "
            f"({sum(o.kind == 'create' for o in bp.operations)} create), {len(bp.rules)} rules, "
            f"{len(bp.agent_rules)} agent rules"
        )
        return self._ok(
            state,
            att,
            detail,
            attempts=attempts,
            drafts=drafts,
            blueprint=bp.model_dump(mode="json"),
            domain_id=domain_id,
            partial_tasks="",
            **kept,
        )

    def _after_blueprint(
        self, state: SynthesisState, bp: Blueprint, models: str, domain_id: str
    ) -> Update:
        """What a new blueprint keeps of the old one's work: the data when the tables are the
        same (and still cover the operations), a tool whose operation is unchanged, the policy
        when the rules are. Tasks are always made again."""
        old_raw = state.get("blueprint")
        files = dict(state.get("files", {}))
        out_files = {"models.py": models}
        if bp.laws:
            out_files["laws.json"] = laws_json(bp)
        tools: dict[str, str] = {}
        feedback = dict(state.get("feedback", {}))
        if old_raw is not None:
            old = Blueprint.model_validate(old_raw)
            same_tables = old.entities == bp.entities
            if same_tables and "db.json" in files:
                db: Database = json.loads(files["db.json"])
                gaps = world_problems(bp, db, self.config.limits())
                if gaps:
                    feedback["data"] = "; ".join(gaps)
                else:
                    out_files["db.json"] = files["db.json"]
                    out_files["domain.json"] = manifest_json(
                        bp, domain_id=domain_id, synthesis_id=state["synthesis_id"],
                        run_id=state.get("run_id"),
                    )  # fmt: skip
            old_ops = {op.name: op for op in old.operations}
            for op in bp.operations:
                code = state.get("tools", {}).get(op.name)
                if same_tables and code and old_ops.get(op.name) == op:
                    tools[op.name] = code
            if tools and "db.json" in out_files:
                out_files["tools.py"] = tools_source(bp, tools)
            if old.policy_rules() == bp.policy_rules() and "policy.md" in files:
                out_files["policy.md"] = files["policy.md"]
        return {
            "files": out_files,
            "tools": tools if "db.json" in out_files else {},
            "feedback": feedback,
        }

    async def data(self, state: SynthesisState) -> Update:
        """The model's program makes every record from the records it refers to; it runs in the
        sandbox, and the world it makes is refused for values outside their types, broken laws,
        placeholders, shares that stray, or tables where no record allows an operation."""
        att, attempts = self._begin(state, "data")
        bp = Blueprint.model_validate(state["blueprint"])
        limits = self.config.limits()
        previous, feedback = self._retry(state, "data")
        messages = prompts.data_messages(bp, limits, previous, feedback)
        text = await self._ask(state, messages, None)
        drafts = {**state.get("drafts", {}), "data": text}
        try:
            program = normalise_generator(bp, extract_code(text))
            db = run_generator(
                bp,
                program,
                Sizes(limits.main_size, limits.catalog_size),
                self.work_dir,
                seed=self.config.seed,
                limits=self.limits,
            )
        except (ParseError, GeneratorError) as exc:
            return self._failed(state, att, "data", str(exc), attempts=attempts, drafts=drafts)
        problems = world_problems(bp, db, limits)
        if not problems:
            problems = untestable(bp, db)
        if problems:
            error = "; ".join(problems)
            twice = unmet_laws(problems) & unmet_laws((feedback or "").split("; "))
            if twice:  # two programs in a row, and no record keeps it: the law is at fault
                error = (
                    f"law(s) {', '.join(sorted(twice))} broken by every record of two worlds in "
                    "a row: no data may be able to keep them; correct or drop each such law: "
                    + "; ".join(p for p in problems if unmet_laws([p]) & twice)
                )
                return self._failed(
                    state, att, "blueprint", error, attempts=attempts, drafts=drafts
                )
            return self._failed(state, att, "data", error, attempts=attempts, drafts=drafts)
        breaches = effect_law_problems(bp, db)
        if breaches:  # the world keeps the laws; the operations do not: the blueprint's fault
            error = "; ".join(breaches)
            return self._failed(state, att, "blueprint", error, attempts=attempts, drafts=drafts)
        manifest = manifest_json(
            bp,
            domain_id=state["domain_id"] or bp.domain_id,
            synthesis_id=state["synthesis_id"],
            run_id=state.get("run_id"),
        )
        files = {k: v for k, v in state["files"].items() if k not in ("db.json", "tasks.jsonl")}
        files.update({"db.json": db_json(db), "domain.json": manifest})
        sizes = ", ".join(f"{t} {len(rows)}" for t, rows in db.items())
        detail = f"made {sizes}; {len(bp.laws)} law(s) kept by every record"
        return self._ok(state, att, detail, attempts=attempts, files=files, drafts=drafts)

    async def tools(self, state: SynthesisState) -> Update:
        """One tool per visit: the LLM writes it, the blueprint's tests check it in the sandbox."""
        bp = Blueprint.model_validate(state["blueprint"])
        done = state.get("tools", {})
        op = next(o for o in bp.operations if o.name not in done)
        key = f"tools:{op.name}"
        att, attempts = self._begin(state, key)
        previous, feedback = self._retry(state, key)
        # Derived first: tests that contradict the spec stop the run before code is asked for.
        tests = operation_tests(bp, op, json.loads(state["files"]["db.json"]))
        text = await self._ask(state, prompts.tool_messages(bp, op, previous, feedback), None)
        drafts = {**state.get("drafts", {}), key: text}
        try:
            function = normalise_tool(bp, op, extract_code(text))
        except ParseError as exc:
            return self._failed(state, att, key, str(exc), attempts=attempts, drafts=drafts)
        error, culprit = self._test_tool(state, bp, {**done, op.name: function}, tests, op.name)
        if error and culprit is None:
            return self._failed(state, att, key, error, attempts=attempts, drafts=drafts)
        tools = {**done, op.name: function}
        detail = f"{len(tests)} tests pass"
        told = state.get("feedback", {})
        if error and culprit is not None:
            # A sequence of the other tools' calls alone broke it: that tool goes back, this one
            # is kept (it cannot mend another tool's effect).
            owner = f"tools:{culprit}"
            if attempts.get(owner, 0) >= self.config.max_iterations:
                return self._failed(state, att, owner, error, attempts=attempts, drafts=drafts)
            tools.pop(culprit)
            told = {**told, owner: error}
            detail += f"; {culprit} sent back: {error}"
        files = dict(state["files"])
        files["tools.py"] = tools_source(bp, tools)
        return self._ok(
            state,
            att,
            detail,
            attempts=attempts,
            tools=tools,
            files=files,
            drafts=drafts,
            feedback=told,
        )

    def _test_tool(
        self,
        state: SynthesisState,
        bp: Blueprint,
        functions: dict[str, str],
        tests: list[ToolTest],
        under_test: str,
    ) -> tuple[str | None, str | None]:
        """Static checks, the tool's unit tests in the sandbox, then random sequences of the
        tools written so far (every law kept, a refusal changes nothing): the error, or None,
        and the tool at fault when a sequence without the tool under test broke a property."""
        source = tools_source(bp, functions)
        problems = check_tools_source(source, "tools.py")
        if problems:
            return "static check: " + "; ".join(str(p) for p in problems), None
        root = self._package(state, {**state["files"], "tools.py": source})
        db = json.loads(state["files"]["db.json"])
        try:
            with load_sandboxed_domain(root, self.limits, check_gold=False) as domain:
                failures = run_tests(domain, tests)
                if failures:
                    head = f"{len(failures)} of {len(tests)} tests fail: "
                    return head + "; ".join(failures[:6]), None
                writes = [
                    op for op in bp.operations if op.name in functions and op.tool_kind == "write"
                ]
                plan = argument_pools(bp, writes, db, tests, focus=under_test)
                found = check_properties(domain, plan)
        except DomainLoadError as exc:
            return "; ".join(str(p) for p in exc.problems), None
        if found is None:
            return None, None
        error = f"a random sequence of calls (shrunk by Hypothesis) fails: {found}"
        if under_test not in found.calls:
            return error, found.operation
        return error, None

    async def policy(self, state: SynthesisState) -> Update:
        """policy.md from the blueprint's rules: a title and one numbered item per rule."""
        att, attempts = self._begin(state, "policy")
        bp = Blueprint.model_validate(state["blueprint"])
        previous, feedback = self._retry(state, "policy")
        text = await self._ask(state, prompts.policy_messages(bp, previous, feedback), None)
        drafts = {**state.get("drafts", {}), "policy": text}
        policy = unfence(text)
        error = policy_problem(policy, len(bp.policy_rules()))
        if error:
            return self._failed(state, att, "policy", error, attempts=attempts, drafts=drafts)
        files = {**state["files"], "policy.md": policy}
        return self._ok(
            state, att, f"{len(policy)} characters", attempts=attempts, files=files, drafts=drafts
        )

    async def tasks(self, state: SynthesisState) -> Update:
        """Tasks grounded in the database by walks over the tools (run in the sandbox), refusals
        drawn from the agent rules; a retry keeps the tasks made so far and adds to them."""
        att, attempts = self._begin(state, "tasks")
        cfg = self.config
        bp = Blueprint.model_validate(state["blueprint"])
        kept_lines = state.get("partial_tasks", "")
        kept = [Task.model_validate_json(line) for line in kept_lines.splitlines() if line.strip()]
        refusals_kept = sum(t.category == "refusal" for t in kept)
        tool_kept = sum(is_tool_refusal(t) for t in kept)
        root = self._package(state, {**state["files"], "tasks.jsonl": kept_lines})
        seed = cfg.seed + attempts["tasks"] - 1  # a retry samples other walks
        dropped = [Task.model_validate_json(line) for line in state.get("dropped_tasks", [])]
        target = cfg.walk_target(sum(op.tool_kind == "write" for op in bp.operations))
        try:
            with load_sandboxed_domain(root, self.limits, check_gold=False) as domain:
                found = await synthesize_tasks(
                    domain,
                    self.client,
                    n=max(0, target - (len(kept) - refusals_kept)),
                    seed=seed,
                    refusals=max(0, cfg.refusals - (refusals_kept - tool_kept)),
                    # A retry refuses the rules no kept refusal refuses yet.
                    rules=unrefused(refusal_rules(bp), kept),
                    tool_refusals=max(0, cfg.tool_refusals - tool_kept),
                    tool_rules=unrefused(tool_rules(bp), kept),
                    guide=walk_guide(bp),
                    # What the reviewer refused is not made again, and its finding is told.
                    exclude=[task_signature(domain, t) for t in dropped],
                    notes=state.get("task_notes"),
                    asks=max(0, cfg.information - sum(t.category == "read" for t in kept)),
                )
        except DomainLoadError as exc:
            error = "; ".join(str(p) for p in exc.problems)
            return self._failed(state, att, "tasks", error, attempts=attempts)
        rejected = state.get("rejected_tasks", []) + [
            f"{reason}: {detail}" for reason, detail in found.rejected
        ]
        # What no task covers, from this attempt only (the reviewer's coverage reads them).
        rejected = [r for r in rejected if not r.startswith("not_covered: ")] + [
            f"not_covered: {line}" for line in found.not_covered
        ]
        made = kept + found.tasks
        refusals = sum(t.category == "refusal" for t in made)
        lines = tasks_jsonl(made)
        if len(made) < cfg.min_tasks or refusals < cfg.min_refusals:
            error = (
                f"{len(made)} task(s) ({refusals} refusals) survived, {cfg.min_tasks} "
                f"({cfg.min_refusals} refusals) needed; "
                + "; ".join(f"{r}: {d}" for r, d in found.rejected[:4])
            )
            failed = self._failed(
                state, att, "tasks", error, attempts=attempts, rejected_tasks=rejected
            )
            failed["partial_tasks"] = lines
            return failed
        files = {**state["files"], "tasks.jsonl": lines}
        detail = (
            f"{len(made)} tasks ({refusals} refusals) from {found.walks} walks, "
            f"{len(found.rejected)} rejected"
        )
        return self._ok(
            state,
            att,
            detail,
            attempts=attempts,
            files=files,
            rejected_tasks=rejected,
            partial_tasks="",
        )

    async def review(self, state: SynthesisState) -> Update:
        """An LLM critic checks policy, tools and tasks against each other; it may send any
        stage back, the blueprint included (a missing operation)."""
        att, attempts = self._begin(state, "review")
        if not self.config.review:
            return self._ok(state, att, "review turned off", attempts=attempts, route="finalize")
        bp = Blueprint.model_validate(state["blueprint"])
        files = state["files"]
        tools = [prompts.tool_line(bp, op) for op in bp.operations]
        lines = [line for line in files["tasks.jsonl"].splitlines() if line.strip()]
        tasks = [Task.model_validate_json(line) for line in lines]
        ids = [t.id for t in tasks]
        previous, feedback = self._retry(state, "review")
        db = json.loads(files["db.json"])
        messages = prompts.review_messages(
            bp,
            files["policy.md"],
            tools,
            [task_line(t) for t in tasks],
            previous,
            feedback,
            ids,
            world=world_sample(bp, db, seed=self.config.seed),
            laws=law_report_lines(bp, db),
            coverage=prompts.coverage_lines(bp, tasks, state.get("rejected_tasks", [])),
        )
        text = await self._ask(state, messages, response_format("review", ReviewAnswer))
        drafts = {**state.get("drafts", {}), "review": text}
        try:
            finding = parse_review(text, [op.name for op in bp.operations], ids)
        except ParseError as exc:
            return self._failed(state, att, "review", str(exc), attempts=attempts, drafts=drafts)
        if finding is None:
            return self._ok(
                state,
                att,
                "policy, tools and tasks agree",
                attempts=attempts,
                drafts=drafts,
                route="finalize",
            )
        update: Update = {"attempts": attempts, "drafts": drafts}
        if finding.owner == "tasks":
            return self._tasks_refused(state, att, finding, lines, **update)
        if finding.owner.startswith("tools:"):
            name = finding.owner.split(":", 1)[1]
            update["tools"] = {k: v for k, v in state["tools"].items() if k != name}
        found = f"the reviewer found: {finding.problem}"
        if attempts["review"] >= self.config.max_iterations:  # the reviewer's own bound
            return self._failed(state, att, "review", found, **update)
        return self._failed(state, att, finding.owner, found, since_settled=True, **update)

    def _tasks_refused(
        self, state: SynthesisState, att: _Attempt, finding: ReviewFinding, lines: list[str],
        **update: Any,
    ) -> Update:  # fmt: skip
        """The reviewer's tasks are dropped (all, when it names none) and never made again; the
        rest are kept. When enough remain the domain goes on to be finalized; otherwise the
        tasks stage makes more, told the finding."""
        cfg = self.config
        flagged = set(finding.tasks) or {Task.model_validate_json(x).id for x in lines}
        kept = [x for x in lines if Task.model_validate_json(x).id not in flagged]
        dropped = [x for x in lines if x not in kept]
        refusals = sum(Task.model_validate_json(x).category == "refusal" for x in kept)
        why = f"the reviewer found: {finding.problem}"
        update["dropped_tasks"] = state.get("dropped_tasks", []) + dropped
        update["rejected_tasks"] = state.get("rejected_tasks", []) + [
            f"review: {Task.model_validate_json(x).id}: {finding.problem}" for x in dropped
        ]
        update["task_notes"] = finding.problem
        # A write whose every task the reviewer dropped is covered no more: say so (the car
        # rental's extra driver went unreported when its tasks were dropped).
        writes = {
            op.name
            for op in Blueprint.model_validate(state["blueprint"]).operations
            if op.tool_kind == "write"
        }
        still = {a.name for x in kept for a in Task.model_validate_json(x).gold_actions}
        lost = sorted(
            {a.name for x in dropped for a in Task.model_validate_json(x).gold_actions}
            & writes - still
        )
        update["rejected_tasks"] += [
            f"not_covered: {name}: the reviewer dropped its tasks ({finding.problem})"
            for name in lost
        ]
        if len(kept) >= cfg.min_tasks and refusals >= cfg.min_refusals:
            files = {**state["files"], "tasks.jsonl": "".join(x + "\n" for x in kept)}
            detail = f"dropped {len(dropped)} task(s) the reviewer flagged; {len(kept)} remain"
            return self._ok(
                state, att, f"{detail} ({why})", files=files, route="finalize", **update
            )
        failed = self._failed(state, att, "tasks", why, **update)
        failed["partial_tasks"] = "".join(x + "\n" for x in kept)
        return failed

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


def bp_tables(bp: BlueprintDraft) -> set[str]:
    return {e.table for e in bp.entities}


def task_line(task: Task) -> str:
    """One task as the reviewer sees it: what the customer says, and the calls (with their
    arguments) a correct agent makes or must refuse."""

    def call(name: str, args: dict[str, Any]) -> str:
        shown = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in args.items())
        return f"{name}({shown})"

    crit = task.evaluation_criteria
    said = task.user_scenario.instructions.reason_for_call
    calls = [call(a.name, a.arguments) for a in crit.actions]
    out = f"{task.id}: customer says {said!r}; gold calls [{'; '.join(calls)}]"
    forbidden = [call(a.name, a.arguments) for a in crit.forbidden_actions]
    if is_tool_refusal(task):
        tried = (task.description.notes or "").split(" -> ")[0] if task.description else ""
        out += f"; the tool refuses {tried}"
        return out + (f"; must not do instead [{'; '.join(forbidden)}]" if forbidden else "")
    return out + (f"; must refuse [{'; '.join(forbidden)}]" if forbidden else "")
