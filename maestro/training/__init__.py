"""training/: datasets from the lake, TRL recipes, the GRPO environment, launchers, registry.

TRL is the trainer; these modules only build its inputs and run it. Heavy libraries (torch,
transformers, trl) are imported inside functions, so importing this package stays cheap.
"""

from maestro.training.datasets import (
    DatasetError,
    TrainingDataset,
    build_dpo,
    build_grpo,
    build_sft,
)
from maestro.training.evaluation import EvaluationSettings, evaluate_model
from maestro.training.job import TrainJob
from maestro.training.launchers import (
    LaunchError,
    LaunchResult,
    LaunchSettings,
    LocalLauncher,
    RayJobLauncher,
    RaySettings,
)
from maestro.training.models import BaseModelSpec, load_model, load_tokenizer
from maestro.training.recipes import LoraSettings, RecipeSettings, TrainResult, train
from maestro.training.registry import model_uri, record_model, record_run
from maestro.training.rollout import GroupRollout, RolloutSettings, TaskReward

__all__ = [
    "BaseModelSpec",
    "DatasetError",
    "EvaluationSettings",
    "GroupRollout",
    "LaunchError",
    "LaunchResult",
    "LaunchSettings",
    "LocalLauncher",
    "LoraSettings",
    "RayJobLauncher",
    "RaySettings",
    "RecipeSettings",
    "RolloutSettings",
    "TaskReward",
    "TrainJob",
    "TrainResult",
    "TrainingDataset",
    "build_dpo",
    "build_grpo",
    "build_sft",
    "evaluate_model",
    "load_model",
    "load_tokenizer",
    "model_uri",
    "record_model",
    "record_run",
    "train",
]
