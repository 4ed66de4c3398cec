"""maestro's tasks as an OpenEnv environment: reset with a task, step with the agent's turn.

OpenEnv (``openenv-core``, Meta and Hugging Face) serves an environment over a WebSocket per
session (``/ws``: reset, step, state, close), which TRL's GRPO and SkyRL drive. Here the agent
under training is the assistant of maestro's own episode loop (:func:`run_episode`, unchanged):
each ``respond`` of the loop's assistant waits for the client's next step, and each step's
observation is what the loop produced since (the tool results, the user's answer). So the
episode keeps every rule of a maestro episode: its copy-on-write session (the sandbox for
untrusted domains), the task's scripted user turns or the user simulator, the turn, step and
time limits, the typed terminations. When it ends, the trajectory is scored by maestro's
scorer (NL assertions by the judge role when one is given): the observation's ``reward`` is
the card's reward once every criterion has a verdict (None while one has none, as GRPO's
reward function gives), and ``info`` holds the card.

- ``reset(task_id=..., seed=...)`` or ``reset(task_ref={...})``: a ``task_ref`` from an
  ``export hf --kind rl`` row is refused when the domain's version or content hash differ from
  what is served (a stale reference).
- ``step({"content": "...", "tool_calls": [{"name": ..., "arguments": {...}}]})``: the
  assistant's turn, text or tool calls (tool calls are run and their results observed).
- ``state``: the episode id, steps, task, termination.
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from maestro.agents.client import Endpoints
from maestro.agents.judge import LLMJudge
from maestro.agents.roles import UserSimulator, assistant_system_prompt
from maestro.agents.settings import RoleSettings
from maestro.conversation import Completion, Message, ToolCall, to_openai
from maestro.domains import Domain
from maestro.domains.models import Task
from maestro.scoring import Scorer
from maestro.simulation.episode import EpisodeLimits, EpisodeResult, run_episode
from maestro.storage.records import domain_row

if TYPE_CHECKING:
    from fastapi import FastAPI

#: Bounds on one step: what a client may send.
MAX_CONTENT_CHARS = 100_000
MAX_TOOL_CALLS = 32
#: How long a connection refused for capacity waits for the client's first message, so that
#: it reads the refusal (see :class:`_QuietClose`).
REFUSAL_LINGER_S = 5.0


class OpenEnvError(Exception):
    """A reset or step the environment cannot take; the message says what is wrong."""


class ToolCallIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(None, max_length=200)


class Turn(BaseModel):
    """The assistant's turn: a text answer, or tool calls (with optional text)."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = Field(None, max_length=MAX_CONTENT_CHARS)
    tool_calls: list[ToolCallIn] = Field(default_factory=list, max_length=MAX_TOOL_CALLS)

    @model_validator(mode="after")
    def _says_something(self) -> Turn:
        if not self.tool_calls and not (self.content or "").strip():
            raise ValueError("a step needs content or tool_calls")
        return self


class MaestroAction(Action):
    """What OpenEnv's server takes as a step: any object, read as a :class:`Turn` by the
    environment. OpenEnv answers a step its own validation refuses with "Invalid message" and
    no more (its client shows only that), so the environment validates, and its error names
    the field and the problem."""

    model_config = ConfigDict(extra="allow")

    content: Any = Field(None, description="The assistant's text (at most 100,000 characters).")
    tool_calls: Any = Field(
        None, description='Tool calls: [{"name": ..., "arguments": {...}, "id": ...}], at most 32.'
    )

    def turn(self) -> Turn:
        data = self.model_dump(exclude={"metadata"}, exclude_none=True)
        try:
            return Turn.model_validate(data)
        except ValidationError as exc:
            raise OpenEnvError(f"malformed step: {_one_line(exc)}") from None


