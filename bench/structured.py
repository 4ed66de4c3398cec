"""The embedded model's parse failures per stage, without and with grammar-constrained decoding.

Each stage runs alone on a fixed sample; both modes see the same prompts:

- ``judge``: NL-assertion verdicts over gold transcripts of library tasks (one attempt each,
  so a failure is an answer the judge's parser refused);
- ``tools``: the assistant's first answer to a customer's opening message in two library
  domains (a call is malformed when it did not come out as a call of an offered tool, or its
  arguments misfit the tool's schema);
- ``blueprint``: the synthesis blueprint of a brief, asked with the current prompt and
  ``Blueprint``'s JSON Schema as ``response_format``.

Mode ``before`` serves as main did before structured outputs (``response_format`` ignored, no
tool grammar); ``after`` with both constraints on. One embedded model runs at a time; the load
average is recorded, since the machine is shared. Results merge into ``--out`` per stage and
mode, so stages can be run one at a time.

    .venv/bin/python bench/structured.py [--stages judge tools blueprint] [--modes before after]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from maestro.agents.client import (
    CallLog,
    ChatClient,
    Endpoints,
    ProviderError,
    json_schema_format,
)
from maestro.agents.codegen.blueprint import Blueprint, BlueprintError, parse_blueprint
from maestro.agents.codegen.prompts import ParseError, blueprint_messages, extract_json
from maestro.agents.embedded import EmbeddedServer
from maestro.agents.judge import LLMJudge
from maestro.agents.roles import Assistant
from maestro.agents.settings import EmbeddedModelSettings, LLMSettings, Role, RoleSettings
from maestro.conversation import Message
from maestro.domains import library_ids, library_path, load_domain
from maestro.scoring import JudgeError
from maestro.simulation import gold_trajectory

BRIEFS = [
    (
        "leisure",
        "A bike rental shop: customers rent bikes by the day, and return or cancel rentals.",
    ),
    ("libraries", "A public library: members borrow books, renew loans, and return them."),
    ("fitness", "A gym: members book classes, cancel bookings, and pause their memberships."),
    ("dental", "A dental clinic: patients book, reschedule and cancel appointments."),
    ("telecom", "An internet provider: customers change plans, report outages and pay bills."),
    ("pharmacy", "A pharmacy: customers refill prescriptions, transfer them, and check status."),
    ("airline", "An airline: passengers change flights, add checked bags, and cancel bookings."),
    ("insurance", "A car insurer: policyholders file claims, add drivers, and cancel policies."),
]
TOOL_DOMAINS = ("hotel", "vetclinic")
#: Call syntax left in a text answer: an attempted call that did not come out as one.
CALL_SYNTAX = re.compile(r"<tool_call>|\{\s*\"name\"\s*:|\"arguments\"\s*:")

Record = dict[str, Any]


def role(role: Role, emb: EmbeddedModelSettings) -> RoleSettings:
    """The role's settings as the runs give them on the embedded model (its caps), with long
    deadlines and no retries: a failure is counted, not retried away."""
    base = LLMSettings().role(role)
    cap = emb.codegen_max_tokens if role == "codegen" else emb.max_tokens
    return base.model_copy(
        update={
            "max_tokens": min(base.max_tokens, cap),
            "timeout_s": 900.0,
            "deadline_s": 900.0,
            "max_retries": 0,
            "empty_retries": 0,
        }
    )


# ----- stages -----------------------------------------------------------------------------------


async def judge_stage(client: ChatClient, log: CallLog, n: int) -> list[Record]:
    """Judge tasks spread over transcript lengths (the sample is fixed: sorted, evenly spaced)."""
    cases = []
    for domain_id in library_ids():
        domain = load_domain(library_path(domain_id), check_gold=False)
        for task in domain.tasks:
            if task.evaluation_criteria.nl_assertions:
                traj = gold_trajectory(domain, task)
                cases.append((len(traj.transcript()), task.id, task, traj))
    cases.sort(key=lambda c: (c[0], c[1]))
    picked = [cases[i * len(cases) // n] for i in range(n)]
    judge = LLMJudge(client, attempts=1)
    out: list[Record] = []
    for _, task_id, task, traj in picked:
        assertions = task.evaluation_criteria.nl_assertions
        try:
            await judge.judge(task, traj, assertions)
            outcome, detail = "ok", ""
        except JudgeError as exc:
            # An endpoint failure (a deadline on a loaded machine) is not a parse failure.
            failed = log.calls[-1].status != "ok"
            outcome, detail = ("provider_error" if failed else "malformed"), str(exc)[:300]
        out.append({"id": task_id, "outcome": outcome, "detail": detail, **_last(log)})
    return out


async def tools_stage(client: ChatClient, log: CallLog, n: int) -> list[Record]:
    """The assistant's first answer in each of the first n/2 tasks of two library domains."""
    out: list[Record] = []
    for domain_id in TOOL_DOMAINS:
        domain = load_domain(library_path(domain_id), check_gold=False)
        assistant = Assistant(client, domain)
        params = {t["function"]["name"]: t["function"]["parameters"] for t in assistant.tools}
        for task in domain.tasks[: n // len(TOOL_DOMAINS)]:
            ins = task.user_scenario.instructions
            opening = " ".join(x for x in (ins.reason_for_call, ins.known_info) if x)
            try:
                done = await assistant.respond(
                    [Message(role="user", content=opening)], episode=f"bench/{task.id}", seed=0
                )
            except ProviderError as exc:  # not a parse failure: counted apart
                out.append({"id": task.id, "outcome": "provider_error", "detail": str(exc)[:200]})
                continue
            outcome, detail = _classify_answer(done.message, params)
            out.append(
                {
                    "id": task.id,
                    "outcome": outcome,
                    "detail": detail,
                    "finish": done.finish_reason,
                    **_last(log),
                }
            )
    return out


def _classify_answer(message: Message, params: dict[str, Any]) -> tuple[str, str]:
    if not message.tool_calls:
        text = message.content or ""
        if CALL_SYNTAX.search(text):
            return "malformed_call", text[:200]
        return "text", text[:120]
    for call in message.tool_calls:
        if not isinstance(call.arguments, dict):
            return "invalid_call", f"{call.name}: arguments are not an object"
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(params[call.name]).iter_errors(call.arguments)
        )
        if error is not None:
            return "invalid_call", f"{call.name}: {error.message}"[:200]
    calls = ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in message.tool_calls)
    return ("call" if len(message.tool_calls) == 1 else "calls"), calls[:200]


