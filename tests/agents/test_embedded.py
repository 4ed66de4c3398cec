"""The embedded model: weights reassembled and checked, the tool-call adapter, and (slow) the
real model answering through the OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from maestro.agents.client import Endpoints, ProviderError, json_schema_format
from maestro.agents.embedded import (
    EmbeddedModelError,
    EmbeddedServer,
    child_environment,
    extract_tool_calls,
    model_path,
    to_plain_messages,
)
from maestro.agents.settings import EmbeddedModelSettings, LLMSettings
from maestro.conversation import Completion
from maestro.domains import Domain
from tests.conftest import role_settings

NAMES = {"get_order", "cancel_order"}


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "O1"}}\n</tool_call>',
        '{"name": "get_order", "arguments": {"order_id": "O1"}}',
        'Let me check.\n```json\n{"name": "get_order", "arguments": {"order_id": "O1"}}\n```',
        '<tool_call>{"name": "get_order", "parameters": {"order_id": "O1"}}',  # unclosed tag, "parameters"
        'Let me check.\n{"name": "get_order", "arguments": {"order_id": "O1"}}\nOne moment.',
    ],
)
def test_tool_calls_written_as_text_become_tool_calls(text: str) -> None:
    content, calls = extract_tool_calls(text, NAMES)
    assert len(calls) == 1
    assert calls[0]["function"]["name"] == "get_order"
    assert json.loads(calls[0]["function"]["arguments"]) == {"order_id": "O1"}
    assert content in (None, "Let me check.", "Let me check.\n\nOne moment.")


def test_text_that_is_not_a_call_of_an_offered_tool_stays_text() -> None:
    for text in [
        "Your order shipped.",
        '{"name": "drop_tables", "arguments": {}}',
        '{"order_id": "O1"}',
        "<tool_call>not json</tool_call>",
    ]:
        content, calls = extract_tool_calls(text, NAMES)
        assert calls == [] and content == text


def test_two_calls_in_one_answer() -> None:
    text = '<tool_call>{"name": "get_order", "arguments": {"order_id": "O1"}}</tool_call>\n<tool_call>{"name": "cancel_order", "arguments": {"order_id": "O1"}}</tool_call>'
    _, calls = extract_tool_calls(text, NAMES)
    assert [c["function"]["name"] for c in calls] == ["get_order", "cancel_order"]


def test_prompt_conversion_puts_tools_in_the_system_prompt_and_results_in_user_turns(
    toy: Domain,
) -> None:
    messages = [
        {"role": "system", "content": "Be helpful."},
        {"role": "user", "content": "Where is O1?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id": "O1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": '{"status": "pending"}'},
    ]
    plain = to_plain_messages(messages, toy.toolkit.schemas())
    assert [m["role"] for m in plain] == ["system", "user", "assistant", "user"]
    assert (
        plain[0]["content"].startswith("Be helpful.")
        and '"name":"cancel_order"' in plain[0]["content"]
    )
    assert (
        plain[2]["content"]
        == '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "O1"}}\n</tool_call>'
    )
    assert plain[3]["content"] == '<tool_response>\n{"status": "pending"}\n</tool_response>'


def _fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blobs: list[bytes]) -> list[str]:
    names = []
    for i, blob in enumerate(blobs, start=1):
        pkg = tmp_path / "site" / f"fake_weights_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(blob)
        names.append(pkg.name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return names


def test_weights_are_reassembled_checked_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = [b"GGUF" + b"a" * 1000, b"b" * 777]
    names = _fake_parts(tmp_path, monkeypatch, blobs)
    sha = hashlib.sha256(b"".join(blobs)).hexdigest()
    settings = EmbeddedModelSettings(
        cache_dir=tmp_path / "cache", packages=names, sha256=sha, file_name="m.gguf"
    )
    path = model_path(settings)
    assert path.read_bytes() == b"".join(blobs)
    # A corrupted cache is rebuilt from the packages.
    path.write_bytes(b"corrupt")
    assert model_path(settings).read_bytes() == b"".join(blobs)


def test_wrong_checksum_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = _fake_parts(tmp_path, monkeypatch, [b"x" * 10])
    settings = EmbeddedModelSettings(
        cache_dir=tmp_path / "cache", packages=names, sha256="0" * 64, file_name="m.gguf"
    )
    with pytest.raises(EmbeddedModelError, match="not the expected release"):
        model_path(settings)
    assert not list((tmp_path / "cache").iterdir())


def test_missing_package_says_how_to_install(tmp_path: Path) -> None:
    settings = EmbeddedModelSettings(
        cache_dir=tmp_path, packages=["no_such_weights_pkg"], sha256="0" * 64
    )
    with pytest.raises(
        EmbeddedModelError, match=r"not installed \(bash scripts/setup.sh installs it\)"
    ):
        model_path(settings)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real embedded model's base URL (one server for this module's slow tests)."""
    settings = LLMSettings().embedded.model_copy(update={"n_ctx": 4096})
    with EmbeddedServer(settings, tmp_path_factory.mktemp("embedded")) as server:
        assert server.base_url is not None
        yield server.base_url


