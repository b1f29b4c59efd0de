"""Rotation of the ring and weighted turns, against a real Valkey server."""

from __future__ import annotations

from collections import Counter

import redis

from django_emq.engine.queue import Claim, Queue

from .helpers import TASK, claim_one, claim_turn, fill, lane, on_ring, pending, ring
from .invariants import check_invariants


def _lanes_of(claims: list[Claim]) -> list[str]:
    return [c.lane for c in claims]


def test_every_window_of_l_claims_serves_each_backlogged_lane_once(queue: Queue) -> None:
    depths = [500, 12, 40, 200, 15]
    lanes = [lane(i + 1) for i in range(len(depths))]
    for name, depth in zip(lanes, depths, strict=True):
        fill(queue, name, depth)
    served = [claim_one(queue).lane for _ in range(len(lanes) * min(depths))]
    for start in range(len(served) - len(lanes) + 1):
        window = served[start : start + len(lanes)]
        assert sorted(window) == sorted(lanes), f"window at {start}: {window}"


def test_remaining_lanes_keep_rotating_once_a_shallow_lane_is_empty(queue: Queue) -> None:
    shallow, deep_a, deep_b = lane(1), lane(2), lane(3)
    fill(queue, shallow, 2)
    fill(queue, deep_a, 50)
    fill(queue, deep_b, 300)
    served = [claim_one(queue).lane for _ in range(30)]
    assert served[:6] == [shallow, deep_a, deep_b] * 2
    rest = served[6:]
    for start in range(len(rest) - 1):
        assert sorted(rest[start : start + 2]) == sorted([deep_a, deep_b])


def test_jobs_leave_a_lane_in_enqueue_order(queue: Queue) -> None:
    mine, other = lane(1), lane(2)
    expected = []
    for i in range(20):
        expected.append(queue.enqueue(mine, TASK, [i]).job_id)
        queue.enqueue(other, TASK, [i])
    claims = queue.claim(60_000, turns=40)
    assert claims is not None
    assert [c.job_id for c in claims if c.lane == mine] == expected
    assert [c.args[0] for c in claims if c.lane == mine] == list(range(20))


def test_a_flood_in_one_lane_does_not_delay_another_lanes_first_job(queue: Queue) -> None:
    flood, small = lane(1), lane(2)
    fill(queue, flood, 1000)
    fill(queue, small, 3)
    served = [claim_one(queue).lane for _ in range(6)]
    assert served == [flood, small] * 3


def test_emptied_lane_leaves_the_ring(r: redis.Redis, queue: Queue) -> None:
    short, long = lane(1), lane(2)
    fill(queue, short, 1)
    fill(queue, long, 5)
    assert ring(r, queue) == [short, long]
    assert claim_one(queue).lane == short
    assert ring(r, queue) == [long]
    assert on_ring(r, queue) == {long}


def test_emptied_lane_rejoins_at_the_tail_when_a_job_arrives(r: redis.Redis, queue: Queue) -> None:
    a, b, c = lane(1), lane(2), lane(3)
    fill(queue, a, 1)
    fill(queue, b, 5)
    fill(queue, c, 5)
    assert [claim_one(queue).lane for _ in range(4)] == [a, b, c, b]
    assert ring(r, queue) == [c, b]
    queue.enqueue(a, TASK, ["back"])
    assert ring(r, queue) == [c, b, a]
    assert on_ring(r, queue) == {a, b, c}
    assert [claim_one(queue).lane for _ in range(3)] == [c, b, a]


def test_new_lane_joins_at_the_tail_of_the_ring(r: redis.Redis, queue: Queue) -> None:
    a, b, c = lane(1), lane(2), lane(3)
    fill(queue, a, 5)
    fill(queue, b, 5)
    claim_one(queue)
    fill(queue, c, 5)
    assert ring(r, queue) == [b, a, c]
    assert [claim_one(queue).lane for _ in range(3)] == [b, a, c]


def test_lane_is_on_the_ring_once_however_many_jobs_arrive(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 30)
    fill(queue, lane(2), 30)
    assert ring(r, queue) == [lane(1), lane(2)]


def _build(q: Queue) -> None:
    fill(q, lane(1), 40)
    fill(q, lane(2), 3)
    fill(q, lane(3), 17)
    fill(q, lane(4), 9)
    q.set_weight(lane(3), 4)
    q.set_weight(lane(4), 2)
    q.set_limit(lane(4), 5)


def test_claim_with_turns_gives_the_same_order_as_single_claims(r: redis.Redis) -> None:
    batched, single = Queue("batched", connection=r), Queue("single", connection=r)
    _build(batched)
    _build(single)
    n = 25
    many = batched.claim(60_000, turns=n)
    assert many is not None
    one_by_one: list[Claim] = []
    for _ in range(n):
        one_by_one += claim_turn(single)

    def shape(claims: list[Claim]) -> list[tuple[str, list[object]]]:
        return [(c.lane, c.args) for c in claims]

    assert shape(many) == shape(one_by_one)
    assert ring(r, batched) == ring(r, single)


def test_claim_with_turns_stops_when_the_ring_is_empty(r: redis.Redis, queue: Queue) -> None:
    for i in range(3):
        fill(queue, lane(i + 1), 2)
    claims = queue.claim(60_000, turns=100)
    assert claims is not None
    assert _lanes_of(claims) == [lane(1), lane(2), lane(3)] * 2
    assert ring(r, queue) == []
    assert queue.claim(60_000) is None


def test_claim_on_an_empty_queue_answers_none(queue: Queue) -> None:
    assert queue.claim(60_000) is None
    assert queue.claim(60_000, turns=10) is None


