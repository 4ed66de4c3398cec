"""agents/codegen: the LangGraph synthesis team and the task synthesis it calls.

Use :func:`run_synthesis` with a :class:`Brief`; it returns a :class:`SynthesisResult` and
leaves an accepted package under the run folder. See docs/synthesis.md.
"""

from maestro.agents.codegen.blueprint import Blueprint, BlueprintError
from maestro.agents.codegen.graph import (
    Brief,
    SynthesisResult,
    build_graph,
    run_synthesis,
    synthesis_folder,
)
from maestro.agents.codegen.normalise import parse_blueprint
from maestro.agents.codegen.state import SynthesisConfig, SynthesisEvent

__all__ = [
    "Blueprint",
    "BlueprintError",
    "Brief",
    "SynthesisConfig",
    "SynthesisEvent",
    "SynthesisResult",
    "build_graph",
    "parse_blueprint",
    "run_synthesis",
    "synthesis_folder",
]
