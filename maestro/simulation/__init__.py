"""simulation/: episodes, trajectories, and scripted yardstick conversations. Never decides rewards."""

from maestro.conversation import Message, ToolCall, Trajectory
from maestro.simulation.scripted import (
    GREETING,
    by_turn,
    calls_trajectory,
    gold_trajectory,
    null_trajectory,
    paraphrased_trajectory,
    perturbed_trajectory,
    turns_trajectory,
)

__all__ = [
    "GREETING",
    "Message",
    "ToolCall",
    "Trajectory",
    "by_turn",
    "calls_trajectory",
    "gold_trajectory",
    "null_trajectory",
    "paraphrased_trajectory",
    "perturbed_trajectory",
    "turns_trajectory",
]