def test_claim_records_the_lease_and_the_worker(r: redis.Redis, queue: Queue) -> None:
    (job_id,) = fill(queue, lane(1), 1)
    claim = queue.claim(60_000, worker_id="host:1")
    assert claim is not None
    (c,) = claim
    assert (c.job_id, c.lane, c.token, c.task_path, c.args, c.kwargs) == (
        job_id,
        lane(1),
        1,
        TASK,
        [0],
        {},
    )
    assert r.zscore(queue.keys.active, job_id) == c.deadline_ms
    row = queue.job(job_id)
    assert row is not None
    assert (row["state"], row["worker"], row["attempts"]) == ("active", "host:1", "1")
    assert queue.lane(lane(1)).inflight == 1


def test_weights_3_and_1_share_claims_3_to_1_over_full_turns(queue: Queue) -> None:
    heavy, light = lane(1), lane(2)
    fill(queue, heavy, 200)
    fill(queue, light, 200)
    queue.set_weight(heavy, 3)
    turns = 20
    counts: Counter[str] = Counter()
    for _ in range(turns):
        counts.update(_lanes_of(claim_turn(queue)))
    assert counts[heavy] == 3 * (turns // 2)
    assert counts[light] == turns // 2


def test_weighted_lane_serves_w_jobs_in_one_turn_oldest_first(r: redis.Redis, queue: Queue) -> None:
    ids = fill(queue, lane(1), 10)
    queue.set_weight(lane(1), 4)
    claims = claim_turn(queue)
    assert [c.job_id for c in claims] == ids[:4]
    assert pending(r, queue, lane(1)) == ids[4:]
    assert queue.lane(lane(1)).inflight == 4


def test_weight_is_bounded_by_depth(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 3)
    fill(queue, lane(2), 3)
    queue.set_weight(lane(1), 5)
    assert _lanes_of(claim_turn(queue)) == [lane(1)] * 3
    assert ring(r, queue) == [lane(2)]


def test_weight_is_bounded_by_ceiling_headroom(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 10)
    queue.set_limit(lane(1), 3)
    claim_one(queue)
    queue.set_weight(lane(1), 5)
    assert len(claim_turn(queue)) == 2
    assert queue.lane(lane(1)).inflight == 3
    assert ring(r, queue) == []


def test_weight_one_is_the_default(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 5)
    queue.set_weight(lane(1), 3)
    queue.set_weight(lane(1), 1)
    assert queue.lane(lane(1)).weight == 1
    assert r.exists(queue.keys.weights) == 0
    assert len(claim_turn(queue)) == 1


def test_max_jobs_cuts_a_weighted_turn_short(queue: Queue) -> None:
    a = lane(1)
    queue.enqueue_many([{"lane": a, "task_path": TASK, "args": [i]} for i in range(5)])
    queue.set_weight(a, 4)
    first = queue.claim(1000, max_jobs=2)
    assert first is not None
    assert [c.args for c in first] == [[0], [1]]
    second = queue.claim(1000, turns=3, max_jobs=10)
    assert second is not None
    assert [c.args for c in second] == [[2], [3], [4]]


def test_a_weighted_lane_keeps_its_turn_across_claims_of_one_job(
    r: redis.Redis, queue: Queue
) -> None:
    """A worker running slow jobs claims one at a time: the heavy lane still gets
    its three jobs per turn of the ring, not one."""
    heavy, light = lane(1), lane(2)
    fill(queue, heavy, 60)
    fill(queue, light, 60)
    queue.set_weight(heavy, 3)
    order = []
    for _ in range(40):
        claims = queue.claim(60_000, max_jobs=1)
        assert claims is not None
        order += _lanes_of(claims)
    assert order == [heavy, heavy, heavy, light] * 10
    check_invariants(queue)


def test_claims_of_two_jobs_follow_the_same_order_as_claims_of_one(r: redis.Redis) -> None:
    by_one, by_two = Queue("one", connection=r), Queue("two", connection=r)
    for q in (by_one, by_two):
        _build(q)
    one: list[Claim] = []
    two: list[Claim] = []
    for _ in range(30):
        one += by_one.claim(60_000, max_jobs=1) or []
    for _ in range(15):
        two += by_two.claim(60_000, turns=2, max_jobs=2) or []
    assert [(c.lane, c.args) for c in one] == [(c.lane, c.args) for c in two]
    check_invariants(by_one)
    check_invariants(by_two)


def test_a_saved_turn_ends_when_its_lane_leaves_the_head(r: redis.Redis, queue: Queue) -> None:
    heavy, light = lane(1), lane(2)
    fill(queue, heavy, 10)
    fill(queue, light, 10)
    queue.set_weight(heavy, 3)
    queue.set_weight(light, 3)
    assert _lanes_of(queue.claim(60_000, max_jobs=1) or []) == [heavy]
    assert r.hgetall(queue.keys.turn) == {b"lane": heavy.encode(), b"credit": b"2"}
    queue.pause(heavy)  # off the ring mid-turn
    check_invariants(queue)
    # the light lane is at the head now: whole turns of its own (3, then 2 of 3)
    assert _lanes_of(queue.claim(60_000, turns=2, max_jobs=5) or []) == [light] * 5
    assert r.hgetall(queue.keys.turn) == {b"lane": light.encode(), b"credit": b"1"}
    queue.resume(heavy)
    check_invariants(queue)


def test_a_weighted_turn_cut_short_is_saved_only_while_its_lane_has_work(
    r: redis.Redis, queue: Queue
) -> None:
    heavy = lane(1)
    fill(queue, heavy, 2)
    queue.set_weight(heavy, 5)
    assert len(queue.claim(60_000, max_jobs=2) or []) == 2
    assert r.exists(queue.keys.turn) == 0  # the lane emptied and left
    assert ring(r, queue) == []
    check_invariants(queue)
