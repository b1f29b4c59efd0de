"""Time-fair share (``fairness="time"``): a lane's share of the workers is
measured in worker time, not jobs (deficit round robin on the server clock,
``lua/includes/timeshare.lua``). Run times are simulated by moving a claimed
row's ``claimed`` time back by the job's length before it completes: the
scripts measure completion minus claim, both on the server clock."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

from django_emq.engine.queue import Queue
from tests import chaos_tasks

from .faults import RestartableServer, Workers
from .helpers import LONG_LEASE, dump, fill, lane, new_client, wait_for
from .invariants import check_invariants, text

A, B, C = lane(1), lane(2), lane(3)
MIN_QUANTUM, DEBT, MOST, SKIPS = 10, 8, 2, 16  # as lua/includes/timeshare.lua has them


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
    lane's average (debt piles up): the credit stays within MOST quanta x weight
    above and DEBT quanta x weight below."""
    fair.set_weight(C, 3)
    for lane_id in (A, B, C):
        fill(fair, lane_id, 200)
    lengths = [0, 0, 0, 100, 5000, 100, 0, 20, 10_000, 0]
    for i in range(240):
        (c,) = fair.claim(LONG_LEASE, max_jobs=1) or []
        run_for(r, fair, c.job_id, lengths[i % len(lengths)])
        fair.complete(c.job_id, c.token)
        q, w = quantum(r, fair), 3 if c.lane == C else 1
        assert -DEBT * q * w - 1 <= credit(r, fair, c.lane) <= MOST * q * w + 1, (i, c.lane)
    check_invariants(fair)


def test_a_lane_left_idle_forgets_its_credit_debt_and_average(r: redis.Redis, fair: Queue) -> None:
    fill(fair, A, 1)
    fill(fair, B, 2)
    for _ in range(2):
        (c,) = fair.claim(LONG_LEASE, max_jobs=1) or []
        run_for(r, fair, c.job_id, 500)
        fair.complete(c.job_id, c.token)
    fields = {text(f) for f in r.hkeys(fair.keys.timeshare)}
    assert fields == {B, f"{B}:avg", "quantum"}  # A has nothing pending or in flight
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


# -- a real worker ------------------------------------------------------------------


def worker_time(client: redis.Redis, queue: Queue) -> tuple[Counter[str], Counter[str]]:
    """Per lane: the jobs the worker finished, and the worker time they held (ms
    from claim to completion on the server clock: what time-fair share balances)."""
    done: Counter[str] = Counter()
    held: Counter[str] = Counter()
    for key in client.scan_iter(match=queue.keys.prefix + "job:*", count=1000):
        state, group, claimed, finished = client.hmget(key, "state", "group", "claimed", "finished")
        if state == b"done" and group and claimed and finished:
            done[text(group)] += 1
            held[text(group)] += int(finished) - int(claimed)
    return done, held


@pytest.mark.parametrize("fairness", ["time", "count"])
def test_a_real_worker_splits_its_time_by_the_queues_fairness(
    server: RestartableServer, tmp_path: Path, fairness: str
) -> None:
    """One worker, one job at a time; lane A's jobs take 10 ms, lane B's 100 ms.
    Time-fair: both lanes hold the worker about as long (A runs many more jobs);
    count-fair: the same number of jobs, so B holds it ~10x as long (a little
    less: each job's few ms of overhead count for both lanes)."""
    client = server.client()
    queue = Queue("default", connection=client)
    length = {A: 0.01, B: 0.1}
    for lane_id, n in ((A, 600), (B, 60)):
        task = chaos_tasks.nap.module_path
        queue.enqueue_many(
            {"lane": lane_id, "task_path": task, "args": [f"{lane_id}{i}", length[lane_id]]}
            for i in range(n)
        )
    env = {"EMQ_TEST_SETTINGS": json.dumps({"FAIRNESS": fairness})}
    workers = Workers(server.url, tmp_path, env=env)
    try:
        workers.start("--concurrency", "1", "--lease", "10")
        wait_for(lambda: worker_time(client, queue)[0][B] >= 30, what="30 of B's jobs done")
    finally:
        workers.close()
    done, held = worker_time(client, queue)
    assert done[A] < 600, "lane A ran dry: the split was not measured under backlog"
    if fairness == "time":
        assert 0.8 <= held[A] / held[B] <= 1.2, (done, held)
        assert done[A] > 2 * done[B]
    else:  # the same jobs each: B's 100 ms jobs take ~10x the time of A's
        assert abs(done[A] - done[B]) <= 2, done
        assert 0.07 <= done[A] * length[A] / (done[B] * length[B]) <= 0.15, done
    check_invariants(queue, hollow_ok=True)
    client.close()


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


# -- the admin ------------------------------------------------------------------


@pytest.mark.django_db
def test_the_admin_shows_a_lanes_credit_when_the_queue_is_time_fair(
    emq: redis.Redis, settings: Any
) -> None:
    from django.test import Client

    from django_emq import get_queue

    from .factories import make_user

    client = Client()
    client.force_login(make_user(staff=True, perms=["view_lanes"]))
    fill(get_queue().shards[0], A, 3)
    assert "credit" not in client.get("/admin/django_emq/lane/").content.decode()
    settings.EMQ = {**settings.EMQ, "FAIRNESS": "time"}
    queue = get_queue().shards[0]
    queue.claim(LONG_LEASE, max_jobs=1)  # a quantum in, one job's estimate out: credit 0
    emq.hset(queue.keys.timeshare, A, -40)
    assert "credit -40 ms" in client.get("/admin/django_emq/lane/").content.decode()
    assert "-40 ms" in client.get(f"/admin/django_emq/lane/default/{A}/").content.decode()


def test_a_worker_claims_no_jobs_ahead_for_a_time_fair_queue(settings: Any) -> None:
    """A job claimed ahead waits in the worker: its lane would be charged the wait."""
    from django_emq.worker.options import WorkerOptions, plan

    assert plan(WorkerOptions(), "default").prefetch > 1
    settings.EMQ = {**settings.EMQ, "FAIRNESS": {"reports": "time"}}
    assert plan(WorkerOptions(), "default").prefetch == 1
    assert plan(WorkerOptions(prefetch=8), "default").prefetch == 8  # unless told
