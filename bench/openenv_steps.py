"""Steps per second through maestro's OpenEnv server against the same episodes in process.

A step is one assistant turn (a tool call, or the closing answer). Each episode plays a task's
gold path (each gold call a step, then the facts to tell), the customer played by the scripted
server's oracle over HTTP in both modes, so the ratio is what OpenEnv's WebSocket protocol and
the bridge into maestro's episode loop cost:

- in process: ``run_episode`` with a gold-playing assistant, ``--clients`` episodes at once;
- OpenEnv: ``--clients`` clients of OpenEnv's own async ``GenericEnvClient``, each on its own
  session, against ``maestro serve-openenv DOMAIN`` in its own process, as users run it.

Both score each episode's trajectory at its end (the server's last step returns the card's
reward), with no judge.

Prints a JSON object last.

    .venv/bin/python bench/openenv_steps.py [--domain hotel] [--episodes 64] [--clients 1 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# bench/mcp.py is named like the MCP SDK's package, which OpenEnv's server imports (through
# fastmcp): keep this folder off the import path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from openenv.core.generic_client import GenericEnvClient  # noqa: E402

from maestro.agents.scripted_server import ScriptedServer, ServerConfig  # noqa: E402
from maestro.agents.settings import RoleSettings  # noqa: E402
from maestro.conversation import Completion, Message, ToolCall  # noqa: E402
from maestro.domains import Domain, Task, library_path, load_domain  # noqa: E402
from maestro.domains.mcp_server import free_port  # noqa: E402
from maestro.scoring import Scorer  # noqa: E402
from maestro.simulation.episode import EpisodeLimits, run_episode  # noqa: E402
from maestro.simulation.scripted import summary_text  # noqa: E402

MAESTRO = str(Path(sys.executable).with_name("maestro"))


class Gold:
    """The assistant side in process: the gold calls one a turn, then the summary."""

    def __init__(self, task: Task) -> None:
        self.left = list(task.gold_actions)
        self.task = task
        self.steps = 0

    async def respond(self, history: list[Message], **_: Any) -> Completion:
        self.steps += 1
        if self.left:
            a = self.left.pop(0)
            call = ToolCall(id=f"c{self.steps}", name=a.name, arguments=a.arguments)
            msg = Message(role="assistant", content=None, tool_calls=[call])
        else:
            msg = Message(role="assistant", content=summary_text(self.task))
        return Completion(msg, "stop", 0, 0, 0.0, 1)


def tasks_of(domain: Domain, n: int) -> list[Task]:
    usable = [t for t in domain.tasks if not t.user_turns]
    return [usable[i % len(usable)] for i in range(n)]


async def in_process(domain: Domain, user: RoleSettings, tasks: list[Task], clients: int) -> dict:
    from maestro.agents.client import Endpoints
    from maestro.agents.roles import UserSimulator

    limit = asyncio.Semaphore(clients)
    steps = 0

    scorer = Scorer(domain)
    async with Endpoints() as endpoints:
        client = endpoints.client("user", user)

        async def one(i: int, task: Task) -> None:
            nonlocal steps
            async with limit:
                gold = Gold(task)
                result = await run_episode(
                    domain, task, gold, UserSimulator(client, domain, task), trial=i,
                    limits=EpisodeLimits(),
                )  # fmt: skip
                scorer.score(task, result.trajectory)
                steps += gold.steps

        started = time.perf_counter()
        await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks)))
        wall = time.perf_counter() - started
    return {"steps": steps, "wall_s": round(wall, 3), "steps_per_s": round(steps / wall, 1)}


async def over_openenv(url: str, tasks: list[Task], clients: int) -> dict:
    queue: asyncio.Queue[Task] = asyncio.Queue()
    for t in tasks:
        queue.put_nowait(t)
    steps = ones = 0

    async def client() -> None:
        nonlocal steps, ones
        async with GenericEnvClient(base_url=url, message_timeout_s=600) as env:
            while not queue.empty():
                task = queue.get_nowait()
                await env.reset(task_id=task.id)
                for a in task.gold_actions:
                    await env.step({"tool_calls": [{"name": a.name, "arguments": a.arguments}]})
                    steps += 1
                result = await env.step({"content": summary_text(task)})
                steps += 1
                while not result.done:  # the customer asked for more: answer again
                    result = await env.step({"content": summary_text(task)})
                    steps += 1
                ones += result.reward == 1.0

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - started
    return {"steps": steps, "wall_s": round(wall, 3), "steps_per_s": round(steps / wall, 1),
            "rewards_1": ones, "episodes": len(tasks)}  # fmt: skip


@contextmanager
def serving(domain_id: str, user_url: str, sessions: int) -> Iterator[str]:
    """``maestro serve-openenv DOMAIN`` in its own process until the block ends."""
    port = free_port()
    env = {**os.environ, "MAESTRO_USER__BASE_URL": user_url, "MAESTRO_USER__MODEL": "oracle",
           "MAESTRO_USER__MAX_CONCURRENCY": "256"}  # fmt: skip
    cmd = [MAESTRO, "serve-openenv", domain_id, "--port", str(port), "--no-judge",
           "--max-sessions", str(sessions)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        f"serve-openenv did not start: {proc.communicate()[1]}"
                    ) from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domain", default="hotel")
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    args = ap.parse_args()
    domain = load_domain(library_path(args.domain))
    out: dict[str, Any] = {"domain": args.domain, "episodes": args.episodes, "runs": []}
    with ScriptedServer(ServerConfig(mode="oracle")) as oracle:
        user = RoleSettings(base_url=oracle.base_url, model="oracle", max_concurrency=256)
        with serving(args.domain, oracle.base_url, max(args.clients) + 1) as url:
            for clients in args.clients:
                tasks = tasks_of(domain, args.episodes if clients > 1 else args.episodes // 4)
                local = asyncio.run(in_process(domain, user, tasks, clients))
                remote = asyncio.run(over_openenv(url, tasks, clients))
                out["runs"].append(
                    {
                        "clients": clients,
                        "in_process": local,
                        "openenv": remote,
                        "ratio": round(local["steps_per_s"] / remote["steps_per_s"], 2),
                    }
                )
                print(json.dumps(out["runs"][-1]), flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
