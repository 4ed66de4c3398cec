"""SFT, DPO and GRPO recipes: a TRL config and trainer each, LoRA as an option. Thin on purpose.

``train`` runs one recipe end to end: base model and tokenizer, trainer, ``trainer.train()``,
the model saved with its tokenizer under the run folder. TensorBoard logs always go under the
run folder; MLflow is added when ``MLFLOW_TRACKING_URI`` is set.
"""

from __future__ import annotations

import copy
import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from maestro.agents.settings import RoleSettings
from maestro.domains import Domain
from maestro.scoring.judge import Judge
from maestro.scoring.reward import EfficiencyPenalty
from maestro.training.datasets import Method, TrainingDataset
from maestro.training.models import BaseModelSpec, load_model, load_tokenizer
from maestro.training.rollout import GroupRollout, RolloutSettings, TaskReward

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer


class RecipeError(Exception):
    """A recipe's settings or inputs do not fit together."""


class LoraSettings(BaseModel):
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )


class RecipeSettings(BaseModel):
    """One training run's knobs; the defaults are sized for a CPU smoke run."""

    method: Method
    base: BaseModelSpec = Field(default_factory=BaseModelSpec)
    max_steps: int = Field(10, ge=1)
    learning_rate: float = Field(5e-4, gt=0)
    batch_size: int = Field(2, ge=1)
    grad_accum: int = Field(1, ge=1)
    #: Tokens per conversation. A library domain's system prompt (policy and tools) alone is
    #: about 6K tokens; at 2,048 truncation left no assistant turn to learn from, and TRL's
    #: trainer ended with an empty dataset.
    max_length: int = Field(16384, ge=64)
    seed: int = 0
    logging_steps: int = Field(1, ge=1)
    lora: LoraSettings | None = None
    #: DPO's KL strength.
    beta: float = Field(0.1, ge=0)
    #: GRPO's KL strength; 0 (TRL's default) needs no reference model.
    grpo_beta: float = Field(0.0, ge=0)
    #: GRPO: rollouts per task (a group); the batch must be a multiple of it.
    num_generations: int = Field(2, ge=2)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    penalty: EfficiencyPenalty = Field(default_factory=EfficiencyPenalty)
    save_model: bool = True


def report_to() -> list[str]:
    """TensorBoard always; MLflow only when a tracking URI is configured and mlflow is there."""
    targets = ["tensorboard"]
    if os.environ.get("MLFLOW_TRACKING_URI") and importlib.util.find_spec("mlflow"):
        targets.append("mlflow")
    return targets


def _common(settings: RecipeSettings, output_dir: Path) -> dict[str, Any]:
    return {
        "output_dir": str(output_dir),
        "max_steps": settings.max_steps,
        "learning_rate": settings.learning_rate,
        "per_device_train_batch_size": settings.batch_size,
        "gradient_accumulation_steps": settings.grad_accum,
        "logging_steps": settings.logging_steps,
        "seed": settings.seed,
        "report_to": report_to(),
        "save_strategy": "no",
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        "use_cpu": not _cuda(),
        "bf16": _cuda(),
    }


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _peft(settings: RecipeSettings) -> Any:
    if settings.lora is None:
        return None
    from peft import LoraConfig

    lo = settings.lora
    return LoraConfig(
        r=lo.r,
        lora_alpha=lo.alpha,
        lora_dropout=lo.dropout,
        target_modules=lo.target_modules,
        task_type="CAUSAL_LM",
    )


def sft_trainer(
    settings: RecipeSettings,
    dataset: Dataset,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    output_dir: Path,
) -> Trainer:
    """SFT on conversations with tools; the loss on assistant turns only."""
    from trl import SFTConfig, SFTTrainer

    config = SFTConfig(
        **_common(settings, output_dir),
        max_length=settings.max_length,
        assistant_only_loss=True,
        packing=False,
        dataset_num_proc=None,
    )
    return SFTTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=_peft(settings),
    )


