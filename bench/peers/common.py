"""What every peer's tasks share: a client of the benchmark's server, the marks
the throughput runs are timed by, and the record a timed (2 ms) job leaves."""

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
