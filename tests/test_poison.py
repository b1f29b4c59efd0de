"""Poison jobs: a job whose worker dies (or freezes) every time it runs it is
not returned to its lane forever. Each lease expiry is counted; when a job's
lease has expired max_expiries times, the reaper makes it dead
with a ``LeaseExpired`` error, and its lane moves on."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.tasks import TaskResultStatus

from django_emq import enqueue_for, lane_id
from django_emq.engine.queue import Claim, Queue
from django_emq.exceptions import LeaseExpired, StaleToken
from tests import chaos_tasks
from tests.chaos_tasks import read_runs
from tests.faults import Workers
from tests.helpers import claim_one, fill, sleep_past, wait_for
from tests.invariants import check_invariants
from tests.test_worker import backend

A = lane_id("USR", 1)


def expire(r: redis.Redis, queue: Queue) -> tuple[str, int, list[str]]:
    """Claim the lane's head with a 1 ms lease, let it run out, reap."""
    c = claim_one(queue, lease_ms=1)
    sleep_past(r, c.deadline_ms)
    return c.job_id, c.token, queue.reap()


def test_job_is_dead_when_its_lease_expired_max_attempts_times(
    r: redis.Redis, queue: Queue
) -> None:
    poison, behind = fill(queue, A, 2)
    for n in (1, 2):
        job_id, _, reaped = expire(r, queue)
        assert (job_id, reaped) == (poison, [poison])
        row = queue.job(poison)
        assert row is not None
        assert (row["state"], row["expiries"]) == ("pending", str(n))
        check_invariants(queue)
    job_id, token, reaped = expire(r, queue)
    assert (job_id, reaped) == (poison, [poison])
    row = queue.job(poison)
    assert row is not None
    assert (row["state"], row["expiries"], row["fails"]) == ("dead", "3", "0")
    error = json.loads(row["error"])
    assert error["exception_class_path"] == "django_emq.exceptions.LeaseExpired"
    assert "expired 3 times" in error["traceback"]
    assert [json.loads(e) for e in json.loads(row["errors"])] == [error]
    assert queue.totals().dead == 1
    with pytest.raises(StaleToken):
        queue.complete(poison, token)
    assert claim_one(queue).job_id == behind, "the lane moved on"
    check_invariants(queue)


def test_max_expiries_one_makes_the_first_expiry_final(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, max_expiries=1)
    (job,) = fill(queue, A, 1)
    expire(r, queue)
    assert (queue.job(job) or {})["state"] == "dead"
    check_invariants(queue)


def test_a_dead_poison_job_retried_by_hand_gets_its_expiries_back(
    r: redis.Redis, queue: Queue
) -> None:
    (poison,) = fill(queue, A, 1)
    for _ in range(3):
        expire(r, queue)
    assert queue.retry_dead([poison]) == 1
    expire(r, queue)
    row = queue.job(poison)
    assert row is not None
    assert (row["state"], row["expiries"]) == ("pending", "1")
    check_invariants(queue)


def test_release_is_not_an_expiry(r: redis.Redis, queue: Queue) -> None:
    (job,) = fill(queue, A, 1)
    for _ in range(5):
        c = claim_one(queue)
        queue.release(c.job_id, c.token)
    row = queue.job(job)
    assert row is not None
    assert (row["state"], row.get("expiries")) == ("pending", None)


