"""The three yardsticks on every task of every library domain, and the library's size rules."""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

import pytest

from maestro.domains import Domain, library_ids, library_path, load_domain
from maestro.scoring import Scorer, check_task
from maestro.simulation import gold_trajectory, null_trajectory, perturbed_trajectory

LIBRARY = library_ids()


@cache
def library(domain_id: str) -> Domain:
    return load_domain(library_path(domain_id))


def _task_ids() -> list[tuple[str, str]]:
    return [(d, t.id) for d in LIBRARY for t in library(d).tasks]


def test_the_library_has_three_domains_and_ninety_tasks() -> None:
    assert len(LIBRARY) == 3
    assert len(_task_ids()) == 90
    industries = {library(d).manifest.industry for d in LIBRARY}
    assert len(industries) == 3


@pytest.mark.parametrize("domain_id", LIBRARY)
def test_library_domain_meets_the_size_rules(domain_id: str) -> None:
    domain = library(domain_id)
    kinds = Counter(s.kind for s in domain.toolkit.specs.values())
    assert len(domain.toolkit.specs) >= 10
    assert kinds["write"] >= 4
    assert domain.initial.count() >= 300
    assert sum(1 for t in domain.initial.table_names if domain.initial.count(t) > 0) >= 4
    assert len(re.findall(r"^\s*\d+\.\s", domain.policy, flags=re.MULTILINE)) >= 8
    assert len(domain.tasks) == 30
    categories = Counter(t.category for t in domain.tasks)
    assert set(categories) == {"read", "single_write", "multi_write", "refusal", "ask_info"}, (
        categories
    )
    for task in domain.tasks:
        crit = task.evaluation_criteria
        assert crit.communicate_info or crit.nl_assertions, task.id
        if task.category == "refusal":
            assert not crit.actions and crit.forbidden_actions and crit.nl_assertions, task.id
        else:
            assert crit.actions, task.id
        if task.category == "multi_write":
            writes = [a for a in task.gold_actions if domain.toolkit.kind(a.name) == "write"]
            assert len(writes) >= 2, task.id


@pytest.mark.parametrize(("domain_id", "task_id"), _task_ids())
def test_gold_scores_one_nothing_scores_zero_perturbed_scores_zero(
    domain_id: str, task_id: str
) -> None:
    domain = library(domain_id)
    task = domain.task(task_id)
    scorer = Scorer(domain)
    assert scorer.score(task, gold_trajectory(domain, task)).reward == 1.0
    assert scorer.score(task, null_trajectory(domain, task)).reward == 0.0
    writes = {n for n, s in domain.toolkit.specs.items() if s.kind == "write"}
    perturbed = perturbed_trajectory(domain, task, writes)
    assert perturbed is not None
    assert scorer.score(task, perturbed).reward == 0.0
    if task.category == "refusal":
        # The forbidden write really happened and the DB check is what caught it.
        card = scorer.score(task, perturbed)
        assert card.criteria["DB"].status == "fail"
    assert check_task(domain, task, scorer).ok


@pytest.mark.parametrize("domain_id", LIBRARY)
def test_gold_replay_is_deterministic(domain_id: str) -> None:
    from maestro.domains import replay_gold

    domain = library(domain_id)
    for task in domain.tasks:
        assert (
            replay_gold(domain, task).session.state_hash()
            == replay_gold(domain, task).session.state_hash()
        )
