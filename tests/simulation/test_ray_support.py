"""Joining a configured Ray cluster: a connection the cluster turns away is tried again, a
bounded number of times; an unreachable cluster is reported at once, by its address."""

from __future__ import annotations

import logging

import pytest

from maestro.simulation import ray_support
from maestro.simulation.ray_support import CONNECT_ATTEMPTS, RayConnectError, _connect

ADDRESS = "ray://head.example:10001"


class Cluster:
    """A stand-in for ``ray.init`` that answers each connection with the next outcome."""

    def __init__(self, *outcomes: Exception | None) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[dict[str, object]] = []

    def __call__(self, **kwargs: object) -> None:
        self.calls.append(kwargs)
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_support, "CONNECT_PAUSE_S", 0.0)


def test_a_connection_turned_away_is_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    turned_away = ConnectionAbortedError("Initialization failure from server:\nStarting failed")
    cluster = Cluster(turned_away, None)
    with caplog.at_level(logging.WARNING):
        _connect(ADDRESS, cluster)
    assert cluster.calls == [{"address": ADDRESS, "log_to_driver": False}] * 2
    assert "attempt 1 of 3" in caplog.text and "Starting failed" in caplog.text


def test_turned_away_every_time_ends_with_the_address_named() -> None:
    cluster = Cluster(*[ConnectionAbortedError("no server")] * CONNECT_ATTEMPTS)
    with pytest.raises(RayConnectError, match=rf"{ADDRESS}.*attempt 3 of 3.*no server"):
        _connect(ADDRESS, cluster)
    assert len(cluster.calls) == CONNECT_ATTEMPTS


def test_an_unreachable_cluster_is_not_waited_for_again() -> None:
    cluster = Cluster(ConnectionError("ray client connection timeout"), None)
    with pytest.raises(RayConnectError, match=rf"{ADDRESS}.*attempt 1 of 3.*timeout"):
        _connect(ADDRESS, cluster)
    assert len(cluster.calls) == 1
