"""The admin's jobs pages through the Django test client, on the real server:
jobs by state, search, the job page and its actions, dead jobs in bulk, the
workers and the charts; every permission; nothing changes on GET; a page
costs as many round trips with 5,000 lanes and finished jobs as with 10."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from django_emq.admin import JobAdmin
from django_emq.engine.queue import Queue
from django_emq.engine.rows import heartbeat

from .helpers import claim_one, dump, fill, lane
from .invariants import check_invariants
from .test_admin import (
    ERROR,
    UserFactory,
    beat,
    counted,
    html,
    logged_in,
    make_dead,
    make_user,
    manager,
    q,
    texts,
    viewer,
)

__all__ = ["counted", "make_user", "manager", "q", "viewer"]  # fixtures used below

JOBS = "/admin/django_emq/job/"
A, B = lane(201), lane(202)
pytestmark = pytest.mark.django_db


def job_url(job_id: str, *rest: str) -> str:
    return f"{JOBS}default/{job_id}/" + "".join(f"{part}/" for part in rest)


def listed(page: str) -> list[str]:
    return re.findall(r'<tr class="emq-job" data-job="([^"]+)">', page)


def test_the_index_lists_jobs_for_a_viewer(viewer: Client) -> None:
    page = html(viewer.get("/admin/"))
    assert JOBS in page


def test_each_state_lists_its_jobs(q: Queue, viewer: Client) -> None:
    (dead,) = make_dead(q, B)
    later = timezone.now() + timedelta(hours=1)
    scheduled = q.enqueue(A, "tests.tasks.noop", run_after=later).job_id
    a = fill(q, A, 2)
    b = fill(q, B, 1)
    running = claim_one(q)
    done = claim_one(q)
    q.complete(done.job_id, done.token, 7)
    assert listed(html(viewer.get(JOBS))) == [a[1]]  # b[0] ran; a[0] runs; one left
    assert listed(html(viewer.get(JOBS, {"state": "scheduled"}))) == [scheduled]
    assert listed(html(viewer.get(JOBS, {"state": "inflight"}))) == [running.job_id]
    assert listed(html(viewer.get(JOBS, {"state": "dead"}))) == [dead]
    assert listed(html(viewer.get(JOBS, {"state": "finished"}))) == [done.job_id, dead]
    assert {running.job_id, done.job_id} == {a[0], b[0]}


def test_the_dead_list_names_the_exception_class_once(q: Queue, viewer: Client) -> None:
    """The class stands beside the message; the message does not repeat it."""
    make_dead(q, B)
    page = html(viewer.get(JOBS, {"state": "dead"}))
    assert "<strong>builtins.ValueError</strong> boom" in page
    assert page.count("ValueError") == 1


def heading(page: str) -> str:
    found = re.search(r'<span id="emq-search-heading">(.*?)</span>', page, re.S)
    assert found, "no search heading"
    return found.group(1)


def test_a_task_search_heading_counts_what_it_found_and_pages_past_the_first_page(
    q: Queue, viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fewer than a page: the count. More than a page: "1-5, and more" and a
    next page, whose heading knows the count once the last hit is in sight."""
    monkeypatch.setattr(JobAdmin, "jobs_per_page", 5)
    fill(q, A, 7)
    done = []
    for _ in range(7):
        claim = claim_one(q)
        q.complete(claim.job_id, claim.token)
        done.append(claim.job_id)
    first = html(viewer.get(JOBS, {"q": "tests.tasks."}))
    assert heading(first) == "Jobs whose task path contains “tests.tasks.”: 1\u20135, and more"
    assert len(listed(first)) == 5
    assert 'id="emq-search-window"' in first, "it says which jobs a search reads"
    assert "pending jobs are found by their lane" in first
    next_url = re.search(r'<a href="([^"]*)" rel="next">', first)
    assert next_url, "a next page"
    second = html(viewer.get(JOBS + next_url.group(1).replace("&amp;", "&")))
    assert heading(second) == "Jobs whose task path contains “tests.tasks.”: 6\u20137 of 7"
    assert set(listed(first) + listed(second)) == set(done)
    assert 'rel="next"' not in second
    assert 'rel="prev"' in second
    past = html(viewer.get(JOBS, {"q": "tests.tasks.", "page": "9"}))  # a stale link
    assert heading(past) == heading(second), "a page past the hits shows the last page"
    monkeypatch.setattr(JobAdmin, "jobs_per_page", 10)
    few = html(viewer.get(JOBS, {"q": "tests.tasks."}))
    assert heading(few) == "7 jobs whose task path contains “tests.tasks.”"
    assert 'id="emq-search-pager"' not in few
    none = html(viewer.get(JOBS, {"q": "other.module"}))
    assert heading(none) == "0 jobs whose task path contains “other.module”"
    assert "among the jobs a search reads" in none