def dpo_trainer(
    settings: RecipeSettings,
    dataset: Dataset,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    output_dir: Path,
) -> Trainer:
    """DPO on chosen/rejected continuations of a shared prefix."""
    from trl import DPOConfig, DPOTrainer

    config = DPOConfig(
        **_common(settings, output_dir), max_length=settings.max_length, beta=settings.beta
    )
    # The reference is the starting policy; with LoRA, TRL uses the model with adapters off.
    ref = None if settings.lora else copy.deepcopy(model)
    return DPOTrainer(
        model=model,
        ref_model=ref,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=_peft(settings),
    )


def grpo_trainer(
    settings: RecipeSettings,
    dataset: Dataset,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    output_dir: Path,
    rollout: GroupRollout,
    reward: TaskReward,
) -> Trainer:
    """GRPO with multi-turn rollouts (user simulator in the loop) and the shaped task reward."""
    from trl import GRPOConfig, GRPOTrainer

    if settings.batch_size % settings.num_generations:
        raise RecipeError(
            f"GRPO batch_size {settings.batch_size} must be a multiple of "
            f"num_generations {settings.num_generations}"
        )
    if settings.grpo_beta > 0 and settings.lora is None:
        # TRL builds GRPO's reference model from the policy's name_or_path: give it a folder.
        base = output_dir / "base"
        model.save_pretrained(str(base))
        model.config._name_or_path = str(base)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    config = GRPOConfig(
        **_common(settings, output_dir),
        num_generations=settings.num_generations,
        max_completion_length=settings.rollout.max_completion_tokens,
        beta=settings.grpo_beta,
        temperature=settings.rollout.sampling.temperature,
        log_completions=False,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=_peft(settings),
        rollout_func=rollout,
    )


class TrainResult(BaseModel):
    """What a run produced: its metrics per logging step, and where the model is."""

    method: Method
    base_model: str
    steps: int
    train_seconds: float
    log_history: list[dict[str, Any]]
    metrics: dict[str, float]
    model_dir: str | None
    tensorboard_dir: str


def _save(trainer: Trainer, settings: RecipeSettings, output_dir: Path, model_dir: str) -> None:
    """The full model in ``model_dir`` (servable as is); with LoRA, the adapters apart too."""
    if settings.lora is None:
        trainer.save_model(model_dir)
        return
    trainer.save_model(str(output_dir / "adapter"))
    if trainer.is_world_process_zero():
        peft_model: Any = trainer.accelerator.unwrap_model(trainer.model)
        peft_model.merge_and_unload().save_pretrained(model_dir)


def train(
    settings: RecipeSettings,
    dataset: TrainingDataset,
    output_dir: Path,
    *,
    domains: Mapping[str, Domain] | None = None,
    user: RoleSettings | None = None,
    judge: Judge | None = None,
) -> TrainResult:
    """Run one recipe to its end. GRPO needs the domains and the user simulator's endpoint."""
    if dataset.method != settings.method:
        raise RecipeError(f"a {settings.method} recipe got a {dataset.method} dataset")
    tokenizer = load_tokenizer(settings.base)
    model = load_model(settings.base, tokenizer)
    hf = dataset.to_hf()
    output_dir.mkdir(parents=True, exist_ok=True)
    if settings.method == "sft":
        trainer = sft_trainer(settings, hf, model, tokenizer, output_dir)
    elif settings.method == "dpo":
        trainer = dpo_trainer(settings, hf, model, tokenizer, output_dir)
    else:
        if domains is None or user is None:
            raise RecipeError("GRPO needs the domains and the user simulator's settings")
        rollout = GroupRollout(domains, dataset.rows, user, settings.rollout)
        reward = TaskReward(domains, judge, settings.penalty)
        trainer = grpo_trainer(settings, hf, model, tokenizer, output_dir, rollout, reward)
    out = trainer.train()
    model_dir: str | None = None
    if settings.save_model:
        model_dir = str(output_dir / "model")
        _save(trainer, settings, output_dir, model_dir)
        tokenizer.save_pretrained(model_dir)
    return TrainResult(
        method=settings.method,
        base_model=settings.base.name,
        steps=int(out.global_step),
        train_seconds=float(out.metrics.get("train_runtime", 0.0)),
        log_history=list(trainer.state.log_history),
        metrics={k: float(v) for k, v in out.metrics.items() if isinstance(v, int | float)},
        model_dir=model_dir,
        tensorboard_dir=str(output_dir / "runs"),
    )
