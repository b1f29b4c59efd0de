"""The job page's attempts through the Django test client, on the real
server: every attempt with its worker, start, end, duration and outcome (done,
failed with its error and traceback, lease expired, released, running now),
the attempts past EMQ HISTORY, escaping, huge tracebacks, rows edited by
hand, and the page's one round trip."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis
from django.test import Client

from django_emq.engine.queue import Queue
from django_emq.engine.rows import Row, attempt_history

from .helpers import claim_one, fill, lane, sleep_past
from .test_admin import ERROR, beat, counted, html, make_user, q, viewer
from .test_admin_jobs import job_url

__all__ = ["counted", "make_user", "q", "viewer"]  # fixtures used below

A = lane(301)
pytestmark = pytest.mark.django_db


def attempt_rows(page: str) -> list[dict[str, str]]:
    """Each attempt row's number, outcome class, worker cell, start, end, took."""
    rows = []
    pattern = r'<tr class="emq-attempt emq-outcome-(\w+)" data-attempt="(\d+)">(.*?)</tr>'
    for match in re.finditer(pattern, page, re.S):
        body = match.group(3)

        def cell(name: str, body: str = body) -> str:
            found = re.search(rf'<td class="[^"]*emq-attempt-{name}">(.*?)</td>', body, re.S)
            assert found, (name, body)
            return found.group(1).strip()

        rows.append(
            {
                "outcome": match.group(1),
                "number": match.group(2),
                "worker": cell("worker"),
                "start": cell("start"),
                "end": cell("end"),
                "took": cell("took"),
                "body": body,
            }
        )
    return rows