def test_a_search_finds_a_task_by_part_of_its_path_and_offers_the_whole_path(
    q: Queue, manager: Client
) -> None:
    """A task's name alone, in another case, finds its jobs; the bulk actions'
    Task field, which takes a whole dotted path, is filled with the one path
    found (with the words typed when the hits hold several paths)."""
    q.enqueue(A, "tests.tasks.noop")
    q.enqueue(B, "tests.tasks.record")
    for _ in range(2):
        claim = claim_one(q)
        q.complete(claim.job_id, claim.token)
    page = html(manager.get(JOBS, {"q": "NOOP"}))
    assert heading(page) == "1 job whose task path contains “NOOP”"
    assert bulk_task(page) == "tests.tasks.noop"
    both = html(manager.get(JOBS, {"q": "tasks."}))
    assert heading(both) == "2 jobs whose task path contains “tasks.”"
    assert bulk_task(both) == "tasks."


def bulk_task(page: str) -> str:
    """What the bulk actions' Task field holds."""
    found = re.search(r'id="emq-bulk-task" value="([^"]*)"', page)
    assert found, "no Task field"
    return found.group(1)


def test_an_unknown_state_or_queue_is_not_found(q: Queue, viewer: Client) -> None:
    assert viewer.get(JOBS, {"state": "nope"}).status_code == 404
    assert viewer.get(JOBS, {"queue": "nope"}).status_code == 404
    assert viewer.get(job_url("JOB0000000000000000000000")).status_code == 404


def test_search_leads_to_the_job_the_lane_or_the_tasks(
    q: Queue, viewer: Client, make_user: UserFactory
) -> None:
    (job,) = fill(q, A, 1)
    assert viewer.get(JOBS, {"q": job})["Location"] == job_url(job)
    assert viewer.get(JOBS, {"q": A})["Location"] == f"/admin/django_emq/lane/default/{A}/"
    user = make_user("zoe")
    from django_emq.lanes import lane_for

    response = viewer.get(JOBS, {"q": "ZOE@example.com"})
    assert response["Location"] == f"/admin/django_emq/lane/default/{lane_for(user)}/"
    claim = claim_one(q)
    q.complete(claim.job_id, claim.token)
    assert listed(html(viewer.get(JOBS, {"q": "tests.tasks."}))) == [job]
    assert listed(html(viewer.get(JOBS, {"q": "other.module"}))) == []


def test_the_job_page_shows_everything_about_a_job(q: Queue, viewer: Client) -> None:
    job = q.enqueue(A, "tests.tasks.noop", ["<b>x</b>" * 400], {"k": 1}).job_id
    for attempt in range(2):
        claim = claim_one(q)
        q.retry(claim.job_id, claim.token, ERROR.replace("boom", f"boom {attempt}"))
    claim = claim_one(q)
    q.report_progress(job, 0.25, "a quarter")
    page = html(viewer.get(job_url(job)))
    assert "tests.tasks.noop" in page
    assert f'href="/admin/django_emq/lane/default/{A}/"' in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page
    assert "<b>x</b>" not in page, "arguments are escaped"
    assert "Show all" in page, "long arguments are cut"
    assert page.count('<tr class="emq-attempt ') == 3
    assert page.count('class="emq-error"') == 2, "each failed attempt shows its error"
    assert 'class="emq-failure"' not in page, "no failure apart from its attempt"
    assert "boom 0" in page
    assert "boom 1" in page
    assert "a quarter" in page
    assert re.search(r"\d\d:\d\d:\d\d", page), "times with seconds"
    assert 'id="emq-cancel"' not in page, "a viewer gets no forms"


def test_cancel_a_pending_job_from_its_page(q: Queue, manager: Client) -> None:
    (job,) = fill(q, A, 1)
    page = html(manager.get(job_url(job)))
    assert 'id="emq-cancel"' in page
    assert texts(manager, manager.post(job_url(job, "cancel"))) == [
        f"Job {job} cancelled: it will not run."
    ]
    assert q.job(job)["state"] == "cancelled"  # type: ignore[index]
    check_invariants(q, hollow_ok=True)
    messages = texts(manager, manager.post(job_url(job, "cancel")))
    assert "no longer in a state" in messages[0]


