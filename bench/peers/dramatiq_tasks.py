"""Dramatiq's actors on its Redis broker (our Valkey), default middleware."""

from __future__ import annotations

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.peers import common

broker = RedisBroker(url=common.url())
dramatiq.set_broker(broker)


@dramatiq.actor
def noop(n: int = 0) -> None:
    """Does nothing."""


@dramatiq.actor
def mark(name: str) -> None:
    common.mark(name)


@dramatiq.actor
def timed(label: str, ms: float) -> None:
    common.timed(label, ms)
