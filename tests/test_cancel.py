"""Job control in the engine: a pending or scheduled job is cancelled in one
script (its lane and the ring are never scanned), a running one is asked to
stop, and a running job reports progress; a sharded queue routes each call to
the job's shard."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from django_emq.engine.policies.progress import parse_progress
from django_emq.engine.queue import Queue
from django_emq.engine.shards import ShardedQueue
from django_emq.exceptions import InvalidJobState, JobNotFound

from .helpers import claim_one, counting_client, fill, lane, pending, ring
from .invariants import check_invariants, text

A, B = lane(1), lane(2)


def row(r: redis.Redis, queue: Queue, job_id: str) -> dict[str, str]:
    return {text(k): text(v) for k, v in r.hgetall(queue.keys.job(job_id)).items()}


def test_a_pending_job_is_cancelled_and_leaves_its_lane(r: redis.Redis, queue: Queue) -> None:
    first, second, third = fill(queue, A, 3)
    assert queue.cancel(second) == "cancelled"
    assert pending(r, queue, A) == [first, third]
    cancelled = row(r, queue, second)
    assert cancelled["state"] == "cancelled"
    error = json.loads(cancelled["error"])
    assert error["exception_class_path"] == "django_emq.exceptions.JobCancelled"
    assert json.loads(cancelled["errors"]) == [cancelled["error"]]
    assert int(r.pttl(queue.keys.job(second))) > 0, "kept like a result, then gone"
    assert queue.totals().pending == 2
    check_invariants(queue)


def test_cancelled_jobs_never_run(queue: Queue) -> None:
    ids = fill(queue, A, 3)
    queue.cancel(ids[0])
    assert [claim_one(queue).job_id, claim_one(queue).job_id] == ids[1:]
    assert queue.claim(60_000) is None


def test_cancelling_a_lanes_last_job_leaves_the_ring_alone_until_the_next_claim(
    r: redis.Redis, queue: Queue
) -> None:
    (a,) = fill(queue, A, 1)
    fill(queue, B, 1)
    assert queue.cancel(a) == "cancelled"
    assert ring(r, queue) == [A, B], "no scan of the ring: the lane stays until a claim drops it"
    assert r.llen(queue.keys.wake) >= 2, "a worker parked after the empty turn is woken again"
    check_invariants(queue, hollow_ok=True)
    assert queue.claim(60_000) is None, "the turn that lands on the empty lane drops it"
    assert claim_one(queue).lane == B
    assert ring(r, queue) == []
    check_invariants(queue)


def test_a_scheduled_job_is_cancelled_and_leaves_the_schedule(r: redis.Redis, queue: Queue) -> None:
    later = timezone.now() + timedelta(hours=1)
    job = queue.enqueue(A, "tests.tasks.noop", run_after=later).job_id
    assert queue.cancel(job) == "cancelled"
    assert r.zcard(queue.keys.schedule) == 0
    assert row(r, queue, job)["state"] == "cancelled"
    assert "due" not in row(r, queue, job)
    assert queue.promote() == (0, None)
    check_invariants(queue)


def test_a_running_job_is_only_asked_to_stop(r: redis.Redis, queue: Queue) -> None:
    fill(queue, A, 1)
    claim = claim_one(queue)
    assert not queue.cancel_requested(claim.job_id)
    assert queue.cancel(claim.job_id) == "requested"
    assert queue.cancel(claim.job_id) == "requested"
    assert queue.cancel_requested(claim.job_id)
    assert row(r, queue, claim.job_id)["state"] == "active"
    queue.complete(claim.job_id, claim.token, "stopped early")
    check_invariants(queue)


def test_finished_and_unknown_jobs_are_refused_and_nothing_changes(queue: Queue) -> None:
    fill(queue, A, 1)
    claim = claim_one(queue)
    queue.complete(claim.job_id, claim.token, 1)
    with pytest.raises(InvalidJobState):
        queue.cancel(claim.job_id)
    with pytest.raises(JobNotFound):
        queue.cancel("JOB0000000000000000000000")
    (job,) = fill(queue, B, 1)
    queue.cancel(job)
    with pytest.raises(InvalidJobState):
        queue.cancel(job)


def test_a_cancel_costs_one_round_trip_whatever_the_lanes(r: redis.Redis) -> None:
    with counting_client(r) as (client, counter):
        queue = Queue("q", connection=client)
        client.ping()
        queue.enqueue_many({"lane": lane(i), "task_path": "tests.tasks.noop"} for i in range(2_000))
        (job,) = fill(queue, A, 1)
        queue.cancel(job)  # loads the script
        (job,) = fill(queue, A, 1)
        counter.sent = 0
        queue.cancel(job)
        assert counter.sent == 1


def test_a_running_job_reports_progress(r: redis.Redis, queue: Queue) -> None:
    fill(queue, A, 1)
    claim = claim_one(queue)
    assert queue.report_progress(claim.job_id, 0.4, "resizing")
    progress = parse_progress(row(r, queue, claim.job_id)["progress"])
    assert progress is not None
    assert (progress.done, progress.note) == (0.4, "resizing")
    queue.complete(claim.job_id, claim.token)
    assert not queue.report_progress(claim.job_id, 0.9), "a finished job is left alone"
    with pytest.raises(ValueError, match="from 0 to 1"):
        queue.report_progress(claim.job_id, 1.5)


def test_a_sharded_queue_routes_job_control_to_the_jobs_shard(r: redis.Redis) -> None:
    sharded = ShardedQueue("s", 3, connection=r)
    jobs = [sharded.enqueue(lane(i), "tests.tasks.noop").job_id for i in range(6)]
    for job in jobs:
        assert sharded.cancel(job) == "cancelled"
    assert sharded.totals().pending == 0
    for shard in sharded.shards:
        check_invariants(shard, hollow_ok=True)


def test_a_scheduled_job_runs_now_when_asked(r: redis.Redis, queue: Queue) -> None:
    later = timezone.now() + timedelta(hours=1)
    job = queue.enqueue(A, "tests.tasks.noop", run_after=later).job_id
    queue.run_now(job)
    assert pending(r, queue, A) == [job]
    check_invariants(queue)
    with pytest.raises(InvalidJobState):
        queue.run_now(job)
