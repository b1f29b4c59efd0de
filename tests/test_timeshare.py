"""Time-fair share (``fairness="time"``): a lane's share of the workers is
measured in worker time, not jobs (deficit round robin on the server clock,
``lua/includes/timeshare.lua``). Run times are simulated by moving a claimed
row's ``claimed`` time back by the job's length before it completes: the
scripts measure completion minus claim, both on the server clock."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
import redis

from django_emq.engine.queue import Queue

from .helpers import LONG_LEASE, dump, fill, lane, new_client
from .invariants import check_invariants

A, B, C = lane(1), lane(2), lane(3)
MIN_QUANTUM, DEBT, SKIPS = 10, 8, 16  # as lua/includes/timeshare.lua sets them


def run_for(r: redis.Redis, queue: Queue, job_id: str, ms: int) -> None:
    """The claimed job has run ``ms``: its claim time moves back by that much."""
    key = queue.keys.job(job_id)
    r.hset(key, "claimed", int(r.hget(key, "claimed") or 0) - ms)


def serve(r: redis.Redis, queue: Queue, length: dict[str, int], claims: int) -> Counter[str]:
    """``claims`` single-job claims, each job "running" its lane's ``length`` (ms)
    and completing; the worker time each lane got."""
    used: Counter[str] = Counter()
    for _ in range(claims):
        got = queue.claim(LONG_LEASE, max_jobs=1)
        assert got, "the ring ran dry"
        (c,) = got
        run_for(r, queue, c.job_id, length[c.lane])
        queue.complete(c.job_id, c.token)
        used[c.lane] += length[c.lane]
    return used


def credit(r: redis.Redis, queue: Queue, lane_id: str) -> int:
    return int(r.hget(queue.keys.timeshare, lane_id) or 0)


def quantum(r: redis.Redis, queue: Queue) -> float:
    return max(MIN_QUANTUM, float(r.hget(queue.keys.timeshare, "quantum") or 0))


@pytest.fixture
def fair(r: redis.Redis) -> Queue:
    return Queue("q", connection=r, fairness="time")


def test_time_fair_lanes_get_the_same_worker_time_whatever_their_jobs_take(
    r: redis.Redis, fair: Queue
) -> None:
    # 100 ms against 1 s: the few ms each claim and complete take in the test
    # (which the server counts too) are small beside either
    fill(fair, A, 400)
    fill(fair, B, 60)
    serve(r, fair, {A: 100, B: 1000}, 60)  # the averages settle
    used = serve(r, fair, {A: 100, B: 1000}, 220)
    assert 0.8 <= used[A] / used[B] <= 1.25, used
    check_invariants(fair)


def test_count_fair_lanes_get_worker_time_in_proportion_to_their_jobs(
    r: redis.Redis, queue: Queue
) -> None:
    fill(queue, A, 100)
    fill(queue, B, 100)
    used = serve(r, queue, {A: 10, B: 100}, 100)
    assert used[B] == 10 * used[A]
    assert not r.exists(queue.keys.timeshare)  # a count-fair queue keeps no credit
