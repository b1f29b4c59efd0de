"""Celery's app: Redis (our Valkey) as the broker, no result backend, defaults otherwise."""

from __future__ import annotations

from celery import Celery

from bench.peers import common

app = Celery("bench", broker=common.url())
app.conf.broker_connection_retry_on_startup = True


@app.task
def noop(n: int = 0) -> None:
    """Does nothing."""


@app.task
def mark(name: str) -> None:
    common.mark(name)


@app.task
def timed(label: str, ms: float) -> None:
    common.timed(label, ms)
