"""Agreement statistics against examples computed by hand or published with their answers."""

from __future__ import annotations

import pytest

from maestro.scoring.agreement import (
    AgreementError,
    category_counts,
    cohen_estimate,
    cohen_kappa,
    fleiss_estimate,
    fleiss_kappa,
    percent_agreement,
    percent_estimate,
    wilson_interval,
)


def two_raters(yy: int, yn: int, ny: int, nn: int) -> tuple[list[str], list[str]]:
    """Labels of raters A and B from a 2x2 table (A's label first)."""
    a = ["y"] * (yy + yn) + ["n"] * (ny + nn)
    b = ["y"] * yy + ["n"] * yn + ["y"] * ny + ["n"] * nn
    return a, b


def test_cohen_kappa_by_hand() -> None:
    # 50 items: both yes 20, A yes/B no 5, A no/B yes 10, both no 15.
    # p_o = (20 + 15) / 50 = 0.70
    # A says yes 25/50 = 0.5, B says yes 30/50 = 0.6
    # p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.50
    # kappa = (0.70 - 0.50) / (1 - 0.50) = 0.40
    a, b = two_raters(20, 5, 10, 15)
    assert percent_agreement(a, b) == pytest.approx(0.70)
    assert cohen_kappa(a, b) == pytest.approx(0.40)


def test_cohen_kappa_second_hand_example() -> None:
    # 10 items: both yes 6, A yes/B no 1, A no/B yes 1, both no 2.
    # p_o = 8/10 = 0.8; A yes 0.7, B yes 0.7; p_e = 0.49 + 0.09 = 0.58
    # kappa = (0.8 - 0.58) / 0.42 = 0.22 / 0.42 = 0.5238...
    a, b = two_raters(6, 1, 1, 2)
    assert cohen_kappa(a, b) == pytest.approx(0.22 / 0.42)


def test_cohen_kappa_extremes() -> None:
    a, b = two_raters(5, 0, 0, 5)
    assert cohen_kappa(a, b) == pytest.approx(1.0)
    a, b = two_raters(0, 5, 5, 0)
    assert cohen_kappa(a, b) == pytest.approx(-1.0)
    # Everyone says yes: chance agreement is 1, kappa is undefined (not 1, not 0).
    assert cohen_kappa(["y"] * 4, ["y"] * 4) is None


def test_fleiss_kappa_textbook_example() -> None:
    # Fleiss (1971) style example as given on Wikipedia ("Fleiss' kappa", worked example):
    # 10 subjects, 14 raters, 5 categories; P-bar = 0.378, P-bar_e = 0.213, kappa = 0.210.
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert fleiss_kappa(table) == pytest.approx(0.210, abs=5e-4)


def test_fleiss_equals_cohen_style_hand_count_for_two_raters() -> None:
    # Two raters, 4 items: (y,y) (y,n) (n,n) (n,n).
    # P_i = 1, 0, 1, 1 -> P-bar = 0.75; category shares: y 3/8, n 5/8
    # P_e = 9/64 + 25/64 = 34/64; kappa = (0.75 - 34/64) / (30/64) = (48-34)/30 = 0.4667
    ratings = [["y", "y"], ["y", "n"], ["n", "n"], ["n", "n"]]
    assert category_counts(ratings, ["y", "n"]) == [[2, 0], [1, 1], [0, 2], [0, 2]]
    assert fleiss_kappa(category_counts(ratings)) == pytest.approx(14 / 30)


def test_wilson_interval_by_hand() -> None:
    # 7 of 10, z = 1.96: centre = (0.7 + 0.19207) / 1.38415 = 0.64449,
    # half = 1.96 * sqrt(0.021 + 0.0096037) / 1.38415 = 0.24771 -> [0.3968, 0.8922]
    low, high = wilson_interval(7, 10)
    assert low == pytest.approx(0.3968, abs=1e-4)
    assert high == pytest.approx(0.8922, abs=1e-4)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(10, 10)[0] < 1.0


def test_estimates_carry_intervals_that_hold_the_value() -> None:
    a, b = two_raters(20, 5, 10, 15)
    pct = percent_estimate(a, b)
    kappa = cohen_estimate(a, b, resamples=500)
    assert pct.low is not None and pct.high is not None
    assert pct.low < 0.70 < pct.high and "Wilson" in pct.method
    assert kappa.low is not None and kappa.high is not None
    assert kappa.low < 0.40 < kappa.high and "bootstrap" in kappa.method
    assert cohen_estimate(a, b, resamples=500) == kappa  # seeded: reproducible
    bigger = cohen_estimate(a * 4, b * 4, resamples=500)
    assert bigger.high - bigger.low < kappa.high - kappa.low  # type: ignore[operator]


def test_fleiss_estimate() -> None:
    ratings = [["y", "y", "y"], ["n", "n", "y"], ["n", "n", "n"], ["y", "y", "n"]] * 3
    est = fleiss_estimate(ratings, resamples=300)
    assert est.value is not None and est.low is not None and est.high is not None
    assert est.low <= est.value <= est.high and est.n == 12


def test_bad_input_is_named() -> None:
    with pytest.raises(AgreementError, match="3 and 2 items"):
        cohen_kappa(["y", "n", "y"], ["y", "n"])
    with pytest.raises(AgreementError, match="no items"):
        percent_agreement([], [])
    with pytest.raises(AgreementError, match="item 1 has 1 rating"):
        fleiss_kappa([[1, 1], [1, 0]])
