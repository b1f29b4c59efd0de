"""Rate limits per lane: at most ``count`` jobs started in any ``per`` window
(a sliding log on the server clock), a throttled lane off the ring until its
next slot, back through promote or a passing claim; state kept in Valkey."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from django_emq.engine.queue import Queue
from tests import chaos_tasks

from .faults import RestartableServer, Workers
from .helpers import (
    LONG_LEASE,
    claim_one,
    dump,
    fill,
    lane,
    new_client,
    on_ring,
    ring,
    sleep_past,
    wait_for,
)
from .invariants import check_invariants

A, B, C = lane(1), lane(2), lane(3)
HOUR = 3600


def served(queue: Queue, n: int) -> list[str]:
    """The lanes of the next ``n`` single-job claims (``-`` for an empty ring)."""
    out = []
    for _ in range(n):
        claims = queue.claim(LONG_LEASE)
        out.append("-" if not claims else claims[0].lane)
    return out


def starts(r: redis.Redis, queue: Queue, lane_id: str) -> list[int]:
    """Server claim times (ms) of every job of ``lane_id`` the queue has started."""
    rows = [r.hgetall(k) for k in r.scan_iter(match=queue.keys.prefix + "job:*")]
    return sorted(
        int(row[b"claimed"])
        for row in rows
        if row.get(b"group") == lane_id.encode() and b"claimed" in row
    )


def assert_never_more_than(stamps: list[int], count: int, per_ms: int) -> None:
    """No window of ``per_ms`` holds more than ``count`` of ``stamps``."""
    for i in range(len(stamps) - count):
        assert stamps[i + count] - stamps[i] >= per_ms, (
            f"starts {stamps[i : i + count + 1]} put {count + 1} in under {per_ms} ms"
        )


def test_a_lane_starts_at_most_its_count_then_leaves_the_ring(r: redis.Redis, queue: Queue) -> None:
    queue.set_rate(A, 2, HOUR)
    fill(queue, A, 5)
    fill(queue, B, 5)
    assert served(queue, 6) == [A, B, A, B, B, B]
    assert A not in on_ring(r, queue)
    info = queue.lane(A)
    assert info.rate == (2, float(HOUR))
    assert info.throttled_until_ms is not None
    check_invariants(queue)


def test_a_throttled_lane_is_not_put_back_by_completes_or_enqueues(
    r: redis.Redis, queue: Queue
) -> None:
    queue.set_rate(A, 1, HOUR)
    fill(queue, A, 3)
    c = claim_one(queue)
    queue.complete(c.job_id, c.token)
    fill(queue, A, 1)
    assert ring(r, queue) == []
    assert queue.claim(LONG_LEASE) is None
    check_invariants(queue)


def test_promote_puts_a_lane_back_when_its_slot_is_due(r: redis.Redis, queue: Queue) -> None:
    queue.set_rate(A, 2, 0.2)
    fill(queue, A, 5)
    assert served(queue, 3) == [A, A, "-"]
    due = queue.lane(A).throttled_until_ms
    assert due is not None
    count, next_due = queue.promote()
    assert (count, next_due) == (0, due)  # not yet
    sleep_past(r, due)
    queue.promote()
    assert ring(r, queue) == [A]
    assert queue.lane(A).throttled_until_ms is None
    check_invariants(queue)


def test_a_claim_passing_by_puts_a_due_lane_back(r: redis.Redis, queue: Queue) -> None:
    queue.set_rate(A, 1, 0.1)
    fill(queue, A, 3)
    fill(queue, B, 3)
    assert served(queue, 1) == [A]
    sleep_past(r, queue.lane(A).throttled_until_ms or 0)
    assert sorted(served(queue, 2)) == [A, B]  # no promote in between


def test_a_window_slides_no_burst_at_its_edge(r: redis.Redis, queue: Queue) -> None:
    """Three starts at t=0 allow the fourth only once the first is a window old."""
    queue.set_rate(A, 3, 0.3)
    fill(queue, A, 8)
    first = served(queue, 4)
    assert first == [A, A, A, "-"]
    stamps = starts(r, queue, A)
    sleep_past(r, stamps[0] + 300)
    queue.promote()
    assert served(queue, 1) == [A]
    assert_never_more_than(starts(r, queue, A), 3, 300)


def test_a_weighted_lane_is_cut_to_its_window(queue: Queue) -> None:
    queue.set_weight(A, 5)
    queue.set_rate(A, 3, HOUR)
    fill(queue, A, 10)
    claims = queue.claim(LONG_LEASE)
    assert claims is not None
    assert len(claims) == 3
    check_invariants(queue)


def test_the_queue_default_applies_to_lanes_without_their_own(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, rate=(1, HOUR))
    queue.set_rate(B, 3, HOUR)
    fill(queue, A, 4)
    fill(queue, B, 4)
    assert sorted(served(queue, 5)) == ["-", A, B, B, B]
    check_invariants(queue)


def test_clearing_a_rate_puts_the_lane_back_at_once(r: redis.Redis, queue: Queue) -> None:
    queue.set_rate(A, 1, HOUR)
    fill(queue, A, 3)
    served(queue, 1)
    queue.clear_rate(A)
    assert ring(r, queue) == [A]
    assert queue.lane(A).rate is None
    assert served(queue, 2) == [A, A]
    check_invariants(queue)


def test_raising_a_rate_lets_the_lane_start_more_now(r: redis.Redis, queue: Queue) -> None:
    queue.set_rate(A, 1, HOUR)
    fill(queue, A, 3)
    served(queue, 1)
    queue.set_rate(A, 2, HOUR)  # the start already made counts against the new window
    assert served(queue, 2) == [A, "-"]
    check_invariants(queue)


def test_a_rate_survives_a_server_restart(server: RestartableServer) -> None:
    client = server.client()
    queue = Queue("q", connection=client)
    queue.set_rate(A, 2, HOUR)
    fill(queue, A, 5)
    assert served(queue, 2) == [A, A]
    client.close()
    server.restart()
    client = server.client()
    queue = Queue("q", connection=client)
    queue.promote()
    assert served(queue, 1) == ["-"]  # still throttled: no second window after a restart
    check_invariants(queue)
    client.close()


def test_eight_threads_never_exceed_the_rate(r: redis.Redis, queue: Queue) -> None:
    count, per_ms, jobs = 4, 150, 20
    queue.set_rate(A, count, per_ms / 1000)
    fill(queue, A, jobs)
    fill(queue, B, jobs)
    done: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        q = Queue("q", connection=new_client(r))
        while True:
            with lock:
                if len(done) == 2 * jobs:
                    return
            claims = q.claim(LONG_LEASE)
            if not claims:
                q.promote()
                continue
            for c in claims:
                q.complete(c.job_id, c.token)
                with lock:
                    done.append(c.job_id)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert_never_more_than(starts(r, queue, A), count, per_ms)
    check_invariants(queue)


@pytest.mark.parametrize(
    ("count", "per"),
    [(0, 1), (-1, 1), (10_001, 1), (1.5, 1), (True, 1), (1, 0), (1, -1), (1, "1"), (1, 8 * 86400)],
)
def test_a_bad_rate_is_refused_and_changes_nothing(
    r: redis.Redis, queue: Queue, count: Any, per: Any
) -> None:
    fill(queue, A, 1)
    before = dump(r)
    with pytest.raises(ValueError, match=r"count|per_seconds"):
        queue.set_rate(A, count, per)
    with pytest.raises(ValueError, match=r"count|per_seconds"):
        Queue("q", connection=r, rate=(count, per))
    assert dump(r) == before


def test_a_rate_takes_a_timedelta(queue: Queue) -> None:
    queue.set_rate(A, 10, timedelta(minutes=1))
    assert queue.lane(A).rate == (10, 60.0)


# -- a real worker ------------------------------------------------------------------


@pytest.fixture
def workers(server: RestartableServer, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(server.url, tmp_path)
    yield w
    w.close()


def test_a_real_worker_keeps_the_rate_and_serves_other_lanes_meanwhile(
    server: RestartableServer, workers: Workers
) -> None:
    client = server.client()
    queue = Queue("default", connection=client)
    count, per_ms = 2, 400
    queue.set_rate(A, count, per_ms / 1000)
    for lane_id in (A, B):
        queue.enqueue_many(
            {
                "lane": lane_id,
                "task_path": chaos_tasks.nap.module_path,
                "args": [f"{lane_id}{i}", 0],
            }
            for i in range(6)
        )
    workers.start("--concurrency", "2", "--lease", "10")
    wait_for(lambda: int(client.hget(queue.keys.stats, "completed") or 0) == 12, what="all done")
    a, b = starts(client, queue, A), starts(client, queue, B)
    assert_never_more_than(a, count, per_ms)
    assert max(b) < a[-1]  # the other lane was not held back by the throttled one
    check_invariants(queue)
    client.close()


# -- settings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad", [5, (0, 1), (1, 0), (1, 2, 3), "10/s", {"default": (1,)}, {"bad name!": (1, 1)}]
)
def test_a_bad_rate_setting_is_reported(settings: Any, bad: Any) -> None:
    from django_emq.conf import problems

    settings.EMQ = {**settings.EMQ, "RATE": bad}
    assert any("RATE" in p for p in problems())


def test_the_settings_give_each_queue_its_default_rate(emq: redis.Redis, settings: Any) -> None:
    from django_emq import get_queue

    settings.EMQ = {**settings.EMQ, "RATE": {"default": (10, timedelta(minutes=1)), "*": (5, 1)}}
    assert get_queue("default").shards[0].rate == (10, 60_000)
    assert get_queue("other").shards[0].rate == (5, 1000)


# -- the admin ------------------------------------------------------------------


@pytest.mark.django_db
def test_the_admin_shows_and_sets_a_lanes_rate(emq: redis.Redis) -> None:
    from django.test import Client

    from django_emq import get_queue

    from .factories import make_user

    client = Client()
    client.force_login(make_user(staff=True, perms=["view_lanes", "manage_lanes"]))
    queue = get_queue().shards[0]
    fill(queue, A, 3)
    url = f"/admin/django_emq/lane/default/{A}/"
    assert client.post(url + "rate/", {"count": "1", "per_seconds": "3600"}).status_code == 302
    assert queue.lane(A).rate == (1, 3600.0)
    claim_one(queue)
    listing = client.get("/admin/django_emq/lane/").content.decode()
    assert "1/3600.0s" in listing
    assert "throttled" in listing
    assert "throttled" in client.get(url).content.decode()
    client.post(url + "rate/", {"count": "5"})  # no period: refused, nothing changes
    assert queue.lane(A).rate == (1, 3600.0)
    client.post(url + "rate/", {"count": "", "per_seconds": ""})
    assert queue.lane(A).rate is None
    assert queue.lane(A).throttled_until_ms is None
