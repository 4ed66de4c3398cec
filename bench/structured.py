"""The embedded model's parse failures per stage, without and with grammar-constrained decoding.

Each stage runs alone on a fixed sample; both modes see the same prompts:

- ``judge``: NL-assertion verdicts over gold transcripts of library tasks (one attempt each,
  so a failure is an answer the judge's parser refused);
- ``tools``: the assistant's first answer to a customer's opening message in two library
  domains (a call is malformed when it did not come out as a call of an offered tool, or its
  arguments misfit the tool's schema);
- ``blueprint``: the synthesis blueprint of a brief, asked as the synthesis asks it (its
  prompt and the ``response_format`` its stage sends);
- ``data``: the seed records of the prompt's own example blueprint (the ferry line), asked as
  the synthesis asks them, one sample per seed;
- ``scenario`` and ``refusal``: the tasks stage's requests for walks planned on the ``hotel``
  library domain (a customer's scenario for a walk; which of four candidate writes the policy
  forbids), asked as the synthesis asks them.

Mode ``before`` serves as main did before structured outputs (``response_format`` ignored, no
tool grammar); ``after`` with both constraints on. One embedded model runs at a time; the load
average is recorded with each answer, since the machine is shared. Each answer is appended to ``--out`` (JSON lines) as it comes and a rerun skips what is
there, so a run cut short resumes; the summary is printed last.

    .venv/bin/python bench/structured.py [--stages judge tools blueprint data scenario refusal] [--n N]
    .venv/bin/python bench/structured.py --speed   # tokens/s with and without a grammar
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from maestro.agents.client import (
    CallLog,
    ChatClient,
    Endpoints,
    ProviderError,
)
from maestro.agents.codegen.answers import ParseError, extract_json, response_format
from maestro.agents.codegen.blueprint import BlueprintDraft, BlueprintError
from maestro.agents.codegen.data import DataError, data_answer_model, parse_data
from maestro.agents.codegen.example import EXAMPLE
from maestro.agents.codegen.normalise import parse_blueprint
from maestro.agents.codegen.prompts import blueprint_messages, data_messages
from maestro.agents.codegen.scenario_prompts import (
    DraftError,
    RefusalDraft,
    ScenarioDraft,
    grounding_problems,
    parse_draft,
    refusal_prompt,
    walk_prompt,
)
from maestro.agents.codegen.scenarios import plan_walks
from maestro.agents.codegen.state import DEFAULT_CLOCK, SynthesisConfig
from maestro.agents.embedded import EmbeddedServer
from maestro.agents.judge import LLMJudge
from maestro.agents.roles import Assistant
from maestro.agents.settings import EmbeddedModelSettings, LLMSettings, Role, RoleSettings
from maestro.conversation import Message, Trajectory
from maestro.domains import Domain, Task, library_ids, library_path, load_domain
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
#: The JSON stages' answers as they come, so each record keeps its answer's text (clipped).
_ANSWERS: list[str] = []
TEXT_CHARS = 4000
#: What one sample's call gave: outcome, detail and finish reason.
Answer = tuple[str, str, str | None]


@dataclass
class Sample:
    """One fixed prompt of a stage, asked the same way in both modes."""

    id: str
    ask: Callable[[ChatClient], Awaitable[Answer]]


def role(role: Role, emb: EmbeddedModelSettings) -> RoleSettings:
    """The role's settings as the runs give them on the embedded model (its caps), with long
    deadlines and no retries: a failure is counted, not retried away."""
    base = LLMSettings().role(role)
    cap = emb.codegen_max_tokens if role == "codegen" else emb.max_tokens
    return base.model_copy(
        update={
            "max_tokens": min(base.max_tokens, cap),
            "timeout_s": 1800.0,
            "deadline_s": 1800.0,
            "max_retries": 0,
            "empty_retries": 0,
        }
    )


# ----- stages -----------------------------------------------------------------------------------


def judge_samples(n: int) -> list[Sample]:
    """Judge tasks spread over transcript lengths, the longest quarter left out to keep the
    run short (the sample is fixed: sorted by length, evenly spaced)."""
    cases = []
    for domain_id in library_ids():
        domain = load_domain(library_path(domain_id), check_gold=False)
        for task in domain.tasks:
            if task.evaluation_criteria.nl_assertions:
                traj = gold_trajectory(domain, task)
                cases.append((len(traj.transcript()), task.id, task, traj))
    cases.sort(key=lambda c: (c[0], c[1]))
    cases = cases[: len(cases) * 3 // 4]
    picked = [cases[i * len(cases) // n] for i in range(n)]

    def ask(task: Task, traj: Trajectory) -> Callable[[ChatClient], Awaitable[Answer]]:
        async def go(client: ChatClient) -> Answer:
            try:
                await LLMJudge(client, attempts=1).judge(
                    task, traj, task.evaluation_criteria.nl_assertions
                )
            except JudgeError as exc:
                return "malformed", str(exc)[:300], None
            return "ok", "", None

        return go

    return [Sample(task_id, ask(task, traj)) for _, task_id, task, traj in picked]


def tools_samples(n: int) -> list[Sample]:
    """The assistant's first answer to the customer's opening (reason and what they know) in
    the first n/2 tasks of two library domains."""
    samples = []
    for domain_id in TOOL_DOMAINS:
        domain = load_domain(library_path(domain_id), check_gold=False)
        params = {
            t["function"]["name"]: t["function"]["parameters"] for t in domain.toolkit.schemas()
        }
        for task in domain.tasks[: n // len(TOOL_DOMAINS)]:
            ins = task.user_scenario.instructions
            opening = " ".join(x for x in (ins.reason_for_call, ins.known_info) if x)

            def ask(
                opening: str, task_id: str, domain: Domain, params: dict[str, Any]
            ) -> Callable[[ChatClient], Awaitable[Answer]]:
                async def go(client: ChatClient) -> Answer:
                    done = await Assistant(client, domain).respond(
                        [Message(role="user", content=opening)],
                        episode=f"bench/{task_id}",
                        seed=0,
                    )
                    return (*_classify_answer(done.message, params), done.finish_reason)

                return go

            samples.append(Sample(task.id, ask(opening, task.id, domain, params)))
    return samples


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


def blueprint_samples(n: int) -> list[Sample]:
    """The blueprint of each brief, asked as the synthesis's blueprint stage asks it."""
    fmt = response_format("blueprint", BlueprintDraft)

    def ask(i: int, industry: str, brief: str) -> Callable[[ChatClient], Awaitable[Answer]]:
        async def go(client: ChatClient) -> Answer:
            messages = blueprint_messages(brief, industry, DEFAULT_CLOCK, None, None)
            text, finish = await _ask_json(client, messages, fmt, i, f"blueprint/{industry}")

            def accept(data: Any) -> None:
                parse_blueprint(data, clock=DEFAULT_CLOCK, industry=industry)

            return (*_classify_json(text, fmt, accept, BlueprintError), finish)

        return go

    return [Sample(ind, ask(i, ind, brief)) for i, (ind, brief) in enumerate(BRIEFS[:n])]


