"""Every attempt's start, end and outcome on the job's row (``tries``): written
by the claim and by whatever ends the attempt (complete, retry, fail, an
expired lease, release), on the server clock, bounded like ``workers``, and
never by a refused (stale) call."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import redis

from django_emq.engine.queue import Claim, Queue
from django_emq.engine.rows import Attempt, AttemptHistory, Outcome, Row, attempt_history
from django_emq.exceptions import StaleToken

from .helpers import LONG_LEASE, claim_one, dump, fill, lane, sleep_past
from .invariants import check_invariants

A = lane(1)


def server_now(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


@contextmanager
def clocked(r: redis.Redis) -> Iterator[list[int]]:
    """The server's clock before and after the block: [before, after]."""
    window = [server_now(r)]
    yield window
    window.append(server_now(r))


def history(queue: Queue, job_id: str) -> AttemptHistory:
    row = queue.job(job_id)
    assert row is not None
    return attempt_history(row)


def claimed(r: redis.Redis, queue: Queue, lease_ms: int = LONG_LEASE) -> tuple[Claim, list[int]]:
    with clocked(r) as window:
        claim = claim_one(queue, lease_ms)
    return claim, window


def test_a_claim_starts_an_attempt_on_the_server_clock(r: redis.Redis, queue: Queue) -> None:
    (job,) = fill(queue, A, 1)
    claim, (before, after) = claimed(r, queue)
    (attempt,) = history(queue, job).kept
    assert attempt.number == 1
    assert attempt.outcome == Outcome.RUNNING
    assert attempt.start_ms is not None
    assert before <= attempt.start_ms <= after
    assert attempt.end_ms is None
    assert claim.token == 1


def test_a_success_ends_the_attempt_done(r: redis.Redis, queue: Queue) -> None:
    (job,) = fill(queue, A, 1)
    claim, _ = claimed(r, queue)
    with clocked(r) as window:
        queue.complete(job, claim.token, 1)
    before, after = window
    (attempt,) = history(queue, job).kept
    assert attempt.outcome == Outcome.DONE
    assert attempt.end_ms is not None
    assert before <= attempt.end_ms <= after
    assert attempt.start_ms is not None
    assert attempt.start_ms <= attempt.end_ms


def test_many_successes_in_one_call_each_end_their_own_attempt(queue: Queue) -> None:
    jobs = fill(queue, A, 3)
    claims = queue.claim(LONG_LEASE, turns=3)
    assert claims is not None
    assert len(claims) == 3
    queue.complete_many([(c.job_id, c.token, None) for c in claims])
    assert [history(queue, j).kept[0].outcome for j in jobs] == [Outcome.DONE] * 3


def test_a_success_riding_with_the_next_claim_ends_its_attempt_done(queue: Queue) -> None:
    first, second = fill(queue, A, 2)
    claim = claim_one(queue)
    claims, refused = queue.complete_many_then_claim([(first, claim.token, None)], LONG_LEASE)
    assert refused == [None]
    assert [c.job_id for c in claims] == [second]
    assert history(queue, first).kept[0].outcome == Outcome.DONE
    assert history(queue, second).kept[0].outcome == Outcome.RUNNING


def test_each_failure_ends_its_attempt_with_its_failure_number(
    r: redis.Redis, queue: Queue
) -> None:
    (job,) = fill(queue, A, 1)
    windows = []
    for n in range(3):
        claim, (start_before, start_after) = claimed(r, queue)
        with clocked(r) as window:
            queue.retry(job, claim.token, f"boom {n}")
        windows.append((start_before, start_after, *window))
    attempts = history(queue, job).kept
    assert [a.number for a in attempts] == [1, 2, 3]
    assert [(a.outcome, a.failure) for a in attempts] == [(Outcome.FAILED, n) for n in (1, 2, 3)]
    for attempt, (s0, s1, e0, e1) in zip(attempts, windows, strict=True):
        assert attempt.start_ms is not None
        assert s0 <= attempt.start_ms <= s1
        assert attempt.end_ms is not None
        assert e0 <= attempt.end_ms <= e1


def test_a_failure_that_kills_the_job_ends_its_attempt_failed(queue: Queue) -> None:
    (job,) = fill(queue, A, 1)
    claim = claim_one(queue)
    queue.fail(job, claim.token, "fatal")
    row = queue.job(job)
    assert row is not None
    assert row[Row.STATE] == "dead"
    (attempt,) = attempt_history(row).kept
    assert (attempt.outcome, attempt.failure) == (Outcome.FAILED, 1)


def test_a_retry_later_ends_the_attempt_and_the_next_claim_starts_another(
    r: redis.Redis, queue: Queue
) -> None:
    (job,) = fill(queue, A, 1)
    claim = claim_one(queue)
    assert queue.retry(job, claim.token, "later", 1) == "scheduled"
    sleep_past(r, server_now(r) + 1)
    queue.promote()
    claim_one(queue)
    first, second = history(queue, job).kept
    assert (first.outcome, second.outcome) == (Outcome.FAILED, Outcome.RUNNING)
    assert first.end_ms is not None
    assert second.start_ms is not None
    assert first.end_ms <= second.start_ms


def test_an_expired_lease_ends_the_attempt_expired(r: redis.Redis, queue: Queue) -> None:
    (job,) = fill(queue, A, 1)
    claim = claim_one(queue, 20)
    sleep_past(r, claim.deadline_ms)
    with clocked(r) as window:
        assert queue.reap() == [job]
    before, after = window
    (attempt,) = history(queue, job).kept
    assert (attempt.outcome, attempt.failure) == (Outcome.EXPIRED, None)
    assert attempt.end_ms is not None
    assert before <= attempt.end_ms <= after


