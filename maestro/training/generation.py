"""Chat generation with a transformers model: the policy in GRPO rollouts and the served model
in evaluations. One place renders the chat template and parses tool calls out of the text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from maestro.agents.client import parse_choice
from maestro.agents.embedded import extract_tool_calls
from maestro.conversation import Message

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


class SamplingSettings(BaseModel):
    max_new_tokens: int = Field(128, ge=1)
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)


class ChatGenerator:
    """Renders OpenAI-style messages with the tokenizer's template and samples a reply."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        sampling: SamplingSettings | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling or SamplingSettings()
        im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        if not isinstance(im_end, int):
            raise TypeError("the tokenizer has no single <|im_end|> token")
        self.im_end = im_end

    def render(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        generation_prompt: bool,
    ) -> str:
        text = self.tokenizer.apply_chat_template(
            list(messages),
            tools=list(tools) if tools else None,
            tokenize=False,
            add_generation_prompt=generation_prompt,
        )
        assert isinstance(text, str)
        return text

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def sample(self, input_ids: Sequence[int], max_new_tokens: int | None = None) -> list[int]:
        """New token ids after ``input_ids``, ending with <|im_end|> unless cut by the length."""
        import torch

        s = self.sampling
        ids = torch.tensor([list(input_ids)], device=self.model.device)
        with torch.no_grad():
            out = self.model.generate(  # type: ignore[operator]
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens or s.max_new_tokens,
                do_sample=s.temperature > 0,
                temperature=s.temperature if s.temperature > 0 else None,
                top_p=s.top_p if s.temperature > 0 else None,
                eos_token_id=self.im_end,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        return [int(t) for t in out[0, ids.shape[1] :].tolist()]

    def parse(self, new_ids: Sequence[int], tools: Sequence[dict[str, Any]] | None) -> Message:
        """The assistant message the tokens spell, tool calls included."""
        text = str(self.tokenizer.decode(list(new_ids), skip_special_tokens=True)).strip()
        names = {t["function"]["name"] for t in tools or []}
        content, calls = extract_tool_calls(text, names) if tools else (text, [])
        raw: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            raw["tool_calls"] = calls
        message, _ = parse_choice({"choices": [{"message": raw, "finish_reason": None}]})
        return message

    def chat(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        max_new_tokens: int | None = None,
    ) -> tuple[Message, int, int]:
        """One reply to a chat-completions request: the message, prompt and completion tokens."""
        prompt = self.encode(self.render(messages, tools, generation_prompt=True))
        cap = self.sampling.max_new_tokens
        new = self.sample(prompt, min(cap, max_new_tokens) if max_new_tokens else cap)
        return self.parse(new, tools), len(prompt), len(new)