def _ask(
    base_url: str, *calls: tuple[list[dict[str, Any]], dict[str, Any]], max_tokens: int = 64
) -> list[Completion]:
    """Completions from the embedded model, one per (messages, keyword arguments)."""

    async def go() -> list[Completion]:
        async with Endpoints() as endpoints:
            settings = role_settings(
                timeout_s=300, deadline_s=600, max_retries=0, max_tokens=max_tokens
            )
            client = endpoints.client("assistant", settings, base_url)
            return [await client.complete(m, **kw) for m, kw in calls]

    return asyncio.run(go())


@pytest.mark.slow
def test_the_real_embedded_model_answers_and_calls_a_tool(embedded: str, toy: Domain) -> None:
    shop = {"role": "system", "content": "You help customers of a shop. Use the tools."}
    hello, call = _ask(
        embedded,
        ([{"role": "user", "content": "Say hello in one word."}], {}),
        (
            [shop, {"role": "user", "content": "What is the status of order O1?"}],
            {"tools": toy.toolkit.schemas()},
        ),
    )
    assert hello.message.content
    assert [c.name for c in call.message.tool_calls] == ["get_order"]
    # Decoded under the tools' grammar, the arguments fit the tool's schema by construction.
    params = next(
        t["function"]["parameters"]
        for t in toy.toolkit.schemas()
        if t["function"]["name"] == "get_order"
    )
    jsonschema.validate(call.message.tool_calls[0].arguments, params)


@pytest.mark.slow
def test_the_real_embedded_model_answers_in_the_schema_asked_for(embedded: str) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"enum": ["yes", "no"]}, "sure": {"type": "boolean"}},
        "required": ["answer", "sure"],
    }
    fmt = json_schema_format("yes_no", schema)
    question = [{"role": "user", "content": "Is the sky green? Answer yes or no."}]
    [out] = _ask(embedded, (question, {"response_format": fmt}), max_tokens=16)
    jsonschema.validate(json.loads(out.message.content or ""), schema)


@pytest.mark.slow
def test_a_schema_the_embedded_model_cannot_decode_is_a_400_naming_it(embedded: str) -> None:
    fmt = json_schema_format("odd", {"type": "object", "properties": {"x": {"type": "decimal"}}})
    with pytest.raises(ProviderError, match="at x: Unrecognized schema") as err:
        _ask(embedded, ([{"role": "user", "content": "hi"}], {"response_format": fmt}))
    assert err.value.status == 400


def test_the_prompt_cache_counts_the_logits_it_keeps_against_its_capacity() -> None:
    import numpy as np
    from llama_cpp.llama import LlamaState

    from maestro.agents.embedded import bounded_prompt_cache

    cache = bounded_prompt_cache(100 << 20)
    for i in range(10):
        # A state the size llama.cpp saves: small KV bytes, a large logits array.
        scores = np.zeros((64, 151_936), dtype=np.single)  # 39 MB
        cache[(i, i + 1, i + 2)] = LlamaState(np.arange(3, dtype=np.intc), scores, 3, b"kv", 2, 0)
    assert cache.cache_size <= 100 << 20
    assert len(cache.cache_state) == 2
    assert (9, 10, 11) in cache.cache_state  # the newest states are kept


def test_the_served_child_gets_exactly_the_settings_it_was_started_with(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MAESTRO_EMBEDDED__N_CTX", "16384")
    monkeypatch.setenv("MAESTRO_EMBEDDED__STRUCTURED_OUTPUTS", "true")
    given = LLMSettings().embedded.model_copy(
        update={"n_ctx": 2048, "structured_outputs": False, "cache_dir": tmp_path}
    )
    env = child_environment(given)
    assert not [k for k in env if k.startswith("MAESTRO_EMBEDDED__")]
    for key in [k for k in list(os.environ) if k.startswith("MAESTRO_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert LLMSettings().embedded == given


@pytest.mark.slow
def test_the_served_model_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    # The parent starts the server and is then SIGKILLed, as a deadline does: no stop() runs.
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from maestro.agents.embedded import EmbeddedServer\n"
            "from maestro.agents.settings import LLMSettings\n"
            "s = LLMSettings().embedded.model_copy(update={'n_ctx': 512})\n"
            "server = EmbeddedServer(s, Path(sys.argv[1])).start()\n"
            "print(server.proc.pid, flush=True)\n"
            "time.sleep(600)\n",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
    finally:
        parent.kill()
        parent.wait(timeout=10)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists():
        state = Path(f"/proc/{child}/stat").read_text().split()[2]
        if state == "Z":  # ended; only its reaping is left to init
            break
        time.sleep(0.5)
    else:
        if Path(f"/proc/{child}").exists():
            os.kill(child, signal.SIGKILL)
            pytest.fail("the embedded model outlived its parent by 30 s")
