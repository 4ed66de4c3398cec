"""The grammar worker: schemas become grammars in a child process that is killed past a deadline,
and the embedded server's event loop stays free while one is built."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maestro.agents.grammar import (
    GrammarCache,
    GrammarError,
    GrammarWorker,
    request_grammar,
    schema_gbnf,
    tool_call_gbnf,
)
from maestro.domains import library_ids, library_path, load_domain
from tests.agents.bounded import within


def endless_conversion(pid_file: str) -> str:
    """A conversion that never ends, as llama-cpp's did on a stray ``]`` (run in the worker)."""
    Path(pid_file).write_text(str(os.getpid()))
    while True:
        pass


def dying_conversion() -> str:
    os._exit(3)


def no_check(gbnf: str) -> None:
    pass


@pytest.fixture
def worker() -> Iterator[GrammarWorker]:
    w = GrammarWorker(1.0)
    yield w
    w.close()


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_a_build_past_the_deadline_is_killed_and_the_error_says_so(
    worker: GrammarWorker, tmp_path: Path
) -> None:
    cache = GrammarCache(no_check, builder=worker)
    worker(schema_gbnf, {"type": "string"})  # started: the deadline is the build's alone
    pid_file = tmp_path / "pid"
    began = time.monotonic()
    err = within(20, lambda: cache.get("endless", endless_conversion, str(pid_file)))
    took = time.monotonic() - began
    assert isinstance(err, GrammarError), err
    assert "took longer than 1 s to become a grammar; its build was stopped" in str(err)
    assert 1.0 <= took < 5.0
    assert _gone(int(pid_file.read_text()))
    # The next build gets a fresh worker.
    assert worker(schema_gbnf, {"type": "integer"}) == schema_gbnf({"type": "integer"})
    assert worker.starts == 2


def test_a_second_identical_hostile_request_is_answered_from_the_failure_cache(
    worker: GrammarWorker, tmp_path: Path
) -> None:
    cache = GrammarCache(no_check, builder=worker)
    pid_file = str(tmp_path / "pid")
    first = within(20, lambda: cache.get("endless", endless_conversion, pid_file))
    began = time.monotonic()
    again = within(20, lambda: cache.get("endless", endless_conversion, pid_file))
    assert time.monotonic() - began < 0.1
    assert isinstance(again, GrammarError) and str(again) == str(first)
    assert (cache.misses, cache.hits, worker.starts) == (1, 1, 1)  # no build, no new worker


def test_a_worker_that_dies_mid_build_is_an_error_and_is_replaced(worker: GrammarWorker) -> None:
    with pytest.raises(GrammarError, match=r"the grammar worker ended \(exit status 3\)"):
        worker(dying_conversion)
    assert worker(schema_gbnf, {"type": "boolean"}) == schema_gbnf({"type": "boolean"})


def test_the_worker_refuses_the_hanging_pattern_quickly_naming_the_parameter(
    worker: GrammarWorker,
) -> None:
    cache = GrammarCache(no_check, builder=worker)
    worker(schema_gbnf, {"type": "string"})
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^a]b$"}}}
    fmt = {"type": "json_schema", "json_schema": {"schema": schema}}
    began = time.monotonic()
    err = within(20, lambda: request_grammar({"response_format": fmt}, cache))
    assert isinstance(err, GrammarError), err
    assert "at /properties/code: pattern '^a]b$': a lone ] at 1" in str(err)
    assert time.monotonic() - began < 0.5
    assert worker.starts == 1  # refused, not killed


def test_the_worker_makes_the_grammars_this_process_makes(worker: GrammarWorker) -> None:
    from maestro.agents.codegen.answers import response_format
    from maestro.agents.codegen.blueprint import BlueprintDraft
    from maestro.agents.grammar import response_format_schema

    for domain_id in library_ids():
        tools = load_domain(library_path(domain_id), check_gold=False).toolkit.schemas()
        assert worker(tool_call_gbnf, tools, None, None) == tool_call_gbnf(tools), domain_id
    blueprint = response_format_schema(response_format("blueprint", BlueprintDraft))
    assert worker(schema_gbnf, blueprint) == schema_gbnf(blueprint)  # type: ignore[arg-type]


