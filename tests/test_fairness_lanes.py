"""Which lanes the fairness chart and ``emq_lane_wait_p95_seconds`` show
(django_emq.engine.history.window_lanes): over the window of the lane wait
hashes, the lanes that started the most jobs beside those that waited
longest, during a flood and after it drained; read in bounded steps."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from django.test import Client

from django_emq.engine import history, ops
from django_emq.engine.queue import Queue
from django_emq.engine.records import ClaimRequest
from django_emq.engine.shards import ShardedQueue
from django_emq.engine.tally import Tally

from .helpers import LONG_LEASE, TASK, claim_one, fill, lane
from .test_admin import html, make_user, q, viewer

__all__ = ["make_user", "q", "viewer"]  # fixtures used below

pytestmark = pytest.mark.django_db
CHARTS = "/admin/django_emq/job/charts/default/"
FLOOD = lane(300)
LIGHT = [lane(301), lane(302), lane(303)]


def lanes_chart(page: str) -> str:
    """The third chart of the charts page (after the last hour's two): the lanes' waits."""
    figures = page.split('<figure class="emq-chart">')
    return figures[3].split("</figure>")[0]


def metric_lanes(client: Client) -> set[str]:
    body = client.get("/emq/metrics").content.decode()
    return set(re.findall(r'emq_lane_wait_p95_seconds\{queue="default",lane="([^"]+)"\}', body))


def stats(client: Client) -> dict[str, Any]:
    queues: list[dict[str, Any]] = client.get("/emq/stats").json()["queues"]
    (found,) = [s for s in queues if s["queue"] == "default"]
    return found


def run(q: Queue, n: int) -> None:
    for _ in range(n):
        claim = claim_one(q)
        q.complete(claim.job_id, claim.token)


def test_a_flood_shows_beside_the_light_lanes_and_stays_after_the_drain(
    q: Queue, viewer: Client
) -> None:
    """A flood lane of 300 jobs and three light lanes of two: while the flood
    is pending and after every job ran, both views show all four lanes (the
    deepest lanes now: only the flood lane, then none)."""
    fill(q, FLOOD, 300)
    for light in LIGHT:
        fill(q, light, 2)
    run(q, 8 + 20)  # the ring serves each lane in turn: the light lanes run out first
    during = stats(viewer)
    assert [row["lane"] for row in during["lanes_top"]] == [FLOOD]
    waits = {row["lane"]: row["started"] for row in during["lanes_waits"]}
    assert waits == {FLOOD: 22, **dict.fromkeys(LIGHT, 2)}
    assert metric_lanes(viewer) == {FLOOD, *LIGHT}
    chart = lanes_chart(html(viewer.get(CHARTS)))
    assert all(name in chart for name in (FLOOD, *LIGHT)), chart

    while (claims := q.claim(60_000, turns=100)) is not None:
        q.complete_many([(c.job_id, c.token, None) for c in claims])
    after = stats(viewer)
    assert after["lanes_top"] == [], "no lane is deep now"
    waits = {row["lane"]: row["started"] for row in after["lanes_waits"]}
    assert waits == {FLOOD: 300, **dict.fromkeys(LIGHT, 2)}
    assert after["lanes_waits_partial"] is False
    assert metric_lanes(viewer) == {FLOOD, *LIGHT}
    chart = lanes_chart(html(viewer.get(CHARTS)))
    assert "<svg" in chart, "not empty after the drain"
    assert all(name in chart for name in (FLOOD, *LIGHT)), chart


def test_the_heaviest_and_the_worst_waiting_lanes_are_chosen() -> None:
    """Of 30 lanes: the 10 with the most jobs started and the 10 worst p95
    waits; a light lane that waited long is in, a light quick one may not be."""
    histograms = {lane(400): {2: 1_000}}  # the flood: many jobs, quick
    histograms |= {lane(401 + i): {3: 5} for i in range(9)}  # light, quickest, most
    histograms |= {lane(410 + i): {4: 1} for i in range(18)}  # light, quick
    histograms |= {lane(450): {30: 1}, lane(451): {28: 2}}  # light, slow
    picked = history.chosen(histograms)
    names = [w.lane for w in picked]
    assert names[:2] == [lane(450), lane(451)], "worst p95 first"
    assert lane(400) in names
    assert {lane(401 + i) for i in range(9)} <= set(names), "the next heaviest"
    assert len(names) == 20, "10 heaviest + 10 worst, none in both"
    assert len(history.chosen(histograms, heaviest=3, worst=3)) == 6
    assert history.chosen({}) == []
    assert history.chosen({lane(1): {}}) == [], "a lane with no start has no wait"


def test_a_large_window_is_read_up_to_its_bound_and_says_so(
    q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane wait hash of 2,000 fields (a hash table, not a listpack) read
    with one step of 100: fewer fields read than held, flagged partial."""
    seconds, _ = q.connection.time()
    now_ms = int(seconds) * 1000
    tally = Tally()
    tally.firsts = [(f"j{i}", lane(500 + i), now_ms, 3) for i in range(2_000)]
    for answer in q.runner.run_many(ops.record_history(q, tally)):
        assert not isinstance(answer, Exception)
    whole = history.window_lanes(q, now_ms)
    assert (whole.fields_read, whole.fields_total, whole.partial) == (2_000, 2_000, False)
    monkeypatch.setattr(history, "SCAN_STEPS", 1)
    monkeypatch.setattr(history, "SCAN_COUNT", 100)
    part = history.window_lanes(q, now_ms)
    assert part.fields_total == 2_000
    assert 0 < part.fields_read < 2_000
    assert part.partial
    assert 0 < len(part.lanes) <= 20, "picked from the fields read"


def test_the_window_spans_every_shard(r: redis.Redis) -> None:
    """Lanes on different shards of a sharded queue: each shard's hashes are
    read, and every lane that started a job is there."""
    sq = ShardedQueue("q", 3, connection=r)
    lanes = [lane(600 + i) for i in range(10)]  # no more than the heaviest ten
    assert len({id(sq.shard_for_lane(name)) for name in lanes}) == 3, "all three shards"
    sq.enqueue_many({"lane": name, "task_path": TASK} for name in lanes)
    while (found := sq.claim_shard(ClaimRequest(LONG_LEASE, turns=10))) is not None:
        shard, claims = found
        shard.complete_many([(c.job_id, c.token, None) for c in claims])
    window = history.window_lanes(sq)
    assert sorted(w.lane for w in window.lanes) == sorted(lanes)
    assert all(w.started == 1 for w in window.lanes)
    assert not window.partial
