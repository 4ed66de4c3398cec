"""A scripted OpenAI-compatible chat-completions server, for tests and benchmarks.

Modes (per server):
- ``script``: replies queued per (episode, role); a call with nothing queued is answered with
  HTTP 400 ``no_script`` and counted, so a test fails loudly.
- ``oracle``: plays the task named by the ``X-Maestro-Episode`` header: the user opens with the
  reason for calling and stops once answered; the assistant makes the gold calls one by one, then
  states every ``communicate_info``; the judge finds every assertion met.
- ``nothing``: the assistant only greets; the judge finds no assertion met.
- ``minimal``: user opens, assistant makes one read call, answers, user stops (4 LLM calls).

Faults are injected at configured rates: 429, 500, a stall past the client's timeout, malformed
tool-call arguments, empty completions. Latency is added to every answer.

Run alone: ``python -m maestro.agents.scripted_server --mode oracle --port 8900``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, Field

from maestro.agents.background import BackgroundApp
from maestro.conversation import STOP
from maestro.domains import Action, Domain, Task, library_ids, library_path, load_domain
from maestro.simulation.scripted import GREETING

Mode = Literal["script", "oracle", "nothing", "minimal"]


class FaultRates(BaseModel):
    """Probability of each injected fault, per call."""

    rate_limit: float = Field(0.0, ge=0, le=1)
    server_error: float = Field(0.0, ge=0, le=1)
    timeout: float = Field(0.0, ge=0, le=1)
    malformed_args: float = Field(0.0, ge=0, le=1)
    empty: float = Field(0.0, ge=0, le=1)


class ScriptedCall(BaseModel):
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class Reply(BaseModel):
    """One scripted answer: text, tool calls, or a fault."""

    content: str | None = None
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    fault: Literal["rate_limit", "server_error", "timeout", "malformed_args", "empty"] | None = None


class ServerConfig(BaseModel):
    mode: Mode = "script"
    latency_s: float = Field(0.0, ge=0)
    faults: FaultRates = Field(default_factory=FaultRates)
    seed: int = 0
    #: How long a "timeout" fault stalls before answering (past any sane client timeout).
    stall_s: float = 30.0
    #: Package folders of domains the oracle can play; library domains when empty.
    domain_paths: list[str] = Field(default_factory=list)
    #: Keep every request body in ``ScriptedModel.requests`` (off: benchmarks send many).
    keep_requests: bool = False
    #: Hold text answers to the request's ``response_format`` (JSON Schema); misfits are
    #: recorded in ``Stats.format_misfits`` and fail ``assert_done``.
    check_response_format: bool = False


@dataclass
class Stats:
    calls: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    unscripted: list[str] = field(default_factory=list)
    #: Requests that sent a response_format, per role.
    response_formats: Counter[str] = field(default_factory=Counter)
    format_misfits: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "faults": dict(self.faults),
            "unscripted": list(self.unscripted),
            "response_formats": dict(self.response_formats),
            "format_misfits": list(self.format_misfits),
            "max_in_flight": self.max_in_flight,
        }


class ScriptedModel:
    """What the server answers; independent of HTTP so its logic is testable alone."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)
        self._scripts: dict[tuple[str, str], deque[Reply]] = {}
        self._lock = threading.Lock()
        self.stats = Stats()
        #: (episode, role, request body) of every call when ``keep_requests`` is on.
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        #: (episode, role, response_format) of every call that sent one.
        self.formats: list[tuple[str, str, dict[str, Any]]] = []
        self._tasks: dict[tuple[str, str], tuple[Domain, Task]] = {}
        if config.mode in ("oracle", "nothing", "minimal"):
            paths = [Path(p) for p in config.domain_paths] or [
                library_path(i) for i in library_ids()
            ]
            for p in paths:
                domain = load_domain(p, check_gold=False)
                # Only tasks and tool kinds are used here, both known without a sandbox child.
                domain.close()
                for t in domain.tasks:
                    self._tasks[(domain.id, t.id)] = (domain, t)

    # ----- scripts -----------------------------------------------------------------------------

    def script(self, episode: str, role: str, replies: list[Reply]) -> None:
        with self._lock:
            self._scripts.setdefault((episode, role), deque()).extend(replies)

    def leftovers(self) -> dict[str, int]:
        with self._lock:
            return {f"{e}/{r}": len(q) for (e, r), q in self._scripts.items() if q}

    # ----- answering ---------------------------------------------------------------------------

    def draw_fault(self) -> str | None:
        f = self.config.faults
        with self._lock:
            x = self._rng.random()
        for name in ("rate_limit", "server_error", "timeout", "malformed_args", "empty"):
            rate = getattr(f, name)
            if x < rate:
                return name
            x -= rate
        return None

    def answer(self, episode: str, role: str, body: dict[str, Any]) -> Reply:
        """The reply for one request; raises LookupError when there is nothing to say."""
        self.stats.calls[role] += 1
        if self.config.keep_requests:
            self.requests.append((episode, role, body))
        response_format = body.get("response_format")
        if response_format is not None:
            self.stats.response_formats[role] += 1
            self.formats.append((episode, role, response_format))
        if self.config.mode == "script":
            with self._lock:
                queue = self._scripts.get((episode, role))
                if not queue:
                    raise LookupError(f"no script for episode {episode!r} role {role!r}")
                return queue.popleft()
        domain_task = self._tasks.get(_task_key(episode))
        if domain_task is None:
            raise LookupError(f"episode {episode!r} names no task this server knows")
        domain, task = domain_task
        messages = body.get("messages") or []
        if role == "user":
            said = sum(1 for m in messages if m.get("role") == "assistant")
            if said == 0:
                return Reply(content=task.user_scenario.instructions.reason_for_call)
            return Reply(content=STOP)
        if role == "judge":
            met = self.config.mode == "oracle"
            verdicts = [
                {"index": i + 1, "met": met, "reason": "scripted oracle verdict"}
                for i in range(len(task.evaluation_criteria.nl_assertions))
            ]
            return Reply(content=json.dumps({"verdicts": verdicts}))
        return self._assistant(domain, task, messages)

    def _assistant(self, domain: Domain, task: Task, messages: list[dict[str, Any]]) -> Reply:
        mode = self.config.mode
        if mode == "nothing":
            return Reply(content=GREETING)
        done = sum(
            1
            for m in messages
            if m.get("role") == "tool" and not str(m.get("content", "")).startswith("Error")
        )
        if mode == "minimal":
            reads = [
                a for a in task.gold_actions if domain.toolkit.kind(a.name) == "read"
            ] or task.gold_actions
            if done == 0 and reads:
                return Reply(
                    tool_calls=[ScriptedCall(name=reads[0].name, arguments=reads[0].arguments)]
                )
            return Reply(
                content="Here is what I found: " + (messages[-1].get("content") or "")[:200]
            )
        gold = gold_until_now(task, messages)
        if done < len(gold):
            return Reply(
                tool_calls=[ScriptedCall(name=gold[done].name, arguments=gold[done].arguments)]
            )
        info = task.evaluation_criteria.communicate_info
        return Reply(content=("To confirm: " + "; ".join(info) + ".") if info else "All done.")


