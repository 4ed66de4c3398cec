"""flows/: compositions of the library folders: the nightly Prefect flow (``flows.nightly``),
its stages (``flows.stages``), the report (``flows.report``), and ``simulate_domain``."""

from maestro.flows.simulate import SimulationReport, TaskOutcome, score_episodes, simulate_domain

__all__ = ["SimulationReport", "TaskOutcome", "score_episodes", "simulate_domain"]