def test_the_last_expiry_that_kills_a_job_names_its_failure(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, max_expiries=2)
    (job,) = fill(queue, A, 1)
    for _ in range(2):
        claim = claim_one(queue, 20)
        sleep_past(r, claim.deadline_ms)
        queue.reap()
    row = queue.job(job)
    assert row is not None
    assert row[Row.STATE] == "dead"
    attempts = attempt_history(row).kept
    assert [(a.outcome, a.failure) for a in attempts] == [
        (Outcome.EXPIRED, None),
        (Outcome.EXPIRED, 1),
    ]


def test_a_release_ends_the_attempt_released(queue: Queue) -> None:
    (job,) = fill(queue, A, 1)
    claim = claim_one(queue)
    queue.release(job, claim.token)
    claim_one(queue)
    first, second = history(queue, job).kept
    assert (first.outcome, second.outcome) == (Outcome.RELEASED, Outcome.RUNNING)


def test_a_cancelled_running_job_ends_its_attempt_failed_by_its_worker(queue: Queue) -> None:
    (job,) = fill(queue, A, 1)
    claim = claim_one(queue)
    assert queue.cancel(job) == "requested"
    queue.fail(job, claim.token, "cancelled")  # what the worker records once the task stops
    (attempt,) = history(queue, job).kept
    assert (attempt.outcome, attempt.failure) == (Outcome.FAILED, 1)


def test_every_way_an_attempt_ends_in_one_history(r: redis.Redis, queue: Queue) -> None:
    (job,) = fill(queue, A, 1)
    claim = claim_one(queue, 20)
    sleep_past(r, claim.deadline_ms)
    queue.reap()
    queue.release(job, claim_one(queue).token)
    queue.retry(job, claim_one(queue).token, "boom")
    queue.complete(job, claim_one(queue).token)
    outcomes = [a.outcome for a in history(queue, job).kept]
    assert outcomes == [Outcome.EXPIRED, Outcome.RELEASED, Outcome.FAILED, Outcome.DONE]
    check_invariants(queue)


STALE: dict[str, Callable[[Queue, str, int], object]] = {
    "complete": lambda q, j, t: q.complete(j, t),
    "retry": lambda q, j, t: q.retry(j, t, "late"),
    "fail": lambda q, j, t: q.fail(j, t, "late"),
    "release": lambda q, j, t: q.release(j, t),
}


@pytest.mark.parametrize("op", sorted(STALE))
def test_a_stale_token_writes_no_end(r: redis.Redis, queue: Queue, op: str) -> None:
    (job,) = fill(queue, A, 1)
    old = claim_one(queue, 20)
    sleep_past(r, old.deadline_ms)
    queue.reap()
    claim_one(queue)  # the newer attempt runs
    before = dump(r)
    with pytest.raises(StaleToken):
        STALE[op](queue, job, old.token)
    assert dump(r) == before
    assert history(queue, job).kept[-1].outcome == Outcome.RUNNING


def test_the_row_keeps_the_latest_attempts_like_workers(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, history=3)
    (job,) = fill(queue, A, 1)
    for n in range(1, 8):
        claims = queue.claim(LONG_LEASE, worker_id=f"w:{n}")
        assert claims is not None
        queue.release(job, claims[0].token)
    found = history(queue, job)
    assert found.forgotten == 4
    assert [(a.number, a.worker, a.outcome) for a in found.kept] == [
        (n, f"w:{n}", Outcome.RELEASED) for n in (5, 6, 7)
    ]


def test_a_row_from_before_tries_were_kept_reads_its_workers_without_times(
    r: redis.Redis, queue: Queue
) -> None:
    (job,) = fill(queue, A, 1)
    claim = claim_one(queue)
    queue.release(job, claim.token)
    # as an older version left it: `workers` (written at every claim then, and
    # not yet on a first attempt's row now), no `tries`
    r.hset(queue.keys.job(job), Row.WORKERS, claim.worker_ids[-1])
    r.hdel(queue.keys.job(job), Row.TRIES)
    claim = claim_one(queue)
    queue.complete(job, claim.token)
    first, second = history(queue, job).kept
    assert (first.outcome, first.start_ms) == (Outcome.UNKNOWN, None)
    assert second.outcome == Outcome.DONE


def test_an_attempt_whose_end_was_never_written_reads_unrecorded(
    r: redis.Redis, queue: Queue
) -> None:
    (job,) = fill(queue, A, 1)
    claim_one(queue)
    r.hset(queue.keys.job(job), Row.STATE, "pending")  # put back without an end, by hand
    (attempt,) = history(queue, job).kept
    assert attempt.outcome == Outcome.UNRECORDED


@pytest.mark.parametrize(
    "tries",
    ["garbage", "1+x", "+5d", "99999999999999999999", "1+2q", ",,,", "1+2d,junk,3"],
)
def test_a_tries_field_edited_by_hand_reads_as_unknown_and_the_job_still_settles(
    r: redis.Redis, queue: Queue, tries: str
) -> None:
    (job,) = fill(queue, A, 1)
    claim = claim_one(queue)
    r.hset(queue.keys.job(job), Row.TRIES, tries)
    queue.complete(job, claim.token)
    row = queue.job(job)
    assert row is not None
    assert row[Row.STATE] == "done"
    found = attempt_history(row)
    assert all(isinstance(a, Attempt) for a in found.kept)
    assert len(found.kept) + found.forgotten >= 1
