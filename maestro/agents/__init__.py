"""agents/: everything that thinks with an LLM. Never writes to storage."""

from maestro.agents.client import (
    CallLog,
    CallRecorder,
    ChatClient,
    EmptyCompletionError,
    Endpoints,
    LLMCall,
    ProviderError,
)
from maestro.agents.embedded import EmbeddedModelError, EmbeddedServer
from maestro.agents.judge import LLMJudge
from maestro.agents.roles import Assistant, UserSimulator
from maestro.agents.scripted_server import (
    FaultRates,
    Reply,
    ScriptedCall,
    ScriptedServer,
    ServerConfig,
)
from maestro.agents.settings import (
    ROLES,
    EmbeddedModelSettings,
    LLMSettings,
    Role,
    RoleSettings,
    load_llm_settings,
)
from maestro.conversation import STOP, TRANSFER, Completion

__all__ = [
    "ROLES",
    "STOP",
    "TRANSFER",
    "Assistant",
    "CallLog",
    "CallRecorder",
    "ChatClient",
    "Completion",
    "EmbeddedModelError",
    "EmbeddedModelSettings",
    "EmbeddedServer",
    "EmptyCompletionError",
    "Endpoints",
    "FaultRates",
    "LLMCall",
    "LLMJudge",
    "LLMSettings",
    "ProviderError",
    "Reply",
    "Role",
    "RoleSettings",
    "ScriptedCall",
    "ScriptedServer",
    "ServerConfig",
    "UserSimulator",
    "load_llm_settings",
]
