"""An async OpenAI-compatible chat client per role, with bounded concurrency, retries and deadlines.

Works with any server speaking ``POST {base_url}/chat/completions``: OpenAI, vLLM, SGLang,
Ollama, llama.cpp, the embedded model and the scripted test server. Every call, failed or not, is
recorded as an :class:`LLMCall` (tokens, latency, attempts) through an injected recorder.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import aiohttp
from pydantic import BaseModel

from maestro.agents.settings import Role, RoleSettings
from maestro.conversation import Completion, Message, ToolCall, to_openai

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class ProviderError(Exception):
    """The endpoint failed the call after every retry, or answered with something unusable."""

    def __init__(
        self, message: str, *, status: int | None = None, attempts: int = 1, kind: str = "provider"
    ) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.kind = kind


class EmptyCompletionError(ProviderError):
    """The model answered with neither text nor tool calls, every time it was asked."""


class LLMCall(BaseModel):
    """One logical call (retries included), as stored in the llm_calls table."""

    role: str
    model: str
    endpoint: str
    episode: str | None = None
    started_at: datetime
    latency_s: float
    attempts: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: str = "ok"
    error: str | None = None


class CallRecorder(Protocol):
    def record(self, call: LLMCall) -> None: ...


@dataclass
class CallLog:
    """An in-memory recorder; the flows write its calls to the lake."""

    calls: list[LLMCall] = field(default_factory=list)

    def record(self, call: LLMCall) -> None:
        self.calls.append(call)


def json_schema_format(
    name: str, schema: dict[str, Any] | type[BaseModel], *, strict: bool = False
) -> dict[str, Any]:
    """The ``response_format`` asking for JSON valid against ``schema`` (a JSON Schema or a
    pydantic model): OpenAI's structured outputs, which vLLM, SGLang, llama.cpp's server and the
    embedded model accept too. Not ``strict`` by default: OpenAI's strict mode refuses optional
    fields and open dictionaries, which pydantic schemas have."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise ValueError(
            f"response format name {name!r} must be 1-64 of A-Z a-z 0-9 _ - (OpenAI's rule)"
        )
    if isinstance(schema, type):
        schema = schema.model_json_schema()
    return {
        "type": "json_schema",
        "json_schema": {"name": name, "schema": schema, "strict": strict},
    }


def parse_choice(body: dict[str, Any]) -> tuple[Message, str | None]:
    """The first choice's message; tool-call arguments that are not a JSON object stay raw text
    (the tool runtime then answers the assistant with a clear error)."""
    try:
        choice = body["choices"][0]
        raw = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ProviderError(
            f"response has no choices[0].message: {str(body)[:300]}", kind="malformed_response"
        ) from None
    calls = []
    for i, tc in enumerate(raw.get("tool_calls") or []):
        fn = tc.get("function") or {}
        args_text = fn.get("arguments")
        args: dict[str, Any] | str
        if isinstance(args_text, dict):
            args = args_text
        else:
            try:
                parsed = json.loads(args_text) if args_text else {}
                args = parsed if isinstance(parsed, dict) else str(args_text)
            except (json.JSONDecodeError, TypeError):
                args = str(args_text)
        calls.append(
            ToolCall(
                id=str(tc.get("id") or f"call_{i}"), name=str(fn.get("name") or ""), arguments=args
            )
        )
    content = raw.get("content")
    if isinstance(content, list):  # some servers send content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return Message(role="assistant", content=content or None, tool_calls=calls), choice.get(
        "finish_reason"
    )


class Endpoints:
    """HTTP sessions and concurrency limits, one per endpoint, shared by the roles that use it.

    Use as an async context manager in the event loop that makes the calls.
    """

    def __init__(self, recorder: CallRecorder | None = None) -> None:
        self.recorder = recorder or CallLog()
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._limits: dict[str, asyncio.Semaphore] = {}

    async def __aenter__(self) -> Endpoints:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for s in self._sessions.values():
            await s.close()
        self._sessions.clear()

    def connection(
        self, base_url: str, settings: RoleSettings
    ) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        if base_url not in self._sessions:
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            self._sessions[base_url] = aiohttp.ClientSession(connector=connector)
            self._limits[base_url] = asyncio.Semaphore(settings.max_concurrency)
        return self._sessions[base_url], self._limits[base_url]

    def client(self, role: Role, settings: RoleSettings, base_url: str | None = None) -> ChatClient:
        """A client for one role; ``base_url`` overrides the settings' (the embedded model's URL)."""
        url = base_url or settings.base_url
        if not url:
            raise ValueError(
                f"role {role!r} has no endpoint: set MAESTRO_{role.upper()}__BASE_URL or start the embedded model"
            )
        return ChatClient(self, role, settings, url.rstrip("/"))


