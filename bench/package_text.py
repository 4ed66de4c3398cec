"""What the checks of a package's text cost at hostile sizes (issue 23, point 2).

- ``lint``: the scenario lint (known facts the instructions have the customer volunteer) on a
  40 KB ``known_info`` of letters, and on 40 KB of names and ids that the instructions repeat;
- ``communicate``: the COMMUNICATE check of 50k ``communicate_info`` items over 20 messages;
- ``match``: 1,000 and 3,000 identical gold actions matched to as many calls (unordered: each
  new action displaces the one before, the worst case of the matching);
- ``validate``: ``maestro domains validate`` of the toy package with a 40 KB ``known_info``.

Each case runs once (they are seconds, not microseconds); a case that raises prints its error.
Prints one line a case, then a JSON object last.

    .venv/bin/python bench/package_text.py [--cases lint communicate match validate]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from maestro.conversation import Message, ToolCall, Trajectory
from maestro.domains import Action, Domain, Task, load_domain
from maestro.scoring import ScoringContext, communicate_check, match_actions
from maestro.scoring.scenario import volunteered_known_facts

ROOT = Path(__file__).parents[1]
TOY = ROOT / "tests" / "fixtures" / "toy"
MAESTRO = str(Path(sys.executable).with_name("maestro"))


def _scenario(known: str, instructions: str) -> Task:
    return Task.model_validate(
        {
            "id": "t",
            "user_scenario": {
                "instructions": {
                    "domain": "toy",
                    "reason_for_call": "I call about my order.",
                    "known_info": known,
                    "task_instructions": instructions,
                }
            },
            "evaluation_criteria": {"nl_assertions": ["x"], "reward_basis": ["NL_ASSERTION"]},
        }
    )


def lint_cases() -> dict[str, Callable[[], object]]:
    letters = _scenario("a" * 40_000, "Say hello.")
    ids = " ".join(f"R{10_000 + i} Kevin Marsh" for i in range(2_000))
    named = _scenario(ids, " ".join(f"Say R{10_000 + i} now." for i in range(200)))
    return {
        "lint: 40 KB of letters": lambda: volunteered_known_facts(letters),
        "lint: 38 KB of ids, 200 sentences": lambda: volunteered_known_facts(named),
    }


def communicate_cases(toy: Domain) -> dict[str, Callable[[], object]]:
    task = toy.task("toy_status").model_copy(deep=True)
    task.evaluation_criteria.communicate_info = [f"item {i} thing" for i in range(50_000)]
    said = [
        f"Your booking R{i} costs ${i}.50 and leaves at 9:30 on 2026-02-16. " * 3 for i in range(20)
    ]
    messages = [Message(role="user", content="Hello.")]
    messages += [Message(role="assistant", content=t) for t in said]
    trajectory = Trajectory(domain_id="toy", task_id="toy_status", messages=messages)
    return {
        "communicate: 50k items, 20 messages": lambda: communicate_check()(
            ScoringContext(toy, task, trajectory)
        )
    }


def match_cases() -> dict[str, Callable[[], object]]:
    def case(n: int) -> Callable[[], object]:
        actions = [Action(action_id=f"a{i}", name="f", arguments={"x": 1}) for i in range(n)]
        calls = [ToolCall(id="c", name="f", arguments={"x": 1, "n": i}) for i in range(n)]
        return lambda: match_actions(actions, calls, ordered=False)

    return {f"match: {n:,} identical gold actions": case(n) for n in (1_000, 3_000)}


def validate_cases() -> dict[str, Callable[[], object]]:
    def run() -> object:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "toy"
            shutil.copytree(TOY, folder, ignore=shutil.ignore_patterns("__pycache__"))
            lines = (folder / "tasks.jsonl").read_text().splitlines()
            first = json.loads(lines[0])
            first["user_scenario"]["instructions"]["known_info"] = "a" * 40_000
            (folder / "tasks.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
            proc = subprocess.run(
                [MAESTRO, "domains", "validate", str(folder), "--json"],
                capture_output=True,
                text=True,
                timeout=3600,
            )
            return f"exit {proc.returncode}"

    return {"validate: toy with a 40 KB known_info": run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["lint", "communicate", "match", "validate"])
    args = parser.parse_args()
    cases: dict[str, Callable[[], object]] = {}
    if "lint" in args.cases:
        cases |= lint_cases()
    if "communicate" in args.cases:
        cases |= communicate_cases(load_domain(TOY, trusted=True))
    if "match" in args.cases:
        cases |= match_cases()
    if "validate" in args.cases:
        cases |= validate_cases()
    results: dict[str, dict[str, object]] = {}
    for name, case in cases.items():
        started = time.perf_counter()
        try:
            case()
            error = None
        except Exception as exc:
            error = f"{type(exc).__name__}: {str(exc)[:100]}"
        seconds = round(time.perf_counter() - started, 3)
        results[name] = {"seconds": seconds, "error": error}
        print(f"{name:<45} {seconds:>9.3f} s  {error or ''}", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