def gold_until_now(task: Task, messages: list[dict[str, Any]]) -> list[Action]:
    """The gold actions due by now: all of them, or for a task with scripted user turns, those
    of the turns the user has spoken so far."""
    if not task.user_turns:
        return task.gold_actions
    heard = sum(1 for m in messages if m.get("role") == "user")
    due = {a for t in task.user_turns[:heard] for a in t.action_ids}
    return [a for a in task.gold_actions if a.action_id in due]


def _task_key(episode: str) -> tuple[str, str]:
    parts = episode.split("/")
    return (parts[0], parts[1]) if len(parts) >= 2 else ("", episode)


def _completion(body: dict[str, Any], reply: Reply, malformed: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}_{time.monotonic_ns() % 10**9}",
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": '{"broken": '
                    if malformed
                    else (c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)),
                },
            }
            for i, c in enumerate(reply.tool_calls)
        ]
    prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
    completion_chars = len(reply.content or "") + sum(
        len(json.dumps(c.arguments)) + len(c.name) for c in reply.tool_calls
    )
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_chars // 4 + 1,
            "completion_tokens": completion_chars // 4 + 1,
            "total_tokens": (prompt_chars + completion_chars) // 4 + 2,
        },
    }


def format_misfit(response_format: Any, content: str | None) -> str | None:
    """Why ``content`` does not fit ``response_format``, or None when it does (or none asked)."""
    if not isinstance(response_format, dict) or response_format.get("type") not in (
        "json_object",
        "json_schema",
    ):
        return None
    try:
        data = json.loads(content or "")
    except json.JSONDecodeError as exc:
        return f"the answer is not JSON ({exc.msg}) though the request asked for a JSON format"
    if response_format["type"] == "json_object":
        return None if isinstance(data, dict) else "the answer is not a JSON object"
    import jsonschema  # type: ignore[import-untyped]  # comes with prefect and mcp

    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return f"the request's schema is not a valid JSON Schema: {exc.message}"
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(data)
    )
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the top level"
    return f"the answer does not fit its schema at {where}: {error.message}"


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind}}, status=status)


