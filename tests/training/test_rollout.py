"""The GRPO environment with a scripted policy: real episodes, the user simulator served by the
scripted HTTP server, tools in the domain runtime, rewards from the real scorer."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, cast

from maestro.agents.scripted_server import Reply, ScriptedServer
from maestro.domains import Domain
from maestro.storage import Lake
from maestro.training.datasets import build_grpo
from maestro.training.generation import ChatGenerator
from maestro.training.models import BaseModelSpec, load_tokenizer
from maestro.training.rollout import GroupRollout, RolloutSettings, TaskReward

from ..conftest import role_settings
from .conftest import TASK_SET


class ScriptedPolicy(ChatGenerator):
    """A policy whose replies are fixed text, tokenized like a model's output."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        super().__init__(cast(Any, None), tokenizer)
        self.replies = deque(replies)

    def sample(self, input_ids: Sequence[int], max_new_tokens: int | None = None) -> list[int]:
        return self.encode(self.replies.popleft() + "<|im_end|>")


CALL = '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "O2"}}\n</tool_call>'
CANCEL = '<tool_call>\n{"name": "cancel_order", "arguments": {"order_id": "O1"}}\n</tool_call>'


def _rollout(
    toy: Domain, lake: Lake, scripted: ScriptedServer
) -> tuple[GroupRollout, dict[str, Any]]:
    rows = {r["task_id"]: r for r in build_grpo(lake, {"toy": toy}, TASK_SET, split=None).rows}
    settings = RolloutSettings.model_validate({"limits": {"max_turns": 6}})
    rollout = GroupRollout(
        {"toy": toy}, list(rows.values()), role_settings(base_url=scripted.base_url), settings
    )
    return rollout, rows


def test_multi_turn_rollout_masks_everything_the_policy_did_not_write(
    toy: Domain, toy_lake: Lake, scripted: ScriptedServer, tiny_spec: BaseModelSpec
) -> None:
    tok = load_tokenizer(tiny_spec)
    rollout, rows = _rollout(toy, toy_lake, scripted)
    scripted.script(
        "toy/toy_status/0",
        "user",
        [Reply(content="Thanks! Anything else?"), Reply(content="###STOP###")],
    )
    policy = ScriptedPolicy(tok, [CALL, "Order O2 has shipped.", "No, it has shipped already."])
    out = rollout.run([rows["toy_status"]["prompt"]], policy)

    ids, mask = out["completion_ids"][0], out["env_mask"][0]
    assert len(ids) == len(mask)
    mine = tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
    theirs = tok.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    assert "get_order" in mine and "has shipped." in mine and "already" in mine
    assert "<tool_response>" in theirs and '"shipped"' in theirs  # the tool's real result
    assert "Thanks! Anything else?" in theirs  # the user simulator's turn, from the server
    assert "get_order" not in theirs and "Thanks" not in mine
    # The prompt and completion tokens together are the conversation as the template renders it.
    assert tok.decode(out["prompt_ids"][0] + ids).count("<|im_start|>assistant") == 3

    roles = [m["role"] for m in __import__("json").loads(out["trajectory"][0])["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant", "user"]
    assert out["termination"] == ["user_stop"]
    reward = TaskReward({"toy": toy})
    assert reward([None], out["trajectory"], ["toy"], ["toy_status"]) == [1.0]


def test_each_rollout_of_a_group_starts_from_the_task_state(
    toy: Domain, toy_lake: Lake, scripted: ScriptedServer, tiny_spec: BaseModelSpec
) -> None:
    tok = load_tokenizer(tiny_spec)
    rollout, rows = _rollout(toy, toy_lake, scripted)
    for trial in (0, 1):
        scripted.script(f"toy/toy_cancel/{trial}", "user", [Reply(content="###STOP###")])
    # Both rollouts cancel O1: the second succeeds too, so it did not see the first one's write.
    policy = ScriptedPolicy(
        tok,
        [
            CANCEL,
            "Cancelled.",
            CANCEL,
            "Cancelled.",
        ],
    )
    prompt = rows["toy_cancel"]["prompt"]
    out = rollout.run([prompt, prompt], policy)
    assert out["prompt_ids"][0] == out["prompt_ids"][1]
    rewards = TaskReward({"toy": toy})(
        [None, None], out["trajectory"], ["toy"] * 2, ["toy_cancel"] * 2
    )
    assert rewards == [1.0, 1.0]
    assert [e.tool_calls for e in rollout.episodes] == [1, 1]
