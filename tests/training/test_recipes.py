"""TRL recipes on CPU with a tiny random model: SFT loss falls on a fixed batch; DPO and GRPO
run a few steps; GRPO's logged rewards are the real scorer's."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from statistics import mean

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.domains import Domain
from maestro.storage import Lake
from maestro.training.datasets import TrainingDataset, build_dpo, build_grpo, build_sft
from maestro.training.models import BaseModelSpec, load_model, load_tokenizer
from maestro.training.recipes import RecipeSettings, grpo_trainer, train
from maestro.training.rollout import GroupRollout, RolloutSettings, TaskReward

from ..conftest import FIXTURES, role_settings
from .conftest import TASK_SET


def test_sft_loss_falls_on_a_fixed_batch(
    toy: Domain, toy_lake: Lake, tiny_spec: BaseModelSpec, tmp_path: Path
) -> None:
    full = build_sft(toy_lake, {"toy": toy}, TASK_SET, split=None)
    gold = [r for r in full.rows if r["source"] == "gold" and r["task_id"] == "toy_status"]
    ds = TrainingDataset("sft/fixed", "sft", TASK_SET, gold, full.built_from)
    settings = RecipeSettings(
        method="sft", base=tiny_spec, max_steps=3, batch_size=1, learning_rate=2e-3
    )
    result = train(settings, ds, tmp_path / "run")
    losses = [h["loss"] for h in result.log_history if "loss" in h]
    assert len(losses) == 3
    assert all(b < a for a, b in itertools.pairwise(losses)), losses
    assert result.model_dir and (Path(result.model_dir) / "config.json").is_file()
    assert list((tmp_path / "run" / "runs").rglob("events.out.tfevents.*"))  # TensorBoard


def test_dpo_runs_and_logs_preference_rewards(
    toy: Domain, toy_lake: Lake, tiny_spec: BaseModelSpec, tmp_path: Path
) -> None:
    ds = build_dpo(toy_lake, {"toy": toy}, TASK_SET, split=None)
    settings = RecipeSettings(
        method="dpo", base=tiny_spec, max_steps=2, batch_size=1, save_model=False
    )
    result = train(settings, ds, tmp_path / "run")
    logged = [h for h in result.log_history if "rewards/margins" in h]
    assert len(logged) == 2 and all(math.isfinite(h["loss"]) for h in logged)
    assert result.model_dir is None


def test_grpo_rollouts_put_the_user_in_the_loop_and_log_scorer_rewards(
    toy: Domain, toy_lake: Lake, tiny_spec: BaseModelSpec, tmp_path: Path
) -> None:
    ds = build_grpo(toy_lake, {"toy": toy}, TASK_SET, split=None)
    tok = load_tokenizer(tiny_spec)
    model = load_model(tiny_spec, tok)
    settings = RecipeSettings(
        method="grpo",
        base=tiny_spec,
        max_steps=2,
        batch_size=2,
        num_generations=2,
        rollout=RolloutSettings.model_validate(
            {"sampling": {"max_new_tokens": 12}, "max_completion_tokens": 64}
        ),
    )
    config = ServerConfig(mode="oracle", domain_paths=[str(FIXTURES / "toy")])
    with ScriptedServer(config) as server:
        rollout = GroupRollout(
            {"toy": toy}, ds.rows, role_settings(base_url=server.base_url), settings.rollout
        )
        reward = TaskReward({"toy": toy})
        trainer = grpo_trainer(settings, ds.to_hf(), model, tok, tmp_path, rollout, reward)
        trainer.train()
        user_calls = server.model.stats.calls["user"]
    episodes = rollout.episodes
    assert len(episodes) == 4  # 2 steps x a group of 2
    # The two rollouts of each step are the same task, each from a fresh session.
    assert episodes[0].task_id == episodes[1].task_id and episodes[2].task_id == episodes[3].task_id
    # The user simulator answered over HTTP whenever the policy finished a turn in text.
    assert user_calls == sum(
        1 for e in episodes for m in e.trajectory.messages[1:] if m.role == "user"
    )
    logged = [
        h["rewards/task_reward/mean"]
        for h in trainer.state.log_history
        if "rewards/task_reward/mean" in h
    ]
    rescored = [
        reward(
            [None] * 2,
            [e.trajectory.model_dump_json() for e in pair],
            ["toy"] * 2,
            [e.task_id for e in pair],
        )
        for pair in (episodes[:2], episodes[2:])
    ]
    assert logged == [mean(r for r in rs if r is not None) for rs in rescored]
