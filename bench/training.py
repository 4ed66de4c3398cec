"""Training steps per second on this CPU, per method (SFT, DPO, GRPO), for the tiny random
model and for SmolLM2-135M-Instruct (the smallest real model a package ships), and one GRPO
run's reward curve. Data: the toy domain's tasks in a lake under a temp folder (a gold and a
do-nothing episode per task, scored by the real scorer); GRPO's user simulator is the scripted
server (oracle mode) over HTTP. Prints a JSON object last.

    .venv/bin/python bench/training.py [--models tiny,smollm2-135m] [--curve-steps 8]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.agents.settings import RoleSettings
from maestro.domains import Domain, load_domain
from maestro.scoring import Scorer
from maestro.simulation.episode import EpisodeResult, Termination
from maestro.simulation.scripted import gold_trajectory, null_trajectory
from maestro.storage import Lake, LakeSettings
from maestro.storage.records import domain_row, episode_row, score_row, task_row
from maestro.training.datasets import BUILDERS
from maestro.training.models import BaseModelSpec
from maestro.training.recipes import RecipeSettings, train
from maestro.training.rollout import RolloutSettings

TOY = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "toy"
TASKS = ["toy_cancel", "toy_status"]
STEPS = {"sft": 4, "dpo": 2, "grpo": 2}


def build_lake(root: Path, domain: Domain) -> Lake:
    lake = Lake(LakeSettings(root=str(root)))
    lake.write("domains", [domain_row(domain)], "bench")
    lake.write("tasks", [task_row(domain, t) for t in domain.tasks], "bench")
    scorer = Scorer(domain)
    episodes, scores = [], []
    for task_id in TASKS:
        task = domain.task(task_id)
        for trial, traj in enumerate(
            [gold_trajectory(domain, task), null_trajectory(domain, task)]
        ):
            e = EpisodeResult(
                domain_id=domain.id,
                task_id=task_id,
                trial=trial,
                seed=trial,
                trajectory=traj,
                termination=Termination.USER_STOP,
                duration_s=0.0,
            )
            episodes.append(episode_row("bench", e, domain.manifest.version, "gold", "gold"))
            scores.append(score_row("bench", e, scorer.score(task, traj), "gold"))
    lake.write("episodes", episodes, "bench")
    lake.write("scores", scores, "bench")
    refs = [{"domain_id": domain.id, "task_id": t} for t in TASKS]
    lake.write(
        "task_sets",
        [{"task_set_id": "bench", "name": "bench", "tasks": refs, "built_from": []}],
        "bench",
    )
    return lake


def run(
    method: str,
    base: str,
    steps: int,
    lake: Lake,
    domain: Domain,
    out: Path,
    user: RoleSettings,
    batch: int,
    max_new_tokens: int,
) -> dict[str, Any]:
    ds = BUILDERS[method](lake, {domain.id: domain}, "bench", split=None)
    settings = RecipeSettings(
        method=method,
        base=BaseModelSpec(kind=base),
        max_steps=steps,
        batch_size=batch,
        num_generations=2,
        learning_rate=5e-5 if base != "tiny" else 5e-4,
        save_model=False,
        rollout=RolloutSettings.model_validate(
            {
                "sampling": {"max_new_tokens": max_new_tokens, "temperature": 1.0},
                "max_completion_tokens": 4 * max_new_tokens,
                "limits": {"max_turns": 4, "max_steps_per_turn": 2},
            }
        ),
    )
    started = time.perf_counter()
    result = train(settings, ds, out / f"{base}-{method}", domains={domain.id: domain}, user=user)
    return {
        "method": method,
        "model": base,
        "steps": result.steps,
        "batch_size": batch,
        "train_s": round(result.train_seconds, 2),
        "steps_per_s": round(result.steps / result.train_seconds, 4),
        "wall_s_with_load": round(time.perf_counter() - started, 2),
        # The machine is shared: the 1-minute load average says how contended the run was.
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "log_history": result.log_history,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="tiny,smollm2-135m")
    parser.add_argument("--methods", default="sft,dpo,grpo")
    parser.add_argument("--curve-model", default="smollm2-135m")
    parser.add_argument("--curve-steps", type=int, default=8)
    parser.add_argument("--curve-batch", type=int, default=4, help="rollouts per step")
    parser.add_argument("--curve-tokens", type=int, default=64, help="sampled tokens per turn")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    domain = load_domain(TOY, trusted=True)
    tmp = Path(tempfile.mkdtemp(prefix="maestro-bench-training-"))
    lake = build_lake(tmp / "lake", domain)
    throughput, curve = [], []
    with ScriptedServer(ServerConfig(mode="oracle", domain_paths=[str(TOY)])) as server:
        user = RoleSettings(base_url=server.base_url, timeout_s=30, deadline_s=60)
        for base in args.models.split(","):
            for method in args.methods.split(","):
                r = run(method, base, STEPS[method], lake, domain, tmp, user, 2, 48)
                r.pop("log_history")
                print(json.dumps(r), flush=True)
                throughput.append(r)
        if args.curve_steps:
            r = run(
                "grpo",
                args.curve_model,
                args.curve_steps,
                lake,
                domain,
                tmp,
                user,
                args.curve_batch,
                args.curve_tokens,
            )
            curve = [
                {
                    "step": h["step"],
                    "reward_mean": h.get("rewards/task_reward/mean"),
                    "reward_std": h.get("rewards/task_reward/std"),
                    "completion_tokens": h.get("completions/mean_length"),
                    "step_s": h.get("step_time"),
                }
                for h in r["log_history"]
                if "rewards/task_reward/mean" in h
            ]
            for point in curve:
                print(json.dumps(point), flush=True)
    summary = {
        "bench": "training",
        "data": "toy domain, 2 tasks, ~800-token conversations",
        "throughput": throughput,
        "grpo_curve": {
            "model": args.curve_model,
            "batch": args.curve_batch,
            "group": 2,
            "tokens_per_turn": args.curve_tokens,
            "points": curve,
        },
    }
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
