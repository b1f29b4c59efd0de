"""Dead jobs: each lane keeps its own, and they can be sent back or deleted,
by id or all of a lane's, without touching any other lane."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
import redis

from django_emq.engine import queue as queue_module
from django_emq.engine.queue import Queue
from django_emq.engine.scripts import sources

from .helpers import (
    LONG_LEASE,
    claim_one,
    dump,
    fill,
    lane,
    on_ring,
    pending,
    ring,
    sleep_past,
)
from .invariants import check_invariants, text

A, B = lane(1), lane(2)


def kill(queue: Queue, job_lane: str, n: int = 1) -> list[str]:
    """Enqueue ``n`` jobs on ``job_lane`` (behind what is there) and make each dead."""
    ids = fill(queue, job_lane, n)
    dead: list[str] = []
    while len(dead) < n:
        c = claim_one(queue)
        if c.job_id in ids:
            queue.fail(c.job_id, c.token, f"boom {c.job_id}")
            dead.append(c.job_id)
        else:
            queue.release(c.job_id, c.token)
    return ids


def lane_dead(r: redis.Redis, queue: Queue, job_lane: str) -> list[str]:
    return [text(m) for m in r.zrange(queue.keys.lane_dead(job_lane), 0, -1)]


def dead(r: redis.Redis, queue: Queue) -> list[str]:
    return [text(m) for m in r.zrange(queue.keys.dead, 0, -1)]


# -- each lane's dead set ---------------------------------------------------------


def test_a_dead_job_is_kept_in_its_lanes_dead_set(r: redis.Redis, queue: Queue) -> None:
    (job,) = kill(queue, A)
    assert lane_dead(r, queue, A) == [job]
    assert lane_dead(r, queue, B) == []
    assert dead(r, queue) == [job]
    assert r.zscore(queue.keys.lane_dead(A), job) == r.zscore(queue.keys.dead, job)
    check_invariants(queue)


def test_a_job_out_of_attempts_is_kept_in_its_lanes_dead_set(r: redis.Redis, queue: Queue) -> None:
    (job,) = queue.enqueue_many([{"lane": B, "task_path": "tests.tasks.noop", "max_attempts": 1}])
    c = claim_one(queue)
    assert queue.retry(c.job_id, c.token, "once is enough") == "dead"
    assert lane_dead(r, queue, B) == [job.job_id]
    check_invariants(queue)


# -- retry ------------------------------------------------------------------------


def test_a_retried_dead_job_returns_to_its_mint_place(r: redis.Redis, queue: Queue) -> None:
    first, second, third = fill(queue, A, 3)
    c = claim_one(queue)
    assert c.job_id == first
    queue.fail(first, c.token, "boom")
    assert pending(r, queue, A) == [second, third]

    assert queue.retry_dead([first]) == 1

    assert pending(r, queue, A) == [first, second, third]
    row = queue.job(first)
    assert row is not None
    assert (row["state"], row["fails"], row["attempts"]) == ("pending", "0", "1")
    assert "finished" not in row
    assert row["errors"] == '["boom"]', "the error history is kept"
    assert dead(r, queue) == []
    assert lane_dead(r, queue, A) == []
    check_invariants(queue)


def test_a_job_dead_of_expired_leases_gets_all_its_attempts_back(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, max_expiries=1)
    (job,) = queue.enqueue_many([{"lane": A, "task_path": "tests.tasks.noop"}])
    c = claim_one(queue, 1)
    sleep_past(r, c.deadline_ms)
    queue.reap()
    assert lane_dead(r, queue, A) == [job.job_id]
    assert queue.retry_dead(lane=A) == 1
    row = queue.job(job.job_id)
    assert row is not None
    assert row.get("expiries", "0") == "0"
    c = claim_one(queue, 1)
    queue.complete(c.job_id, c.token)
    check_invariants(queue)


def test_a_retried_dead_job_runs_again_with_a_higher_token(queue: Queue) -> None:
    (job,) = kill(queue, A)
    queue.retry_dead([job])
    again = claim_one(queue)
    assert (again.job_id, again.token) == (job, 2)
    queue.complete(again.job_id, again.token)
    row = queue.job(job)
    assert row is not None
    assert row["state"] == "done"


def test_retrying_puts_an_emptied_lane_back_on_the_ring(r: redis.Redis, queue: Queue) -> None:
    (job,) = kill(queue, A)
    assert A not in on_ring(r, queue)
    queue.retry_dead([job])
    assert ring(r, queue) == [A]
    check_invariants(queue)


def test_retrying_leaves_a_paused_lane_off_the_ring(r: redis.Redis, queue: Queue) -> None:
    (job,) = kill(queue, A)
    queue.pause(A)
    assert queue.retry_dead(lane=A) == 1
    assert pending(r, queue, A) == [job]
    assert ring(r, queue) == []
    check_invariants(queue)


def test_retrying_a_lane_takes_all_its_dead_jobs_and_no_others(
    r: redis.Redis, queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_module, "BATCH", 2)  # three calls for five jobs
    of_a = kill(queue, A, 5)
    of_b = kill(queue, B, 2)

    assert queue.retry_dead(lane=A) == 5

    assert pending(r, queue, A) == of_a
    assert lane_dead(r, queue, A) == []
    assert lane_dead(r, queue, B) == of_b
    assert set(dead(r, queue)) == set(of_b)
    check_invariants(queue)


def test_retry_skips_ids_that_are_not_dead(r: redis.Redis, queue: Queue) -> None:
    (job,) = kill(queue, A)
    waiting = fill(queue, B, 1)[0]
    before = queue.job(waiting)
    assert queue.retry_dead([waiting, job, "JOBnosuchjob"]) == 1
    assert queue.job(waiting) == before
    assert queue.job("JOBnosuchjob") is None
    check_invariants(queue)


def test_retry_with_a_lane_skips_other_lanes_jobs(r: redis.Redis, queue: Queue) -> None:
    (of_a,) = kill(queue, A)
    (of_b,) = kill(queue, B)
    assert queue.retry_dead([of_a, of_b], lane=B) == 1
    assert dead(r, queue) == [of_a]
    assert pending(r, queue, B) == [of_b]
    check_invariants(queue)


# -- delete -----------------------------------------------------------------------


def test_deleting_a_dead_job_removes_its_row_and_both_entries(r: redis.Redis, queue: Queue) -> None:
    one, two = kill(queue, A, 2)
    assert queue.delete_dead([one]) == 1
    assert queue.job(one) is None
    assert dead(r, queue) == [two]
    assert lane_dead(r, queue, A) == [two]
    check_invariants(queue)


def test_deleting_a_lane_takes_all_its_dead_jobs_and_no_others(
    r: redis.Redis, queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_module, "BATCH", 2)
    of_a = kill(queue, A, 5)
    of_b = kill(queue, B, 1)
    assert queue.delete_dead(lane=A) == 5
    assert all(queue.job(job) is None for job in of_a)
    assert dead(r, queue) == of_b
    assert not r.exists(queue.keys.lane_dead(A))
    check_invariants(queue)


def test_delete_skips_ids_that_are_not_dead(queue: Queue) -> None:
    waiting = fill(queue, A, 1)[0]
    assert queue.delete_dead([waiting]) == 0
    row = queue.job(waiting)
    assert row is not None
    assert row["state"] == "pending"


def test_a_lane_wide_call_drops_stray_entries_and_finishes(r: redis.Redis, queue: Queue) -> None:
    """An entry whose row was deleted by hand cannot hold a lane-wide loop forever."""
    gone, kept = kill(queue, A, 2)
    r.delete(queue.keys.job(gone))
    assert queue.retry_dead(lane=A) == 1
    assert pending(r, queue, A) == [kept]
    assert dead(r, queue) == []
    assert lane_dead(r, queue, A) == []
    check_invariants(queue)


# -- refused input ----------------------------------------------------------------

REFUSED: dict[str, Callable[[Queue], Any]] = {
    "no ids and no lane": lambda q: q.retry_dead(),
    "a bad lane": lambda q: q.retry_dead(lane="usr1"),
    "a bad id": lambda q: q.retry_dead(["JOB1", "bad id"]),
    "delete, no ids and no lane": lambda q: q.delete_dead(),
    "delete, a bad id": lambda q: q.delete_dead(["{other}"], lane=A),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_input_is_refused_before_anything_is_written(
    r: redis.Redis, queue: Queue, case: str
) -> None:
    kill(queue, A, 2)
    before = dump(r)
    with pytest.raises(ValueError, match=r"dead jobs|lane id|job id"):
        REFUSED[case](queue)
    assert dump(r) == before


def test_an_empty_list_of_ids_changes_nothing(r: redis.Redis, queue: Queue) -> None:
    kill(queue, A, 2)
    before = dump(r)
    assert queue.retry_dead([], lane=A) == 0
    assert queue.delete_dead([]) == 0
    assert dump(r) == before


# -- cost -------------------------------------------------------------------------


def _commands(r: redis.Redis, work: Callable[[], Any]) -> dict[str, int]:
    r.config_resetstat()
    work()
    stats: dict[str, dict[str, Any]] = r.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(entry["calls"])
        for name, entry in stats.items()
        if name.removeprefix("cmdstat_") not in {"config|resetstat", "info"}
    }


def _by_id_then_lane(method: Callable[..., int], job_id: str) -> Callable[[], None]:
    def work() -> None:
        method([job_id])
        method(lane=A)

    return work


@pytest.mark.parametrize("op", ["retry_dead", "delete_dead"])
def test_dead_job_calls_cost_the_same_with_10_and_5000_lanes(r: redis.Redis, op: str) -> None:
    """Counted by the server (commands inside scripts included), never timed."""
    counts = []
    for n in (10, 5_000):
        r.flushall()
        queue = Queue("q", connection=r)
        one = kill(queue, A, 3)[0]
        queue.enqueue_many(
            {"lane": lane(i + 10), "task_path": "tests.tasks.noop"} for i in range(n)
        )
        for src in sources().values():
            r.script_load(src.source)
        counts.append(_commands(r, _by_id_then_lane(getattr(queue, op), one)))
    assert counts[0] == counts[1]
    assert "lrem" not in counts[1]
    assert "lpos" not in counts[1]
    assert "lrange" not in counts[1]


def test_a_claimed_job_is_listed_in_its_lanes_active_set(r: redis.Redis, queue: Queue) -> None:
    fill(queue, A, 2)
    c = claim_one(queue, LONG_LEASE)
    members = cast(
        list[tuple[bytes, float]], r.zrange(queue.keys.lane_active(A), 0, -1, withscores=True)
    )
    row = queue.job(c.job_id)
    assert row is not None
    assert [(text(m), int(s)) for m, s in members] == [(c.job_id, int(row["claimed"]))]
    queue.complete(c.job_id, c.token)
    assert not r.exists(queue.keys.lane_active(A))
    check_invariants(queue)
