"""The engine's bulk operations on the real server: cancel named jobs, every
job of a lane, every job of a task; send back every dead job of a task; run
an ended job again. Each leaves the keyspace whole, and works in batches."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_emq.engine import bulk
from django_emq.engine.queue import Queue
from django_emq.exceptions import InvalidJobState, JobNotFound

from .helpers import claim_one, fill, lane
from .invariants import check_invariants

A, B = lane(301), lane(302)
OTHER = "tests.tasks.record"


def _states(queue: Queue, ids: list[str]) -> list[str]:
    return [(queue.job(i) or {}).get("state", "gone") for i in ids]


def test_cancel_jobs_cancels_pending_asks_running_and_skips_ended(queue: Queue) -> None:
    waiting = fill(queue, A, 3)
    running = claim_one(queue)
    queue.complete(running.job_id, running.token)
    ended = running.job_id
    running = claim_one(queue)
    done = bulk.cancel_jobs(queue, [*waiting, ended, "JOB0000000000000000000000"])
    assert done == bulk.Bulk(cancelled=1, requested=1, skipped=2)
    assert queue.cancel_requested(running.job_id)
    check_invariants(queue, hollow_ok=True)


def test_cancel_jobs_refuses_a_malformed_id_before_anything(queue: Queue) -> None:
    ids = fill(queue, A, 2)
    with pytest.raises(ValueError, match="job id"):
        bulk.cancel_jobs(queue, [ids[0], "not an id"])
    assert _states(queue, ids) == ["pending", "pending"]


def test_cancel_jobs_works_in_batches(queue: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "BATCH", 3)
    ids = fill(queue, A, 8)
    assert bulk.cancel_jobs(queue, ids).cancelled == 8
    assert set(_states(queue, ids)) == {"cancelled"}
    check_invariants(queue, hollow_ok=True)


def test_cancel_lane_cancels_its_pending_scheduled_and_running_jobs_only(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BATCH", 2)  # several pages of each
    mine = fill(queue, A, 5)
    theirs = fill(queue, B, 2)
    later = timezone.now() + timedelta(hours=1)
    deferred = queue.enqueue(A, OTHER, run_after=later).job_id
    other_deferred = queue.enqueue(B, OTHER, run_after=later).job_id
    running = claim_one(queue)  # A's head
    assert running.job_id == mine[0]
    done = bulk.cancel_lane(queue, A)
    assert (done.cancelled, done.requested, done.complete) == (5, 1, True)
    assert _states(queue, [*mine[1:], deferred]) == ["cancelled"] * 5
    assert _states(queue, [*theirs, other_deferred]) == ["pending", "pending", "scheduled"]
    check_invariants(queue, hollow_ok=True)


def test_cancel_task_finds_its_jobs_in_every_lane(queue: Queue) -> None:
    noop = fill(queue, A, 2) + fill(queue, B, 2)
    others = [queue.enqueue(lane(303 + i), OTHER).job_id for i in range(3)]
    later = timezone.now() + timedelta(hours=1)
    deferred = queue.enqueue(B, OTHER, run_after=later).job_id
    done = bulk.cancel_task(queue, OTHER)
    assert (done.cancelled, done.complete) == (4, True)
    assert _states(queue, [*others, deferred]) == ["cancelled"] * 4
    assert set(_states(queue, noop)) == {"pending"}
    check_invariants(queue, hollow_ok=True)


def test_a_walk_past_its_budget_says_it_is_not_complete(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "MOST", 3)
    ids = [queue.enqueue(A, OTHER).job_id for _ in range(5)]
    first = bulk.cancel_task(queue, OTHER)
    assert (first.cancelled, first.complete) == (3, False)
    second = bulk.cancel_task(queue, OTHER)
    assert (second.cancelled, second.complete) == (2, True), "the next call goes on"
    assert set(_states(queue, ids)) == {"cancelled"}


def test_retry_dead_of_task_sends_back_only_that_tasks_dead_jobs(queue: Queue) -> None:
    dead_other = []
    for n in range(2):
        job = queue.enqueue(lane(310 + n), OTHER).job_id
        claim = claim_one(queue)
        queue.fail(claim.job_id, claim.token, "boom")
        dead_other.append(job)
    (noop,) = fill(queue, A, 1)
    claim = claim_one(queue)
    queue.fail(claim.job_id, claim.token, "boom")
    assert bulk.retry_dead_of_task(queue, OTHER) == (2, True)
    assert _states(queue, dead_other) == ["pending", "pending"]
    assert _states(queue, [noop]) == ["dead"]
    check_invariants(queue, hollow_ok=True)


def test_run_again_enqueues_a_copy_of_an_ended_job(queue: Queue) -> None:
    job = queue.enqueue(A, OTHER, args=[1, "x"], kwargs={"k": [2]}, max_attempts=7).job_id
    with pytest.raises(InvalidJobState):
        bulk.run_again(queue, job)  # pending: not ended
    claim = claim_one(queue)
    queue.fail(claim.job_id, claim.token, "boom")
    copy = bulk.run_again(queue, job)
    assert copy != job
    row, old = queue.job(copy), queue.job(job)
    assert row is not None
    assert old is not None
    assert (row["state"], row["group"], row["task"], row["max"]) == ("pending", A, OTHER, "7")
    assert (row["args"], row["kwargs"]) == (old["args"], old["kwargs"])
    assert old["state"] == "dead", "the old job is left as it is"
    elsewhere = bulk.run_again(queue, job, lane=B)
    assert (queue.job(elsewhere) or {})["group"] == B
    with pytest.raises(JobNotFound):
        bulk.run_again(queue, "JOB0000000000000000000000")
    check_invariants(queue, hollow_ok=True)


def test_retrying_a_job_stopped_when_asked_forgets_the_request(queue: Queue) -> None:
    """A job asked to stop that ended dead (its task raised JobCancelled) runs
    afresh when retried: its new attempt does not see the old request."""
    (job,) = fill(queue, A, 1)
    claim = claim_one(queue)
    assert queue.cancel(job) == "requested"
    queue.fail(claim.job_id, claim.token, "JobCancelled")
    assert queue.cancel_requested(job)
    assert queue.retry_dead([job]) == 1
    assert not queue.cancel_requested(job)
    check_invariants(queue, hollow_ok=True)
