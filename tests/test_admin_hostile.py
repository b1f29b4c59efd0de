"""The jobs lists, the lane page and the job page, read as a hostile operator
would: rows edited by hand (garbage numbers, impossible times, a lane that is
no lane, fields missing), HTML where text belongs. Every page still renders,
escaped."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.test import Client
from django.utils import timezone

from django_emq.engine.queue import Queue
from django_emq.engine.rows import Row

from .helpers import claim_one, dump, fill, lane, sleep_past
from .test_admin import ERROR, html, logged_in, make_dead, make_user, q, viewer
from .test_admin_jobs import JOBS, job_url, listed

__all__ = ["make_user", "q", "viewer"]  # fixtures used below

A = lane(401)
pytestmark = pytest.mark.django_db

#: Fields a hand edit may leave in any state's row, each a separate case.
EDITS: dict[str, dict[str, str]] = {
    "counters garbage": {Row.ATTEMPTS: "many", Row.FAILS: "x"},
    "times garbage": {Row.ENQUEUED: "soon", Row.CLAIMED: "1.5", Row.FINISHED: "-"},
    "times out of range": {Row.ENQUEUED: "9" * 18, Row.CLAIMED: "9" * 40, Row.FINISHED: "-9" * 9},
    "html everywhere": {
        Row.TASK: "<script>x()</script>",
        Row.WORKER: "<i>w</i>",
        Row.ERROR: "<img src=x onerror=alert(1)>",
        Row.ARGS: '["<b>"]',
    },
    "a lane that is no lane": {Row.LANE: "a/b <c>"},
    "an empty lane": {Row.LANE: ""},
    "a user lane that is no lane": {Row.LANE: "USR!!<>"},
    "progress infinite": {Row.PROGRESS: '{"done": Infinity, "at": 1e30, "note": "<b>"}'},
    "progress not a number": {Row.PROGRESS: '{"done": NaN, "at": -1, "note": null}'},
    "progress huge note": {Row.PROGRESS: '{"done": 0.5, "at": 1, "note": "%s"}' % ("n" * 100_000)},
}

#: Where each state's jobs are listed.
LISTS = {
    "pending": {"state": "pending"},
    "scheduled": {"state": "scheduled"},
    "dead": {"state": "dead"},
    "finished": {"state": "finished"},
    "active": {"state": "inflight"},
}


def rows_in_every_state(q: Queue) -> dict[str, str]:
    """A dead, a finished, an active, a pending and a scheduled job of lane A:
    state -> id."""
    (dead,) = make_dead(q, A)
    (done, active, waiting) = fill(q, A, 3)
    claim = claim_one(q)
    q.complete(claim.job_id, claim.token)
    claim_one(q)
    later = q.enqueue(A, "tests.tasks.noop", run_after=timezone.now() + timedelta(hours=1))
    return {"dead": dead, "finished": done, "active": active, "pending": waiting,
            "scheduled": later.job_id}  # fmt: skip


@pytest.mark.parametrize("case", sorted(EDITS))
def test_every_list_and_job_page_renders_a_row_edited_by_hand(
    q: Queue, viewer: Client, case: str
) -> None:
    jobs = rows_in_every_state(q)
    for job in jobs.values():
        for field, value in EDITS[case].items():
            q.connection.hset(q.keys.job(job), field, value)
    for state, query in LISTS.items():
        page = html(viewer.get(JOBS, query))
        assert jobs[state] in listed(page), (state, case)
        assert "<script>x()</script>" not in page
        assert "<img src=x" not in page
        assert "<i>w</i>" not in page
    for job in jobs.values():
        page = html(viewer.get(job_url(job)))
        assert "<script>x()</script>" not in page
        assert '<b>"' not in page
    page = html(viewer.get(f"/admin/django_emq/lane/default/{A}/"))
    assert "<img src=x" not in page


def test_a_row_missing_every_field_but_its_state_still_lists(q: Queue, viewer: Client) -> None:
    jobs = rows_in_every_state(q)
    for job in jobs.values():
        key = q.keys.job(job)
        state = q.connection.hget(key, Row.STATE)
        assert state is not None
        q.connection.delete(key)
        q.connection.hset(key, Row.STATE, state)
    for state, query in LISTS.items():
        assert jobs[state] in listed(html(viewer.get(JOBS, query)))
    for job in jobs.values():
        html(viewer.get(job_url(job)))


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ('{"done": Infinity, "at": 1, "note": "x"}', None),
        ('{"done": NaN, "at": 1, "note": "x"}', None),
        ('{"done": 7, "at": 1, "note": "<b>over</b>"}', "100 %"),
        ('{"done": -2, "at": 1, "note": null}', "0 %"),
    ],
)
def test_progress_edited_by_hand_is_held_to_0_to_100_or_not_shown(
    q: Queue, viewer: Client, raw: str, shown: str | None
) -> None:
    (job,) = fill(q, A, 1)
    claim_one(q)
    q.connection.hset(q.keys.job(job), Row.PROGRESS, raw)
    page = html(viewer.get(job_url(job)))
    assert ('id="emq-job-progress"' in page) == (shown is not None)
    if shown:
        assert shown in page
    assert "<b>over</b>" not in page


def test_an_errors_list_edited_to_hold_thousands_shows_the_latest_thousand(
    q: Queue, viewer: Client
) -> None:
    (job,) = fill(q, A, 1)
    q.cancel(job)
    errors = json.dumps([f"error {n}" for n in range(5_000)])
    q.connection.hset(q.keys.job(job), Row.ERRORS, errors)
    page = html(viewer.get(job_url(job)))
    assert page.count('<tr class="emq-failure">') == 1_000
    assert "error 4999" in page
    assert "error 3999<" not in page


def test_a_huge_one_line_error_is_cut_in_the_dead_list(q: Queue, viewer: Client) -> None:
    (dead,) = make_dead(q, A, error=ERROR.replace("boom", "x" * 200_000))
    page = html(viewer.get(JOBS, {"state": "dead"}))
    assert dead in listed(page)
    assert len(page) < 100_000


def test_a_huge_traceback_is_cut_on_the_lane_page(q: Queue, viewer: Client) -> None:
    text = "Traceback (most recent call last):\n" + "  line\n" * 50_000 + "ValueError: the end"
    record = json.dumps({"exception_class_path": "builtins.ValueError", "traceback": text})
    (dead,) = make_dead(q, A, error=record)
    page = html(viewer.get(f"/admin/django_emq/lane/default/{A}/"))
    assert len(page) < 60_000
    assert "characters left out" in page
    assert "ValueError: the end" in page
    assert f'href="/admin/django_emq/job/default/{dead}/"' in page


def test_a_job_row_of_the_wrong_type_gets_the_damaged_page(q: Queue, viewer: Client) -> None:
    (job,) = fill(q, A, 1)
    q.connection.delete(q.keys.job(job))
    q.connection.set(q.keys.job(job), "garbage")
    page = viewer.get(job_url(job))
    assert page.status_code == 503
    assert q.keys.job(job) in page.content.decode()


def test_a_heartbeats_key_of_the_wrong_type_leaves_the_job_page_readable(
    q: Queue, viewer: Client
) -> None:
    (job,) = fill(q, A, 1)
    claim_one(q)
    q.connection.set(q.keys.workers, "garbage")
    page = html(viewer.get(job_url(job)))
    assert "running now" in page


@pytest.mark.parametrize("page", ["9" * 30, "-1", "0", "1e3", "\uff12"])
@pytest.mark.parametrize("state", ["scheduled", "inflight", "dead", "finished"])
def test_a_page_number_out_of_range_shows_a_page(
    q: Queue, viewer: Client, state: str, page: str
) -> None:
    rows_in_every_state(q)
    html(viewer.get(JOBS, {"state": state, "page": page}))


@pytest.mark.parametrize("param", ["pending", "inflight", "dead"])
def test_a_lane_page_number_out_of_range_shows_a_page(q: Queue, viewer: Client, param: str) -> None:
    rows_in_every_state(q)
    html(viewer.get(f"/admin/django_emq/lane/default/{A}/", {param: "9" * 30}))


def test_a_search_of_ten_thousand_characters_finds_nothing(q: Queue, viewer: Client) -> None:
    rows_in_every_state(q)
    page = html(viewer.get(JOBS, {"q": "x" * 10_000}))
    assert listed(page) == []


def test_the_lane_list_shows_a_page_for_a_page_number_out_of_range(
    q: Queue, viewer: Client
) -> None:
    rows_in_every_state(q)
    html(viewer.get("/admin/django_emq/lane/", {"page": "9" * 30}))


def test_html_in_a_queue_name_or_a_search_is_escaped(q: Queue, viewer: Client) -> None:
    assert viewer.get(JOBS, {"queue": "<b>x</b>"}).status_code == 404
    page = html(viewer.get(JOBS, {"q": "<b>tests.</b>"}))
    assert "<b>tests.</b>" not in page


def test_html_in_a_lane_to_move_to_is_refused_and_escaped(
    q: Queue, make_user: Callable[..., Any], r: redis.Redis
) -> None:
    manager = logged_in(make_user("mover", "manage_lanes"))
    (job,) = fill(q, A, 1)
    before = dump(r)
    response = manager.post(job_url(job, "move"), {"lane": "<script>x()</script>"}, follow=True)
    page = html(response)
    assert "<script>x()</script>" not in page
    assert "Nothing was changed" in page
    assert dump(r) == before


def test_an_expired_lease_reads_expired_in_the_in_flight_list_not_0_s_left(
    q: Queue, viewer: Client, r: redis.Redis
) -> None:
    (job,) = fill(q, A, 1)
    claim = claim_one(q, 20)
    sleep_past(r, claim.deadline_ms)
    page = html(viewer.get(JOBS, {"state": "inflight"}))
    assert listed(page) == [job]
    assert "lease expired: back to the lane at the next reap" in page
    assert "lease left" not in page
