"""pass^k and pass@k over repeated trials (tau2-bench's definitions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import comb


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that k trials drawn from n, of which c succeeded, all succeed: C(c,k)/C(n,k)."""
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k trials drawn from n succeeds: 1 - C(n-c,k)/C(n,k)."""
    _check(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"successes c={c} must be between 0 and trials n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of trials n={n}")


def _mean(metric: str, results: Mapping[str, Sequence[bool]], k: int) -> float:
    if not results:
        raise ValueError("no tasks to aggregate")
    fn = pass_hat_k if metric == "pass^k" else pass_at_k
    return sum(fn(len(r), sum(r), k) for r in results.values()) / len(results)


def mean_pass_hat_k(results: Mapping[str, Sequence[bool]], k: int) -> float:
    """pass^k averaged over tasks; ``results`` maps a task id to its trials' successes."""
    return _mean("pass^k", results, k)


def mean_pass_at_k(results: Mapping[str, Sequence[bool]], k: int) -> float:
    """pass@k averaged over tasks."""
    return _mean("pass@k", results, k)
