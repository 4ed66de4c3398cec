"""Every numeric option of every command refuses what is not a usable number (negative, zero
where it makes no sense, NaN, infinity, out of range) at parse time: exit code 2, the option
named, nothing run. Click's own ranges let NaN through, so each case here was a traceback or a
run started with a nonsense limit before."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from maestro.cli.app import app

SIM = ["simulate", "--domain", "hotel"]
STAGE = ["stage", "ingest", "--run-id", "r1"]
TRAIN = ["train", "--method", "sft", "--task-set", "ts", "--domain", "hotel"]
EVAL = ["evaluate", "--model", "m", "--task-set", "ts", "--domain", "hotel"]

CASES = [
    (SIM, "--episode-deadline-s", "-5"),
    (SIM, "--episode-deadline-s", "nan"),
    (SIM, "--episode-deadline-s", "inf"),
    (SIM, "--episode-deadline-s", "0"),
    (SIM, "--episode-deadline-s", "1e99"),
    (SIM, "--episode-deadline-s", "soon"),
    (SIM, "--trials", "0"),
    (SIM, "--trials", "65"),
    (SIM, "--concurrency", "0"),
    (SIM, "--ray-workers", "-1"),
    (SIM, "--max-turns", "0"),
    (["nightly"], "--trials", "65"),
    (["nightly"], "--concurrency", "0"),
    (["nightly"], "--chunk-size", "0"),
    (["nightly"], "--ray-workers", "2000"),
    (["nightly"], "--tasks-per-domain", "0"),
    (["nightly"], "--max-turns", "0"),
    (["nightly"], "--synthesize", "101"),
    (["nightly"], "--synthesis-budget-s", "nan"),
    (STAGE, "--trials", "0"),
    (STAGE, "--concurrency", "99999"),
    (["serve-mcp", "hotel"], "--port", "99999"),
    (["serve-mcp", "hotel"], "--idle-timeout-s", "inf"),
    (["serve-mcp", "hotel"], "--max-sessions", "0"),
    (["annotate", "export"], "-n", "0"),
    (["annotate", "export"], "--seed", "-1"),
    (["annotate", "agreement"], "--resamples", "5"),
    (["llm", "check"], "--timeout-s", "nan"),
    (["llm", "serve"], "--port", "70000"),
    (["query", "select 1"], "--limit", "0"),
    (["synthesize", "--brief", "a shop"], "--tasks", "0"),
    (["synthesize", "--brief", "a shop"], "--seed", "-1"),
    (["synthesize", "--brief", "a shop"], "--records", "0"),
    (["synthesize", "--brief", "a shop"], "--deadline-s", "inf"),
    (["synthesize", "--brief", "a shop"], "--catalog-records", "0"),
    (["synthesize", "--brief", "a shop"], "--refusals", "51"),
    (TRAIN, "--learning-rate", "nan"),
    (TRAIN, "--learning-rate", "-0.1"),
    (TRAIN, "--deadline-s", "inf"),
    (TRAIN, "--max-steps", "0"),
    (TRAIN, "--gpus", "-1"),
    (EVAL, "--trials", "0"),
    (EVAL, "--max-new-tokens", "0"),
    (["ui"], "--port", "99999"),
]


@pytest.mark.parametrize(
    ("command", "option", "value"), CASES, ids=[f"{c[0]} {o} {v}" for c, o, v in CASES]
)
def test_a_bad_number_is_refused_at_parse_time(command: list[str], option: str, value: str) -> None:
    result = CliRunner().invoke(app, [*command, option, value])
    assert result.exit_code == 2, result.output
    assert "Invalid value for" in result.output and option in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
