"""Tenant lanes: workers rotate across tenants first, then across the lanes of
the chosen tenant (two-level fairness), with weights and ceilings at both
levels; untenanted lanes ride the top ring as before."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime

import pytest
import redis

from django_emq.engine.doctor import Doctor
from django_emq.engine.queue import Queue

from .helpers import (
    LONG_LEASE,
    TASK,
    claim_one,
    dump,
    lane,
    new_client,
    ring,
    server_ms,
    sleep_past,
)
from .invariants import check_invariants

T1, T2, T3 = lane(1, "ORG"), lane(2, "ORG"), lane(3, "ORG")


def enqueue(queue: Queue, lane_id: str, n: int, tenant: str | None = None) -> list[str]:
    jobs = queue.enqueue_many(
        {"lane": lane_id, "task_path": TASK, "args": [i], "tenant": tenant} for i in range(n)
    )
    return [e.job_id for e in jobs]


def claimed_lanes(queue: Queue, n: int, max_jobs: int = 1) -> list[str]:
    """The lanes of the next ``n`` claims of up to ``max_jobs`` jobs each."""
    out: list[str] = []
    for _ in range(n):
        claims = queue.claim(LONG_LEASE, max_jobs=max_jobs, turns=max_jobs)
        out += [c.lane for c in claims or []]
    return out


def test_a_tenant_of_one_user_gets_half_the_claims_against_a_tenant_of_fifty(
    queue: Queue,
) -> None:
    flooders = [lane(100 + i) for i in range(50)]
    for user in flooders:
        enqueue(queue, user, 20, tenant=T1)
    alone = lane(1)
    enqueue(queue, alone, 200, tenant=T2)
    served = claimed_lanes(queue, 200)
    assert Counter(s == alone for s in served) == {True: 100, False: 100}
    check_invariants(queue)


def test_each_user_inside_a_tenant_gets_a_fair_turn(queue: Queue) -> None:
    users = [lane(10 + i) for i in range(5)]
    for user in users:
        enqueue(queue, user, 10, tenant=T1)
    served = claimed_lanes(queue, 25)
    assert Counter(served) == {user: 5 for user in users}
    assert served[:5] == users  # one turn each, in arrival order
    check_invariants(queue)


def test_an_untenanted_lane_counts_as_one_tenant(queue: Queue) -> None:
    for i in range(10):
        enqueue(queue, lane(10 + i), 10, tenant=T1)
    enqueue(queue, lane(1), 50)
    served = claimed_lanes(queue, 40)
    assert served.count(lane(1)) == 20
    check_invariants(queue)


def test_a_batch_claim_serves_tenants_in_turn(queue: Queue) -> None:
    for i in range(4):
        enqueue(queue, lane(10 + i), 10, tenant=T1)
    enqueue(queue, lane(1), 10, tenant=T2)
    served = claimed_lanes(queue, 1, max_jobs=8)
    assert served.count(lane(1)) == 4
    check_invariants(queue)


def test_a_tenant_weight_serves_that_many_of_its_jobs_per_turn(queue: Queue) -> None:
    for i in range(3):
        enqueue(queue, lane(10 + i), 30, tenant=T1)
    enqueue(queue, lane(1), 30, tenant=T2)
    queue.set_tenant_weight(T1, 3)
    served = claimed_lanes(queue, 40)
    assert served.count(lane(1)) == 10
    assert Counter(s for s in served if s != lane(1)) == {lane(10 + i): 10 for i in range(3)}
    check_invariants(queue)


def test_lane_weights_share_a_tenant_turn(queue: Queue) -> None:
    heavy, light = lane(10), lane(11)
    enqueue(queue, heavy, 40, tenant=T1)
    enqueue(queue, light, 40, tenant=T1)
    enqueue(queue, lane(1), 40, tenant=T2)
    queue.set_weight(heavy, 3)
    served = claimed_lanes(queue, 40)
    assert served.count(lane(1)) == 20  # the tenants share alike
    assert (served.count(heavy), served.count(light)) == (15, 5)  # 3:1 inside T1
    check_invariants(queue)


def test_a_weighted_claim_of_many_jobs_serves_the_tenant_turn_whole(queue: Queue) -> None:
    for i in range(4):
        enqueue(queue, lane(10 + i), 10, tenant=T1)
    enqueue(queue, lane(1), 10, tenant=T2)
    queue.set_tenant_weight(T1, 4)
    served = claimed_lanes(queue, 1, max_jobs=5)
    assert sorted(served) == sorted([lane(10), lane(11), lane(12), lane(13), lane(1)])
    check_invariants(queue)


def test_a_tenant_at_its_ceiling_leaves_the_ring_and_comes_back(queue: Queue) -> None:
    for i in range(3):
        enqueue(queue, lane(10 + i), 5, tenant=T1)
    enqueue(queue, lane(1), 30, tenant=T2)
    queue.set_tenant_limit(T1, 2)
    claims = queue.claim(LONG_LEASE, max_jobs=10, turns=10) or []
    held = [c for c in claims if c.lane != lane(1)]
    assert len(held) == 2
    assert "@" + T1 not in ring(queue.connection, queue)
    check_invariants(queue)
    more = queue.claim(LONG_LEASE, max_jobs=10, turns=10) or []
    assert {c.lane for c in more} == {lane(1)}
    queue.complete(held[0].job_id, held[0].token)
    assert "@" + T1 in ring(queue.connection, queue)
    check_invariants(queue)
    again = queue.claim(LONG_LEASE, max_jobs=10, turns=10) or []
    assert len([c for c in again if c.lane != lane(1)]) == 1


def test_raising_a_tenant_ceiling_puts_it_back(queue: Queue) -> None:
    enqueue(queue, lane(10), 5, tenant=T1)
    queue.set_tenant_limit(T1, 1)
    assert len(queue.claim(LONG_LEASE, max_jobs=5, turns=5) or []) == 1
    assert queue.claim(LONG_LEASE) is None
    queue.set_tenant_limit(T1, None)
    assert len(queue.claim(LONG_LEASE, max_jobs=5, turns=5) or []) == 4
    check_invariants(queue)


def test_a_lane_ceiling_holds_inside_a_tenant(queue: Queue) -> None:
    enqueue(queue, lane(10), 5, tenant=T1)
    enqueue(queue, lane(11), 5, tenant=T1)
    queue.set_limit(lane(10), 1)
    served = claimed_lanes(queue, 6)
    assert served.count(lane(10)) == 1
    assert served.count(lane(11)) == 5
    check_invariants(queue)


def test_pausing_a_tenanted_lane_takes_it_off_its_tenant_ring(queue: Queue) -> None:
    enqueue(queue, lane(10), 3, tenant=T1)
    enqueue(queue, lane(11), 3, tenant=T1)
    queue.pause(lane(10))
    check_invariants(queue)
    assert set(claimed_lanes(queue, 3)) == {lane(11)}
    assert "@" + T1 not in ring(queue.connection, queue)  # its ring is empty now
    queue.resume(lane(10))
    check_invariants(queue)
    assert claimed_lanes(queue, 3) == [lane(10)] * 3


def test_draining_the_last_lane_of_a_tenant_takes_the_tenant_off_the_ring(queue: Queue) -> None:
    enqueue(queue, lane(10), 3, tenant=T1)
    enqueue(queue, lane(1), 3)
    assert queue.drain(lane(10)) == 3
    assert ring(queue.connection, queue) == [lane(1)]
    check_invariants(queue)


def test_moving_a_job_between_tenanted_lanes_keeps_both_rings_right(queue: Queue) -> None:
    [job] = enqueue(queue, lane(10), 1, tenant=T1)
    enqueue(queue, lane(20), 1, tenant=T2)
    assert queue.move(job, lane(20))
    check_invariants(queue)
    assert "@" + T1 not in ring(queue.connection, queue)
    assert claimed_lanes(queue, 3) == [lane(20), lane(20)]


def test_retry_reap_and_release_return_a_tenanted_lane_to_its_tenant_ring(
    queue: Queue,
) -> None:
    enqueue(queue, lane(10), 3, tenant=T1)
    queue.set_tenant_limit(T1, 3)
    retried = claim_one(queue)
    released = claim_one(queue)
    expired = claim_one(queue, lease_ms=1)
    assert "@" + T1 not in ring(queue.connection, queue)  # at its ceiling
    queue.retry(retried.job_id, retried.token, "again")
    queue.release(released.job_id, released.token)
    check_invariants(queue)
    time.sleep(0.01)
    assert queue.reap() == [expired.job_id]
    check_invariants(queue)
    assert len(claimed_lanes(queue, 3)) == 3
    check_invariants(queue)


def test_a_deferred_job_joins_its_tenant_ring_when_promoted(queue: Queue) -> None:
    due_ms = server_ms(queue.connection) + 500  # on the server clock, far enough ahead
    # that a slow enqueue on a loaded machine still lands before it
    run_after = datetime.fromtimestamp(due_ms / 1000, UTC)
    queue.enqueue(lane(10), TASK, tenant=T1, run_after=run_after)
    sleep_past(queue.connection, due_ms)
    assert queue.promote()[0] == 1
    check_invariants(queue)
    assert claimed_lanes(queue, 1) == [lane(10)]


def test_a_rate_limited_tenanted_lane_rejoins_its_tenant_ring(queue: Queue) -> None:
    enqueue(queue, lane(10), 3, tenant=T1)
    queue.set_rate(lane(10), 1, 0.05)
    assert claimed_lanes(queue, 2) == [lane(10)]
    check_invariants(queue)
    time.sleep(0.08)
    queue.promote()
    check_invariants(queue)
    assert claimed_lanes(queue, 1) == [lane(10)]


def test_a_busy_lane_keeps_its_tenant_and_an_idle_one_changes(queue: Queue) -> None:
    enqueue(queue, lane(10), 2, tenant=T1)
    enqueue(queue, lane(10), 1, tenant=T2)  # busy: T1 holds
    assert queue.tenant_of(lane(10)) == T1
    enqueue(queue, lane(10), 1)  # no tenant named: the recorded one holds
    assert queue.tenant_of(lane(10)) == T1
    claims = queue.claim(LONG_LEASE, max_jobs=10, turns=10) or []
    for c in claims:
        queue.complete(c.job_id, c.token)
    enqueue(queue, lane(10), 1, tenant=T2)  # idle: it moves
    assert queue.tenant_of(lane(10)) == T2
    check_invariants(queue)


@pytest.mark.parametrize("bad", ["org1", "@ORG00000000001", "ORG0000000001:", "", "ORG" + "x" * 40])
def test_a_bad_tenant_is_refused_and_nothing_is_written(
    r: redis.Redis, queue: Queue, bad: str
) -> None:
    before = dump(r)
    with pytest.raises(ValueError, match="not a tenant id"):
        queue.enqueue(lane(10), TASK, tenant=bad)
    with pytest.raises(ValueError, match="not a tenant id"):
        queue.set_tenant_weight(bad, 2)
    with pytest.raises(ValueError, match="not a tenant id"):
        queue.set_tenant_limit(bad, 2)
    assert dump(r) == before


def test_bad_tenant_settings_are_refused_and_nothing_is_written(
    r: redis.Redis, queue: Queue
) -> None:
    before = dump(r)
    for bad in (0, -1, 1001):
        with pytest.raises(ValueError, match="weight"):
            queue.set_tenant_weight(T1, bad)
    with pytest.raises(ValueError, match="ceiling"):
        queue.set_tenant_limit(T1, 0)
    assert dump(r) == before


def test_tenants_are_listed_with_their_settings(queue: Queue) -> None:
    enqueue(queue, lane(10), 2, tenant=T1)
    enqueue(queue, lane(11), 2, tenant=T1)
    enqueue(queue, lane(20), 2, tenant=T2)
    queue.set_tenant_weight(T1, 2)
    queue.set_tenant_limit(T2, 5)
    infos = {t.tenant: t for t in queue.tenants()}
    assert (infos[T1].lanes, infos[T1].serving, infos[T1].weight) == (2, 2, 2)
    assert (infos[T2].lanes, infos[T2].ceiling, infos[T2].on_ring) == (1, 5, True)
    assert queue.tenant_lanes(T1) == [lane(10), lane(11)]
    assert queue.lane(lane(20)).tenant == T2
    assert queue.lane(lane(1)).tenant is None


def test_eight_threads_claiming_and_completing_across_tenants_lose_nothing(
    r: redis.Redis, queue: Queue
) -> None:
    jobs: set[str] = set()
    for t in range(4):
        for u in range(5):
            jobs |= set(enqueue(queue, lane(100 * t + u), 10, tenant=lane(t + 1, "ORG")))
    jobs |= set(enqueue(queue, lane(999), 20))
    queue.set_tenant_limit(lane(1, "ORG"), 2)
    queue.set_tenant_weight(lane(2, "ORG"), 3)
    queue.set_weight(lane(100), 2)
    done: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        client = new_client(r)
        mine = Queue("q", connection=client)
        idle = 0
        while idle < 20:
            claims = mine.claim(LONG_LEASE, max_jobs=3, turns=3)
            if not claims:
                idle += 1
                continue
            idle = 0
            for c in claims:
                mine.complete(c.job_id, c.token)
            with lock:
                done.extend(c.job_id for c in claims)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(done) == sorted(jobs)
    check_invariants(queue)
    assert ring(r, queue) == []


@pytest.mark.parametrize(
    "damage",
    [
        "lane off its tenant ring",
        "entry off the top ring",
        "tenant count wrong",
        "tenanted lane on the top ring",
    ],
)
def test_the_doctor_finds_and_mends_a_damaged_tenant(
    r: redis.Redis, queue: Queue, damage: str
) -> None:
    enqueue(queue, lane(10), 3, tenant=T1)
    enqueue(queue, lane(11), 3, tenant=T1)
    enqueue(queue, lane(1), 3)
    claim_one(queue)
    k = queue.keys
    if damage == "lane off its tenant ring":
        r.lrem(k.tenant_ring(T1), 1, lane(11))
    elif damage == "entry off the top ring":
        r.lrem(k.ring, 1, "@" + T1)
        r.srem(k.on_ring, "@" + T1)
    elif damage == "tenant count wrong":
        r.hset(k.inflight, "@" + T1, 7)
    else:
        r.rpush(k.ring, lane(10))
    assert not Doctor(queue).audit().clean
    _, after = Doctor(queue).repair()
    assert after.clean, after.findings
    check_invariants(queue)
    assert sorted(claimed_lanes(queue, 8)) == sorted(
        [lane(10)] * 2 + [lane(11)] * 3 + [lane(1)] * 3
    )


def test_a_sharded_queue_rotates_tenants_on_every_shard(r: redis.Redis) -> None:
    from django_emq.engine.shards import ShardedQueue

    sharded = ShardedQueue("q", 3, connection=r)
    users = [lane(200 + i) for i in range(12)]
    for user in users:
        sharded.enqueue_many({"lane": user, "task_path": TASK, "tenant": T1} for _ in range(3))
    sharded.enqueue_many({"lane": lane(1), "task_path": TASK, "tenant": T2} for _ in range(3))
    sharded.set_tenant_weight(T1, 2)
    sharded.set_tenant_limit(T2, 1)
    assert sharded.tenant_of(users[0]) == T1
    info = sharded.tenant(T1)
    assert (info.weight, info.serving) == (2, 12)
    assert sharded.tenant(T2).ceiling == 1
    assert sorted(sharded.tenant_lanes(T1)) == sorted(users)
    for shard in sharded.shards:
        check_invariants(shard)
    done = 0
    while claims := sharded.claim(LONG_LEASE):
        for c in claims:
            sharded.complete(c.job_id, c.token)
            done += 1
    assert done == 39
    for shard in sharded.shards:
        check_invariants(shard)


def test_next_to_run_shows_the_head_lane_of_each_tenant(queue: Queue) -> None:
    from django_emq.engine.listing import jobs_in_state

    first = enqueue(queue, lane(10), 2, tenant=T1)
    enqueue(queue, lane(11), 2, tenant=T1)
    alone = enqueue(queue, lane(1), 2)
    listed = jobs_in_state(queue, "pending", limit=3)
    assert [j.row.job_id for j in listed.jobs][:2] == [first[0], alone[0]]


def test_a_time_fair_queue_refuses_tenants_and_writes_nothing(r: redis.Redis) -> None:
    """Time-fair share is kept per lane in worker time; the two levels of tenants
    are not measured in it, so an enqueue naming a tenant there is refused."""
    time_fair = Queue("timed", connection=r, fairness="time")
    before = dump(r)
    with pytest.raises(ValueError, match="time-fair queue"):
        time_fair.enqueue(lane(10), TASK, tenant=T1)
    assert dump(r) == before
    time_fair.enqueue(lane(10), TASK)  # without a tenant it is served as usual
    assert claim_one(time_fair) is not None