async def blueprint_stage(client: ChatClient, log: CallLog, n: int) -> list[Record]:
    schema = Blueprint.model_json_schema()
    fmt = json_schema_format("blueprint", schema)
    out: list[Record] = []
    for i, (industry, brief) in enumerate(BRIEFS[:n]):
        try:
            done = await client.complete(
                blueprint_messages(brief, industry, None),
                response_format=fmt,
                seed=i,
                episode=f"bench/blueprint/{industry}",
            )
        except ProviderError as exc:  # not a parse failure: counted apart
            out.append({"id": industry, "outcome": "provider_error", "detail": str(exc)[:200]})
            continue
        text = done.message.content or ""
        outcome, detail = _classify_blueprint(text, schema, industry)
        out.append(
            {
                "id": industry,
                "outcome": outcome,
                "detail": detail,
                "finish": done.finish_reason,
                **_last(log),
            }
        )
    return out


def _classify_blueprint(text: str, schema: dict[str, Any], industry: str) -> tuple[str, str]:
    """accepted, not_json, off_schema (rejected, and the JSON misfits the schema) or
    rejected_in_schema (fits the schema, refused by the blueprint's own checks)."""
    try:
        data = extract_json(text)
    except ParseError as exc:
        return "not_json", str(exc)[:200]
    try:
        parse_blueprint(data, industry=industry)
        return "accepted", ""
    except BlueprintError as exc:
        problem = str(exc)[:300]
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(data)
    )
    if error is not None:
        return "off_schema", problem
    return "rejected_in_schema", problem


STAGES: dict[
    str, tuple[Role, Callable[[ChatClient, CallLog, int], Awaitable[list[Record]]], int]
] = {
    "judge": ("judge", judge_stage, 12),
    "tools": ("assistant", tools_stage, 16),
    "blueprint": ("codegen", blueprint_stage, 8),
}


def _last(log: CallLog) -> Record:
    """The latest call's figures; printed as it comes, since a run here takes many minutes."""
    call = log.calls[-1]
    print(f"  {call.episode}: {call.latency_s:.1f} s, {call.completion_tokens} tokens", flush=True)
    return {
        "latency_s": round(call.latency_s, 2),
        "completion_tokens": call.completion_tokens,
        "status": call.status,
    }


