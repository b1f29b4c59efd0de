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


def test_a_lane_of_weight_two_gets_twice_the_worker_time(r: redis.Redis, fair: Queue) -> None:
    fair.set_weight(A, 2)
    fill(fair, A, 300)
    fill(fair, B, 300)
    serve(r, fair, {A: 100, B: 400}, 60)
    used = serve(r, fair, {A: 100, B: 400}, 240)
    assert 1.6 <= used[A] / used[B] <= 2.5, used
    check_invariants(fair)


def test_a_new_lane_is_served_one_job_a_landing_until_its_jobs_are_measured(
    fair: Queue,
) -> None:
    fill(fair, A, 3)
    fill(fair, B, 3)
    got = [c.lane for _ in range(4) for c in fair.claim(LONG_LEASE, max_jobs=1) or []]
    assert got == [A, B, A, B]


def test_a_lanes_credit_stays_within_its_bounds(r: redis.Redis, fair: Queue) -> None:
    """Jobs of 0 ms (the estimate refunded: credit piles up) and spikes 50x the
    lane's average (debt piles up): the credit stays within one quantum x weight
    above and TS_DEBT quanta x weight below."""
    fair.set_weight(C, 3)
    for lane_id in (A, B, C):
        fill(fair, lane_id, 200)
    lengths = [0, 0, 0, 100, 5000, 100, 0, 20, 10_000, 0]
    for i in range(240):
        (c,) = fair.claim(LONG_LEASE, max_jobs=1) or []
        run_for(r, fair, c.job_id, lengths[i % len(lengths)])
        fair.complete(c.job_id, c.token)
        q, w = quantum(r, fair), 3 if c.lane == C else 1
        assert -DEBT * q * w - 1 <= credit(r, fair, c.lane) <= q * w + 1, (i, c.lane)
    check_invariants(fair)


def test_one_claim_skips_at_most_sixteen_lanes_in_debt(r: redis.Redis, fair: Queue) -> None:
    names = [lane(n) for n in range(1, 31)]
    for lane_id in names:
        fill(fair, lane_id, 1)
    r.hset(fair.keys.timeshare, mapping=dict.fromkeys(names, -DEBT * MIN_QUANTUM))
    (c,) = fair.claim(LONG_LEASE, max_jobs=1) or []
    assert c.lane == names[SKIPS]  # the 17th lane it landed on is served in debt
    assert all(credit(r, fair, n) < 0 for n in names[:SKIPS])  # each got a quantum
    check_invariants(fair)


def test_a_retry_a_failure_and_a_release_charge_the_time_the_attempt_took(
    r: redis.Redis, fair: Queue
) -> None:
    fill(fair, A, 4)
    for end in ("retry", "fail", "release"):
        (c,) = fair.claim(LONG_LEASE, max_jobs=1) or []
        charged = credit(r, fair, A)
        charge = int(r.hget(fair.keys.job(c.job_id), "charge") or 0)
        run_for(r, fair, c.job_id, 300)
        if end == "retry":
            fair.retry(c.job_id, c.token, "again")
        elif end == "fail":
            fair.fail(c.job_id, c.token, "broken")
        else:
            fair.release(c.job_id, c.token)
        assert not r.hexists(fair.keys.job(c.job_id), "charge")
        paid = credit(r, fair, A) - charged  # charge - used, where used >= 300 ms
        assert paid <= charge - 300, end
        check_invariants(fair)


def test_an_expired_lease_charges_the_time_it_was_held(r: redis.Redis, fair: Queue) -> None:
    fill(fair, A, 2)
    (c,) = fair.claim(1, max_jobs=1) or []
    run_for(r, fair, c.job_id, 200)
    before = credit(r, fair, A)
    r.zadd(fair.keys.active, {c.job_id: 0})  # the lease is over
    assert fair.reap() == [c.job_id]
    assert credit(r, fair, A) <= before + MIN_QUANTUM - 200
    assert not r.hexists(fair.keys.job(c.job_id), "charge")
    check_invariants(fair)


@pytest.mark.parametrize("bad", ["Time", "", "jobs", None, 1, ("time",)])
def test_a_bad_fairness_is_refused_and_changes_nothing(r: redis.Redis, bad: Any) -> None:
    fill(Queue("q", connection=r), A, 1)
    before = dump(r)
    with pytest.raises(ValueError, match="fairness must be 'count' or 'time'"):
        Queue("q", connection=r, fairness=bad)
    assert dump(r) == before


def test_eight_threads_share_worker_time_and_run_every_job_once(
    r: redis.Redis, fair: Queue
) -> None:
    jobs = {A: 240, B: 30}
    length = {A: 100, B: 800}
    for lane_id, n in jobs.items():
        fill(fair, lane_id, n)
    done: list[str] = []
    used: Counter[str] = Counter()
    lock = threading.Lock()

    def work() -> None:
        client = new_client(r)
        q = Queue("q", connection=client, fairness="time")
        while (got := q.claim(LONG_LEASE, max_jobs=1)) is not None:
            for c in got:
                run_for(client, q, c.job_id, length[c.lane])
                q.complete(c.job_id, c.token)
                with lock:
                    done.append(c.job_id)
                    if len(done) <= 150:  # while both lanes are backlogged
                        used[c.lane] += length[c.lane]
        client.close()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(done) == len(set(done)) == sum(jobs.values())
    assert 0.6 <= used[A] / used[B] <= 1.6, used
    check_invariants(fair)


# -- settings -------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["fast", 1, {"default": "Time"}, {"bad name!": "time"}])
def test_a_bad_fairness_setting_is_reported(settings: Any, bad: Any) -> None:
    from django_emq.conf import problems

    settings.EMQ = {**settings.EMQ, "FAIRNESS": bad}
    assert any("FAIRNESS" in p for p in problems())


def test_the_settings_give_each_queue_its_fairness(emq: redis.Redis, settings: Any) -> None:
    from django_emq import get_queue

    settings.EMQ = {**settings.EMQ, "FAIRNESS": {"default": "time"}}
    assert get_queue("default").shards[0].fairness == "time"
    assert get_queue("other").shards[0].fairness == "count"
    settings.EMQ = {**settings.EMQ, "FAIRNESS": "time"}
    assert get_queue("other").shards[0].fairness == "time"
