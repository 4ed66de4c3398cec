"""A trained model behind an OpenAI-compatible chat-completions endpoint (aiohttp, as the
embedded model's server), so the evaluation runs it through the same client, episodes and
scoring as any other assistant. Requests are served one at a time; each has a deadline."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from aiohttp import web

from maestro.agents.background import BackgroundApp
from maestro.conversation import to_openai
from maestro.training.generation import ChatGenerator


def build_app(gen: ChatGenerator, model_name: str, deadline_s: float) -> web.Application:
    lock = asyncio.Lock()

    def generate(body: dict[str, Any]) -> dict[str, Any]:
        message, prompt_tokens, completion_tokens = gen.chat(
            body.get("messages") or [], body.get("tools") or None, body.get("max_tokens")
        )
        out = to_openai(message)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [
                {
                    "index": 0,
                    "message": out,
                    "finish_reason": "tool_calls" if message.tool_calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    async def chat(request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except json.JSONDecodeError:
            return web.json_response({"error": {"message": "request body is not JSON"}}, status=400)
        try:
            async with asyncio.timeout(deadline_s), lock:
                out = await asyncio.get_running_loop().run_in_executor(None, generate, body)
        except TimeoutError:
            return web.json_response(
                {"error": {"message": f"no answer within {deadline_s:g} s"}}, status=503
            )
        except Exception as exc:  # the model failing is the caller's data, not a server crash
            return web.json_response(
                {"error": {"message": f"{type(exc).__name__}: {exc}"}}, status=500
            )
        return web.json_response(out)

    async def models(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": model_name, "object": "model", "owned_by": "maestro"}],
            }
        )

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


class ModelServer(BackgroundApp):
    """The server on a background thread with its own event loop."""

    def __init__(
        self,
        gen: ChatGenerator,
        model_name: str,
        host: str = "127.0.0.1",
        deadline_s: float = 300.0,
    ) -> None:
        super().__init__(
            lambda: build_app(gen, model_name, deadline_s), host, name="maestro-model-server"
        )