class ChatClient:
    """Chat completions for one role against one endpoint."""

    def __init__(
        self, endpoints: Endpoints, role: Role, settings: RoleSettings, base_url: str
    ) -> None:
        self.endpoints = endpoints
        self.role = role
        self.settings = settings
        self.base_url = base_url
        self.model = settings.model or "default"
        self._url = f"{base_url}/chat/completions"
        headers = {"Content-Type": "application/json"}
        if settings.api_key is not None:
            headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        self._headers = headers
        self._tools_cache: tuple[Sequence[dict[str, Any]], str] | None = None

    def _tools_json(self, tools: Sequence[dict[str, Any]]) -> str:
        """The tools as JSON, serialised once for the same list (an assistant's schemas are
        several kB, sent with every call)."""
        if self._tools_cache is None or self._tools_cache[0] is not tools:
            self._tools_cache = (tools, json.dumps(list(tools)))
        return self._tools_cache[1]

    async def complete(
        self,
        messages: Sequence[Message | dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        episode: str | None = None,
        seed: int | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """One completion; retried on 429, 5xx, connection errors, timeouts and empty answers."""
        s = self.settings
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [to_openai(m) if isinstance(m, Message) else m for m in messages],
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
        }
        if s.top_p is not None:
            payload["top_p"] = s.top_p
        if seed is not None:
            payload["seed"] = seed
        if response_format is not None:
            payload["response_format"] = response_format
        body = json.dumps(payload)
        if tools:
            body = f'{body[:-1]},"tools":{self._tools_json(tools)}}}'

        headers = dict(self._headers)
        if episode:
            headers["X-Maestro-Episode"] = episode
        headers["X-Maestro-Role"] = self.role
        started_wall = datetime.now(UTC)
        started = time.perf_counter()
        attempts = 0
        usage = (0, 0)
        try:
            async with asyncio.timeout(s.deadline_s):
                result, attempts, usage = await self._attempts(body, headers)
        except TimeoutError:
            err = ProviderError(
                f"{self.role}: no answer within the call deadline of {s.deadline_s:g} s",
                attempts=attempts,
                kind="deadline",
            )
            self._record(episode, started_wall, started, attempts, usage, err)
            raise err from None
        except ProviderError as exc:
            self._record(episode, started_wall, started, exc.attempts, usage, exc)
            raise
        self._record(episode, started_wall, started, attempts, usage, None)
        message, finish = result
        return Completion(
            message, finish, usage[0], usage[1], time.perf_counter() - started, attempts
        )

    async def _attempts(
        self, body: str, headers: dict[str, str]
    ) -> tuple[tuple[Message, str | None], int, tuple[int, int]]:
        s = self.settings
        session, limit = self.endpoints.connection(self.base_url, s)
        attempt = 0
        empty = 0
        prompt_tokens = completion_tokens = 0
        last_error = ""
        while True:
            attempt += 1
            retry_after: float | None = None
            status: int | None = None
            try:
                async with (
                    limit,
                    session.post(
                        self._url,
                        data=body,
                        headers=headers,
                        timeout=aiohttp.ClientTimeout(total=s.timeout_s),
                    ) as resp,
                ):
                    status = resp.status
                    text = await resp.text()
                    if status == 200:
                        data = json.loads(text)
                        u = data.get("usage") or {}
                        prompt_tokens += int(u.get("prompt_tokens") or 0)
                        completion_tokens += int(u.get("completion_tokens") or 0)
                        message, finish = parse_choice(data)
                        if message.content or message.tool_calls:
                            return (
                                (message, finish),
                                attempt,
                                (prompt_tokens, completion_tokens),
                            )
                        empty += 1
                        last_error = "empty completion"
                        if empty > s.empty_retries:
                            raise EmptyCompletionError(
                                f"{self.role}: empty completion {empty} time(s)",
                                attempts=attempt,
                                kind="empty_completion",
                            )
                        continue
                    last_error = f"HTTP {status}: {text[:300]}"
                    if status not in RETRYABLE_STATUS:
                        raise ProviderError(
                            f"{self.role}: {last_error}", status=status, attempts=attempt
                        )
                    ra = resp.headers.get("Retry-After")
                    retry_after = float(ra) if ra and ra.replace(".", "", 1).isdigit() else None
            except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
                last_error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if attempt > s.max_retries:
                raise ProviderError(
                    f"{self.role}: gave up after {attempt} attempt(s); last error: {last_error}",
                    status=status,
                    attempts=attempt,
                )
            delay = min(s.backoff_max_s, s.backoff_base_s * 2 ** (attempt - 1)) * random.uniform(
                0.5, 1.5
            )
            await asyncio.sleep(max(delay, retry_after or 0.0))

    def _record(
        self,
        episode: str | None,
        started_wall: datetime,
        started: float,
        attempts: int,
        usage: tuple[int, int],
        error: ProviderError | None,
    ) -> None:
        self.endpoints.recorder.record(
            LLMCall(
                role=self.role,
                model=self.model,
                endpoint=self.base_url,
                episode=episode,
                started_at=started_wall,
                latency_s=time.perf_counter() - started,
                attempts=max(attempts, 1),
                prompt_tokens=usage[0],
                completion_tokens=usage[1],
                status="ok" if error is None else error.kind,
                error=None if error is None else str(error),
            )
        )
