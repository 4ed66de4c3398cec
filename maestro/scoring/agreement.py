"""Agreement statistics for judge-expert validation: percent agreement, Cohen's and Fleiss' kappa.

Pure functions over label sequences; no I/O. Confidence intervals:

* percent agreement: the Wilson score interval (analytic; sound near 0 and 1 and for small n,
  where the normal "Wald" interval is not);
* Cohen's and Fleiss' kappa: a percentile bootstrap over items (resampling whole items, seeded,
  so a report is reproducible). Kappa's analytic standard errors rest on large-sample normality
  that samples of a few dozen items do not have.

A kappa is undefined when chance agreement is 1 (every label in one category); it is then
``None``, never a made-up 0 or 1.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

Label = Hashable

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000


class AgreementError(ValueError):
    """The labels cannot be compared (different lengths, nothing to compare, too few raters)."""


@dataclass(frozen=True)
class Estimate:
    """A statistic with its confidence interval and how the interval was computed."""

    value: float | None
    low: float | None
    high: float | None
    n: int
    method: str

    def to_json(self) -> dict[str, object]:
        return {
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "method": self.method,
        }


def _pairs(a: Sequence[Label], b: Sequence[Label]) -> None:
    if len(a) != len(b):
        raise AgreementError(f"the two raters labelled {len(a)} and {len(b)} items, not the same")
    if not a:
        raise AgreementError("no items to compare")


def percent_agreement(a: Sequence[Label], b: Sequence[Label]) -> float:
    """Share of items on which two raters give the same label."""
    _pairs(a, b)
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def cohen_kappa(a: Sequence[Label], b: Sequence[Label]) -> float | None:
    """Cohen's kappa of two raters: (p_o - p_e) / (1 - p_e); None when p_e is 1."""
    _pairs(a, b)
    n = len(a)
    p_o = percent_agreement(a, b)
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in ca) / (n * n)
    if math.isclose(p_e, 1.0):
        return None
    return (p_o - p_e) / (1 - p_e)


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa from an items x categories table of how many raters chose each category.

    Items may have different numbers of raters (at least 2 each): an item's agreement is the
    share of agreeing rater pairs, which is Fleiss' (1971) P_i when every item has n raters.
    """
    if not counts:
        raise AgreementError("no items to compare")
    width = len(counts[0])
    totals = [0.0] * width
    p_items = []
    raters = 0
    for i, row in enumerate(counts):
        if len(row) != width:
            raise AgreementError(f"item {i} has {len(row)} categories, not {width}")
        n_i = sum(row)
        if n_i < 2:
            raise AgreementError(f"item {i} has {n_i} rating(s); Fleiss' kappa needs 2 or more")
        p_items.append(sum(c * (c - 1) for c in row) / (n_i * (n_i - 1)))
        for j, c in enumerate(row):
            totals[j] += c
        raters += n_i
    p_bar = sum(p_items) / len(p_items)
    p_e = sum((t / raters) ** 2 for t in totals)
    if math.isclose(p_e, 1.0):
        return None
    return (p_bar - p_e) / (1 - p_e)


def category_counts(
    ratings: Sequence[Sequence[Label]], categories: Sequence[Label] | None = None
) -> list[list[int]]:
    """The items x categories count table Fleiss' kappa takes, from each item's labels."""
    cats = list(categories) if categories is not None else _sorted_labels(ratings)
    index = {c: j for j, c in enumerate(cats)}
    table = []
    for i, labels in enumerate(ratings):
        row = [0] * len(cats)
        for label in labels:
            if label not in index:
                raise AgreementError(f"item {i}: label {label!r} is not one of {cats}")
            row[index[label]] += 1
        table.append(row)
    return table


def _sorted_labels(ratings: Sequence[Sequence[Label]]) -> list[Label]:
    seen = {label for labels in ratings for label in labels}
    return sorted(seen, key=repr)


def wilson_interval(
    successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float]:
    """The Wilson score interval of a proportion."""
    if n <= 0:
        raise AgreementError("no items to compare")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_interval(
    n: int,
    statistic: Callable[[list[int]], float | None],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap of a statistic of item indexes; resamples where it is undefined
    are dropped (None when most are)."""
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        v = statistic(idx)
        if v is not None:
            values.append(v)
    if len(values) < resamples / 2:
        return None, None
    values.sort()
    alpha = (1 - confidence) / 2
    lo = values[math.floor(alpha * (len(values) - 1))]
    hi = values[math.ceil((1 - alpha) * (len(values) - 1))]
    return lo, hi


def percent_estimate(
    a: Sequence[Label], b: Sequence[Label], confidence: float = DEFAULT_CONFIDENCE
) -> Estimate:
    """Percent agreement with its Wilson interval."""
    p = percent_agreement(a, b)
    agree = sum(x == y for x, y in zip(a, b, strict=True))
    low, high = wilson_interval(agree, len(a), confidence)
    return Estimate(p, low, high, len(a), f"Wilson score {confidence:.0%}")


def cohen_estimate(
    a: Sequence[Label],
    b: Sequence[Label],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Estimate:
    """Cohen's kappa with a percentile-bootstrap interval over items."""
    value = cohen_kappa(a, b)

    def stat(idx: list[int]) -> float | None:
        return cohen_kappa([a[i] for i in idx], [b[i] for i in idx])

    low, high = bootstrap_interval(
        len(a), stat, confidence=confidence, resamples=resamples, seed=seed
    )
    return Estimate(
        value, low, high, len(a), f"percentile bootstrap {confidence:.0%}, {resamples} resamples"
    )


def fleiss_estimate(
    ratings: Sequence[Sequence[Label]],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Estimate:
    """Fleiss' kappa of each item's labels, with a percentile-bootstrap interval over items."""
    cats = _sorted_labels(ratings)
    table = category_counts(ratings, cats)
    value = fleiss_kappa(table)

    def stat(idx: list[int]) -> float | None:
        return fleiss_kappa([table[i] for i in idx])

    low, high = bootstrap_interval(
        len(table), stat, confidence=confidence, resamples=resamples, seed=seed
    )
    return Estimate(
        value,
        low,
        high,
        len(table),
        f"percentile bootstrap {confidence:.0%}, {resamples} resamples",
    )
