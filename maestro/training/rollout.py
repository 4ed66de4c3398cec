"""The GRPO environment: multi-turn episodes with the user simulator in the loop.

TRL's ``environment_factory`` can only answer tool calls, so this is a ``rollout_func``
(experimental in TRL 1.16: ``rollout_func(prompts, trainer) -> {"prompt_ids",
"completion_ids", "logprobs", ...}``; other keys reach the reward functions). TRL's sampler has
already repeated each prompt ``num_generations`` times, so a group is consecutive copies of one
task; each copy runs in a fresh session at the task's initial state.

Each rollout is a real :func:`maestro.simulation.episode.run_episode`: the policy is the
assistant (it generates with the trainer's model and records its tokens), the user simulator
is the configured user role (the scripted server in tests), tools run in the domain runtime.
Tokens the policy generated get ``env_mask`` 1; tool results and user turns get 0, so they are
out of the loss. The episode's trajectory goes to the reward function, which scores it with the
real scorer and the shaped reward.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from maestro.agents.client import ChatClient, Endpoints, ProviderError
from maestro.agents.roles import UserSimulator, shown_tools
from maestro.agents.settings import RoleSettings
from maestro.conversation import Completion, Message, Trajectory, to_openai
from maestro.domains import Domain
from maestro.domains.models import Task
from maestro.scoring.judge import Judge
from maestro.scoring.reward import EfficiencyPenalty, trajectory_reward
from maestro.scoring.scorer import Scorer
from maestro.simulation.episode import EpisodeLimits, EpisodeResult, run_episode
from maestro.training.generation import ChatGenerator, SamplingSettings

if TYPE_CHECKING:
    from trl import GRPOTrainer


class RolloutError(Exception):
    """A prompt names no known task, or the rollout cannot be set up."""


class RolloutSettings(BaseModel):
    sampling: SamplingSettings = Field(default_factory=lambda: SamplingSettings(max_new_tokens=96))
    limits: EpisodeLimits = Field(
        default_factory=lambda: EpisodeLimits(max_turns=4, max_steps_per_turn=3, deadline_s=300)
    )
    #: Tokens one rollout may hold after its prompt (policy and environment together).
    max_completion_tokens: int = Field(1024, ge=16)


def prompt_key(prompt: Sequence[Mapping[str, Any]]) -> str:
    """The identity of a GRPO prompt: its roles and texts."""
    return json.dumps([[m.get("role"), m.get("content")] for m in prompt])


class _Tokens:
    """The rollout's completion tokens and which of them the policy wrote."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.mask: list[int] = []

    def add(self, ids: Sequence[int], policy: bool) -> None:
        self.ids.extend(ids)
        self.mask.extend([1 if policy else 0] * len(ids))


class PolicyAssistant:
    """The assistant side of an episode, played by the model being trained."""

    def __init__(
        self, gen: ChatGenerator, system: str, tools: list[dict[str, Any]], budget: int
    ) -> None:
        self.gen = gen
        self.tools = tools
        self.all_tools = tools
        self.budget = budget
        self.prompt: list[dict[str, Any]] = [{"role": "system", "content": system}]
        self.prompt_ids: list[int] = []
        self.tokens = _Tokens()
        self._covered: list[dict[str, Any]] = []  # messages already in the token stream

    async def respond(
        self,
        history: list[Message],
        *,
        episode: str,
        seed: int | None,
        tools: list[str] | None = None,
    ) -> Completion:
        started = time.perf_counter()
        msgs = [to_openai(m) for m in history]
        if tools is not None:
            self._show(tools)
        if not self.prompt_ids:
            self._covered = self.prompt + msgs
            self.prompt_ids = self.gen.encode(self.gen.render(self._covered, self.tools, True))
        else:
            self._add_environment(msgs[len(self._covered) - 1 :])
        left = self.budget - len(self.tokens.ids)
        if left <= 0:
            raise ProviderError("the rollout used its completion-token budget", kind="length")
        turn = min(left, self.gen.sampling.max_new_tokens)
        new = self.gen.sample(self.prompt_ids + self.tokens.ids, max_new_tokens=turn)
        self.tokens.add(new, policy=True)
        message = self.gen.parse(new, self.tools)
        self._covered.append(to_openai(message))
        return Completion(
            message, None, len(self.prompt_ids), len(new), time.perf_counter() - started, 1
        )

    def _show(self, names: list[str]) -> None:
        """Show only the task's visible tools. The tools are part of the prompt's tokens, so a
        task whose turns add tools mid-episode cannot be rolled out (BFCL's missed-function
        entries): that is the episode's error, not a silent change of prompt."""
        shown = shown_tools(self.all_tools, names)
        if not self.prompt_ids:
            self.tools = shown
        elif shown != self.tools:
            raise ProviderError(
                "the task shows new tools mid-episode; a GRPO rollout keeps one tool list",
                kind="unsupported",
            )

    def _add_environment(self, new_msgs: list[dict[str, Any]]) -> None:
        """Tool results and user turns since the policy last spoke, as masked tokens."""
        before = self.gen.render(self._covered, self.tools, False)
        self._covered = self._covered + new_msgs
        after = self.gen.render(self._covered, self.tools, True)
        if not after.startswith(before):
            raise RolloutError("the chat template does not preserve prefixes")
        # The policy's turn ended at <|im_end|> (or was cut short); the template adds the rest.
        closing = (
            "\n" if self.tokens.ids and self.tokens.ids[-1] == self.gen.im_end else "<|im_end|>\n"
        )
        self.tokens.add(self.gen.encode(closing + after[len(before) :]), policy=False)