def build_app(model: ScriptedModel) -> web.Application:
    config = model.config

    async def chat(request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except json.JSONDecodeError:
            return _error(400, "request body is not JSON", "invalid_request")
        episode = request.headers.get("X-Maestro-Episode", "")
        role = request.headers.get("X-Maestro-Role", "assistant")
        stats = model.stats
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            return await respond(body, episode, role)
        finally:
            stats.in_flight -= 1

    async def respond(body: dict[str, Any], episode: str, role: str) -> web.Response:
        if config.latency_s:
            await asyncio.sleep(config.latency_s)
        try:
            reply = model.answer(episode, role, body)
        except LookupError as exc:
            model.stats.unscripted.append(f"{episode}/{role}: {exc}")
            return _error(400, f"scripted server: {exc}", "no_script")
        fault = reply.fault or model.draw_fault()
        if fault == "malformed_args" and not reply.tool_calls:
            fault = None
        if fault:
            model.stats.faults[fault] += 1
        if fault == "rate_limit":
            return web.json_response(
                {"error": {"message": "rate limited", "type": "rate_limit"}},
                status=429,
                headers={"Retry-After": "0"},
            )
        if fault == "server_error":
            return _error(500, "injected server error", "server_error")
        if fault == "timeout":
            await asyncio.sleep(config.stall_s)
        if fault == "empty":
            reply = Reply(content="")
        elif config.check_response_format and not reply.tool_calls:
            problem = format_misfit(body.get("response_format"), reply.content)
            if problem:
                model.stats.format_misfits.append(f"{episode}/{role}: {problem}")
        return web.json_response(_completion(body, reply, malformed=fault == "malformed_args"))

    async def models(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": "scripted", "object": "model", "owned_by": "maestro"}],
            }
        )

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({**model.stats.to_json(), "leftovers": model.leftovers()})

    async def add_script(request: web.Request) -> web.Response:
        data = await request.json()
        model.script(
            data["episode"], data["role"], [Reply.model_validate(r) for r in data["replies"]]
        )
        return web.json_response({"ok": True})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/admin/stats", stats)
    app.router.add_post("/admin/script", add_script)
    return app


class ScriptedServer(BackgroundApp):
    """The server on a background thread with its own event loop, for tests."""

    def __init__(
        self, config: ServerConfig | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.model = ScriptedModel(config or ServerConfig())
        super().__init__(
            lambda: build_app(self.model),
            host,
            port,
            name="scripted-llm-server",
            backlog=4096,
            handler_cancellation=True,
        )

    def script(self, episode: str, role: str, replies: list[Reply]) -> None:
        self.model.script(episode, role, replies)

    def assert_done(self) -> None:
        """Fail when a call had no script, or scripted replies were never asked for."""
        problems = []
        if self.model.stats.unscripted:
            problems.append(f"unscripted calls: {self.model.stats.unscripted}")
        if self.model.stats.format_misfits:
            problems.append(
                f"answers that misfit their response_format: {self.model.stats.format_misfits}"
            )
        left = self.model.leftovers()
        if left:
            problems.append(f"scripted replies never used: {left}")
        if problems:
            raise AssertionError("; ".join(problems))


@contextmanager
def scripted_server(config: ServerConfig | None = None) -> Iterator[ScriptedServer]:
    with ScriptedServer(config) as server:
        yield server


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Scripted OpenAI-compatible server for tests and benchmarks."
    )
    parser.add_argument(
        "--mode", choices=["script", "oracle", "nothing", "minimal"], default="oracle"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    parser.add_argument("--config", help="a JSON file with a full ServerConfig")
    args = parser.parse_args()
    if args.config:
        config = ServerConfig.model_validate_json(Path(args.config).read_text())
    else:
        config = ServerConfig(mode=args.mode, latency_s=args.latency)
    web.run_app(
        build_app(ScriptedModel(config)),
        host=args.host,
        port=args.port,
        access_log=None,
        print=None,
        handler_cancellation=True,
    )


if __name__ == "__main__":
    main()
