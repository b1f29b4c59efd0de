"""One word for a claimed job on every page of the console: "running", never
"active" (the engine's state) or "in flight" (issue 22: three words for one
thing). Every page and confirmation page the console serves is read, with a
job in each state in view, and its visible text checked. A cancelled job's
page says whether it ever ran."""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from django_emq.engine import browse
from django_emq.engine.queue import Queue

from .helpers import claim_one, fill, lane
from .test_admin import action, beat, detail, html, make_dead, make_user, manager, q

__all__ = ["make_user", "manager", "q"]  # fixtures used below

LIST = "/admin/django_emq/lane/"
JOBS = "/admin/django_emq/job/"
A, B, T = lane(501), lane(502), lane(503)
pytestmark = pytest.mark.django_db

#: The words the console no longer uses for a claimed job.
OTHER_WORDS = re.compile(r"\bin[ -]flight\b|\bactive\b", re.IGNORECASE)


def visible(page: str) -> str:
    """The page's text as a reader sees it: no scripts, styles, tags or
    attributes (a class name or a query string may say ``active``; no one reads
    those), entities decoded."""
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S | re.I)
    body = re.sub(r"<!--.*?-->", " ", body, flags=re.S)
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", body)).split())


@pytest.fixture
def jobs(q: Queue) -> dict[str, str]:
    """A job in every state (running, pending, scheduled, dead, done,
    cancelled), a tenant, and a worker's heartbeat: every part of every page
    has something to show."""
    (dead,) = make_dead(q, A, 1)
    (done,) = fill(q, A, 1)
    claim = claim_one(q)
    q.complete(claim.job_id, claim.token)
    (running,) = fill(q, A, 1)
    assert claim_one(q).job_id == running
    (pending, cancelled) = fill(q, B, 2)
    q.cancel(cancelled)
    later = datetime.now(UTC) + timedelta(hours=1)
    scheduled = q.enqueue(A, "tests.tasks.noop", run_after=later).job_id
    q.enqueue(T, "tests.tasks.noop", tenant=lane(504))
    q.set_limit(A, 3)
    beat(q, "w:1", browse.overview(q).server_ms)
    return {
        "running": running,
        "pending": pending,
        "scheduled": scheduled,
        "dead": dead,
        "done": done,
        "cancelled": cancelled,
    }


def get(url: str, query: dict[str, str] | None = None) -> Callable[[Client], Any]:
    """A GET of ``url`` by the client it is given."""
    return lambda client: client.get(url, query or {})


def pages(ids: dict[str, str]) -> dict[str, Callable[[Client], Any]]:
    """Every page and confirmation page of the console, by what it is."""
    found: dict[str, Callable[[Client], Any]] = {
        "lane list": lambda c: c.get(LIST),
        "lane list by running": lambda c: c.get(LIST, {"sort": "running"}),
        "lane list, tenants": lambda c: c.get(LIST, {"tenants": "1"}),
        "lane list, paused filter": lambda c: c.get(LIST, {"filter": "paused"}),
        "lane page": lambda c: c.get(detail(A)),
        "lane page, empty lists": lambda c: c.get(detail(lane(599))),
        "drain confirmation": lambda c: c.post(action(A, "drain")),
        "cancel every job confirmation": lambda c: c.post(action(A, "cancel-all")),
        "workers": lambda c: c.get(f"{JOBS}workers/"),
        "stop a worker confirmation": lambda c: c.post(f"{JOBS}workers/default/w:1/stop/"),
        "charts": lambda c: c.get(f"{JOBS}charts/default/"),
        "search": lambda c: c.get(JOBS, {"q": "noop"}),
        "cancel the jobs found confirmation": lambda c: c.post(
            f"{JOBS}default/bulk/cancel-search/", {"q": "noop"}
        ),
        "cancel a task's jobs confirmation": lambda c: c.post(
            f"{JOBS}default/bulk/cancel-task/", {"task": "tests.tasks.noop"}
        ),
    }
    for state in ("pending", "scheduled", "inflight", "dead", "finished"):
        found[f"{state} tab"] = get(JOBS, {"state": state})
    for state, job_id in ids.items():
        found[f"a {state} job's page"] = get(f"{JOBS}default/{job_id}/")
    found["run again confirmation"] = lambda c: c.post(f"{JOBS}default/{ids['done']}/run-again/")
    return found


def test_no_page_says_active_or_in_flight_for_a_running_job(
    manager: Client, jobs: dict[str, str]
) -> None:
    said: dict[str, list[str]] = {}
    for name, get in pages(jobs).items():
        text = visible(html(get(manager)))
        assert "Django administration" in text, f"{name}: not a console page"
        said.update({name: OTHER_WORDS.findall(text)} if OTHER_WORDS.search(text) else {})
    assert said == {}


def test_the_pages_that_count_claimed_jobs_say_running(
    manager: Client, jobs: dict[str, str]
) -> None:
    every = pages(jobs)
    for name in ("lane list", "lane page", "inflight tab", "a running job's page", "workers"):
        text = visible(html(every[name](manager)))
        assert re.search(r"\brunning\b", text, re.IGNORECASE), f"{name} never says running"
    empty = visible(html(every["lane page, empty lists"](manager)))
    assert "None of this lane\u2019s jobs is running." in empty


def test_a_cancelled_job_says_whether_it_ever_ran(q: Queue, manager: Client) -> None:
    """Cancelled while waiting to run: "before it ran", and its attempts say
    none ran. Cancelled while waiting for a retry, after an attempt failed: it
    "will not run again", and its attempt is listed. Both end "Cancelled"."""
    (retried,) = fill(q, B, 1)
    claim = claim_one(q)
    assert claim.job_id == retried
    assert q.retry(retried, claim.token, "boom", delay_ms=3_600_000) == "scheduled"
    assert q.cancel(retried) == "cancelled"
    (never,) = fill(q, A, 1)
    assert q.cancel(never) == "cancelled"
    first = visible(html(manager.get(f"{JOBS}default/{never}/")))
    assert "cancelled — before it ran: it never will" in first
    assert "None: it was cancelled before it ran." in first
    assert "Cancelled" in first
    second = visible(html(manager.get(f"{JOBS}default/{retried}/")))
    assert "cancelled — it will not run again" in second
    assert "None: it was cancelled before it ran." not in second
    assert "Cancelled" in second
