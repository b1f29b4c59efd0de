"""Unique jobs: at most one unfinished (pending, scheduled or running) job per
unique key and lane; a second enqueue answers the first job; the key frees
when the job finishes (done, dead, drained or moved away)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.tasks import TaskResultStatus

from django_emq import enqueue_for, get_queue, lane_for, unique
from django_emq.engine.queue import Queue
from django_emq.exceptions import LaneFull
from tests import tasks

from .factories import make_user
from .helpers import TASK, claim_one, dump, fill, lane, new_client, sleep_past
from .invariants import check_invariants

A, B = lane(1), lane(2)
KEY = "report:42"


def test_a_second_enqueue_answers_the_first_job_and_writes_nothing(
    r: redis.Redis, queue: Queue
) -> None:
    first = queue.enqueue(A, TASK, [1], unique_key=KEY)
    before = dump(r)
    second = queue.enqueue(A, TASK, [2], unique_key=KEY)
    assert not first.duplicate
    assert second.duplicate
    assert (second.job_id, second.state) == (first.job_id, "pending")
    assert dump(r) == before
    check_invariants(queue)


def test_the_key_is_per_lane(queue: Queue) -> None:
    a = queue.enqueue(A, TASK, unique_key=KEY)
    b = queue.enqueue(B, TASK, unique_key=KEY)
    assert a.job_id != b.job_id
    assert not b.duplicate


def test_a_running_job_still_holds_its_key(queue: Queue) -> None:
    first = queue.enqueue(A, TASK, unique_key=KEY)
    claim_one(queue)
    again = queue.enqueue(A, TASK, unique_key=KEY)
    assert (again.job_id, again.state, again.duplicate) == (first.job_id, "active", True)


def test_a_scheduled_job_holds_its_key(queue: Queue) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    first = queue.enqueue(A, TASK, run_after=later, unique_key=KEY)
    again = queue.enqueue(A, TASK, unique_key=KEY)
    assert (again.job_id, again.state) == (first.job_id, "scheduled")


def test_the_key_frees_when_the_job_completes(queue: Queue) -> None:
    first = queue.enqueue(A, TASK, unique_key=KEY)
    c = claim_one(queue)
    queue.complete(c.job_id, c.token, "ok")
    again = queue.enqueue(A, TASK, unique_key=KEY)
    assert not again.duplicate
    assert again.job_id != first.job_id
    check_invariants(queue)


def test_the_key_frees_when_the_job_is_dead(queue: Queue) -> None:
    queue.enqueue(A, TASK, unique_key=KEY)
    c = claim_one(queue)
    queue.fail(c.job_id, c.token, "boom")
    assert not queue.enqueue(A, TASK, unique_key=KEY).duplicate
    check_invariants(queue)


def test_the_key_frees_when_retries_run_out(queue: Queue) -> None:
    queue.enqueue(A, TASK, unique_key=KEY, max_attempts=1)
    c = claim_one(queue)
    assert queue.retry(c.job_id, c.token, "boom") == "dead"
    assert not queue.enqueue(A, TASK, unique_key=KEY).duplicate


def test_a_retried_job_keeps_its_key(queue: Queue) -> None:
    first = queue.enqueue(A, TASK, unique_key=KEY, max_attempts=3)
    c = claim_one(queue)
    assert queue.retry(c.job_id, c.token, "boom") == "pending"
    assert queue.enqueue(A, TASK, unique_key=KEY).job_id == first.job_id


def test_the_key_frees_when_a_lease_expires_for_the_last_time(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, max_expiries=1)
    queue.enqueue(A, TASK, unique_key=KEY)
    c = claim_one(queue, lease_ms=1)
    sleep_past(r, c.deadline_ms)
    assert queue.reap() == [c.job_id]
    assert queue.job(c.job_id)["state"] == "dead"  # type: ignore[index]
    assert not queue.enqueue(A, TASK, unique_key=KEY).duplicate
    check_invariants(queue)


def test_the_key_frees_when_the_lane_is_drained(queue: Queue) -> None:
    queue.enqueue(A, TASK, unique_key=KEY)
    assert queue.drain(A) == 1
    assert not queue.enqueue(A, TASK, unique_key=KEY).duplicate
    check_invariants(queue)


def test_a_moved_job_frees_its_key(queue: Queue) -> None:
    first = queue.enqueue(A, TASK, unique_key=KEY)
    queue.move(first.job_id, B)
    assert not queue.enqueue(A, TASK, unique_key=KEY).duplicate
    check_invariants(queue)


def test_the_key_frees_when_a_pending_job_is_cancelled(r: redis.Redis, queue: Queue) -> None:
    first = queue.enqueue(A, TASK, unique_key=KEY)
    assert queue.cancel(first.job_id) == "cancelled"
    assert r.hget(queue.keys.unique, f"{A}:{KEY}") is None
    assert not r.hexists(queue.keys.job(first.job_id), "uniq")
    check_invariants(queue, hollow_ok=True)  # the emptied lane leaves at the next claim
    again = queue.enqueue(A, TASK, unique_key=KEY)
    assert not again.duplicate
    assert again.job_id != first.job_id
    check_invariants(queue)


def test_the_key_frees_when_a_scheduled_job_is_cancelled(r: redis.Redis, queue: Queue) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    first = queue.enqueue(A, TASK, run_after=later, unique_key=KEY)
    assert queue.cancel(first.job_id) == "cancelled"
    assert r.hget(queue.keys.unique, f"{A}:{KEY}") is None
    check_invariants(queue)
    assert not queue.enqueue(A, TASK, unique_key=KEY).duplicate
    check_invariants(queue)


def test_a_running_job_asked_to_cancel_keeps_its_key(queue: Queue) -> None:
    first = queue.enqueue(A, TASK, unique_key=KEY)
    claim_one(queue)
    assert queue.cancel(first.job_id) == "requested"
    assert queue.enqueue(A, TASK, unique_key=KEY).job_id == first.job_id
    check_invariants(queue)


def test_a_finished_row_kept_for_its_result_holds_nothing(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, result_ttl=timedelta(0))
    queue.enqueue(A, TASK, unique_key=KEY)
    c = claim_one(queue)
    queue.complete(c.job_id, c.token)  # the row is deleted at once
    assert not queue.enqueue(A, TASK, unique_key=KEY).duplicate
    check_invariants(queue)


def test_a_unique_duplicate_is_answered_even_when_the_lane_is_full(queue: Queue) -> None:
    queue.set_max_depth(A, 1)
    first = queue.enqueue(A, TASK, unique_key=KEY)
    assert queue.enqueue(A, TASK, unique_key=KEY).job_id == first.job_id
    with pytest.raises(LaneFull):
        queue.enqueue(A, TASK, unique_key="other")


def test_eight_threads_enqueue_one_job_per_key(r: redis.Redis, queue: Queue) -> None:
    answers: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def work() -> None:
        q = Queue("q", connection=new_client(r))
        for n in range(20):
            done = q.enqueue(A, TASK, [n], unique_key=f"k{n % 4}")
            with lock:
                answers.append((done.job_id, done.duplicate))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    created = [job_id for job_id, duplicate in answers if not duplicate]
    assert len(created) == 4
    assert {job_id for job_id, _ in answers} == set(created)
    assert queue.depth(A) == 4
    check_invariants(queue)


@pytest.mark.parametrize("bad", ["", "x" * 201, 42, "tab\there"])
def test_a_bad_unique_key_is_refused_and_writes_nothing(
    r: redis.Redis, queue: Queue, bad: Any
) -> None:
    with pytest.raises(ValueError, match="unique_key"):
        queue.enqueue(A, TASK, unique_key=bad)
    with pytest.raises(ValueError, match="unique_key"):
        queue.enqueue_many(
            [{"lane": B, "task_path": TASK}, {"lane": A, "task_path": TASK, "unique_key": bad}]
        )
    assert r.dbsize() == 0


def test_jobs_without_a_key_are_never_merged(queue: Queue) -> None:
    fill(queue, A, 3)
    assert queue.depth(A) == 3


# -- the Django layer -----------------------------------------------------------


@pytest.mark.django_db
def test_enqueue_for_with_a_unique_key_answers_the_existing_result(emq: redis.Redis) -> None:
    user = make_user()
    first = enqueue_for(user, tasks.add, 1, 2, unique_key=KEY)
    second = enqueue_for(user, tasks.add, 5, 5, unique_key=KEY)
    assert second.id == first.id
    assert second.args == [1, 2]  # the job that holds the key, not the refused call
    assert get_queue().depth(lane_for(user)) == 1


@pytest.mark.django_db
def test_the_unique_context_manager_works_for_plain_enqueue(emq: redis.Redis) -> None:
    from django_emq import lane as lane_ctx

    user = make_user()
    with lane_ctx(user), unique(KEY):
        first = tasks.add.enqueue(1, 2)
        second = tasks.add.enqueue(1, 2)
    third = enqueue_for(user, tasks.add, 1, 2)
    assert first.id == second.id != third.id


@pytest.mark.django_db
def test_a_real_worker_frees_the_key_when_the_job_is_done(emq: redis.Redis) -> None:
    from django.core.management import call_command

    user = make_user()
    first = enqueue_for(user, tasks.add, 1, 2, unique_key=KEY)
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
    first.refresh()
    assert first.status == TaskResultStatus.SUCCESSFUL
    second = enqueue_for(user, tasks.add, 1, 2, unique_key=KEY)
    assert second.id != first.id
    check_invariants(get_queue())  # type: ignore[arg-type]
