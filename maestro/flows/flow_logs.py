"""What a flow's log in Prefect carries: maestro's messages and the libraries' warnings, not
what libraries print.

Flows do not set ``log_prints``: with it, every ``print`` anywhere in the process during a run
went to the run's log (a training run's log carried a CPython bytecode listing that the
``datasets`` library's hashing printed). Instead, Python warnings are routed to logging
(``py.warnings``) and that logger, like every ``maestro.*`` logger, gets Prefect's API handler;
a subprocess's output (a training job's) is relayed without progress bars and echoes.
"""

from __future__ import annotations

import logging
import os
import re

#: Loggers whose records reach the flow run's log besides Prefect's run loggers.
EXTRA_LOGGERS = ("maestro", "py.warnings")

# tqdm bars ("  40%|████      | 2/5 [00:01<00:02, 1.9it/s]", "4 examples [00:00, 285 examples/s]")
# and their carriage-return redraws.
_PROGRESS = re.compile(r"\d+%\||\[\d+:\d\d(?::\d\d)?[,<]|\r")
# The source line Python prints under a warning ("  warnings.warn(...)").
_WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ")


def configure_flow_logging() -> None:
    """Route warnings and maestro's loggers to the flow run's log. Call before Prefect is
    imported (it reads its logging settings then); a setting already in the environment wins."""
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", ",".join(EXTRA_LOGGERS))
    # Those loggers also fire outside any run (at start-up, in helpers): not an error there.
    os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
    logging.captureWarnings(True)
    # maestro's own INFO lines are worth keeping; the root logger's WARNING would drop them.
    maestro = logging.getLogger("maestro")
    if maestro.level == logging.NOTSET:
        maestro.setLevel(os.environ.get("PREFECT_LOGGING_LEVEL", "INFO"))


def job_log_lines(text: str, limit: int = 20) -> list[str]:
    """The last ``limit`` lines of a job's output worth a flow log line: no progress bars, no
    blank lines, no echo of a warning's source line."""
    kept: list[str] = []
    after_warning = False
    for line in text.splitlines():
        echo = after_warning and line.startswith("  ")
        after_warning = bool(_WARNING.match(line))
        if echo or not line.strip() or _PROGRESS.search(line):
            continue
        kept.append(line.rstrip())
    return kept[-limit:]
