"""What every peer's tasks share: a client of the benchmark's server, the marks
the throughput runs are timed by, the record a timed (2 ms) job leaves, and
the one-``INCR`` job body that django-emq's worker and Huey's both run
(:func:`incr`: ``bench.tasks.incr`` calls the same function)."""

from __future__ import annotations

import os
import time

import redis

#: The server ``bench/run.py`` started; set in the environment of every worker.
URL_ENV = "BENCH_REDIS_URL"
#: ``bench:mark:start`` / ``bench:mark:end``: epoch seconds when the mark job ran.
MARK_PREFIX = "bench:mark:"
#: Same list and format as ``bench.tasks.RUNS_KEY``: ``"<label> <start> <end>"``.
RUNS_KEY = "bench:runs"
#: The counter every :func:`incr` job increments.
INCR_KEY = "bench:incr"
#: A hash: field ``"1"`` and field ``"<total>"`` hold when the first and the last
#: ``INCR`` answered (epoch seconds, ``repr`` of ``time.time()``).
INCR_AT_KEY = "bench:incr:at"

_client: redis.Redis | None = None


def url() -> str:
    return os.environ[URL_ENV]


def client() -> redis.Redis:
    """One client per process, made on first use (after any fork)."""
    global _client
    if _client is None:
        # A pool that waits for a free connection: with hundreds of threads,
        # redis-py's default pool (100) would refuse.
        pool = redis.BlockingConnectionPool.from_url(url(), max_connections=64)
        _client = redis.Redis(connection_pool=pool)
    return _client


def mark(name: str) -> None:
    """Record now (epoch seconds) under ``bench:mark:<name>``."""
    client().set(MARK_PREFIX + name, repr(time.time()))


def timed(label: str, ms: float) -> None:
    """Sleep ``ms`` milliseconds, then record the label with the start and end times."""
    start = time.time()
    time.sleep(ms / 1000)
    client().rpush(RUNS_KEY, f"{label} {start:.6f} {time.time():.6f}")


def incr(client: redis.Redis, total: int) -> None:
    """The job body of the INCR benchmark: one ``INCR`` of :data:`INCR_KEY`. The job
    whose ``INCR`` answered 1 and the one that answered ``total`` also record when
    (one ``HSET`` each), so a run is timed from the first ``INCR`` to the last by
    the jobs themselves, whatever the worker around them does."""
    n = client.incr(INCR_KEY)
    if n == 1 or n == total:
        client.hset(INCR_AT_KEY, str(n), repr(time.time()))


def incr_rate(client: redis.Redis, total: int) -> tuple[int, float | None, float | None]:
    """``(INCRs done, seconds from the first INCR to the last, INCRs per second)``:
    the ``total`` - 1 INCRs after the first over that span; the span and the
    rate are ``None`` until the last one has run."""
    done = int(client.get(INCR_KEY) or 0)
    first, last = client.hmget(INCR_AT_KEY, ["1", str(total)])
    if first is None or last is None:
        return done, None, None
    span = float(last) - float(first)
    return done, span, (total - 1) / span