def test_ask_a_running_job_to_stop(q: Queue, manager: Client) -> None:
    fill(q, A, 1)
    claim = claim_one(q)
    texts(manager, manager.post(job_url(claim.job_id, "cancel")))
    assert q.cancel_requested(claim.job_id)
    assert "asked to stop at" in html(manager.get(job_url(claim.job_id)))


def test_a_job_page_keeps_the_stop_request_after_the_task_returned(
    q: Queue, manager: Client
) -> None:
    """A sync task that reads the flag and returns ends done: its page still
    says a stop was asked, and when."""
    fill(q, A, 1)
    claim = claim_one(q)
    texts(manager, manager.post(job_url(claim.job_id, "cancel")))
    q.complete(claim.job_id, claim.token, "stopped")
    page = html(manager.get(job_url(claim.job_id)))
    assert 'id="emq-job-stop-asked"' in page
    assert "its task returned: the job ended done" in page


def test_run_a_scheduled_job_now_and_retry_a_dead_one(q: Queue, manager: Client) -> None:
    (dead,) = make_dead(q, B)
    later = timezone.now() + timedelta(hours=1)
    job = q.enqueue(A, "tests.tasks.noop", run_after=later).job_id
    texts(manager, manager.post(job_url(job, "run-now")))
    assert q.job(job)["state"] == "pending"  # type: ignore[index]
    texts(manager, manager.post(job_url(dead, "retry")))
    assert q.job(dead)["state"] == "pending"  # type: ignore[index]
    check_invariants(q)


def test_move_a_job_to_another_lane(q: Queue, manager: Client) -> None:
    (job,) = fill(q, A, 1)
    assert texts(manager, manager.post(job_url(job, "move"), {"lane": B})) == [
        f"Job {job} moved to lane {B}."
    ]
    assert q.job(job)["group"] == B  # type: ignore[index]
    assert (
        "Nothing was changed"
        in texts(manager, manager.post(job_url(job, "move"), {"lane": "x y"}))[0]
    )
    check_invariants(q)


def test_dead_jobs_in_bulk_ask_first_then_act(q: Queue, manager: Client) -> None:
    dead = make_dead(q, A, 2) + make_dead(q, B, 1)
    url = f"{JOBS}default/dead-jobs/"
    confirm = html(manager.post(url + "retry/", {"scope": "selected", "job": [dead[0]]}))
    assert "Yes, I\u2019m sure" in confirm
    assert q.totals().dead == 3, "the confirmation page changes nothing"
    texts(
        manager,
        manager.post(url + "retry/", {"scope": "selected", "job": [dead[0]], "confirmed": "yes"}),
    )
    assert q.totals().dead == 2
    assert "Delete 2 dead jobs" in html(manager.post(url + "delete/", {"scope": "all"}))
    assert texts(manager, manager.post(url + "delete/", {"scope": "all", "confirmed": "yes"})) == [
        "Deleted 2 dead jobs."
    ]
    assert q.totals().dead == 0
    check_invariants(q)


def test_the_workers_page_lists_workers_and_the_jobs_they_hold(q: Queue, viewer: Client) -> None:
    fill(q, A, 1)
    claim = q.claim(60_000, worker_id="host-a:11")
    assert claim is not None
    from django_emq.engine import browse

    now = browse.overview(q).server_ms
    record = heartbeat(host="host-a", pid=11, done=40, running=1, beat_ms=now,
                       queues=("default",), concurrency=8, failed=2,
                       started_ms=now - 3_723_000)  # fmt: skip
    q.connection.hset(q.keys.workers, "host-a:11", record)
    beat(q, "old:1", now)
    page = html(viewer.get(JOBS + "workers/"))
    assert "host-a:11" in page
    assert "1 h 2 min" in page, "its uptime"
    row = page[page.index("host-a:11") :]
    assert re.search(r">8<.*>40<.*>2<", row, re.S), "concurrency, done, failed"
    assert job_url(claim[0].job_id) in page


