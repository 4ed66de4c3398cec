"""Check ``maestro export tau2`` with tau2-bench's own loaders and evaluator.

Two steps, two interpreters (tau2 1.0.1 needs Python >= 3.12; maestro runs on 3.11):

    # 1. with maestro: export the library domains, and maestro's own gold tool results
    .venv/bin/python scripts/tau2_check.py export /tmp/tau2-export
    # 2. with tau2 installed (a throwaway venv): copy the export into the tau2 checkout the
    #    venv runs from, register each domain as the README's snippet does, and check
    /tmp/tau2venv/bin/python scripts/tau2_check.py check /tmp/tau2-export --tau2-src /tmp/tau2-src

Step 2 loads every task with tau2's registry (``get_tasks`` on each split), builds the gold
trajectory of each task by running the gold actions through tau2's own ``Environment``, and
scores it and a do-nothing trajectory with tau2's ``evaluate_simulation`` (NL assertions
aside: tau2 grades them with a remote model, so they are left out of the basis). It also
compares each gold tool result with maestro's (typed JSON, not strings), and calls a tool with
a list where a string is expected. It prints one JSON object with the counts, last.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any


def export(out: Path) -> None:
    """maestro side: the library domains in tau2's layout, and maestro's gold tool results."""
    from maestro.domains import library_ids, library_path, load_domain, replay_gold
    from maestro.domains.tau2_export import export_tau2

    gold: dict[str, dict[str, list[str]]] = {}
    for domain_id in library_ids():
        domain = load_domain(library_path(domain_id))
        export_tau2(domain, out, force=True)  # the three domains share the tree
        gold[domain_id] = {
            t.id: [o.content for o in replay_gold(domain, t).outcomes] for t in domain.tasks
        }
    (out / "maestro_gold_results.json").write_text(json.dumps(gold), encoding="utf-8")
    print(json.dumps({"exported": sorted(gold), "out": str(out)}))


def _register(domain_id: str) -> Any:
    """As the README's snippet: the environment, the tasks and their splits."""
    import importlib

    from tau2.registry import registry

    env = importlib.import_module(f"tau2.domains.{domain_id}.environment")
    registry.register_domain(env.get_environment, domain_id)
    registry.register_tasks(env.get_tasks, domain_id, get_task_splits=env.get_tasks_split)
    return env


def _trajectory(env_module: Any, task: Any, *, gold: bool) -> tuple[Any, list[str]]:
    """A simulation run: the user's opening, the gold calls answered by tau2's environment
    (or none), a closing message; and the tool results as the agent read them."""
    from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage
    from tau2.data_model.simulation import SimulationRun, TerminationReason

    env = env_module.get_environment()
    state = task.initial_state
    env.set_state(
        initialization_data=state.initialization_data if state else None,
        initialization_actions=state.initialization_actions if state else None,
        message_history=[],
    )
    opening = task.user_scenario.instructions.reason_for_call
    messages: list[Any] = [UserMessage(role="user", content=opening)]
    results: list[str] = []
    actions = (task.evaluation_criteria.actions or []) if gold else []
    for i, action in enumerate(actions):
        call = ToolCall(id=f"call_{i}", name=action.name, arguments=action.arguments)
        messages.append(AssistantMessage(role="assistant", tool_calls=[call]))
        answer = env.get_response(call)
        messages.append(answer)
        results.append(answer.content or "")
    info = task.evaluation_criteria.communicate_info or []
    closing = ("To confirm: " + "; ".join(info) + ".") if gold and info else "Hello!"
    messages.append(AssistantMessage(role="assistant", content=closing))
    run = SimulationRun(
        id=f"{task.id}-{'gold' if gold else 'null'}",
        task_id=task.id,
        start_time="2026-01-01T00:00:00",
        end_time="2026-01-01T00:00:01",
        duration=1.0,
        termination_reason=TerminationReason.AGENT_STOP,
        messages=messages,
    )
    return run, results


def _without_nl(task: Any) -> Any:
    from tau2.data_model.tasks import RewardType

    basis = [b for b in task.evaluation_criteria.reward_basis if b != RewardType.NL_ASSERTION]
    crit = task.evaluation_criteria.model_copy(update={"reward_basis": basis or [RewardType.DB]})
    return task.model_copy(update={"evaluation_criteria": crit})


def _types_kept(tau2_text: str, maestro_text: str) -> bool:
    """The agent reads the same JSON maestro's assistant reads (numbers stay numbers)."""
    try:
        return bool(json.loads(tau2_text) == json.loads(maestro_text))
    except json.JSONDecodeError:
        return tau2_text == maestro_text


def check(out: Path, tau2_src: Path) -> None:
    """tau2 side: load, evaluate, compare."""
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    gold_results = json.loads((out / "maestro_gold_results.json").read_text(encoding="utf-8"))
    summary: dict[str, Any] = {}
    for domain_id, maestro_gold in gold_results.items():
        for part in ("src/tau2/domains", "data/tau2/domains"):
            target = tau2_src / part / domain_id
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(out / part / domain_id, target)
        env_module = _register(domain_id)
        splits = env_module.get_tasks_split()
        loaded = {s: len(env_module.get_tasks(s)) for s in splits}
        tasks = env_module.get_tasks("base")
        row: dict[str, Any] = {"tasks": len(tasks), "splits": loaded}
        gold_one, null_zero, typed, results = [], [], 0, 0
        for task in tasks:
            scored = _without_nl(task)
            run, texts = _trajectory(env_module, task, gold=True)
            reward = evaluate_simulation(run, scored, EvaluationType.ALL, False, domain_id)
            gold_one.append(reward.reward == 1.0 or task.id)
            null, _ = _trajectory(env_module, task, gold=False)
            reward = evaluate_simulation(null, scored, EvaluationType.ALL, False, domain_id)
            null_zero.append(reward.reward == 0.0 or task.id)
            for mine, theirs in zip(maestro_gold[task.id], texts, strict=True):
                results += 1
                typed += _types_kept(theirs, mine)
        row["gold_scores_1"] = sum(x is True for x in gold_one)
        row["gold_not_1"] = [x for x in gold_one if x is not True]
        row["do_nothing_scores_0"] = sum(x is True for x in null_zero)
        row["do_nothing_not_0"] = [x for x in null_zero if x is not True]
        row["gold_results_as_maestro"] = f"{typed}/{results}"
        row["bad_argument"] = _bad_argument(env_module, tasks)
        summary[domain_id] = row
        print(domain_id, json.dumps(row), flush=True)
    print(json.dumps(summary))


def _bad_argument(env_module: Any, tasks: list[Any]) -> str:
    """A list where a string is expected: the call's error names the argument."""
    from tau2.data_model.message import ToolCall

    env = env_module.get_environment()
    for task in tasks:
        for action in task.evaluation_criteria.actions or []:
            text = next((k for k, v in action.arguments.items() if isinstance(v, str)), None)
            if text:
                args = {**action.arguments, text: [action.arguments[text]]}
                answer = env.get_response(ToolCall(id="x", name=action.name, arguments=args))
                return answer.content or ""
    return "no string argument to break"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("step", choices=["export", "check"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--tau2-src", type=Path, help="the tau2-bench checkout tau2 runs from")
    args = parser.parse_args()
    if args.step == "export":
        export(args.out)
    elif args.tau2_src is None:
        sys.exit("check needs --tau2-src")
    else:
        check(args.out, args.tau2_src)


if __name__ == "__main__":
    main()