def test_a_worker_runs_module_level_functions_only(worker: GrammarWorker) -> None:
    with pytest.raises(TypeError, match="runs module-level functions"):
        worker(lambda: 'root ::= "x"')


@pytest.mark.slow
def test_the_server_answers_other_requests_while_a_grammar_is_built() -> None:
    """The real app and model: a schema slow to convert (many long patterns, each within the
    checks) must not hold up /v1/models, and is refused at the deadline."""
    from aiohttp import ClientSession
    from aiohttp.test_utils import TestServer

    from maestro.agents.embedded import build_app, model_path
    from maestro.agents.settings import LLMSettings

    settings = LLMSettings().embedded.model_copy(update={"n_ctx": 512, "grammar_build_s": 1.0})
    app = build_app(settings, model_path(settings))
    props = {f"p{i}": {"type": "string", "pattern": "ab" * 9_000} for i in range(400)}
    fmt = {"type": "json_schema", "json_schema": {"schema": {"properties": props}}}
    body = {"messages": [{"role": "user", "content": "hi"}], "response_format": fmt}

    async def go() -> tuple[float, int, dict[str, Any]]:
        async with TestServer(app) as server, ClientSession() as http:
            slow = asyncio.ensure_future(
                http.post(server.make_url("/v1/chat/completions"), data=json.dumps(body))
            )
            await asyncio.sleep(0.5)  # the grammar is being built
            began = time.monotonic()
            async with http.get(server.make_url("/v1/models")) as models:
                assert models.status == 200
            answered = time.monotonic() - began
            async with await slow as refused:
                return answered, refused.status, await refused.json()

    answered, status, refusal = asyncio.run(go())
    assert answered < 0.5
    assert status == 400
    assert "took longer than 1 s" in refusal["error"]["message"]


def test_a_schema_past_the_value_budget_is_refused_before_it_is_read() -> None:
    from maestro.agents.grammar import MAX_SCHEMA_NODES

    cache = GrammarCache(no_check)
    fmt = {"type": "json_schema", "json_schema": {"schema": {"enum": [[]] * MAX_SCHEMA_NODES}}}
    with pytest.raises(GrammarError, match=f"more than the {MAX_SCHEMA_NODES} values"):
        request_grammar({"response_format": fmt}, cache)
    assert cache.misses == 0  # refused before any build
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"enum": [1] * 60_000}}}]
    with pytest.raises(GrammarError, match="the tools schema holds more than"):
        request_grammar({"tools": tools}, cache)


def test_an_answer_whose_tokens_stall_is_stopped_at_the_next_token() -> None:
    """Fifth red team, P1: two overlapping recursive alternatives made llama.cpp's grammar
    check 4-5x slower with every token (0.02 s, 0.13, 0.49, 1.9, 7.8, 37 s) and held the
    generation lock for good. The server's logits processor stops the answer at the first
    token past token_deadline_s (the first token, after the prompt's evaluation, aside).
    Measured against the real server and model: stopped at token 8 (docs/security.md); an
    end-to-end test would spend minutes of CI in llama.cpp's uninterruptible C."""
    from maestro.agents.embedded import GenerationStalled, TokenPace

    pace = TokenPace(0.2)
    scores = [0.0, 1.0]
    time.sleep(0.3)  # the prompt's evaluation: before the first token, not counted
    assert pace(None, scores) is scores
    for _ in range(3):
        assert pace(None, scores) is scores  # ordinary tokens pass
    time.sleep(0.3)
    with pytest.raises(GenerationStalled, match=r"answer token 5 took 0\.\d s, more than"):
        pace(None, scores)