def data_samples(n: int) -> list[Sample]:
    """The seed records of the prompt's example blueprint, asked as the data stage asks them
    (same prompt each time; the seed differs)."""
    bp = parse_blueprint(EXAMPLE, clock=DEFAULT_CLOCK)
    limits = SynthesisConfig().limits()
    fmt = response_format("data", data_answer_model(bp, limits))

    def ask(seed: int) -> Callable[[ChatClient], Awaitable[Answer]]:
        async def go(client: ChatClient) -> Answer:
            messages = data_messages(bp, limits, None, None)
            text, finish = await _ask_json(client, messages, fmt, seed, f"data/{seed}")

            def accept(data: Any) -> None:
                parse_data(bp, data, limits)

            return (*_classify_json(text, fmt, accept, DataError), finish)

        return go

    return [Sample(f"seed{i}", ask(i)) for i in range(n)]


async def _ask_json(
    client: ChatClient, messages: list[dict[str, str]], fmt: dict[str, Any], seed: int, ep: str
) -> tuple[str, str | None]:
    done = await client.complete(messages, response_format=fmt, seed=seed, episode=f"bench/{ep}")
    _ANSWERS.append(done.message.content or "")
    return done.message.content or "", done.finish_reason


def _classify_json(
    text: str, fmt: dict[str, Any], accept: Callable[[Any], None], refused: type[Exception]
) -> tuple[str, str]:
    """accepted, not_json, off_schema (refused, and the JSON misfits the schema the stage
    sent) or rejected_in_schema (fits the schema, refused by the stage's own checks)."""
    try:
        data = extract_json(text)
    except ParseError as exc:
        return "not_json", str(exc)[:200]
    try:
        accept(data)
        return "accepted", ""
    except refused as exc:
        problem = str(exc)[:300]
    schema = fmt["json_schema"]["schema"]
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(data)
    )
    if error is not None:
        return "off_schema", problem
    return "rejected_in_schema", problem


