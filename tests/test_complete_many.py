"""complete_many: several successes in one script call, each fenced on its own."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from django_emq.engine import ops
from django_emq.engine.queue import MAX_BATCH, Claim, Queue
from django_emq.engine.records import encode_outcomes
from django_emq.exceptions import InvalidArguments, JobNotFound, StaleToken

from .helpers import LONG_LEASE, counting_client, dump, fill, lane, on_ring, ring
from .invariants import check_invariants


def claim_all(queue: Queue, n: int) -> list[Claim]:
    claims = queue.claim(LONG_LEASE, turns=n, max_jobs=n)
    assert claims is not None
    assert len(claims) == n
    return claims


def test_records_every_job_across_lanes_in_one_round_trip(r: redis.Redis) -> None:
    with counting_client(r) as (client, counter):
        queue = Queue("q", connection=client)
        for n in range(4):
            fill(queue, lane(n), 3)
        warm, *claims = claim_all(queue, 9)
        queue.complete(warm.job_id, warm.token)  # loads the script: its first call is 3
        counter.sent = 0
        refused = queue.complete_many([(c.job_id, c.token, {"n": i}) for i, c in enumerate(claims)])
        # one script call for the eight jobs, and one more that adds them to the
        # history (engine/tally.py: the complete script writes none)
        assert counter.sent == 2
    assert refused == [None] * 8
    for i, c in enumerate(claims):
        row = queue.job(c.job_id)
        assert row is not None
        assert row["state"] == "done"
        assert json.loads(row["result"]) == {"n": i}
    totals = queue.totals()
    assert (totals.active, totals.pending) == (0, 3)
    assert r.hgetall(queue.keys.inflight) == {}
    assert int(r.hget(queue.keys.stats, "completed") or 0) == 9
    check_invariants(queue)


def test_a_refused_job_changes_nothing_and_the_others_are_recorded(queue: Queue) -> None:
    fill(queue, lane(1), 2)
    fill(queue, lane(2), 2)
    first, second, third = claim_all(queue, 3)
    queue.release(second.job_id, second.token)
    again = claim_all(queue, 1)[0]  # second's lease moved on: token + 1
    assert again.job_id == second.job_id
    refused = queue.complete_many(
        [
            (first.job_id, first.token, 1),
            (second.job_id, second.token, 2),
            ("JOB0000000000nothere", 1, 3),
            (third.job_id, third.token, 4),
        ]
    )
    assert refused[0] is None
    assert refused[3] is None
    assert isinstance(refused[1], StaleToken)
    assert refused[1].job_id == second.job_id
    assert isinstance(refused[2], JobNotFound)
    row = queue.job(second.job_id)
    assert row is not None
    assert row["state"] == "active"
    assert "result" not in row
    assert queue.totals().active == 1
    check_invariants(queue)


def test_a_job_named_twice_is_recorded_once(queue: Queue) -> None:
    fill(queue, lane(1), 1)
    (c,) = claim_all(queue, 1)
    refused = queue.complete_many([(c.job_id, c.token, "a"), (c.job_id, c.token, "b")])
    assert refused[0] is None
    assert isinstance(refused[1], StaleToken)
    row = queue.job(c.job_id)
    assert row is not None
    assert json.loads(row["result"]) == "a"
    assert int(queue.connection.hget(queue.keys.stats, "completed") or 0) == 1
    check_invariants(queue)


def test_a_lane_at_its_ceiling_rejoins_the_ring_once(r: redis.Redis, queue: Queue) -> None:
    busy = lane(1)
    fill(queue, busy, 5)
    queue.set_limit(busy, 2)
    claims = claim_all(queue, 2)
    assert busy not in on_ring(r, queue)
    assert queue.complete_many([(c.job_id, c.token, None) for c in claims]) == [None, None]
    assert ring(r, queue) == [busy]
    assert queue.lane(busy).inflight == 0
    check_invariants(queue)


@pytest.mark.parametrize(
    ("outcomes", "error"),
    [
        ("JOB1", TypeError),
        ({"JOB1": 1}, TypeError),
        ([("JOB1", 1)], TypeError),
        ([["JOB1", 1, None]], TypeError),
        ([("", 1, None)], ValueError),
        ([(None, 1, None)], ValueError),
        ([("JOB1", 0, None)], ValueError),
        ([("JOB1", True, None)], ValueError),
        ([("JOB1", "1", None)], ValueError),
        ([("JOB1", 1, float("nan"))], InvalidArguments),
        ([("JOB1", 1, object())], InvalidArguments),
        ([("JOB1", 1, None)] * (MAX_BATCH + 1), ValueError),
    ],
)
def test_bad_input_raises_and_changes_nothing(
    r: redis.Redis, queue: Queue, outcomes: Any, error: type[Exception]
) -> None:
    fill(queue, lane(1), 2)
    (c,) = claim_all(queue, 1)
    # a sound outcome first: the bad one after it must not let it through either
    batch = [(c.job_id, c.token, None), *outcomes] if isinstance(outcomes, list) else outcomes
    before = dump(r)
    with pytest.raises(error):
        queue.complete_many(batch)
    assert dump(r) == before
    assert queue.complete_many([(c.job_id, c.token, None)]) == [None]


def test_nothing_to_record_sends_nothing(r: redis.Redis) -> None:
    with counting_client(r) as (client, counter):
        queue = Queue("q", connection=client)
        assert queue.complete_many([]) == []
        assert counter.sent == 0


#: What runs or loads a script (FCALL; EVALSHA without Functions), and the measuring.
NOT_IN_SCRIPTS = {"fcall", "function|load", "evalsha", "script|load", "config|resetstat"}


def _script_commands(r: redis.Redis) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    return sum(
        int(v["calls"])
        for name, v in stats.items()
        if name.removeprefix("cmdstat_") not in NOT_IN_SCRIPTS
    )


def _cost(r: redis.Redis, queue: Queue, lanes: int, jobs: int) -> int:
    """Commands the script runs to record ``jobs`` successes spread over ``lanes``
    (the complete script alone: the API's history call after it is not counted)."""
    r.flushall()
    for n in range(lanes):
        fill(queue, lane(n), jobs // lanes + 1)  # one left each: the lanes stay on the ring
    claims = claim_all(queue, jobs)
    r.config_resetstat()
    op = ops.complete(queue, encode_outcomes([(c.job_id, c.token, None) for c in claims]))
    assert queue.runner.run(op) == [None] * jobs
    return _script_commands(r)


def test_cost_per_job_is_three_commands_and_the_rest_is_per_lane(
    r: redis.Redis, queue: Queue
) -> None:
    # One more job costs its row's fence, write and expiry; one more lane its
    # jobs' removal from its active set (the set's size is the lane's in-flight
    # count: no count of its own; no type check, as the removal is among the
    # first writes, guarded: lua/includes/complete_jobs.lua): no ring check, as
    # the queue has no ceilings (only a lane held at its ceiling rejoins the ring
    # when a job ends). The call itself: the clock, the active set, the completed
    # counter (no type check of the counters: the count is the first write,
    # guarded), one read of the policy index for every lane policy (none set
    # here: no policy is asked anything more, check.lua policiesOff). No history: the caller sends
    # it (lua/record_history-2.lua).
    one_lane = [_cost(r, queue, 1, jobs) for jobs in (8, 16, 32)]
    assert one_lane[1] - one_lane[0] == 8 * 3
    assert one_lane[2] - one_lane[1] == 16 * 3
    per_lane = [_cost(r, queue, lanes, 16) for lanes in (1, 2, 4)]
    assert per_lane[1] - per_lane[0] == 1
    assert per_lane[2] - per_lane[1] == 2 * 1
    assert one_lane[1] == 16 * 3 + 1 + 3 + 1


def test_a_claim_of_thousands_of_jobs_keeps_every_lease(queue: Queue) -> None:
    """A claim bigger than Lua can unpack at once (about 4,000 jobs) still
    records every lease: the active set is written in chunks."""
    lanes = [lane(n) for n in range(100)]
    queue.enqueue_many([{"lane": ln, "task_path": "t.t"} for ln in lanes for _ in range(50)])
    for ln in lanes:
        queue.set_weight(ln, 50)
    claims = queue.claim(LONG_LEASE, turns=100)
    assert claims is not None
    assert len(claims) == 5000
    assert queue.totals().active == 5000
    check_invariants(queue)
    for start in range(0, 5000, MAX_BATCH):
        chunk = claims[start : start + MAX_BATCH]
        assert queue.complete_many([(c.job_id, c.token, None) for c in chunk]) == [None] * len(
            chunk
        )
    assert queue.totals().active == 0
    check_invariants(queue)


def test_a_claim_mends_a_depth_index_that_says_a_lane_is_empty(
    r: redis.Redis, queue: Queue
) -> None:
    """The claim trusts the depth index for what a lane has left, but checks the
    lane before letting it leave the ring: a wrong index (edited by hand) is
    mended, and the lane keeps its turn."""
    busy = lane(1)
    fill(queue, busy, 3)
    r.zadd(queue.keys.depths, {busy: 1})  # says 1; the lane holds 3
    claim_all(queue, 1)
    assert ring(r, queue) == [busy]
    assert r.zscore(queue.keys.depths, busy) == 2
    check_invariants(queue)