class _FixedOpening:
    """The user's side: the prompt's opening first (every rollout of a group starts alike),
    then the user simulator."""

    def __init__(self, opening: str, simulator: UserSimulator) -> None:
        self.opening = opening
        self.simulator = simulator

    async def respond(
        self, history: list[Message], *, episode: str, seed: int | None
    ) -> Completion:
        if not history:
            return Completion(Message(role="user", content=self.opening), "stop", 0, 0, 0.0, 1)
        return await self.simulator.respond(history, episode=episode, seed=seed)


class GroupRollout:
    """A TRL ``rollout_func`` over maestro tasks."""

    def __init__(
        self,
        domains: Mapping[str, Domain],
        rows: Sequence[Mapping[str, Any]],
        user: RoleSettings,
        settings: RolloutSettings | None = None,
    ) -> None:
        if not user.base_url:
            raise RolloutError("the user simulator needs an endpoint (user role base_url)")
        self.user = user
        self.settings = settings or RolloutSettings()
        self.tasks: dict[str, tuple[Domain, Task]] = {}
        for row in rows:
            key = prompt_key(row["prompt"])
            found = (domains[row["domain_id"]], domains[row["domain_id"]].task(row["task_id"]))
            if key in self.tasks and self.tasks[key][1].id != found[1].id:
                raise RolloutError(
                    f"tasks {self.tasks[key][1].id} and {found[1].id} have the same prompt"
                )
            self.tasks[key] = found
        self.episodes: list[EpisodeResult] = []

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, Any]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        gen = ChatGenerator(model, trainer.processing_class, self.settings.sampling)  # type: ignore[arg-type]
        was_training = model.training
        model.eval()
        try:
            return self.run(prompts, gen)
        finally:
            model.train(was_training)

    def run(self, prompts: list[Any], gen: ChatGenerator) -> dict[str, Any]:
        """One episode per prompt, in order, with ``gen`` as the assistant."""
        outs = asyncio.run(self._all(prompts, gen))
        return {
            "prompt_ids": [o[0].prompt_ids for o in outs],
            # TRL needs at least one completion token; an episode that never reached the
            # policy (a user-simulator failure at once) gets one masked end token.
            "completion_ids": [o[0].tokens.ids or [gen.im_end] for o in outs],
            "env_mask": [o[0].tokens.mask or [0] for o in outs],
            "logprobs": None,
            "trajectory": [o[1].trajectory.model_dump_json() for o in outs],
            "termination": [o[1].termination.value for o in outs],
        }

    async def _all(
        self, prompts: list[Any], gen: ChatGenerator
    ) -> list[tuple[PolicyAssistant, EpisodeResult]]:
        outs = []
        async with Endpoints() as endpoints:
            client = endpoints.client("user", self.user)
            for i, prompt in enumerate(prompts):
                outs.append(await self._one(i, prompt, gen, client))
        self.episodes.extend(e for _, e in outs)
        return outs

    async def _one(
        self, i: int, prompt: Sequence[Mapping[str, Any]], gen: ChatGenerator, client: ChatClient
    ) -> tuple[PolicyAssistant, EpisodeResult]:
        found = self.tasks.get(prompt_key(prompt))
        if found is None:
            raise RolloutError(f"prompt {i} names no task of this rollout's dataset")
        domain, task = found
        system = next(m["content"] for m in prompt if m["role"] == "system")
        opening = next(m["content"] for m in prompt if m["role"] == "user")
        policy = PolicyAssistant(
            gen, system, domain.toolkit.schemas(), self.settings.max_completion_tokens
        )
        user = _FixedOpening(opening, UserSimulator(client, domain, task))
        result = await run_episode(
            domain, task, policy, user, trial=i, seed=i, limits=self.settings.limits
        )
        if not policy.prompt_ids:  # the episode ended before the policy spoke
            policy.prompt_ids = gen.encode(
                gen.render(policy.prompt + [dict(m) for m in prompt[1:]], policy.tools, True)
            )
        return policy, result


class TaskReward:
    """The reward function: the real scorer's card of each rollout's trajectory, times the
    efficiency penalty. ``None`` (no reward) when a criterion could not be judged."""

    __name__ = "task_reward"

    def __init__(
        self,
        domains: Mapping[str, Domain],
        judge: Judge | None = None,
        penalty: EfficiencyPenalty | None = None,
    ) -> None:
        self.scorers = {d: Scorer(dom, judge) for d, dom in domains.items()}
        self.judge = judge
        self.penalty = penalty or EfficiencyPenalty()

    def __call__(
        self,
        completions: list[Any],
        trajectory: list[str],
        domain_id: list[str],
        task_id: list[str],
        **kwargs: Any,
    ) -> list[float | None]:
        return asyncio.run(self._score(trajectory, domain_id, task_id))

    async def _score(
        self, trajectories: list[str], domain_ids: list[str], task_ids: list[str]
    ) -> list[float | None]:
        out: list[float | None] = []
        for raw, d, t in zip(trajectories, domain_ids, task_ids, strict=True):
            scorer = self.scorers[d]
            task = scorer.domain.task(t)
            traj = Trajectory.model_validate_json(raw)
            card = await scorer.ascore(task, traj) if self.judge else scorer.score(task, traj)
            out.append(trajectory_reward(task, traj, card, self.penalty).reward)
        return out