def _draft_samples(n: int, refusal: bool) -> list[Sample]:
    """The tasks stage's scenario (or refusal) requests for walks planned on the hotel library
    domain, asked as the synthesis asks them (its prompt and the format it sends)."""
    hotel = load_domain(library_path("hotel"), check_gold=False)
    walks, plans = plan_walks(hotel, n=0 if refusal else n, seed=9, refusals=n if refusal else 0)
    fmt = response_format(
        "refusal" if refusal else "scenario", RefusalDraft if refusal else ScenarioDraft
    )

    def ask(i: int) -> Callable[[ChatClient], Awaitable[Answer]]:
        if refusal:
            plan = plans[i]
            prompt = refusal_prompt(hotel, plan.group, plan.rule.rule if plan.rule else None)
        else:
            prompt = walk_prompt(hotel, walks[i])

        def accept(data: Any) -> None:
            if refusal:
                draft = parse_draft(json.dumps(data), RefusalDraft)
                if draft.candidate is not None and not 1 <= draft.candidate <= len(plans[i].group):
                    raise DraftError(f"candidate must be 1..{len(plans[i].group)} or null")
                return
            problems = grounding_problems(
                parse_draft(json.dumps(data), ScenarioDraft), walks[i].user_values
            )
            if problems:
                raise DraftError("; ".join(problems))

        async def go(client: ChatClient) -> Answer:
            messages = [{"role": "user", "content": prompt}]
            text, finish = await _ask_json(client, messages, fmt, 0, f"draft/{i}")
            return (*_classify_json(text, fmt, accept, DraftError), finish)

        return go

    count = len(plans) if refusal else len(walks)
    return [Sample(f"{'refusal' if refusal else 'walk'}{i}", ask(i)) for i in range(count)]


STAGES: dict[str, tuple[Role, Callable[[int], list[Sample]], int]] = {
    "judge": ("judge", judge_samples, 10),
    "tools": ("assistant", tools_samples, 4),
    "blueprint": ("codegen", blueprint_samples, 2),
    "data": ("codegen", data_samples, 2),
    "scenario": ("codegen", lambda n: _draft_samples(n, refusal=False), 2),
    "refusal": ("codegen", lambda n: _draft_samples(n, refusal=True), 2),
}


# ----- runs -------------------------------------------------------------------------------------


