"""The metrics views: Prometheus text and JSON, opened by a bearer token or
the view permission, a fixed number of round trips whatever the lanes, and
the history they read kept in bounded memory."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import redis
from django.test import Client

from django_emq.backend import configured_queues
from django_emq.engine.queue import Queue

from .helpers import claim_one, fill, lane
from .invariants import text
from .test_admin import UserFactory, counted, logged_in, make_user, q, viewer

__all__ = ["counted", "make_user", "q", "viewer"]  # fixtures used below

TOKEN = "s3cret-token-of-32-characters!!!"
pytestmark = pytest.mark.django_db


def work(q: Queue, lanes: int = 3) -> None:
    for i in range(lanes):
        fill(q, lane(i), 2)
    for _ in range(lanes):
        claim = claim_one(q)
        q.complete(claim.job_id, claim.token)
    claim = claim_one(q)
    q.fail(claim.job_id, claim.token, "boom")


def test_the_metrics_speak_prometheus(q: Queue, viewer: Client) -> None:
    work(q)
    response = viewer.get("/emq/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    body = response.content.decode()
    assert 'emq_pending{queue="default"} 2\n' in body
    assert 'emq_dead{queue="default"} 1\n' in body
    assert 'emq_jobs_total{queue="default",event="enqueued"} 6\n' in body
    assert 'emq_jobs_total{queue="default",event="completed"} 3\n' in body
    assert 'emq_wait_seconds{queue="default",quantile="0.95"}' in body
    assert f'emq_lane_wait_p95_seconds{{queue="default",lane="{lane(1)}"}}' in body
    for line in body.splitlines():
        assert line.startswith("#") or line.startswith("emq_"), line


def test_the_stats_are_json(q: Queue, viewer: Client) -> None:
    work(q)
    (stats,) = [s for s in viewer.get("/emq/stats").json()["queues"] if s["queue"] == "default"]
    assert (stats["queue"], stats["pending"], stats["dead"]) == ("default", 2, 1)
    assert stats["counters"]["completed"] == 3
    assert len(stats["lanes_top"]) == 2, "the lanes with work left"


def test_drained_jobs_are_counted_so_every_enqueued_job_is_accounted_for(
    q: Queue, viewer: Client
) -> None:
    """The identity docs/metrics.md states: every job enqueued (or revived) is
    pending, scheduled or running now, or was counted once as completed,
    dead, cancelled or drained."""
    work(q)
    (cancelled,) = fill(q, lane(9), 1)
    q.cancel(cancelled)
    drained = sum(q.drain(lane(i)) for i in range(3))
    assert drained == 2
    (stats,) = [s for s in viewer.get("/emq/stats").json()["queues"] if s["queue"] == "default"]
    counters = stats["counters"]
    assert counters["drained"] == 2
    assert counters["enqueued"] + counters["revived"] == (
        stats["pending"] + stats["scheduled"] + stats["inflight"] + counters["completed"]
        + counters["dead"] + counters["cancelled"] + counters["drained"]
    )  # fmt: skip
    body = viewer.get("/emq/metrics").content.decode()
    assert 'emq_jobs_total{queue="default",event="drained"} 2\n' in body


def test_a_bearer_token_or_the_permission_opens_them(
    q: Queue, make_user: UserFactory, settings: Any
) -> None:
    settings.EMQ = {**settings.EMQ, "METRICS_TOKEN": TOKEN}
    anonymous = Client()
    for url in ("/emq/metrics", "/emq/stats"):
        assert anonymous.get(url).status_code == 403
        assert anonymous.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 403
        assert anonymous.get(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert logged_in(make_user(f"u{len(url)}")).get(url).status_code == 403


def test_the_metrics_cost_the_same_round_trips_with_10_and_5000_lanes(
    q: Queue, viewer: Client, counted: Callable[[Callable[[], Any]], int]
) -> None:
    measured = {}
    for lanes in (10, 5_000):
        q.connection.flushall()
        jobs = [{"lane": lane(i), "task_path": "tests.tasks.noop"} for i in range(lanes)] * 2
        for i in range(0, len(jobs), 2_000):
            q.enqueue_many(jobs[i : i + 2_000])
        for _ in range(5):
            claim = claim_one(q)
            q.complete(claim.job_id, claim.token)
        measured[lanes] = {
            url: counted(partial(viewer.get, url)) for url in ("/emq/metrics", "/emq/stats")
        }
    assert measured[10] == measured[5_000]
    queues = len(configured_queues())
    assert max(measured[5_000].values()) <= 7 * queues, measured
    print(f"round trips with {queues} queues:", measured[5_000])


def test_the_history_of_a_busy_minute_is_small(r: redis.Redis, q: Queue) -> None:
    """Bytes the history keys take after 2,000 jobs over 1,000 lanes in one
    minute: one minute hash, one hour's lane waits, the finished window."""
    jobs = [{"lane": lane(i % 1_000), "task_path": "tests.tasks.noop"} for i in range(2_000)]
    q.enqueue_many(jobs)
    while (claims := q.claim(60_000, turns=100)) is not None:
        q.complete_many([(c.job_id, c.token, None) for c in claims])
    k = q.keys
    keys = [text(key) for key in r.keys(k.prefix.replace("{", "\\{").replace("}", "\\}") + "*")]
    minute = [key for key in keys if key.startswith(k.prefix + "m:")]
    lanes = [key for key in keys if key.startswith(k.prefix + "lw:")]
    sizes = {
        "minute": sum(int(r.memory_usage(key) or 0) for key in minute),
        "lane waits": sum(int(r.memory_usage(key) or 0) for key in lanes),
        "finished window": int(r.memory_usage(k.finished) or 0),
    }
    print("history bytes after 2,000 jobs on 1,000 lanes:", json.dumps(sizes))
    assert sizes["minute"] < 1_000
    # Per hour's key (a run that straddles an hour's edge writes two of them).
    per_hour = max((int(r.memory_usage(key) or 0) for key in lanes), default=0)
    # About 60 bytes a lane on Valkey 9, 128 on Redis 7.0 (its hash table is larger).
    assert per_hour < 150 * 1_000, "at most about 150 bytes a lane an hour"
