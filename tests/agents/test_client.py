"""The OpenAI-compatible client against the scripted server, over real HTTP."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from maestro.agents.client import (
    CallLog,
    Completion,
    EmptyCompletionError,
    Endpoints,
    ProviderError,
)
from maestro.agents.scripted_server import Reply, ScriptedCall, ScriptedServer, ServerConfig
from maestro.agents.settings import LLMSettings, RoleSettings
from tests.conftest import role_settings


def complete(
    server: ScriptedServer, settings: RoleSettings, episode: str = "ep", n: int = 1
) -> tuple[list[Completion | BaseException], CallLog]:
    log = CallLog()

    async def go() -> list[Completion | BaseException]:
        async with Endpoints(log) as endpoints:
            client = endpoints.client("assistant", settings, server.base_url)
            return list(
                await asyncio.gather(
                    *(
                        client.complete([{"role": "user", "content": "hi"}], episode=episode)
                        for _ in range(n)
                    ),
                    return_exceptions=True,
                )
            )

    return asyncio.run(go()), log


def test_text_and_tool_calls_are_parsed(scripted: ScriptedServer) -> None:
    scripted.script(
        "ep",
        "assistant",
        [
            Reply(tool_calls=[ScriptedCall(name="get_order", arguments={"order_id": "O1"})]),
            Reply(content="Your order shipped."),
        ],
    )
    (first,), log = complete(scripted, role_settings())
    (second,), _ = complete(scripted, role_settings())
    assert isinstance(first, Completion) and isinstance(second, Completion)
    assert first.message.tool_calls[0].name == "get_order"
    assert first.message.tool_calls[0].arguments == {"order_id": "O1"}
    assert first.finish_reason == "tool_calls"
    assert second.message.content == "Your order shipped."
    assert first.prompt_tokens > 0 and first.completion_tokens > 0
    [call] = log.calls
    assert (
        call.status == "ok"
        and call.attempts == 1
        and call.episode == "ep"
        and call.role == "assistant"
    )


def test_malformed_tool_arguments_stay_raw_text_for_the_runtime(scripted: ScriptedServer) -> None:
    scripted.script(
        "ep",
        "assistant",
        [
            Reply(
                tool_calls=[ScriptedCall(name="get_order", arguments={"a": 1})],
                fault="malformed_args",
            )
        ],
    )
    (out,), _ = complete(scripted, role_settings())
    assert isinstance(out, Completion)
    assert out.message.tool_calls[0].arguments == '{"broken": '


@pytest.mark.parametrize("fault", ["rate_limit", "server_error", "timeout", "empty"])
def test_transient_faults_are_retried(fault: str) -> None:
    with ScriptedServer(ServerConfig(mode="script", stall_s=3.0)) as server:
        server.script("ep", "assistant", [Reply(fault=fault), Reply(content="recovered")])  # type: ignore[arg-type]
        (out,), log = complete(server, role_settings(timeout_s=0.3))
        server.assert_done()
    assert isinstance(out, Completion), out
    assert out.message.content == "recovered"
    assert out.attempts == 2
    assert log.calls[0].attempts == 2 and log.calls[0].status == "ok"


def test_gives_up_after_max_retries_and_records_the_failure(scripted: ScriptedServer) -> None:
    scripted.script("ep", "assistant", [Reply(fault="server_error")] * 3)
    (out,), log = complete(scripted, role_settings(max_retries=2))
    assert isinstance(out, ProviderError)
    assert out.attempts == 3
    assert "gave up after 3 attempt(s); last error: HTTP 500" in str(out)
    assert log.calls[0].status == "provider" and log.calls[0].attempts == 3


def test_empty_completions_become_a_typed_error(scripted: ScriptedServer) -> None:
    scripted.script("ep", "assistant", [Reply(fault="empty")] * 3)
    (out,), log = complete(scripted, role_settings(empty_retries=2))
    assert isinstance(out, EmptyCompletionError)
    assert out.kind == "empty_completion"
    assert log.calls[0].status == "empty_completion"


def test_a_call_without_a_script_fails_loudly_and_is_not_retried() -> None:
    with ScriptedServer(ServerConfig(mode="script")) as server:
        (out,), _ = complete(server, role_settings())
        with pytest.raises(AssertionError, match="unscripted calls"):
            server.assert_done()
    assert isinstance(out, ProviderError)
    assert out.status == 400 and out.attempts == 1
    assert "no script for episode 'ep' role 'assistant'" in str(out)


def test_leftover_script_fails_the_test() -> None:
    with ScriptedServer(ServerConfig(mode="script")) as server:
        server.script("ep", "assistant", [Reply(content="never asked for")])
        with pytest.raises(AssertionError, match="never used"):
            server.assert_done()


def test_the_call_deadline_bounds_retries_and_stalls() -> None:
    with ScriptedServer(ServerConfig(mode="script", stall_s=10.0)) as server:
        server.script("ep", "assistant", [Reply(fault="timeout")] * 5)
        started = time.monotonic()
        (out,), log = complete(server, role_settings(timeout_s=5.0, deadline_s=0.5))
        elapsed = time.monotonic() - started
    assert isinstance(out, ProviderError) and out.kind == "deadline"
    assert elapsed < 5.0
    assert log.calls[0].status == "deadline"


def test_concurrency_per_endpoint_is_bounded() -> None:
    with ScriptedServer(ServerConfig(mode="script", latency_s=0.05)) as server:
        server.script("ep", "assistant", [Reply(content="ok")] * 12)
        outs, _ = complete(server, role_settings(max_concurrency=3), n=12)
        server.assert_done()
        assert all(isinstance(o, Completion) for o in outs)
        assert server.model.stats.max_in_flight == 3


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAESTRO_ASSISTANT__BASE_URL", "http://llm.internal:8000/v1")
    monkeypatch.setenv("MAESTRO_ASSISTANT__MODEL", "qwen3-8b")
    monkeypatch.setenv("MAESTRO_ASSISTANT__API_KEY", "sk-secret")
    monkeypatch.setenv("MAESTRO_JUDGE__TEMPERATURE", "0.3")
    monkeypatch.setenv("MAESTRO_USER__MAX_CONCURRENCY", "7")
    s = LLMSettings()
    assert s.assistant.base_url == "http://llm.internal:8000/v1"
    assert s.assistant.model == "qwen3-8b"
    assert s.assistant.api_key is not None and s.assistant.api_key.get_secret_value() == "sk-secret"
    assert "sk-secret" not in repr(s)
    assert s.judge.temperature == 0.3
    assert s.user.max_concurrency == 7
    assert s.codegen.base_url is None and s.uses_embedded()


def test_a_role_without_endpoint_is_an_error_naming_the_variable() -> None:
    async def go() -> None:
        async with Endpoints() as endpoints:
            endpoints.client("judge", RoleSettings())

    with pytest.raises(ValueError, match="MAESTRO_JUDGE__BASE_URL"):
        asyncio.run(go())


def test_a_settings_file_is_read_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from maestro.agents.settings import load_llm_settings

    env_file = tmp_path / "maestro.env"
    env_file.write_text(
        "MAESTRO_USER__BASE_URL=http://users:8000/v1\nMAESTRO_USER__MODEL=from-file\n"
    )
    monkeypatch.setenv("MAESTRO_SETTINGS_FILE", str(env_file))
    monkeypatch.setenv("MAESTRO_USER__MODEL", "from-env")
    s = load_llm_settings()
    assert s.user.base_url == "http://users:8000/v1"
    assert s.user.model == "from-env"
    monkeypatch.setenv("MAESTRO_SETTINGS_FILE", str(tmp_path / "missing.env"))
    with pytest.raises(FileNotFoundError, match=r"missing\.env"):
        load_llm_settings()


def test_a_response_format_from_a_pydantic_model_reaches_the_server() -> None:
    from pydantic import BaseModel

    from maestro.agents.client import json_schema_format

    class Answer(BaseModel):
        ok: bool

    fmt = json_schema_format("answer", Answer)
    assert fmt == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": Answer.model_json_schema(), "strict": False},
    }
    with ScriptedServer(ServerConfig(check_response_format=True)) as server:
        server.script("ep", "codegen", [Reply(content='{"ok": true}')])

        async def go() -> Completion:
            async with Endpoints() as endpoints:
                client = endpoints.client("codegen", role_settings(), server.base_url)
                return await client.complete(
                    [{"role": "user", "content": "ok?"}], episode="ep", response_format=fmt
                )

        assert asyncio.run(go()).message.content == '{"ok": true}'
        server.assert_done()
    assert server.model.formats == [("ep", "codegen", fmt)]
    with pytest.raises(ValueError, match="response format name 'a b' must be 1-64 of"):
        json_schema_format("a b", Answer)