async def run_stage(
    base_url: str, emb: EmbeddedModelSettings, stage: str, mode: str, n: int, out: Path
) -> None:
    """Ask every sample of the stage not yet recorded in ``out`` for this mode; each record is
    appended as it comes, so a run cut short resumes where it stopped."""
    role_name, samples, _ = STAGES[stage]
    done = {(r["stage"], r["mode"], r["id"]) for r in read_records(out)}
    log = CallLog()
    async with Endpoints(log) as endpoints:
        client = endpoints.client(role_name, role(role_name, emb), base_url)
        for sample in samples(n):
            if (stage, mode, sample.id) in done:
                continue
            load, calls = os.getloadavg()[0], len(log.calls)
            try:
                outcome, detail, finish = await sample.ask(client)
            except ProviderError as exc:
                outcome, detail, finish = "provider_error", str(exc)[:300], None
            if len(log.calls) > calls and log.calls[-1].status != "ok":
                outcome = "provider_error"  # the judge wraps it; not a parse failure either way
            call = log.calls[-1] if len(log.calls) > calls else None
            text = _ANSWERS.pop() if _ANSWERS else None
            _ANSWERS.clear()
            record = {
                "stage": stage,
                "mode": mode,
                "id": sample.id,
                "outcome": outcome,
                "detail": detail,
                "finish": finish,
                "latency_s": round(call.latency_s, 2) if call else None,
                "completion_tokens": call.completion_tokens if call else 0,
                "load_avg_1m": round((load + os.getloadavg()[0]) / 2, 2),
                # Head and tail of a long answer: where it went wrong is usually at the end.
                "text": text
                if text is None or len(text) <= TEXT_CHARS
                else f"{text[: TEXT_CHARS // 2]} [...] {text[-TEXT_CHARS // 2 :]}",
            }
            with out.open("a") as f:
                f.write(json.dumps(record) + "\n")
            print(f"  {stage} {mode} {sample.id}: {outcome} {record['latency_s']} s", flush=True)


def read_records(path: Path) -> list[Record]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def failures(stage: str, records: list[Record]) -> dict[str, Any]:
    """The stage's parse-failure figure, as reported in docs/llm.md."""
    counts = Counter(r["outcome"] for r in records)
    if stage == "tools":
        attempted = sum(counts[k] for k in ("call", "calls", "invalid_call", "malformed_call"))
        bad = counts["invalid_call"] + counts["malformed_call"]
    elif stage in ("blueprint", "data", "scenario", "refusal"):
        bad, attempted = counts["not_json"] + counts["off_schema"], len(records)
    else:
        bad, attempted = counts["malformed"], len(records)
    attempted -= counts["provider_error"] if stage != "tools" else 0
    return {"failed": bad, "of": attempted, "counts": dict(counts)}


def summary(records: list[Record]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for stage in STAGES:
        for mode in ("before", "after"):
            rs = [r for r in records if r["stage"] == stage and r["mode"] == mode]
            if not rs:
                continue
            timed = [r["latency_s"] for r in rs if r["latency_s"] is not None]
            out.setdefault(stage, {})[mode] = {
                **failures(stage, rs),
                "mean_latency_s": round(statistics.mean(timed), 1) if timed else None,
                "completion_tokens": sum(r["completion_tokens"] for r in rs),
                "mean_load_avg_1m": round(statistics.mean(r["load_avg_1m"] for r in rs), 1),
            }
    return out


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
    parser.add_argument("--out", type=Path, default=Path("runs/bench/structured.jsonl"))
    parser.add_argument("--fresh", action="store_true", help="forget earlier records in --out")
    parser.add_argument(
        "--speed", action="store_true", help="only measure generation speed with a grammar"
    )
    args = parser.parse_args()
    # A deadline's SIGTERM unwinds normally, so the embedded model's process is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.speed:
        print(json.dumps(grammar_speed(LLMSettings().embedded)))
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.fresh:
        args.out.unlink(missing_ok=True)
    for stage in args.stages:
        for mode in args.modes:
            on = mode == "after"
            emb = LLMSettings().embedded.model_copy(
                update={"structured_outputs": on, "constrain_tool_calls": on}
            )
            print(f"== {stage} {mode}: cpus {os.cpu_count()}, load {os.getloadavg()}", flush=True)
            with EmbeddedServer(emb, args.out.parent) as server:
                assert server.base_url is not None
                n = args.n or STAGES[stage][2]
                asyncio.run(run_stage(server.base_url, emb, stage, mode, n, args.out))
    print(json.dumps(summary(read_records(args.out)), indent=1))


if __name__ == "__main__":
    main()