def _one_line(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors()[:3]:
        where = ".".join(str(x) for x in e["loc"]) or "step"
        parts.append(f"{where}: {e['msg'].removeprefix('Value error, ')}")
    more = exc.error_count() - 3
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


class MaestroObservation(Observation):
    """What the agent sees: the messages since its last step (the user's, the tools'), and at
    reset the system prompt and the tools; at the end the termination and the score card."""

    task_id: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    system: str | None = None
    tools: list[dict[str, Any]] | None = None
    termination: str | None = None
    info: dict[str, Any] = Field(default_factory=dict)


class MaestroState(State):
    domain_id: str | None = None
    task_id: str | None = None
    termination: str | None = None
    messages: int = 0


@dataclass
class Catalog:
    """What a server serves, shared by its sessions: the domains, the tasks a reset may name,
    the user simulator's and judge's settings, the episodes' limits."""

    domains: Mapping[str, Domain]
    tasks: Sequence[tuple[str, str]]
    user: RoleSettings | None = None
    judge: RoleSettings | None = None
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    #: Seconds a step waits for the episode's next turn (the user simulator's and the tools'
    #: time); past it the step is an error and the episode goes on.
    step_timeout_s: float = 600.0
    name: str = "maestro"
    _endpoints: Endpoints | None = field(default=None, repr=False)
    _hashes: dict[str, str | None] = field(default_factory=dict, repr=False)
    _scorers: dict[str, Scorer] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        missing = [(d, t) for d, t in self.tasks if d not in self.domains]
        if missing:
            raise OpenEnvError(f"tasks of domains not served: {missing[:5]}")
        self._index = {t: d for d, t in self.tasks}
        if len(self._index) != len(self.tasks):
            raise OpenEnvError("two served tasks share an id")
        unscripted = [t for d, t in self.tasks if not self.domains[d].task(t).user_turns]
        if unscripted and (self.user is None or not self.user.base_url):
            raise OpenEnvError(
                f"{len(unscripted)} task(s) (e.g. {unscripted[0]}) need a user simulator: set "
                "MAESTRO_USER__BASE_URL (or serve tasks with scripted user turns only)"
            )

    def endpoints(self) -> Endpoints:
        if self._endpoints is None:
            self._endpoints = Endpoints()
        return self._endpoints

    async def close(self) -> None:
        if self._endpoints is not None:
            await self._endpoints.close()

    def find(self, task_id: str | None, task_ref: Mapping[str, Any] | None) -> tuple[Domain, Task]:
        if task_ref is not None:
            return self._from_ref(task_ref)
        if task_id is None:
            if len(self.tasks) != 1:
                raise OpenEnvError(
                    f"reset needs task_id (or task_ref): this server has {len(self.tasks)} tasks"
                )
            task_id = self.tasks[0][1]
        if task_id not in self._index:
            raise OpenEnvError(f"no task {task_id!r} is served here")
        domain = self.domains[self._index[task_id]]
        return domain, domain.task(task_id)

    def _from_ref(self, ref: Mapping[str, Any]) -> tuple[Domain, Task]:
        if not isinstance(ref, Mapping):
            raise OpenEnvError("task_ref must be an object")
        domain_id, task_id = ref.get("domain_id"), ref.get("task_id")
        if not isinstance(task_id, str) or not isinstance(domain_id, str):
            raise OpenEnvError("task_ref needs a domain_id and a task_id")
        if self._index.get(task_id) != domain_id:
            raise OpenEnvError(f"task_ref names {domain_id!r}/{task_id!r}, which is not served")
        domain = self.domains[domain_id]
        if domain_id not in self._hashes:
            self._hashes[domain_id] = domain_row(domain).content_hash
        served = (domain.manifest.version, self._hashes[domain_id])
        asked = (ref.get("domain_version"), ref.get("domain_hash"))
        if asked != served:
            raise OpenEnvError(
                f"stale task_ref: {domain_id} version {asked[0]} (hash {str(asked[1])[:12]}) "
                f"is served as version {served[0]} (hash {str(served[1])[:12]})"
            )
        return domain, domain.task(task_id)

    def scorer(self, domain: Domain) -> Scorer:
        if domain.id not in self._scorers:
            judge = None
            if self.judge is not None and self.judge.base_url:
                judge = LLMJudge(self.endpoints().client("judge", self.judge))
            self._scorers[domain.id] = Scorer(domain, judge)
        return self._scorers[domain.id]


class _Episode:
    """One run of :func:`run_episode` whose assistant is the client: the loop's ``respond``
    hands the turn to the client and waits for its step."""

    def __init__(self, catalog: Catalog, domain: Domain, task: Task, seed: int) -> None:
        self.catalog, self.domain, self.task = catalog, domain, task
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.reply: asyncio.Future[Completion] | None = None
        self.seen = 0
        self.steps = 0
        self.result: EpisodeResult | None = None
        user = None
        if not task.user_turns:
            assert catalog.user is not None
            user = UserSimulator(catalog.endpoints().client("user", catalog.user), domain, task)
        self.runner = asyncio.create_task(
            run_episode(domain, task, self, user, seed=seed, trial=seed, limits=catalog.limits)
        )
        self.runner.add_done_callback(self._ended)

    async def respond(
        self, history: list[Message], *, episode: str, seed: int | None, tools: list[str] | None
    ) -> Completion:
        self.reply = asyncio.get_running_loop().create_future()
        self.events.put_nowait(("turn", (history, tools)))
        return await self.reply

    def _ended(self, task: asyncio.Task[EpisodeResult]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        self.events.put_nowait(("crash", exc) if exc else ("done", task.result()))

    async def next(self) -> MaestroObservation:
        try:
            kind, value = await asyncio.wait_for(
                self.events.get(), timeout=self.catalog.step_timeout_s
            )
        except TimeoutError:
            raise OpenEnvError(
                f"the episode did not come back within {self.catalog.step_timeout_s:g} s"
            ) from None
        if kind == "crash":
            raise OpenEnvError(f"the episode failed: {type(value).__name__}: {value}")
        if kind == "turn":
            history, _tools = value
            return MaestroObservation(task_id=self.task.id, messages=self._new(history))
        self.result = value
        return await self._final(value)

    def _new(self, history: list[Message]) -> list[dict[str, Any]]:
        """The messages the client has not seen, its own (assistant) turns left out."""
        new = history[self.seen :]
        self.seen = len(history)
        return [_wire(m) for m in new if m.role != "assistant"]

    async def _final(self, result: EpisodeResult) -> MaestroObservation:
        traj = result.trajectory
        scorer = self.catalog.scorer(self.domain)
        card = (
            await scorer.ascore(self.task, traj) if scorer.judge else scorer.score(self.task, traj)
        )
        return MaestroObservation(
            task_id=self.task.id,
            messages=self._new(traj.messages),
            done=True,
            reward=card.reward if card.complete else None,
            termination=result.termination.value,
            info={
                "succeeded": card.succeeded,
                "complete": card.complete,
                "error": result.error,
                "card": card.model_dump(mode="json"),
            },
        )

    async def act(self, turn: Turn) -> MaestroObservation:
        if self.result is not None:
            raise OpenEnvError("the episode is over: reset to start another")
        if self.reply is None or self.reply.done():
            raise OpenEnvError("the episode is not waiting for the assistant")
        calls = [
            ToolCall(id=c.id or f"call_{uuid.uuid4().hex[:12]}", name=c.name, arguments=c.arguments)
            for c in turn.tool_calls
        ]
        message = Message(role="assistant", content=turn.content or None, tool_calls=calls)
        self.steps += 1
        self.reply.set_result(Completion(message, "tool_calls" if calls else "stop", 0, 0, 0.0, 1))
        return await self.next()

    def cancel(self) -> None:
        if not self.runner.done():
            self.runner.cancel()


def _wire(m: Message) -> dict[str, Any]:
    out = to_openai(m)
    if m.role == "tool":
        out["status"] = m.status
    return out


class MaestroEnvironment(Environment[MaestroAction, MaestroObservation, MaestroState]):
    """One OpenEnv session: at most one episode at a time, each a fresh copy of its task's
    state (an episode is never shared between sessions)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, catalog: Catalog) -> None:
        super().__init__()
        self.catalog = catalog
        self.episode: _Episode | None = None
        self.episode_id: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
        raise OpenEnvError("this environment is asynchronous: use reset_async")

    def step(self, action: MaestroAction, timeout_s: float | None = None, **kwargs: Any) -> Any:
        raise OpenEnvError("this environment is asynchronous: use step_async")

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        task_ref: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> MaestroObservation:
        if kwargs:
            raise OpenEnvError(
                f"reset takes task_id, task_ref, seed, episode_id; not {sorted(kwargs)}"
            )
        domain, task = self.catalog.find(task_id, task_ref)
        if self.episode is not None:
            self.episode.cancel()
        self._loop = asyncio.get_running_loop()
        self.episode = _Episode(self.catalog, domain, task, seed or 0)
        self.episode_id = episode_id or uuid.uuid4().hex
        first = await self.episode.next()
        first.system = assistant_system_prompt(domain)
        first.tools = domain.toolkit.schemas()
        return first

    async def step_async(
        self, action: MaestroAction, timeout_s: float | None = None, **kwargs: Any
    ) -> MaestroObservation:
        if self.episode is None:
            raise OpenEnvError("step before reset: reset with a task first")
        return await self.episode.act(action.turn())

    @property
    def state(self) -> MaestroState:
        ep = self.episode
        return MaestroState(
            episode_id=self.episode_id,
            step_count=ep.steps if ep else 0,
            domain_id=ep.domain.id if ep else None,
            task_id=ep.task.id if ep else None,
            termination=ep.result.termination.value if ep and ep.result else None,
            messages=ep.seen if ep else 0,
        )

    def close(self) -> None:
        """Called from the server's executor thread: the episode is cancelled in its loop."""
        ep, loop = self.episode, self._loop
        self.episode = None
        if ep is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(ep.cancel)


def build_app(
    catalog: Catalog, *, max_sessions: int, idle_timeout_s: float, token: str | None = None
) -> FastAPI:
    """OpenEnv's own FastAPI app (``/ws``, ``/reset``, ``/step``, ``/state``, ``/health``,
    ``/schema``) over ``catalog``, at most ``max_sessions`` sessions at once, each ended after
    ``idle_timeout_s`` without a message; with ``token``, every request and WebSocket handshake
    must carry ``Authorization: Bearer TOKEN``."""
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.types import ConcurrencyConfig

    app = create_fastapi_app(
        lambda: MaestroEnvironment(catalog),
        MaestroAction,
        MaestroObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s
        ),
    )
    app.router.on_shutdown.append(catalog.close)
    app.add_middleware(_QuietClose)
    if token is not None:
        app.add_middleware(_BearerOnly, token=token)
    return app


class _QuietClose:
    """ASGI middleware over OpenEnv's WebSocket handler.

    - It closes the socket again after the client's own close, and the disconnect it then meets
      was logged as an ASGI error per session: suppressed.
    - A connection past the session cap is refused when it opens: the handler sends the
      CAPACITY_REACHED error and closes at once, so a client whose first message (its reset)
      was not yet sent met a bare "connection closed" instead of the reason (a race that a
      loaded machine lost). The close is held until the client's next message or
      :data:`REFUSAL_LINGER_S`, so the client reads the error as the answer to its reset.
    """

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        from starlette.websockets import WebSocketDisconnect
        from uvicorn.protocols.utils import ClientDisconnected

        refused = False

        async def lingering_send(message: dict[str, Any]) -> None:
            nonlocal refused
            if message["type"] == "websocket.send" and '"CAPACITY_REACHED"' in (
                message.get("text") or ""
            ):
                refused = True
            elif message["type"] == "websocket.close" and refused:
                with suppress(TimeoutError):
                    await asyncio.wait_for(receive(), REFUSAL_LINGER_S)
            await send(message)

        with suppress(WebSocketDisconnect, ClientDisconnected):
            await self.app(scope, receive, lingering_send)


@contextmanager
def running(app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``app`` in a background thread for the block; yields its ``http://`` base URL
    (port 0: a free one)."""
    import uvicorn

    from maestro.domains.mcp_server import free_port

    port = port or free_port(host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", ws="websockets-sansio")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="openenv", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise OpenEnvError(f"the OpenEnv server did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


class _BearerOnly:
    """ASGI middleware: HTTP requests and WebSocket handshakes without the bearer token are
    refused (401; a WebSocket closed with 1008 before it is accepted)."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "bearer token required"})
            return
        body = b'{"detail":"bearer token required"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
