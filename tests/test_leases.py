"""Leases, fencing tokens, completion, retries, failures and releases."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from django_emq.engine.queue import Claim, Queue
from django_emq.exceptions import JobNotFound, StaleToken

from .helpers import (
    LONG_LEASE,
    active,
    claim_one,
    dump,
    fill,
    lane,
    pending,
    ring,
    sleep_past,
    wait_until,
)

SHORT_LEASE = 50

Op = Callable[[Queue, str, int], object]

OPS: dict[str, Op] = {
    "complete": lambda q, job_id, token: q.complete(job_id, token, {"ok": True}),
    "retry": lambda q, job_id, token: q.retry(job_id, token, "late error"),
    "retry_later": lambda q, job_id, token: q.retry(job_id, token, "late error", 1000),
    "fail": lambda q, job_id, token: q.fail(job_id, token, "late error"),
    "extend": lambda q, job_id, token: q.extend(job_id, token, LONG_LEASE),
    "release": lambda q, job_id, token: q.release(job_id, token),
}


def _expire(r: redis.Redis, queue: Queue, claim: Claim) -> list[str]:
    sleep_past(r, claim.deadline_ms)
    return queue.reap()


# -- leases ------------------------------------------------------------------


def test_expired_lease_is_reaped_to_the_head_of_its_own_lane(r: redis.Redis, queue: Queue) -> None:
    ids = fill(queue, lane(1), 3)
    fill(queue, lane(2), 3)
    first = claim_one(queue, SHORT_LEASE)
    assert first.job_id == ids[0]
    assert _expire(r, queue, first) == [first.job_id]
    assert pending(r, queue, lane(1)) == ids
    assert active(r, queue) == []
    row = queue.job(first.job_id)
    assert row is not None
    assert (row["state"], row["expiries"]) == ("pending", "1")
    assert queue.lane(lane(1)).inflight == 0


def test_reaped_job_comes_out_before_later_jobs_with_a_higher_token(
    r: redis.Redis, queue: Queue
) -> None:
    ids = fill(queue, lane(1), 3)
    first = claim_one(queue, SHORT_LEASE)
    _expire(r, queue, first)
    again = claim_one(queue)
    assert again.job_id == first.job_id == ids[0]
    assert again.token > first.token
    assert claim_one(queue).job_id == ids[1]


def test_reaped_lane_rejoins_the_ring(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 1)
    fill(queue, lane(2), 2)
    first = claim_one(queue, SHORT_LEASE)
    assert ring(r, queue) == [lane(2)]
    _expire(r, queue, first)
    assert ring(r, queue) == [lane(2), lane(1)]


def test_reaped_job_of_a_lane_at_its_ceiling_frees_the_lane(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 3)
    queue.set_limit(lane(1), 1)
    first = claim_one(queue, SHORT_LEASE)
    assert ring(r, queue) == []
    _expire(r, queue, first)
    assert ring(r, queue) == [lane(1)]


def test_reap_leaves_live_leases_alone(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 1)
    fill(queue, lane(2), 1)
    short = claim_one(queue, SHORT_LEASE)
    long = claim_one(queue, LONG_LEASE)
    assert _expire(r, queue, short) == [short.job_id]
    assert active(r, queue) == [long.job_id]
    row = queue.job(long.job_id)
    assert row is not None
    assert row["state"] == "active"


def test_reap_with_nothing_expired_changes_nothing(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 2)
    claim_one(queue)
    before = dump(r)
    assert queue.reap() == []
    assert dump(r) == before


def test_reap_returns_more_than_one_batch(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 600)
    queue.set_weight(lane(1), 600)
    claims = queue.claim(SHORT_LEASE)
    assert claims is not None
    assert len(claims) == 600
    sleep_past(r, max(c.deadline_ms for c in claims))
    assert sorted(queue.reap()) == sorted(c.job_id for c in claims)
    assert queue.depth(lane(1)) == 600


def test_extend_pushes_the_lease_deadline(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 1)
    c = claim_one(queue, SHORT_LEASE)
    assert r.zscore(queue.keys.active, c.job_id) == c.deadline_ms
    deadline = queue.extend(c.job_id, c.token, LONG_LEASE)
    assert deadline > c.deadline_ms
    assert r.zscore(queue.keys.active, c.job_id) == deadline


def test_extended_lease_is_not_reaped(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 1)
    c = claim_one(queue, SHORT_LEASE)
    queue.extend(c.job_id, c.token, LONG_LEASE)
    sleep_past(r, c.deadline_ms)
    assert queue.reap() == []
    assert active(r, queue) == [c.job_id]


def test_extend_refuses_a_bad_lease(queue: Queue) -> None:
    fill(queue, lane(1), 1)
    c = claim_one(queue)
    for bad in (0, -5):
        with pytest.raises(ValueError, match="lease_ms"):
            queue.extend(c.job_id, c.token, bad)


# -- fencing -----------------------------------------------------------------


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_stale_token_after_a_reclaim_is_refused_and_changes_nothing(
    r: redis.Redis, queue: Queue, op: Op
) -> None:
    fill(queue, lane(1), 3)
    old = claim_one(queue, SHORT_LEASE)
    _expire(r, queue, old)
    new = claim_one(queue)
    assert new.job_id == old.job_id
    before = dump(r)
    with pytest.raises(StaleToken):
        op(queue, old.job_id, old.token)
    assert dump(r) == before


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_stale_token_on_a_reaped_pending_job_is_refused_and_changes_nothing(
    r: redis.Redis, queue: Queue, op: Op
) -> None:
    fill(queue, lane(1), 3)
    old = claim_one(queue, SHORT_LEASE)
    _expire(r, queue, old)
    before = dump(r)
    with pytest.raises(StaleToken):
        op(queue, old.job_id, old.token)
    assert dump(r) == before


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_token_from_the_future_is_refused_and_changes_nothing(
    r: redis.Redis, queue: Queue, op: Op
) -> None:
    fill(queue, lane(1), 2)
    c = claim_one(queue)
    before = dump(r)
    with pytest.raises(StaleToken):
        op(queue, c.job_id, c.token + 1)
    assert dump(r) == before


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_any_call_on_a_completed_job_is_refused_and_changes_nothing(
    r: redis.Redis, queue: Queue, op: Op
) -> None:
    fill(queue, lane(1), 2)
    c = claim_one(queue)
    queue.complete(c.job_id, c.token, "first")
    before = dump(r)
    with pytest.raises(StaleToken):
        op(queue, c.job_id, c.token)
    assert dump(r) == before


@pytest.mark.parametrize("op", OPS.values(), ids=OPS.keys())
def test_unknown_job_raises_job_not_found_and_changes_nothing(
    r: redis.Redis, queue: Queue, op: Op
) -> None:
    fill(queue, lane(1), 2)
    claim_one(queue)
    before = dump(r)
    with pytest.raises(JobNotFound):
        op(queue, "JOBnothere", 1)
    assert dump(r) == before


# -- completion --------------------------------------------------------------


def test_complete_keeps_the_result_and_frees_the_lane(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 1)
    c = claim_one(queue)
    queue.complete(c.job_id, c.token, {"answer": [4, 2]})
    row = queue.job(c.job_id)
    assert row is not None
    assert (row["state"], row["result"]) == ("done", '{"answer":[4,2]}')
    assert r.pttl(queue.keys.job(c.job_id)) > 0
    assert active(r, queue) == []
    assert queue.lane(lane(1)).inflight == 0
    assert r.hget(queue.keys.stats, "completed") == b"1"


def test_complete_with_no_result_ttl_deletes_the_row(r: redis.Redis) -> None:
    from datetime import timedelta

    q = Queue("q", connection=r, result_ttl=timedelta(0))
    fill(q, lane(1), 1)
    c = claim_one(q)
    q.complete(c.job_id, c.token)
    assert q.job(c.job_id) is None


# -- retries, failures, releases ----------------------------------------------------------


def test_retry_without_delay_returns_the_job_to_the_head_of_its_lane(
    r: redis.Redis, queue: Queue
) -> None:
    ids = fill(queue, lane(1), 3)
    c = claim_one(queue)
    assert queue.retry(c.job_id, c.token, "flaky") == "pending"
    assert pending(r, queue, lane(1)) == ids
    row = queue.job(c.job_id)
    assert row is not None
    assert (row["state"], row["error"], row["fails"]) == ("pending", "flaky", "1")
    again = claim_one(queue)
    assert (again.job_id, again.token) == (c.job_id, c.token + 1)


def test_retry_with_delay_schedules_the_job(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 1)
    c = claim_one(queue)
    assert queue.retry(c.job_id, c.token, "later", delay_ms=LONG_LEASE) == "scheduled"
    due = r.zscore(queue.keys.schedule, c.job_id)
    assert due is not None
    row = queue.job(c.job_id)
    assert row is not None
    assert (row["state"], row["due"]) == ("scheduled", str(int(due)))
    assert queue.depth(lane(1)) == 0
    assert ring(r, queue) == []
    assert queue.promote() == (0, int(due))
    assert queue.claim(LONG_LEASE) is None


def test_promote_brings_a_due_retry_back_to_its_lane(r: redis.Redis, queue: Queue) -> None:
    ids = fill(queue, lane(1), 2)
    c = claim_one(queue)
    queue.retry(c.job_id, c.token, "later", delay_ms=50)
    wait_until(lambda: queue.promote()[0] == 1)
    assert pending(r, queue, lane(1)) == ids
    assert r.zcard(queue.keys.schedule) == 0
    row = queue.job(c.job_id)
    assert row is not None
    assert row["state"] == "pending"
    assert "due" not in row
    assert claim_one(queue).job_id == c.job_id


def test_retry_refuses_a_negative_delay(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 1)
    c = claim_one(queue)
    before = dump(r)
    with pytest.raises(ValueError, match="delay_ms"):
        queue.retry(c.job_id, c.token, "x", delay_ms=-1)
    assert dump(r) == before


def test_job_is_dead_after_max_attempts_failures_with_its_error_kept(
    r: redis.Redis, queue: Queue
) -> None:
    (job_id,) = fill(queue, lane(1), 1)
    states = []
    for i in range(queue.max_attempts):
        c = claim_one(queue)
        states.append(queue.retry(c.job_id, c.token, f"error {i}"))
    assert states == ["pending"] * (queue.max_attempts - 1) + ["dead"]
    row = queue.job(job_id)
    assert row is not None
    assert (row["state"], row["error"]) == ("dead", f"error {queue.max_attempts - 1}")
    assert r.zscore(queue.keys.dead, job_id) is not None
    assert queue.totals().dead == 1
    assert queue.claim(LONG_LEASE) is None


def test_per_job_max_attempts_overrides_the_queues(queue: Queue) -> None:
    job = queue.enqueue(lane(1), "tests.tasks.noop", max_attempts=1)
    c = claim_one(queue)
    assert queue.retry(c.job_id, c.token, "once") == "dead"
    row = queue.job(job.job_id)
    assert row is not None
    assert row["state"] == "dead"


def test_fail_makes_the_job_dead_at_once(r: redis.Redis, queue: Queue) -> None:
    (job_id,) = fill(queue, lane(1), 1)
    c = claim_one(queue)
    queue.fail(c.job_id, c.token, "ValueError: hopeless")
    row = queue.job(job_id)
    assert row is not None
    assert (row["state"], row["error"], row["fails"]) == ("dead", "ValueError: hopeless", "1")
    assert r.zscore(queue.keys.dead, job_id) is not None
    assert active(r, queue) == []
    assert queue.lane(lane(1)).inflight == 0


def test_release_returns_the_job_to_the_head_of_its_lane(r: redis.Redis, queue: Queue) -> None:
    ids = fill(queue, lane(1), 3)
    c = claim_one(queue)
    queue.release(c.job_id, c.token)
    assert pending(r, queue, lane(1)) == ids
    assert active(r, queue) == []
    assert ring(r, queue) == [lane(1)]
    again = claim_one(queue)
    assert (again.job_id, again.token) == (c.job_id, c.token + 1)


def test_release_does_not_count_a_failure(r: redis.Redis) -> None:
    q = Queue("q", connection=r, max_attempts=2)
    (job_id,) = fill(q, lane(1), 1)
    for _ in range(3):
        c = claim_one(q)
        q.release(c.job_id, c.token)
    row = q.job(job_id)
    assert row is not None
    assert (row["fails"], row["attempts"]) == ("0", "3")
    c = claim_one(q)
    assert q.retry(c.job_id, c.token, "first failure") == "pending"
    c = claim_one(q)
    assert q.retry(c.job_id, c.token, "second failure") == "dead"
