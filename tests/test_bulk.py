"""The engine's bulk operations on the real server: cancel named jobs, every
job of a lane, every job of a task; send back every dead job of a task; run
an ended job again. Each leaves the keyspace whole, and works in batches."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_emq.engine import bulk, ops
from django_emq.engine.queue import Queue
from django_emq.engine.shards import AnyQueue, ShardedQueue
from django_emq.exceptions import InvalidArguments, InvalidJobState, JobNotFound

from .helpers import claim_one, dump, fill, lane
from .invariants import check_invariants

A, B = lane(301), lane(302)
OTHER = "tests.tasks.record"


def _states(queue: AnyQueue, ids: list[str]) -> list[str]:
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
    second = bulk.cancel_task(queue, OTHER, first.cursor)
    assert (second.cancelled, second.complete, second.cursor) == (2, True, ""), "it goes on"
    assert set(_states(queue, ids)) == {"cancelled"}


def between_pages(monkeypatch: pytest.MonkeyPatch, *moves: Callable[[], object]) -> None:
    """Run ``moves[n]`` right after the walk acted on its page n (what a worker
    might do between two pages), deterministically."""
    act = bulk.cancel_jobs
    pages = iter(moves)

    def hooked(queue: AnyQueue, job_ids: Iterable[str]) -> bulk.Bulk:
        done = act(queue, job_ids)
        next(pages, lambda: None)()
        return done

    monkeypatch.setattr(bulk, "cancel_jobs", hooked)


def test_jobs_claimed_between_pages_never_make_the_walk_skip_one(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BATCH", 5)
    ids = fill(queue, A, 20)

    def a_worker_runs_three() -> None:
        for _ in range(3):
            claim = claim_one(queue)
            queue.complete(claim.job_id, claim.token)

    between_pages(monkeypatch, a_worker_runs_three)  # after the 1st pending page
    done = bulk.cancel_lane(queue, A)
    assert (done.cancelled, done.complete) == (17, True)
    assert _states(queue, ids) == ["cancelled"] * 5 + ["done"] * 3 + ["cancelled"] * 12
    check_invariants(queue, hollow_ok=True)


def test_a_job_moving_on_during_the_walk_is_met_in_its_later_state(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BATCH", 2)
    later = timezone.now() + timedelta(hours=1)
    deferred = [queue.enqueue(A, OTHER, run_after=later).job_id for _ in range(4)]
    first, second = queue.enqueue(A, OTHER).job_id, queue.enqueue(B, OTHER).job_id
    # cancel_task: after the 1st schedule page one job is promoted, after
    # lane A's pending page lane B's job is claimed
    between_pages(
        monkeypatch,
        lambda: queue.run_now(deferred[3]),
        lambda: None,  # the 2nd schedule page
        lambda: queue.claim(60_000, turns=5),  # after lane A's page: its 2 jobs
    )
    done = bulk.cancel_task(queue, OTHER)
    assert (done.cancelled, done.requested, done.complete) == (5, 1, True)
    assert _states(queue, [*deferred, first]) == ["cancelled"] * 5
    assert queue.cancel_requested(second)
    check_invariants(queue, hollow_ok=True)


def test_calling_again_with_the_cursor_goes_past_jobs_it_does_not_act_on(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "MOST", 4)
    fill(queue, A, 9)  # another task's jobs, ahead of the one it looks for
    mine = queue.enqueue(B, OTHER).job_id
    answers = [bulk.cancel_task(queue, OTHER)]
    while not answers[-1].complete:
        answers.append(bulk.cancel_task(queue, OTHER, answers[-1].cursor))
    assert [a.cancelled for a in answers] == [0, 0, 1]
    assert _states(queue, [mine]) == ["cancelled"]


def test_a_lane_of_exactly_the_most_jobs_is_complete(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "MOST", 4)
    fill(queue, A, 4)
    assert bulk.cancel_lane(queue, A) == bulk.Bulk(cancelled=4)


def test_a_cursor_of_another_call_is_refused_before_anything(queue: Queue) -> None:
    ids = fill(queue, A, 2)
    with pytest.raises(ValueError, match="not a cursor"):
        bulk.cancel_lane(queue, A, "garbage")
    cursor = json.dumps([f"lane:{B}", 0, 1, "", "1", ids[0]])
    with pytest.raises(ValueError, match="goes on with"):
        bulk.cancel_lane(queue, A, cursor)
    assert _states(queue, ids) == ["pending", "pending"]


def test_jobs_of_one_score_are_paged_by_member(queue: Queue) -> None:
    """A page's bound is (score, member): ties go on by member bytes (upper
    case before lower case, as the set orders them), bound gone or not."""
    key = queue.keys.schedule
    members = ["A1", "B2", "Ba", "a0", "b1", "c"]
    queue.connection.zadd(key, {m: 7 for m in members} | {"Z": 3, "z": 9})
    got = queue.runner.run(ops.page(key, 3, ("7", "B2")))
    assert got == [("Ba", "7"), ("a0", "7"), ("b1", "7")]
    queue.connection.zrem(key, "Ba")
    assert queue.runner.run(ops.page(key, 9, ("7", "Ba"))) == [
        ("a0", "7"), ("b1", "7"), ("c", "7"), ("z", "9"),
    ]  # fmt: skip
    assert queue.runner.run(ops.page(key, 2, None)) == [("Z", "3"), ("A1", "7")]
    queue.connection.delete(key)


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
    assert bulk.retry_dead_of_task(queue, OTHER) == bulk.Retried(2, True)
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


def test_a_long_run_of_one_score_is_paged_whole_while_members_leave(queue: Queue) -> None:
    key = queue.keys.schedule
    members = [f"J{n:03d}" for n in range(50)]
    queue.connection.zadd(key, dict.fromkeys(members, 5))
    met: list[str] = []
    after = None
    while page := queue.runner.run(ops.page(key, 7, after)):
        met += [m for m, _ in page]
        member, score = page[-1]
        after = (score, member)
        queue.connection.zrem(key, met[0], member)  # the bound itself leaves too
    assert met == members
    queue.connection.delete(key)


def test_a_sharded_queue_skips_an_id_naming_no_shard_as_a_plain_queue_does(
    queue: Queue,
) -> None:
    sharded = ShardedQueue("bulk-s", 3, connection=queue.connection)
    (job,) = [sharded.enqueue(A, OTHER).job_id]
    unknown = ["JOB0000000000000000000000.s7", "JOB0000000000000000000000"]
    done = bulk.cancel_jobs(sharded, [job, *unknown])
    assert done == bulk.Bulk(cancelled=1, skipped=2)
    assert bulk.cancel_jobs(queue, unknown) == bulk.Bulk(skipped=2)
    assert _states(sharded, [job]) == ["cancelled"]
    for shard in sharded.shards:
        check_invariants(shard, hollow_ok=True)


def test_cancel_task_finds_the_lanes_whose_depths_change_during_the_walk(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BATCH", 2)
    lanes = [lane(320 + n) for n in range(7)]
    mine = [queue.enqueue(name, OTHER).job_id for name in lanes]
    for name in lanes[:3]:
        fill(queue, name, 3 - lanes.index(name))  # depths differ, and change below
    moves = [lambda: queue.claim(60_000, turns=3) for _ in range(20)]
    between_pages(monkeypatch, *moves)
    done = bulk.cancel_task(queue, OTHER)
    assert done.complete
    assert done.cancelled + done.requested + done.skipped == len(mine)
    assert not {s for s in _states(queue, mine)} & {"pending", "scheduled"}
    check_invariants(queue, hollow_ok=True)


def _record(queue: AnyQueue, ids: Any) -> None:
    for shard in queue.shards:
        shard.record_history(finished=ids)


#: Each public call that takes a collection of ids (or lanes), given ``ids``.
BULK_CALLS: dict[str, Callable[[AnyQueue, Any], object]] = {
    "cancel_jobs": bulk.cancel_jobs,
    "retry_dead": lambda q, ids: q.retry_dead(ids),
    "delete_dead": lambda q, ids: q.delete_dead(ids, lane=A),
    "lanes_named": lambda q, ids: q.lanes_named(ids),
    "record_history": _record,
}


@pytest.mark.parametrize("ids", ["abc", b"abc", A, 7])
@pytest.mark.parametrize("call", list(BULK_CALLS))
@pytest.mark.parametrize("shards", [1, 3])
def test_one_str_in_place_of_a_collection_of_ids_is_refused_before_anything(
    queue: Queue, call: str, ids: object, shards: int
) -> None:
    """Iterated, "abc" would name the jobs a, b and c: it is refused, and the
    jobs of those ids (pending, dead) are left as they were."""
    target: AnyQueue = (
        queue if shards == 1 else ShardedQueue("bulk-s", 3, connection=queue.connection)
    )
    for job_id in "abc":
        target.enqueue(A, OTHER, job_id=job_id)
    (dead,) = target.claim(60_000, worker_id="w:1") or []
    target.fail(dead.job_id, dead.token, "boom")
    before = dump(queue.connection)
    with pytest.raises(InvalidArguments, match="must be a collection"):
        BULK_CALLS[call](target, ids)
    assert dump(queue.connection) == before
