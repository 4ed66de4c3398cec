"""scoring/: pure functions from (task, trajectory, replay) to a score card.

No I/O except through an injected judge.
"""

from maestro.scoring.card import AssertionVerdict, CheckItem, CriterionScore, ScoreCard
from maestro.scoring.conformance import DomainCheck, TaskCheck, check_domain, check_task
from maestro.scoring.criteria import (
    ScoringContext,
    action_check,
    communicate_check,
    db_check,
    match_actions,
)
from maestro.scoring.external import (
    Agreement,
    ExternalChecker,
    ExternalVerdict,
    agreement,
    check_externally,
    external_checker,
)
from maestro.scoring.judge import Judge, JudgeError, RuleJudge, calls, says
from maestro.scoring.metrics import mean_pass_at_k, mean_pass_hat_k, pass_at_k, pass_hat_k
from maestro.scoring.scorer import Scorer, combine, judge_assertions

__all__ = [
    "Agreement",
    "AssertionVerdict",
    "CheckItem",
    "CriterionScore",
    "DomainCheck",
    "ExternalChecker",
    "ExternalVerdict",
    "Judge",
    "JudgeError",
    "RuleJudge",
    "ScoreCard",
    "Scorer",
    "ScoringContext",
    "TaskCheck",
    "action_check",
    "agreement",
    "calls",
    "check_domain",
    "check_externally",
    "check_task",
    "combine",
    "communicate_check",
    "db_check",
    "external_checker",
    "judge_assertions",
    "match_actions",
    "mean_pass_at_k",
    "mean_pass_hat_k",
    "pass_at_k",
    "pass_hat_k",
    "says",
]
