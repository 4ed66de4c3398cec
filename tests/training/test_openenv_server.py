"""``maestro serve-openenv``: maestro's tasks driven by OpenEnv's own client over its WebSocket
protocol, the user simulator and judge served by the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.domains import Domain, Task
from maestro.domains.mcp_server import free_port
from maestro.storage import Lake
from maestro.training.hf_export import export_hf
from maestro.training.openenv_server import Catalog, OpenEnvError, build_app, running

from ..conftest import FIXTURES, role_settings
from .conftest import TASK_SET

MAESTRO = str(Path(sys.executable).with_name("maestro"))
TOKEN = "s3cret-token-of-32-characters-xx"


@pytest.fixture(scope="module")
def oracle() -> Iterator[ScriptedServer]:
    """Plays the toy's customer (opens with the reason for calling, stops once answered) and
    its judge (every assertion met)."""
    config = ServerConfig(mode="oracle", domain_paths=[str(FIXTURES / "toy")])
    with ScriptedServer(config) as server:
        yield server


def catalog(toy: Domain, oracle: ScriptedServer) -> Catalog:
    settings = role_settings(base_url=oracle.base_url)
    return Catalog({"toy": toy}, [("toy", t.id) for t in toy.tasks], user=settings, judge=settings)


@pytest.fixture
def served(toy: Domain, oracle: ScriptedServer) -> Iterator[str]:
    app = build_app(catalog(toy, oracle), max_sessions=8, idle_timeout_s=60)
    with running(app) as url:
        yield url


def gold_episode(env: Any, task: Task) -> Any:
    """The task played as a careful agent would: its gold calls, then its facts."""
    result = env.reset(task_id=task.id)
    assert not result.done, result.observation
    for action in task.gold_actions:
        result = env.step({"tool_calls": [{"name": action.name, "arguments": action.arguments}]})
        assert not result.done
        (tool,) = result.observation["messages"]
        assert tool["role"] == "tool" and tool["status"] == "ok", tool
    facts = " ".join(task.evaluation_criteria.communicate_info)
    return env.step({"content": facts or "Done: is there anything else?"})


def test_a_gold_episode_scores_1_and_a_do_nothing_one_0(served: str, toy: Domain) -> None:
    with GenericEnvClient(base_url=served).sync() as env:
        for task in toy.tasks:
            first = env.reset(task_id=task.id)
            obs = first.observation
            assert [m["role"] for m in obs["messages"]] == ["user"]
            assert obs["system"].startswith("You are a customer-service agent for Toy shop")
            assert {t["function"]["name"] for t in obs["tools"]} == set(toy.toolkit.names)
            end = gold_episode(env, task)
            assert end.done and end.reward == 1.0, end.observation["info"]
            info = end.observation["info"]
            assert info["succeeded"] and end.observation["termination"] == "user_stop"
            assert set(info["card"]["criteria"]) == {
                c.value for c in task.evaluation_criteria.reward_basis
            }
        env.reset(task_id="toy_cancel")
        nothing = env.step({"content": "Hello! How can I help you today?"})
        assert nothing.done and nothing.reward == 0.0
        failed = [c for c, s in nothing.observation["info"]["card"]["criteria"].items()]
        assert "DB" in failed and not nothing.observation["info"]["succeeded"]
        state = env.state()
        assert state["task_id"] == "toy_cancel" and state["termination"] == "user_stop"


def test_sessions_share_nothing(served: str) -> None:
    with (
        GenericEnvClient(base_url=served).sync() as a,
        GenericEnvClient(base_url=served).sync() as b,
    ):
        a.reset(task_id="toy_cancel")
        b.reset(task_id="toy_cancel")
        done = a.step({"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "O1"}}]})
        assert json.loads(done.observation["messages"][0]["content"])["status"] == "cancelled"
        seen = b.step({"tool_calls": [{"name": "get_order", "arguments": {"order_id": "O1"}}]})
        assert json.loads(seen.observation["messages"][0]["content"])["status"] == "pending"
        # A's next episode starts from the task's state again.
        a.reset(task_id="toy_cancel")
        again = a.step({"tool_calls": [{"name": "get_order", "arguments": {"order_id": "O1"}}]})
        assert json.loads(again.observation["messages"][0]["content"])["status"] == "pending"


@pytest.mark.parametrize(
    ("before", "action", "says"),
    [
        (None, {"content": "hi"}, "step before reset: reset with a task first"),
        ("toy_cancel", {}, "a step needs content or tool_calls"),
        ("toy_cancel", {"content": "  "}, "a step needs content or tool_calls"),
        ("toy_cancel", {"tool_calls": "cancel it"}, "tool_calls: Input should be a valid list"),
        ("toy_cancel", {"tool_calls": [{"arguments": {}}]}, "tool_calls.0.name: Field required"),
        ("toy_cancel", {"content": "x", "reward": 1.0}, "reward: Extra inputs are not permitted"),
        ("toy_cancel", {"content": "x" * 100_001}, "content: String should have at most 100000"),
        ("toy_cancel", {"tool_calls": [{"name": "get_order"}] * 33}, "at most 32 items"),
    ],
)
def test_a_malformed_step_is_an_error_and_the_session_goes_on(
    served: str, toy: Domain, before: str | None, action: dict[str, Any], says: str
) -> None:
    with GenericEnvClient(base_url=served).sync() as env:
        if before:
            env.reset(task_id=before)
        with pytest.raises(RuntimeError, match="Server error") as err:
            env.step(action)
        assert says in str(err.value)
        assert gold_episode(env, toy.task("toy_status")).reward == 1.0


def test_resets_that_name_nothing_served_are_errors(
    served: str, toy: Domain, tmp_path: Path
) -> None:
    with GenericEnvClient(base_url=served).sync() as env:
        with pytest.raises(RuntimeError, match="no task 'nope' is served here"):
            env.reset(task_id="nope")
        with pytest.raises(RuntimeError, match="reset needs task_id"):
            env.reset()
        with pytest.raises(RuntimeError, match="reset takes task_id, task_ref, seed"):
            env.reset(task_id="toy_cancel", difficulty="hard")
        ref = {"domain_id": "toy", "task_id": "toy_cancel", "domain_version": "0.0.9"}
        with pytest.raises(RuntimeError, match=r"stale task_ref: toy version 0\.0\.9"):
            env.reset(task_ref={**ref, "domain_hash": "0" * 64})
        with pytest.raises(RuntimeError, match="task_ref names 'toy'/'toy_gone'"):
            env.reset(task_ref={**ref, "task_id": "toy_gone"})
        end = gold_episode(env, toy.task("toy_cancel"))
        assert end.reward == 1.0
        with pytest.raises(RuntimeError, match="the episode is over: reset"):
            env.step({"content": "one more thing"})


def test_an_exported_rl_rows_task_ref_resets_its_task(
    served: str, toy: Domain, toy_lake: Lake, tmp_path: Path
) -> None:
    from datasets import load_from_disk

    export_hf(toy_lake, {"toy": toy}, TASK_SET, tmp_path / "rl", "rl")
    rows = load_from_disk(str(tmp_path / "rl"))["test"].to_list()
    with GenericEnvClient(base_url=served).sync() as env:
        for row in rows:
            first = env.reset(task_ref=row["task_ref"])
            assert env.state()["task_id"] == row["task_id"]
            assert first.observation["system"] == row["prompt"][0]["content"]
            assert first.observation["tools"] == json.loads(row["tools"])


def test_sessions_past_the_cap_are_refused(toy: Domain, oracle: ScriptedServer) -> None:
    app = build_app(catalog(toy, oracle), max_sessions=1, idle_timeout_s=60)
    with running(app) as url:
        with GenericEnvClient(base_url=url).sync() as first:
            first.reset(task_id="toy_status")
            second = GenericEnvClient(base_url=url).sync()
            with second, pytest.raises(RuntimeError, match=r"CAPACITY_REACHED|capacity"):
                # a client slow to send its reset (a loaded machine) still reads the refusal,
                # not a closed connection (CI of stop 36)
                time.sleep(1.0)
                second.reset(task_id="toy_status")
        with GenericEnvClient(base_url=url).sync() as later:  # the first one's slot is free
            assert gold_episode(later, toy.task("toy_status")).reward == 1.0


def test_a_token_is_asked_of_every_request_and_websocket(
    toy: Domain, oracle: ScriptedServer
) -> None:
    app = build_app(catalog(toy, oracle), max_sessions=2, idle_timeout_s=60, token=TOKEN)
    with running(app) as url:
        with pytest.raises(ConnectionError):
            GenericEnvClient(base_url=url).sync().connect()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}/health", timeout=10)
        assert refused.value.code == 401
        wrong = {"Authorization": f"Bearer {TOKEN[:-1]}y"}
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(urllib.request.Request(f"{url}/health", headers=wrong))
        right = {"Authorization": f"Bearer {TOKEN}"}
        ok = urllib.request.urlopen(urllib.request.Request(f"{url}/health", headers=right))
        assert ok.status == 200
        ws_url = url.replace("http://", "ws://") + "/ws"
        with connect(ws_url, additional_headers=right, open_timeout=10) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"task_id": "toy_status"}}))
            answer = json.loads(ws.recv(timeout=60))
            assert answer["type"] == "observation"
            assert answer["data"]["observation"]["messages"][0]["role"] == "user"


def test_a_catalog_of_unscripted_tasks_needs_a_user_simulator(toy: Domain) -> None:
    with pytest.raises(OpenEnvError, match="need a user simulator: set MAESTRO_USER__BASE_URL"):
        Catalog({"toy": toy}, [("toy", "toy_cancel")], user=None)
    with pytest.raises(OpenEnvError, match="tasks of domains not served"):
        Catalog({}, [("toy", "toy_cancel")], user=None)


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MAESTRO_USER__")}
    return subprocess.run(
        [MAESTRO, "serve-openenv", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, "COLUMNS": "200", **env},
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--host", "0.0.0.0"], "0.0.0.0 is not a loopback address"),
        (["--token", "short"], "--token: use at least 16 characters"),
        (["--max-sessions", "0"], "'--max-sessions': Input should be greater than or equal"),
        ([], "need a user simulator: set MAESTRO_USER__BASE_URL"),
    ],
)
def test_the_command_refuses_bad_options_before_serving(args: list[str], says: str) -> None:
    proc = _cli(str(FIXTURES / "toy"), "--port", str(free_port()), *args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert "serving" not in proc.stderr


def test_the_command_names_a_task_set_it_cannot_serve(tmp_path: Path) -> None:
    proc = _cli("no_such_thing", "--lake-root", str(tmp_path / "lake"))
    assert proc.returncode == 2
    assert "'no_such_thing' is no domain, and as a task set" in proc.stderr
