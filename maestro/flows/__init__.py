"""flows/: compositions of the library folders (the Prefect flows come with the lake issue)."""

from maestro.flows.simulate import (
    SimulationReport,
    TaskOutcome,
    report,
    score_batch,
    simulate_domain,
)

__all__ = ["SimulationReport", "TaskOutcome", "report", "score_batch", "simulate_domain"]
