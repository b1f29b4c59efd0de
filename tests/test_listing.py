"""Queue-wide listings by state and the history the scripts keep: pages read
by rank, the finished window bounded, per-minute counters and wait
histograms written by the calls the jobs already make."""

from __future__ import annotations

from datetime import timedelta

import redis
from django.utils import timezone

from django_emq.engine import history, listing
from django_emq.engine.queue import Queue
from django_emq.engine.shards import ShardedQueue
from django_emq.engine.tally import bucket_upper_ms

from .helpers import claim_one, fill, lane
from .invariants import check_invariants

A, B, C = lane(1), lane(2), lane(3)


def ids(page: listing.Listing) -> list[str]:
    return [job.row.job_id for job in page.jobs]


def test_pending_jobs_are_listed_in_run_order_across_the_ring(queue: Queue) -> None:
    a = fill(queue, A, 3)
    b = fill(queue, B, 1)
    c = fill(queue, C, 2)
    page = listing.jobs_in_state(queue, "pending", 0, 10)
    assert ids(page) == [a[0], b[0], c[0], a[1], c[1], a[2]]
    assert page.total == 6
    served = [claim_one(queue).job_id for _ in range(6)]
    assert served == ids(page)


def test_scheduled_inflight_dead_and_finished_pages(queue: Queue) -> None:
    later = timezone.now() + timedelta(hours=1)
    soon = queue.enqueue(A, "tests.tasks.noop", run_after=later).job_id
    latest = queue.enqueue(A, "tests.tasks.noop", run_after=later + timedelta(hours=1)).job_id
    fill(queue, B, 3)
    first, second, third = claim_one(queue), claim_one(queue), claim_one(queue)
    queue.complete(first.job_id, first.token, 1)
    queue.fail(second.job_id, second.token, "boom")
    assert ids(listing.jobs_in_state(queue, "scheduled", 0, 10)) == [soon, latest]
    inflight = listing.jobs_in_state(queue, "inflight", 0, 10)
    assert ids(inflight) == [third.job_id]
    assert inflight.jobs[0].row.deadline_ms == third.deadline_ms
    assert ids(listing.jobs_in_state(queue, "dead", 0, 10)) == [second.job_id]
    finished = listing.jobs_in_state(queue, "finished", 0, 10)
    assert ids(finished) == [second.job_id, first.job_id]
    assert listing.jobs_in_state(queue, "finished", 1, 1).total == 2
    assert ids(listing.jobs_in_state(queue, "finished", 1, 1)) == [first.job_id]
    check_invariants(queue)


def test_the_finished_window_is_bounded(r: redis.Redis, queue: Queue) -> None:
    r.zadd(queue.keys.finished, {f"JOB{i:022d}": i for i in range(10_000)})
    fill(queue, A, 1)
    done = claim_one(queue)
    queue.complete(done.job_id, done.token)
    assert r.zcard(queue.keys.finished) == 10_000
    assert r.zscore(queue.keys.finished, "JOB" + "0" * 22) is None, "the oldest left"


def test_a_task_path_is_found_by_any_part_of_it_in_any_case(queue: Queue) -> None:
    """Its start (a module), its name alone, or a part in another case: an
    operator often knows a task's name and not its module."""
    queue.enqueue(A, "app.tasks.Resize_all")
    queue.enqueue(A, "app.other.send")
    for _ in range(2):
        claim = claim_one(queue)
        queue.complete(claim.job_id, claim.token)

    def paths(part: str) -> list[str]:
        return sorted(job.row.task_path for job in listing.find_by_task(queue, part))

    assert paths("app.tasks.") == ["app.tasks.Resize_all"]
    assert paths("resize") == ["app.tasks.Resize_all"]
    assert paths("SEND") == ["app.other.send"]
    assert paths("app.") == ["app.other.send", "app.tasks.Resize_all"]
    assert paths("tasks.send") == []


def test_a_sharded_queue_merges_its_shards_pages(r: redis.Redis) -> None:
    sharded = ShardedQueue("s", 3, connection=r)
    for i in range(9):
        sharded.enqueue(lane(i), "tests.tasks.noop")
    claims = []
    while (found := sharded.claim(60_000)) is not None:
        claims += found
    for claim in claims:
        sharded.complete(claim.job_id, claim.token)
    page = listing.jobs_in_state(sharded, "finished", 2, 4)
    assert page.total == 9
    assert len(page.jobs) == 4
    assert len(ids(listing.jobs_in_state(sharded, "pending", 0, 10))) == 0


def test_the_scripts_count_each_minute_and_histogram_the_waits(queue: Queue) -> None:
    fill(queue, A, 3)
    fill(queue, B, 1)
    for _ in range(3):
        claim = claim_one(queue)
        queue.complete(claim.job_id, claim.token)
    last = claim_one(queue)
    queue.fail(last.job_id, last.token, "boom")
    (minute,) = history.series(queue, step_minutes=1, count=1)
    assert (minute.count("enq"), minute.count("done"), minute.count("dead")) == (4, 3, 1)
    assert sum(minute.waits.values()) == 4, "one wait per first start"
    assert minute.wait_ms(0.95) is not None
    waits = history.lane_waits(queue, [A, B, C])
    assert (sum(waits[A].values()), sum(waits[B].values()), waits[C]) == (3, 1, {})
    check_invariants(queue)


def test_percentiles_come_from_the_log_spaced_buckets() -> None:
    hist = {0: 50, 10: 45, 20: 5}
    assert history.percentile(hist, 0.5) == bucket_upper_ms(0)
    assert history.percentile(hist, 0.95) == bucket_upper_ms(10)
    assert history.percentile(hist, 0.99) == bucket_upper_ms(20)
    assert history.percentile({}, 0.5) is None