def shown_time(ms: int, zone: str) -> str:
    return datetime.fromtimestamp(ms / 1000, ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S")


def error(message: str) -> str:
    return ERROR.replace("boom", message)


def test_three_failures_show_each_attempts_times_in_the_site_time_zone_and_its_traceback(
    q: Queue, viewer: Client, settings: Any
) -> None:
    settings.TIME_ZONE = "Asia/Tokyo"
    (job,) = fill(q, A, 1)
    for n in range(3):
        claim = claim_one(q)
        q.retry(job, claim.token, error(f"boom {n}"))
    page = html(viewer.get(job_url(job)))
    rows = attempt_rows(page)
    assert [(r["number"], r["outcome"]) for r in rows] == [(str(n), "failed") for n in (1, 2, 3)]
    row = q.job(job)
    assert row is not None
    for shown, attempt in zip(rows, attempt_history(row).kept, strict=True):
        assert attempt.start_ms is not None
        assert attempt.end_ms is not None
        assert shown_time(attempt.start_ms, "Asia/Tokyo") in shown["start"]
        assert shown_time(attempt.end_ms, "Asia/Tokyo") in shown["end"]
        assert re.fullmatch(r"\d+ ms|\d+\.\d s", shown["took"]), shown["took"]
        assert "ValueError" in shown["body"]
        assert f"boom {int(shown['number']) - 1}" in shown["body"]
        assert "Traceback (most recent call last)" in shown["body"]
    assert "3 attempts" in page


def test_a_done_attempt_reads_done(q: Queue, viewer: Client) -> None:
    (job,) = fill(q, A, 1)
    claim = claim_one(q)
    q.complete(job, claim.token, 1)
    (row,) = attempt_rows(html(viewer.get(job_url(job))))
    assert row["outcome"] == "done"
    assert ">done<" in row["body"]
    assert "<time" in row["end"]


def test_an_expired_lease_and_a_release_read_as_such(
    r: redis.Redis, q: Queue, viewer: Client
) -> None:
    (job,) = fill(q, A, 1)
    claim = claim_one(q, 20)
    sleep_past(r, claim.deadline_ms)
    q.reap()
    q.release(job, claim_one(q).token)
    expired, released = attempt_rows(html(viewer.get(job_url(job))))
    assert (expired["outcome"], released["outcome"]) == ("expired", "released")
    assert "lease expired" in expired["body"]
    assert "released" in released["body"]


def test_the_expiry_that_kills_a_job_shows_its_lease_expired_error(
    r: redis.Redis, q: Queue, viewer: Client
) -> None:
    (job,) = fill(q, A, 1)
    for _ in range(q.max_expiries):
        claim = claim_one(q, 20)
        sleep_past(r, claim.deadline_ms)
        q.reap()
    rows = attempt_rows(html(viewer.get(job_url(job))))
    assert [row["outcome"] for row in rows] == ["expired"] * q.max_expiries
    assert "LeaseExpired" not in rows[0]["body"]
    assert "django_emq.exceptions.LeaseExpired" in rows[-1]["body"]
    assert "MAX_EXPIRIES" in rows[-1]["body"]


def test_a_running_attempt_links_its_live_worker_and_has_no_end(
    r: redis.Redis, q: Queue, viewer: Client
) -> None:
    (job,) = fill(q, A, 1)
    claims = q.claim(60_000, worker_id="w:live")
    assert claims is not None
    seconds, micros = r.time()
    beat(q, "w:live", int(seconds) * 1000 + int(micros) // 1000)
    (row,) = attempt_rows(html(viewer.get(job_url(job))))
    assert row["outcome"] == "running"
    assert "running now" in row["body"]
    assert "<time" not in row["end"]
    assert row["worker"] == (
        '<a href="/admin/django_emq/job/workers/#worker-default-w%3Alive">w:live</a>'
    )


def test_a_running_attempt_whose_lease_ran_out_says_so(
    r: redis.Redis, q: Queue, viewer: Client
) -> None:
    (job,) = fill(q, A, 1)
    claim = claim_one(q, 20)
    sleep_past(r, claim.deadline_ms)
    (row,) = attempt_rows(html(viewer.get(job_url(job))))
    assert row["outcome"] == "running"
    assert "its lease ran out" in row["body"]
    q.connection.zrem(q.keys.active, job)  # by hand: no lease at all
    (row,) = attempt_rows(html(viewer.get(job_url(job))))
    assert "it holds no lease" in row["body"]


def test_a_running_attempt_within_its_lease_has_no_warning(q: Queue, viewer: Client) -> None:
    (job,) = fill(q, A, 1)
    claim_one(q)
    (row,) = attempt_rows(html(viewer.get(job_url(job))))
    assert "emq-lease-warning" not in row["body"]


def test_a_worker_without_a_fresh_beat_is_not_linked(q: Queue, viewer: Client) -> None:
    (job,) = fill(q, A, 1)
    assert q.claim(60_000, worker_id="w:gone") is not None
    beat(q, "w:gone", 1_000)  # beat long ago
    (row,) = attempt_rows(html(viewer.get(job_url(job))))
    assert row["worker"] == "w:gone"


def test_the_workers_page_has_the_anchor_the_job_page_links_to(q: Queue, viewer: Client) -> None:
    beat(q, "w:live", 1_000)
    page = html(viewer.get("/admin/django_emq/job/workers/"))
    assert 'id="worker-default-w:live"' in page


def test_attempts_past_the_history_show_as_not_kept(q: Queue, viewer: Client) -> None:
    (job,) = fill(q, A, 1)
    for _ in range(q.history + 2):
        q.release(job, claim_one(q).token)
    page = html(viewer.get(job_url(job)))
    assert "2 earlier attempts not kept" in page
    rows = attempt_rows(page)
    assert [r["number"] for r in rows] == [str(n) for n in range(3, q.history + 3)]
    assert f"{q.history + 2} attempts" in page


def test_a_job_never_started_says_so(q: Queue, viewer: Client) -> None:
    (job,) = fill(q, A, 1)
    page = html(viewer.get(job_url(job)))
    assert "Not started yet." in page
    assert attempt_rows(page) == []


def test_html_in_an_error_or_a_worker_id_is_escaped(q: Queue, viewer: Client) -> None:
    (job,) = fill(q, A, 1)
    claim = claim_one(q)
    record = {"exception_class_path": "<b>Cls</b>", "traceback": "<script>alert(1)</script>"}
    q.retry(job, claim.token, json.dumps(record))
    q.connection.hset(q.keys.job(job), Row.WORKERS, "w:<i>x</i>")  # by hand: claims refuse it
    page = html(viewer.get(job_url(job)))
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>Cls</b>" not in page
    assert "<i>x</i>" not in page


def test_a_huge_traceback_is_cut_to_its_head_and_tail(q: Queue, viewer: Client) -> None:
    (job,) = fill(q, A, 1)
    claim = claim_one(q)
    text = "Traceback (most recent call last):\n" + "  line\n" * 50_000 + "ValueError: the end"
    q.retry(job, claim.token, json.dumps({"exception_class_path": "builtins.ValueError",
                                          "traceback": text}))  # fmt: skip
    page = html(viewer.get(job_url(job)))
    (row,) = attempt_rows(page)
    cut = re.search(r'<pre class="emq-traceback">(.*?)</pre>', row["body"], re.S)
    assert cut
    assert len(cut.group(1)) < 21_000
    assert "characters left out" in cut.group(1)
    assert cut.group(1).endswith("ValueError: the end")
    assert "Show all" in row["body"]


def test_a_failure_no_attempt_stands_for_is_listed_apart(q: Queue, viewer: Client) -> None:
    (job,) = fill(q, A, 1)
    q.cancel(job)  # cancelled before it ran: a failure, no attempt
    page = html(viewer.get(job_url(job)))
    assert attempt_rows(page) == []
    assert page.count('<tr class="emq-failure">') == 1
    assert "JobCancelled" in page


def ran(page: str) -> str:
    found = re.search(r"\(ran ([^)]*)\)", page)
    assert found, "no ran time"
    return found.group(1)


def test_the_ran_time_sums_the_attempts_and_leaves_out_the_back_off_between(
    q: Queue, viewer: Client
) -> None:
    """Three attempts of 0.2 s, 0.3 s and 0.5 s over 99 s (back-off between
    them): it ran 1.0 s. A row that keeps no attempt times has its span."""
    (job,) = fill(q, A, 1)
    for _ in range(2):
        claim = claim_one(q)
        q.retry(job, claim.token, error("boom"))
    claim = claim_one(q)
    q.complete(job, claim.token, 1)
    base = 1_700_000_000_000
    key = q.keys.job(job)
    q.connection.hset(key, mapping={
        Row.STARTED: base, Row.FINISHED: base + 99_000,
        Row.TRIES: f"{base}+200f,{base + 40_000}+300f,{base + 98_500}+500d",
    })  # fmt: skip
    assert ran(html(viewer.get(job_url(job)))) == "1.0 s"
    q.connection.hdel(key, Row.TRIES)
    assert ran(html(viewer.get(job_url(job)))) == "1 min 39 s"


ODD_ROWS: dict[str, dict[str, str]] = {
    "tries garbage": {Row.TRIES: "x,1+y,<b>,99999999999999"},
    "attempts garbage": {Row.ATTEMPTS: "many"},
    "attempts huge": {Row.ATTEMPTS: "9" * 30},
    "workers huge": {Row.WORKERS: ",".join(f"w{i}" for i in range(5_000))},
    "times out of range": {Row.ENQUEUED: "9" * 15, Row.STARTED: "-5", Row.FINISHED: "1e9"},
    "errors not a list": {Row.ERRORS: '{"a": 1}', Row.ERRORS_TOTAL: "-3"},
    "errors garbage": {Row.ERRORS: "[not json", Row.ERROR: "\x00\xff"},
    "failure number unknown": {Row.TRIES: "1000+5f77"},
    "no state": {Row.STATE: ""},
    "progress garbage": {Row.PROGRESS: "{{{"},
}


@pytest.mark.parametrize("case", sorted(ODD_ROWS))
def test_a_row_edited_by_hand_still_shows(q: Queue, viewer: Client, case: str) -> None:
    (job,) = fill(q, A, 1)
    claim = claim_one(q)
    q.retry(job, claim.token, error("boom"))
    claim_one(q)
    for field, value in ODD_ROWS[case].items():
        q.connection.hset(q.keys.job(job), field, value)
    page = html(viewer.get(job_url(job)))
    assert len(attempt_rows(page)) <= 1_000


def test_the_job_page_costs_one_round_trip(
    r: redis.Redis,
    q: Queue,
    viewer: Client,
    counted: Callable[[Callable[[], Any]], int],
) -> None:
    (job,) = fill(q, A, 1)
    for n in range(3):
        claims = q.claim(60_000, worker_id=f"w:{n}")
        assert claims is not None
        q.retry(job, claims[0].token, error(f"boom {n}"))
        beat(q, f"w:{n}", 1_000)
    viewer.get(job_url(job))  # scripts loaded
    assert counted(lambda: viewer.get(job_url(job))) == 1