@pytest.fixture
def workers(emq: redis.Redis, settings: Any, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(settings.EMQ["URL"], tmp_path)
    yield w
    w.close()


def test_a_job_that_kills_every_worker_running_it_ends_dead(
    emq: redis.Redis, settings: Any, workers: Workers
) -> None:
    """Real workers, restarted as a supervisor would: the poison job kills three
    of them (MAX_EXPIRIES), then it is dead; its lane's other job runs."""
    settings.EMQ = {**settings.EMQ, "MAX_EXPIRIES": 3}
    poison = enqueue_for(A, chaos_tasks.kills_its_worker, "poison")
    behind = enqueue_for(A, chaos_tasks.tick, "behind")
    q = backend().queue("default")

    def state(job_id: str) -> str:
        return (q.job(job_id) or {}).get("state", "")

    deaths = 0
    give_up = time.monotonic() + 60  # safety limit only
    while state(poison.id) != "dead":
        assert time.monotonic() < give_up, "the poison job never ended"
        worker = workers.start("--concurrency", "1", "--lease", "1")
        while worker.alive() and state(poison.id) != "dead":
            time.sleep(0.05)
        deaths += not worker.alive()
    wait_for(lambda: state(behind.id) == "done", what="the lane's other job done")
    runs = read_runs(workers.runs)
    assert [run.attempt for run in runs["poison"]] == [1, 2, 3]
    assert deaths == 3
    poison.refresh()
    assert poison.status == TaskResultStatus.FAILED
    assert poison.errors[-1].exception_class is LeaseExpired
    assert "died or froze every time" in poison.errors[-1].traceback
    check_invariants(q)


def test_max_attempts_one_still_survives_a_killed_worker(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, max_attempts=1)
    (job,) = fill(queue, A, 1)
    expire(r, queue)
    assert (queue.job(job) or {})["state"] == "pending"
    check_invariants(queue)


def test_a_job_whose_lease_expired_before_ends_its_claim(r: redis.Redis, queue: Queue) -> None:
    """A suspect (its worker died or froze running it) is claimed last in a claim
    of many turns: if it kills the next worker too, nothing was claimed with it."""
    lanes = [lane_id("USR", n) for n in range(1, 9)]
    for lane in lanes:
        fill(queue, lane, 3)
    suspect, _, reaped = expire(r, queue)  # the head of the first lane
    assert reaped == [suspect]
    claims = queue.claim(60_000, turns=16, worker_id="w:1")
    assert claims is not None
    # the ring moved on by one turn: the suspect's lane comes round last
    assert [c.lane for c in claims] == [*lanes[1:], lanes[0]]
    assert claims[-1].job_id == suspect
    assert [c.expiries for c in claims] == [0] * 7 + [1]
    check_invariants(queue)


def test_a_poison_job_among_short_ones_takes_no_innocent_job_with_it(
    emq: redis.Redis, settings: Any, workers: Workers
) -> None:
    """Short jobs make a worker prefetch; a poison job among them kills three
    workers. Only its first kill can catch jobs claimed or finished with it
    (nobody knew it yet): each other job is charged at most that one expiry,
    and every one of them ends done. (One job thread: the jobs another thread
    runs or holds when the poison job kills its worker are charged too.)"""
    settings.EMQ = {**settings.EMQ, "MAX_EXPIRIES": 3, "PREFETCH": 16}
    q = backend().queue("default")
    lanes = [lane_id("USR", n) for n in range(2, 10)]
    innocents = [
        enqueue_for(lane, chaos_tasks.tick, f"{lane}-{i}") for i in range(20) for lane in lanes
    ]
    innocents += [enqueue_for(A, chaos_tasks.tick, f"a-{i}") for i in range(10)]
    poison = enqueue_for(A, chaos_tasks.kills_its_worker, "poison")
    innocents += [enqueue_for(A, chaos_tasks.tick, f"a-after-{i}") for i in range(10)]

    def state(job_id: str) -> str:
        return (q.job(job_id) or {}).get("state", "")

    deaths = 0
    give_up = time.monotonic() + 90  # safety limit only
    while any(state(job.id) != "done" for job in innocents) or state(poison.id) != "dead":
        assert time.monotonic() < give_up, "the jobs never ended"
        worker = workers.start("--concurrency", "1", "--lease", "1", "--burst")
        while worker.alive():
            time.sleep(0.05)
        deaths += worker.process.returncode != 0
    assert deaths == 3
    charged = {job.id: int((q.job(job.id) or {}).get("expiries", 0)) for job in innocents}
    assert max(charged.values()) <= 1, charged
    runs = read_runs(workers.runs)
    assert [run.attempt for run in runs["poison"]] == [1, 2, 3]
    check_invariants(q)


def test_a_suspect_at_the_head_of_a_weighted_lane_ends_its_turn_too(
    r: redis.Redis, queue: Queue
) -> None:
    """Nothing is claimed after a suspect, not even the rest of its lane's
    weighted turn: those jobs go back to the lane, in their mint places."""
    heavy = lane_id("USR", 1)
    ids = fill(queue, heavy, 4)
    queue.set_weight(heavy, 3)
    suspect = claim_one_of_turn(queue, lease_ms=1)
    sleep_past(r, suspect.deadline_ms)
    assert queue.reap() == [suspect.job_id]
    claims = queue.claim(60_000, turns=16, worker_id="w:1")
    assert claims is not None
    assert [(c.job_id, c.expiries) for c in claims] == [(suspect.job_id, 1)]
    assert queue.depth(heavy) == 3
    after = queue.claim(60_000, turns=16, worker_id="w:1")
    assert after is not None
    assert [c.job_id for c in after] == ids[1:]
    check_invariants(queue)


def claim_one_of_turn(queue: Queue, lease_ms: int) -> Claim:
    """The head of a weighted turn, the rest released back to the lane."""
    claims = queue.claim(lease_ms, max_jobs=1)
    assert claims is not None
    assert len(claims) == 1
    return claims[0]
