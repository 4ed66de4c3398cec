"""The expression language of blueprints and laws: parsed and evaluated by the host, never
``eval``-ed.

Paths (``$quantity``, ``booking_id.sailing_id.departs_at``, a bare field, ``self``), constants and
the clock (``today``, ``now``); arithmetic (``+ - * /``, ``round``, ``min``, ``max``, ``abs``);
date arithmetic (``pickup_at + days(3)``, ``now - hours(2)``, ``days_between(a, b)``,
``hours_between(a, b)``, ``date(x)``); comparisons (``= != < <= > >=``, ``in``, ``not in``,
``is null``, ``is not null``); ``and``, ``or``, ``not``; counts and sums over the records of a
table (``count(returns where rental_id = $rental_id)``, ``sum(charges.amount where ...)``).

One meaning serves every use: the derived tool tests, the data checks, the walks, the laws and
the prompts (``syntax.unparse`` is the text they show).
"""

from maestro.domains.expressions.checking import (
    BOOL,
    DATE,
    DATETIME,
    ROW,
    Resolved,
    Scope,
    TableShape,
    VType,
    check_condition,
    comparable,
    infer,
    resolve_path,
)
from maestro.domains.expressions.evaluation import (
    Env,
    EvaluationError,
    compare,
    evaluate,
    holds,
    read_value,
    round_half_up,
    stored,
)
from maestro.domains.expressions.syntax import (
    Aggregate,
    Arith,
    Call,
    Clock,
    Compare,
    ExpressionError,
    IsNull,
    ListLit,
    Lit,
    Logic,
    Member,
    Neg,
    Node,
    Not,
    Path,
    conjuncts,
    parse,
    unparse,
    walk,
)

__all__ = [
    "BOOL",
    "DATE",
    "DATETIME",
    "ROW",
    "Aggregate",
    "Arith",
    "Call",
    "Clock",
    "Compare",
    "Env",
    "EvaluationError",
    "ExpressionError",
    "IsNull",
    "ListLit",
    "Lit",
    "Logic",
    "Member",
    "Neg",
    "Node",
    "Not",
    "Path",
    "Resolved",
    "Scope",
    "TableShape",
    "VType",
    "check_condition",
    "comparable",
    "compare",
    "conjuncts",
    "evaluate",
    "holds",
    "infer",
    "parse",
    "read_value",
    "resolve_path",
    "round_half_up",
    "stored",
    "unparse",
    "walk",
]
