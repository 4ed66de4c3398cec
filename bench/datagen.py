"""Cost of making a world: the data stage's program run in the sandbox (the ferry line's program
of the scripted team, which builds each record from the records it refers to with worldgen's
people and places), the host's checks of the world it made (types, references, laws, shares,
placeholders, coverage), the derived tests' effects checked against the laws, and Hypothesis's
stateful check of each write tool. Prints a JSON object last.

    PYTHONPATH=. .venv/bin/python bench/datagen.py [--sizes 100 1000 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from maestro.agents.codegen.checks import effect_law_problems, operation_tests
from maestro.agents.codegen.data import DataLimits, world_problems
from maestro.agents.codegen.generator import Sizes, normalise_generator, run_generator
from maestro.agents.codegen.properties import argument_pools, check_properties
from maestro.agents.codegen.render import laws_json
from maestro.agents.codegen.state import SynthesisConfig
from maestro.domains.sandbox import load_sandboxed_domain
from tests.synthesis import scripted_team as team


def timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def world(size: int, repeat: int) -> dict[str, Any]:
    bp = team.blueprint()
    program = normalise_generator(bp, team.DATA_PROGRAM)
    limits = DataLimits(main_size=size, catalog_size=10, least=min(10, size))
    runs, checks, effects = [], [], []
    db: dict[str, Any] = {}
    for i in range(repeat):
        with tempfile.TemporaryDirectory() as work:
            wall, db = timed(
                lambda w=work, s=i: run_generator(bp, program, Sizes(size, 10), Path(w), seed=s)
            )
        runs.append(wall)
        wall, problems = timed(lambda d=db: world_problems(bp, d, limits))
        assert problems == [], problems[:3]
        checks.append(wall)
        wall, broken = timed(lambda d=db: effect_law_problems(bp, d))
        assert broken == [], broken
        effects.append(wall)
    records = sum(len(rows) for rows in db.values())
    return {
        "records_per_main_table": size,
        "records": records,
        "generate_s": round(statistics.median(runs), 2),
        "generate_range_s": [round(min(runs), 2), round(max(runs), 2)],
        "records_per_s": round(records / statistics.median(runs)),
        "world_checks_s": round(statistics.median(checks), 3),
        "effect_law_checks_s": round(statistics.median(effects), 3),
        "laws": len(bp.laws),
    }


def properties() -> dict[str, Any]:
    config = SynthesisConfig()
    bp = team.blueprint(config)
    files = team.package_files("bench", config)
    files["laws.json"] = laws_json(bp)
    db = json.loads(files["db.json"])
    writes = [op for op in bp.operations if op.tool_kind == "write"]
    per_tool: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, text in files.items():
            (root / name).write_text(text, encoding="utf-8")
        with load_sandboxed_domain(root, check_gold=False) as domain:
            for op in writes:
                plan = argument_pools(bp, writes, db, operation_tests(bp, op, db), focus=op.name)
                wall, found = timed(lambda p=plan: check_properties(domain, p))
                assert found is None, found
                per_tool[op.name] = round(wall, 2)
    return {
        "hypothesis_s_per_tool": per_tool,
        "hypothesis_median_s": round(statistics.median(per_tool.values()), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    out = {
        "cpus": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 2),
        "worlds": [world(n, args.repeat) for n in args.sizes],
        **properties(),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
