"""The benchmark's django.tasks: a no-op, one ``INCR`` (the body Huey's worker
runs too, timed by the jobs themselves), a job that sleeps (a thread) and one
that awaits (a coroutine), each of those two recording when it ran."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from django.tasks import task

from bench.peers import common

#: The list the timed jobs append ``"<label> <start> <end>"`` to (epoch seconds).
RUNS_KEY = "bench:runs"


@task
def noop(n: int = 0) -> None:
    """Does nothing: the throughput benchmarks time the queue, not the job."""


@task
def incr(total: int) -> None:
    """One ``INCR`` on the benchmark's server (:func:`bench.peers.common.incr`, the
    same function Huey's side runs, on the same kind of client)."""
    common.incr(_client(), total)


@task
def timed(label: str, ms: float) -> None:
    """Sleep ``ms`` milliseconds, then record the label with the start and end times."""
    start = time.time()
    time.sleep(ms / 1000)
    _client().rpush(RUNS_KEY, f"{label} {start:.6f} {time.time():.6f}")


def _client() -> Any:
    """A client of the benchmark's server whose pool waits for a free connection:
    with hundreds of threads, redis-py's default pool (100) would refuse."""
    global _sclient
    if _sclient is None:
        import redis

        pool = redis.BlockingConnectionPool.from_url(os.environ["EMQ_URL"], max_connections=64)
        _sclient = redis.Redis(connection_pool=pool)
    return _sclient


_sclient: Any = None


@task
async def io_async(ms: float) -> None:
    """Await ``ms`` milliseconds: an I/O-bound job (an API call, a webhook) that
    waits on the event loop. Timed from the job rows' own timestamps."""
    await asyncio.sleep(ms / 1000)