# ----- runs -------------------------------------------------------------------------------------


def failures(stage: str, records: list[Record]) -> dict[str, Any]:
    """The stage's parse-failure figure, as reported in docs/llm.md."""
    counts = Counter(r["outcome"] for r in records)
    if stage == "tools":
        attempted = sum(counts[k] for k in ("call", "calls", "invalid_call", "malformed_call"))
        bad = counts["invalid_call"] + counts["malformed_call"]
        return {"failed": bad, "of": attempted, "counts": dict(counts)}
    if stage == "blueprint":
        bad = counts["not_json"] + counts["off_schema"]
        return {"failed": bad, "of": len(records), "counts": dict(counts)}
    return {"failed": counts["malformed"], "of": len(records), "counts": dict(counts)}


async def run_stages(
    base_url: str, emb: EmbeddedModelSettings, stages: list[str], sizes: dict[str, int]
) -> dict[str, Any]:
    results = {}
    for stage in stages:
        role_name, fn, _ = STAGES[stage]
        log = CallLog()
        async with Endpoints(log) as endpoints:
            client = endpoints.client(role_name, role(role_name, emb), base_url)
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            records = await fn(client, log, sizes[stage])
        results[stage] = {
            "records": records,
            "wall_s": round(time.perf_counter() - t0, 1),
            "load_avg_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
            "completion_tokens": sum(r.get("completion_tokens", 0) for r in records),
            **failures(stage, records),
        }
        print(
            json.dumps(
                {"stage": stage, **{k: v for k, v in results[stage].items() if k != "records"}}
            ),
            flush=True,
        )
    return results


def grammar_speed(emb: EmbeddedModelSettings, tokens: int = 128) -> dict[str, Any]:
    """Generation speed with and without a grammar, in this process (no server): the same
    prompt, greedy, free JSON, the model's KV cache cleared between runs."""
    from llama_cpp import Llama, LlamaGrammar

    from maestro.agents.embedded import model_path
    from maestro.agents.grammar import schema_gbnf

    llm = Llama(model_path=str(model_path(emb)), n_ctx=2048, verbose=False)
    prompt = [{"role": "user", "content": "Write a JSON object mapping 40 fruits to colors."}]
    grammar = LlamaGrammar.from_string(schema_gbnf({"type": "object"}), verbose=False)
    out: dict[str, Any] = {"load_avg_1m": round(os.getloadavg()[0], 2)}
    for name, g in [("free", None), ("grammar", grammar)] * 2:  # the second pair is counted
        llm.reset()
        t0 = time.perf_counter()
        done: Any = llm.create_chat_completion(
            messages=prompt,  # type: ignore[arg-type]
            temperature=0.0,
            max_tokens=tokens,
            grammar=g,
        )
        n = done["usage"]["completion_tokens"]
        out[name] = {"tokens": n, "s": round(time.perf_counter() - t0, 2)}
    llm.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", nargs="+", choices=list(STAGES), default=list(STAGES))
    parser.add_argument(
        "--modes", nargs="+", choices=["before", "after"], default=["before", "after"]
    )
    parser.add_argument("--n", type=int, help="sample size of every stage (default: per stage)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/structured.json"))
    parser.add_argument(
        "--speed", action="store_true", help="only measure generation speed with a grammar"
    )
    args = parser.parse_args()
    if args.speed:
        print(json.dumps(grammar_speed(LLMSettings().embedded)))
        return
    sizes = {s: args.n or STAGES[s][2] for s in STAGES}
    report: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for mode in args.modes:
        on = mode == "after"
        emb = LLMSettings().embedded.model_copy(
            update={"structured_outputs": on, "constrain_tool_calls": on}
        )
        print(f"== {mode}: cpus {os.cpu_count()}, load {os.getloadavg()}", flush=True)
        with EmbeddedServer(emb, args.out.parent) as server:
            assert server.base_url is not None
            results = asyncio.run(run_stages(server.base_url, emb, args.stages, sizes))
        for stage, result in results.items():
            report.setdefault(stage, {})[mode] = result
        args.out.write_text(json.dumps(report, indent=1))
    summary = {
        stage: {mode: f"{r['failed']}/{r['of']}" for mode, r in modes.items()}
        for stage, modes in report.items()
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