def test_the_charts_page_draws_svg_from_the_history(q: Queue, viewer: Client) -> None:
    fill(q, A, 3)
    for _ in range(2):
        claim = claim_one(q)
        q.complete(claim.job_id, claim.token)
    page = html(viewer.get(JOBS + "charts/default/"))
    assert page.count('<figure class="emq-chart">') == 5
    assert 'data-points="1"' in page
    assert A in page, "the busiest lanes' waits"
    assert "<script" not in page.split('<div id="content-main"')[1]


def test_permissions(q: Queue, make_user: UserFactory, viewer: Client) -> None:
    (job,) = fill(q, A, 1)
    nobody = logged_in(make_user("nobody"))
    for url in (JOBS, job_url(job), JOBS + "workers/", JOBS + "charts/default/"):
        assert nobody.get(url).status_code == 403, url
        assert Client().get(url).status_code == 302, url
    assert viewer.post(job_url(job, "cancel")).status_code == 403
    assert viewer.post(f"{JOBS}default/dead-jobs/retry/", {"scope": "all"}).status_code == 403
    assert q.job(job)["state"] == "pending"  # type: ignore[index]


def test_nothing_changes_on_get(q: Queue, manager: Client, r: redis.Redis) -> None:
    make_dead(q, B)
    (job,) = fill(q, A, 1)
    before = dump(r)
    for url in (job_url(job, "cancel"), job_url(job, "move"), f"{JOBS}default/dead-jobs/delete/"):
        assert manager.get(url).status_code == 405
    for url in (JOBS, job_url(job), JOBS + "workers/", JOBS + "charts/default/"):
        assert manager.get(url).status_code == 200
    assert dump(r) == before


def test_a_post_without_the_csrf_token_is_refused(q: Queue, make_user: UserFactory) -> None:
    (job,) = fill(q, A, 1)
    client = logged_in(make_user("csrf", "manage_lanes"), enforce_csrf_checks=True)
    assert client.post(job_url(job, "cancel")).status_code == 403
    assert q.job(job)["state"] == "pending"  # type: ignore[index]


# -- round trips ------------------------------------------------------------------------


def populate(q: Queue, lanes: int) -> str:
    """``lanes`` lanes with a pending job, as many finished jobs, and a few of
    every state on lane A; answers a finished job's id."""
    make_dead(q, A, 5)
    fill(q, A, 10)
    jobs = [{"lane": lane(1_000 + i), "task_path": "tests.tasks.noop"} for i in range(lanes)]
    for i in range(0, len(jobs), 2_000):
        q.enqueue_many(jobs[i : i + 2_000])
    q.enqueue(A, "tests.tasks.noop", run_after=timezone.now() + timedelta(hours=1))
    done = ""
    for _ in range(lanes):
        claim = claim_one(q)
        q.complete(claim.job_id, claim.token, {"n": 1})
        done = claim.job_id
    claim_one(q)
    return done


PAGES: dict[str, Callable[[Client, str], Any]] = {
    "next to run": lambda c, j: c.get(JOBS),
    "scheduled": lambda c, j: c.get(JOBS, {"state": "scheduled"}),
    "running": lambda c, j: c.get(JOBS, {"state": "inflight"}),
    "dead": lambda c, j: c.get(JOBS, {"state": "dead"}),
    "finished, page 2": lambda c, j: c.get(JOBS, {"state": "finished", "page": "2"}),
    "task search": lambda c, j: c.get(JOBS, {"q": "tests.nothing"}),
    "task search, page 3": lambda c, j: c.get(JOBS, {"q": "tests.", "page": "3"}),
    "job page": lambda c, j: c.get(job_url(j)),
    "workers": lambda c, j: c.get(JOBS + "workers/"),
    "charts": lambda c, j: c.get(JOBS + "charts/default/"),
    "bulk confirmation": lambda c, j: c.post(f"{JOBS}default/dead-jobs/delete/", {"scope": "all"}),
}


def test_every_jobs_page_costs_the_same_round_trips_with_10_and_5000_lanes(
    q: Queue,
    manager: Client,
    counted: Callable[[Callable[[], Any]], int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(JobAdmin, "jobs_per_page", 5)
    measured: dict[int, dict[str, int]] = {}
    for lanes in (10, 5_000):
        q.connection.flushall()
        done = populate(q, lanes)
        measured[lanes] = {
            name: counted(partial(page, manager, done)) for name, page in PAGES.items()
        }
    assert measured[10] == measured[5_000]
    assert max(measured[5_000].values()) <= 8, measured[5_000]
    print("round trips per page:", json.dumps(measured[5_000]))


__all__ += ["User"]
