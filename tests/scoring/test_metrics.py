from __future__ import annotations

import pytest

from maestro.scoring import mean_pass_at_k, mean_pass_hat_k, pass_at_k, pass_hat_k


def test_pass_hat_k_by_hand() -> None:
    # 4 trials, 3 successes: C(3,2)/C(4,2) = 3/6.
    assert pass_hat_k(4, 3, 2) == pytest.approx(0.5)
    assert pass_hat_k(4, 3, 1) == pytest.approx(0.75)
    assert pass_hat_k(4, 4, 4) == 1.0
    assert pass_hat_k(4, 3, 4) == 0.0


def test_pass_at_k_by_hand() -> None:
    # 4 trials, 1 success: 1 - C(3,2)/C(4,2) = 1 - 3/6.
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(4, 0, 3) == 0.0
    assert pass_at_k(4, 1, 4) == 1.0


def test_means_over_tasks() -> None:
    results = {"a": [True, True, False, True], "b": [False, False, False, False]}
    assert mean_pass_hat_k(results, 1) == pytest.approx((0.75 + 0.0) / 2)
    assert mean_pass_hat_k(results, 2) == pytest.approx((0.5 + 0.0) / 2)
    assert mean_pass_at_k(results, 2) == pytest.approx((1.0 + 0.0) / 2)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_bad_counts_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)
    with pytest.raises(ValueError, match="no tasks"):
        mean_pass_hat_k({}, 1)
