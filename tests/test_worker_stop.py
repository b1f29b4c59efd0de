"""Stopping a worker from the console, with a real worker process: *Stop after
current jobs* on the workers page asks it; at its next beat it takes no new
job, finishes the one it runs and exits 0, as on SIGTERM; its last record
stays listed as stopped. Also the record's rules on their own."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
import redis
from django.test import Client

from django_emq.engine import worker_control
from django_emq.engine.queue import Queue
from django_emq.engine.rows import STOPPED_KEPT_MS, heartbeat, heartbeat_is_stale, parse_heartbeat
from tests.faults import Workers
from tests.helpers import lane, wait_for
from tests.invariants import check_invariants
from tests.test_admin import html, make_user, manager, q, texts, viewer
from tests.test_worker import runs

__all__ = ["make_user", "manager", "q", "viewer"]  # fixtures used below

pytestmark = pytest.mark.django_db
WORKERS = "/admin/django_emq/job/workers/"
A, B = lane(701), lane(702)
GATE = "test:stop:gate"


def test_a_worker_asked_from_the_console_finishes_its_job_and_exits(
    emq: redis.Redis, q: Queue, manager: Client, workers: Workers
) -> None:
    q.enqueue(A, "tests.tasks.gate", args=["held", GATE])
    worker = workers.start("--concurrency", "1", "--grace", "30")
    worker_id = f"{socket.gethostname()}:{worker.pid}"
    wait_for(lambda: "start:held" in runs(emq), what="the gated job running")
    waiting = [q.enqueue(B, "tests.tasks.record", args=[f"w{i}"]).job_id for i in range(3)]
    wait_for(lambda: emq.hexists(q.keys.workers, worker_id), what="the worker's heartbeat")

    page = html(manager.get(WORKERS))
    stop_url = f"{WORKERS}default/{worker_id}/stop/"
    assert f'action="{stop_url}"' in page
    assert f"Stop worker {worker_id}" in html(manager.post(stop_url, {}))
    assert not emq.hexists(q.keys.stops, worker_id), "the confirmation page changes nothing"
    messages = texts(manager, manager.post(stop_url, {"confirmed": "yes"}))
    assert "was asked to stop" in messages[0]
    wait_for(lambda: "asked to stop from the console" in worker.output(), what="the worker told")
    assert worker.alive(), "it waits for its running job"

    emq.set(GATE, "1")
    assert worker.process.wait(timeout=30) == 0
    assert "end:held" in runs(emq)
    assert not any(f"start:w{i}" in runs(emq) for i in range(3)), "no new job after the ask"
    assert [(q.job(j) or {}).get("state") for j in waiting] == ["pending"] * 3
    record = parse_heartbeat(worker_id, emq.hget(q.keys.workers, worker_id))
    assert record.stopped_ms is not None, "its last record says it stopped"
    assert not emq.hexists(q.keys.stops, worker_id), "the request is gone with it"
    page = html(manager.get(WORKERS))
    assert "stopped at" in page
    assert f'action="{stop_url}"' not in page, "a stopped worker offers no stop"
    check_invariants(q)


def test_asking_an_unknown_or_stopped_worker_changes_nothing(q: Queue, manager: Client) -> None:
    assert not worker_control.ask_to_stop(q, "nobody:1")
    stopped = heartbeat(host="h", pid=1, done=0, running=0, beat_ms=1, stopped_ms=1)
    q.connection.hset(q.keys.workers, "h:1", stopped)
    assert not worker_control.ask_to_stop(q, "h:1")
    messages = texts(manager, manager.post(f"{WORKERS}default/h:1/stop/", {"confirmed": "yes"}))
    assert "Nothing was changed" in messages[0]
    assert q.connection.hlen(q.keys.stops) == 0


def test_the_stop_control_needs_manage_and_post(q: Queue, viewer: Client, manager: Client) -> None:
    live = heartbeat(host="h", pid=2, done=0, running=0, beat_ms=10**13)
    q.connection.hset(q.keys.workers, "h:2", live)
    url = f"{WORKERS}default/h:2/stop/"
    assert viewer.post(url, {"confirmed": "yes"}).status_code == 403
    assert manager.get(url).status_code == 405
    assert "emq-stop-worker" not in html(viewer.get(WORKERS))
    assert q.connection.hlen(q.keys.stops) == 0
    assert worker_control.ask_to_stop(q, "h:2")
    assert set(worker_control.stops_asked(q)) == {"h:2"}


def test_a_stopped_record_is_kept_a_while_then_pruned() -> None:
    stopped = heartbeat(host="h", pid=1, done=3, running=0, beat_ms=1_000, every_ms=200,
                        stopped_ms=1_000)  # fmt: skip
    assert not heartbeat_is_stale(stopped, 1_000 + STOPPED_KEPT_MS, 200, 5)
    assert heartbeat_is_stale(stopped, 1_001 + STOPPED_KEPT_MS, 200, 5)
    assert json.loads(stopped)["stopped"] == 1_000
    assert parse_heartbeat("h:1", stopped).stopped_ms == 1_000
    live = heartbeat(host="h", pid=1, done=3, running=0, beat_ms=1_000, every_ms=200)
    assert heartbeat_is_stale(live, 2_001, 200, 5), "a silent live record goes after 5 beats"
    assert parse_heartbeat("h:1", live).stopped_ms is None


def test_a_hand_edited_worker_id_is_listed_without_a_stop_control(
    q: Queue, manager: Client
) -> None:
    live = heartbeat(host="h", pid=3, done=0, running=0, beat_ms=10**13)
    q.connection.hset(q.keys.workers, mapping={"bad/id <x>": live, "h:3": live})
    page = html(manager.get(WORKERS))
    assert "bad/id &lt;x&gt;" in page
    assert page.count("emq-stop-worker") == 1, "only the well-formed id offers a stop"


def server_ms(q: Queue) -> int:
    seconds, micros = q.connection.time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_a_silent_worker_is_not_asked(q: Queue) -> None:
    """Silent: its last beat older than the window the workers page uses."""
    old = server_ms(q) - worker_control.ALIVE_MS - 1_000
    q.connection.hset(q.keys.workers, "h:4", heartbeat(host="h", pid=4, done=0, running=0,
                                                      beat_ms=old, started_ms=1))  # fmt: skip
    assert not worker_control.ask_to_stop(q, "h:4")
    assert q.connection.hlen(q.keys.stops) == 0


def test_a_request_names_the_incarnation_and_a_new_one_is_asked_afresh(
    q: Queue, manager: Client
) -> None:
    def beats(started_ms: int, pid: int) -> None:
        record = heartbeat(host="h", pid=pid, done=0, running=0, beat_ms=10**13,
                           started_ms=started_ms)  # fmt: skip
        q.connection.hset(q.keys.workers, "web-1", record)

    beats(100, 5)
    assert worker_control.ask_to_stop(q, "web-1")
    first = worker_control.stops_asked(q)["web-1"]
    assert first.of == worker_control.incarnation(100, 5) == "100-5"
    assert first.applies_to("100-5")
    assert "stopping: asked" in html(manager.get(WORKERS))
    beats(200, 5)  # restarted with the same id: the request is not its own
    assert not first.applies_to(worker_control.incarnation(200, 5))
    assert "stopping: asked" not in html(manager.get(WORKERS))
    assert worker_control.ask_to_stop(q, "web-1"), "asked again, for the new one"
    assert worker_control.stops_asked(q)["web-1"].of == "200-5"
    assert worker_control.ask_to_stop(q, "web-1")  # twice: the first request stays
    assert worker_control.stops_asked(q)["web-1"].of == "200-5"


@pytest.mark.parametrize("value", ["oops", "1700000000000", "{}", "1.5"])
def test_a_value_this_version_did_not_write_is_read_alike_by_both_readers(
    q: Queue, manager: Client, value: str
) -> None:
    """The worker and the workers page read a field with one parser: a hand
    edit stops whichever worker has that id, and the page says so."""
    live = heartbeat(host="h", pid=6, done=0, running=0, beat_ms=10**13, started_ms=1)
    q.connection.hset(q.keys.workers, "h:6", live)
    q.connection.hset(q.keys.stops, "h:6", value)
    request = worker_control.stops_asked(q)["h:6"]
    assert request.of is None
    assert request.applies_to("1-6")
    assert "stopping: asked" in html(manager.get(WORKERS))


def test_a_restarted_worker_ignores_a_request_meant_for_the_one_before(
    emq: redis.Redis, q: Queue, workers: Workers
) -> None:
    earlier = heartbeat(host="h", pid=1, done=0, running=0, beat_ms=10**13, started_ms=1)
    emq.hset(q.keys.workers, "web-1", earlier)
    assert worker_control.ask_to_stop(q, "web-1")  # then it died, unread
    worker = workers.start("--worker-id", "web-1")

    def record() -> Any:
        return parse_heartbeat("web-1", emq.hget(q.keys.workers, "web-1"))

    wait_for(lambda: record().pid == worker.process.pid, what="the new worker's beat")
    seen = {record().beat_ms}

    def two_more_beats() -> bool:
        seen.add(record().beat_ms)
        return len(seen) >= 3

    wait_for(two_more_beats, what="two more beats, each reading the request")
    assert worker.alive()
    assert "asked to stop" not in worker.output()
    assert worker_control.ask_to_stop(q, "web-1"), "a request for it, now"
    assert worker.process.wait(timeout=30) == 0
    assert "asked to stop from the console" in worker.output()
