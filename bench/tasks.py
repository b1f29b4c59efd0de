"""The benchmark's django.tasks: a no-op, and a 2 ms job that records when it ran."""

from __future__ import annotations

import time

from django.tasks import task

from django_emq.connection import get_connection

#: The list the timed jobs append ``"<label> <start> <end>"`` to (epoch seconds).
RUNS_KEY = "bench:runs"


@task
def noop(n: int = 0) -> None:
    """Does nothing: the throughput benchmarks time the queue, not the job."""


@task
def timed(label: str, ms: float) -> None:
    """Sleep ``ms`` milliseconds, then record the label with the start and end times."""
    start = time.time()
    time.sleep(ms / 1000)
    get_connection().rpush(RUNS_KEY, f"{label} {start:.6f} {time.time():.6f}")
