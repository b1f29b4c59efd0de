"""The admin's bulk actions through the Django test client, on the real
server: cancel every job of a task, of a lane or that a search finds; send
back every dead job of a task; run an ended job again; move a job to a
user's lane. Each asks first (a confirmation page that changes nothing),
needs ``manage_lanes`` and the CSRF token, and refuses GET."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.test import Client
from django.utils import timezone

from django_emq.engine import bulk
from django_emq.engine.queue import Queue

from .helpers import claim_one, fill, lane
from .invariants import check_invariants
from .test_admin import (
    UserFactory,
    html,
    logged_in,
    make_dead,
    make_user,
    manager,
    q,
    texts,
    viewer,
)

__all__ = ["make_user", "manager", "q", "viewer"]  # fixtures used below

JOBS = "/admin/django_emq/job/"
LANES = "/admin/django_emq/lane/"
A, B = lane(401), lane(402)
OTHER = "tests.tasks.record"
pytestmark = pytest.mark.django_db


def bulk_url(action: str) -> str:
    return f"{JOBS}default/bulk/{action}/"


def states(q: Queue, ids: list[str]) -> list[str]:
    return [(q.job(i) or {}).get("state", "gone") for i in ids]


def test_cancel_every_job_of_a_task_asks_first(q: Queue, manager: Client) -> None:
    mine = [q.enqueue(lane(410 + i), OTHER).job_id for i in range(3)]
    (kept,) = fill(q, A, 1)
    page = html(manager.post(bulk_url("cancel-task"), {"task": OTHER}))
    assert 'id="emq-bulk-question"' in page
    assert f"Cancel every job of task {OTHER}" in page
    assert states(q, mine) == ["pending"] * 3, "the confirmation page changes nothing"
    done = manager.post(bulk_url("cancel-task"), {"task": OTHER, "confirmed": "yes"})
    assert texts(manager, done) == ["Cancelled 3 jobs: they will not run."]
    assert states(q, mine) == ["cancelled"] * 3
    assert states(q, [kept]) == ["pending"]
    check_invariants(q, hollow_ok=True)


def test_a_bad_task_path_is_refused_and_changes_nothing(q: Queue, manager: Client) -> None:
    (job,) = fill(q, A, 1)
    messages = texts(manager, manager.post(bulk_url("cancel-task"), {"task": "no such thing!"}))
    assert "whole dotted path" in messages[0]
    assert "Nothing was changed" in messages[0]
    assert states(q, [job]) == ["pending"]


def test_cancel_the_jobs_a_search_finds(q: Queue, manager: Client) -> None:
    later = timezone.now() + timedelta(hours=1)
    deferred = [q.enqueue(A, OTHER, run_after=later).job_id for _ in range(2)]
    other = q.enqueue(B, "tests.tasks.noop", run_after=later).job_id
    page = html(manager.post(bulk_url("cancel-search"), {"q": "tests.tasks.rec"}))
    assert "Cancel the 2 jobs" in page
    assert all(job in page for job in deferred)
    shown = hidden(page, "ids")
    assert sorted(shown.split()) == sorted(deferred)
    found_later = q.enqueue(A, OTHER, run_after=later).job_id  # after the page was shown
    done = manager.post(
        bulk_url("cancel-search"), {"q": "tests.tasks.rec", "ids": shown, "confirmed": "yes"}
    )
    assert texts(manager, done) == ["Cancelled 2 jobs: they will not run."]
    assert states(q, [*deferred, other]) == ["cancelled", "cancelled", "scheduled"]
    assert states(q, [found_later]) == ["scheduled"], "exactly the jobs the page showed"


def test_cancel_the_jobs_found_refuses_a_bad_id_and_changes_nothing(
    q: Queue, manager: Client
) -> None:
    (job,) = fill(q, A, 1)
    form = {"q": "tests", "ids": f"{job} not/an/id", "confirmed": "yes"}
    (message,) = texts(manager, manager.post(bulk_url("cancel-search"), form))
    assert "is not a job id" in message
    assert "Nothing was changed" in message
    assert states(q, [job]) == ["pending"]


def test_a_task_cancel_that_stops_at_the_bound_offers_to_go_on(
    q: Queue, manager: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "MOST", 2)
    fill(q, A, 3)  # another task's, looked at first
    mine = q.enqueue(B, OTHER).job_id
    form = {"task": OTHER, "confirmed": "yes"}
    page = html(manager.post(bulk_url("cancel-task"), form))
    assert 'id="emq-go-on"' in page
    assert states(q, [mine]) == ["pending"]
    done = manager.post(bulk_url("cancel-task"), {**form, "cursor": hidden(page, "cursor")})
    assert texts(manager, done) == ["Cancelled 1 job: it will not run."]
    assert states(q, [mine]) == ["cancelled"]


def test_a_lane_cancel_that_stops_at_the_bound_offers_to_go_on(
    q: Queue, manager: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "MOST", 2)
    later = timezone.now() + timedelta(hours=1)
    for n in range(3):  # other lanes' scheduled jobs, looked at first
        q.enqueue(lane(430 + n), OTHER, run_after=later)
    mine = fill(q, A, 1)
    url = f"{LANES}default/{A}/cancel-all/"
    page = html(manager.post(url, {"confirmed": "yes"}))
    assert 'id="emq-go-on"' in page
    assert states(q, mine) == ["pending"]
    done = manager.post(url, {"confirmed": "yes", "cursor": hidden(page, "cursor")})
    assert texts(manager, done) == ["Cancelled 1 job: it will not run."]
    assert states(q, mine) == ["cancelled"]
    (message,) = texts(manager, manager.post(url, {"confirmed": "yes", "cursor": "[1]"}))
    assert "not a cursor" in message
    assert "Nothing was changed" in message


def test_a_dead_retry_that_stops_at_the_bound_offers_to_go_on(
    q: Queue, manager: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "MOST", 2)
    make_dead(q, A, 2)  # tests.tasks.noop, dead first
    q.enqueue(B, OTHER)
    claim = claim_one(q)
    q.fail(claim.job_id, claim.token, "boom")
    form = {"task": OTHER, "confirmed": "yes"}
    page = html(manager.post(bulk_url("retry-dead-task"), form))
    assert 'id="emq-go-on"' in page, "3 dead jobs, 2 looked at per call"
    done = manager.post(bulk_url("retry-dead-task"), {**form, "cursor": hidden(page, "cursor")})
    assert done.status_code == 302, "the second call got through"
    assert states(q, [claim.job_id]) == ["pending"]


def hidden(page: str, name: str) -> str:
    """The value of hidden input ``name`` on a page."""
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)">', page)
    assert found, f"no hidden {name}"
    return unescape(found.group(1))


def test_the_search_page_offers_the_bulk_actions_to_managers_only(
    q: Queue, manager: Client, viewer: Client
) -> None:
    q.enqueue(A, OTHER, run_after=timezone.now() + timedelta(hours=1))
    url = f"{JOBS}?queue=default&q=tests.tasks.record"
    page = html(manager.get(url))
    for element in ("emq-cancel-found", "emq-cancel-task", "emq-retry-dead-task"):
        assert f'id="{element}"' in page
    assert 'id="emq-bulk"' not in html(viewer.get(url))


def test_retry_every_dead_job_of_a_task(q: Queue, manager: Client) -> None:
    dead = make_dead(q, A, 2)  # tests.tasks.noop
    for n in range(2):
        q.enqueue(lane(420 + n), OTHER)
        claim = claim_one(q)
        q.fail(claim.job_id, claim.token, "boom")
    page = html(manager.post(bulk_url("retry-dead-task"), {"task": "tests.tasks.noop"}))
    assert "Send every dead job of task tests.tasks.noop" in page
    done = manager.post(
        bulk_url("retry-dead-task"), {"task": "tests.tasks.noop", "confirmed": "yes"}
    )
    assert texts(manager, done) == ["Sent 2 dead jobs of tests.tasks.noop back to their lanes."]
    assert states(q, dead) == ["pending", "pending"]
    assert q.totals().dead == 2, "the other task's dead jobs stay"
    check_invariants(q, hollow_ok=True)


def test_the_bulk_actions_need_manage_post_and_csrf(
    q: Queue, viewer: Client, manager: Client, make_user: UserFactory
) -> None:
    (job,) = fill(q, A, 1)
    for action in ("cancel-task", "cancel-search", "retry-dead-task"):
        data = {"task": "tests.tasks.noop", "q": "tests", "confirmed": "yes"}
        assert viewer.post(bulk_url(action), data).status_code == 403
        assert manager.get(bulk_url(action)).status_code == 405
    assert manager.post(bulk_url("explode"), {}).status_code == 404
    strict = logged_in(make_user("strict", "manage_lanes"), enforce_csrf_checks=True)
    refused = strict.post(bulk_url("cancel-task"), {"task": "tests.tasks.noop", "confirmed": "yes"})
    assert refused.status_code == 403
    assert states(q, [job]) == ["pending"]


def test_cancel_every_job_of_a_lane_from_its_page(q: Queue, manager: Client) -> None:
    mine = fill(q, A, 3)
    (theirs,) = fill(q, B, 1)
    url = f"{LANES}default/{A}/cancel-all/"
    assert 'id="emq-cancel-all"' in html(manager.get(f"{LANES}default/{A}/"))
    page = html(manager.post(url, {}))
    assert f"Cancel every job of lane {A}" in page
    assert states(q, mine) == ["pending"] * 3
    assert texts(manager, manager.post(url, {"confirmed": "yes"})) == [
        "Cancelled 3 jobs: they will not run."
    ]
    assert states(q, [*mine, theirs]) == ["cancelled"] * 3 + ["pending"]
    check_invariants(q, hollow_ok=True)


def test_run_an_ended_job_again_after_confirming(q: Queue, manager: Client) -> None:
    (dead,) = make_dead(q, A, 1)
    page = html(manager.get(f"{JOBS}default/{dead}/"))
    assert 'id="emq-run-again"' in page
    assert 'id="emq-retry-dead-task"' in page
    url = f"{JOBS}default/{dead}/run-again/"
    confirm = html(manager.post(url, {"lane": ""}))
    assert f"Run job {dead}" in confirm
    assert q.totals().pending == 0, "the confirmation page changes nothing"
    done = manager.post(url, {"lane": "", "confirmed": "yes"})
    assert done.status_code == 302
    new_id = done["Location"].rstrip("/").rsplit("/", 1)[-1]
    assert new_id != dead
    row = q.job(new_id)
    assert row is not None
    assert (row["state"], row["group"]) == ("pending", A)
    assert states(q, [dead]) == ["dead"]


def test_run_again_refuses_a_job_that_has_not_ended(q: Queue, manager: Client) -> None:
    (job,) = fill(q, A, 1)
    assert 'id="emq-run-again"' not in html(manager.get(f"{JOBS}default/{job}/"))
    messages = texts(manager, manager.post(f"{JOBS}default/{job}/run-again/", {"confirmed": "yes"}))
    assert messages == [f"Job {job} has not ended: it cannot run again."]
    assert q.totals().pending == 1


def test_move_and_run_again_take_a_username(
    q: Queue, manager: Client, make_user: UserFactory
) -> None:
    from django_emq import lane_for

    alice = make_user("alice", staff=False)
    (job,) = fill(q, A, 1)
    messages = texts(manager, manager.post(f"{JOBS}default/{job}/move/", {"lane": "alice"}))
    assert messages == [f"Job {job} moved to lane {lane_for(alice)}."]
    assert (q.job(job) or {})["group"] == lane_for(alice)
    messages = texts(manager, manager.post(f"{JOBS}default/{job}/move/", {"lane": "nobody"}))
    assert "neither a lane id nor a user" in messages[0]
    assert (q.job(job) or {})["group"] == lane_for(alice), "nothing changed"


# -- pages that refresh themselves while something runs -------------------------------

REFRESH = '<meta http-equiv="refresh" content="5">'


def test_a_job_page_refreshes_while_the_job_runs_only(q: Queue, viewer: Client) -> None:
    fill(q, A, 2)
    running = claim_one(q)
    page = html(viewer.get(f"{JOBS}default/{running.job_id}/"))
    assert REFRESH in page
    toggle = re.search(r'href="([^"]*)" id="emq-refresh-toggle"', page)
    assert toggle is not None
    assert "refresh=0" in toggle.group(1)
    off = html(viewer.get(f"{JOBS}default/{running.job_id}/?refresh=0"))
    assert REFRESH not in off
    assert 'id="emq-refresh-toggle"' in off, "it can be switched back on"
    q.complete(running.job_id, running.token)
    done = html(viewer.get(f"{JOBS}default/{running.job_id}/"))
    assert REFRESH not in done
    assert 'id="emq-refresh-toggle"' not in done, "nothing runs: nothing to refresh for"


def test_a_lane_page_refreshes_while_one_of_its_jobs_runs(q: Queue, viewer: Client) -> None:
    fill(q, A, 2)
    fill(q, B, 1)
    claim = claim_one(q)
    busy = A if (q.job(claim.job_id) or {})["group"] == A else B
    idle = B if busy == A else A
    assert REFRESH in html(viewer.get(f"{LANES}default/{busy}/"))
    assert REFRESH not in html(viewer.get(f"{LANES}default/{idle}/"))
    assert REFRESH not in html(viewer.get(f"{LANES}default/{busy}/?refresh=0"))


def test_the_bulk_operations_as_docs_django_md_shows_them(q: Queue) -> None:
    from django_emq import get_queue
    from django_emq.engine import cancel_task, run_again

    waiting = [q.enqueue(lane(430 + i), OTHER).job_id for i in range(2)]
    done = cancel_task(get_queue(), OTHER)
    assert (done.cancelled, done.requested) == (2, 0)
    copy_id = run_again(get_queue(), waiting[0])
    assert (q.job(copy_id) or {})["state"] == "pending"


def test_run_again_into_a_full_lane_is_refused_and_changes_nothing(
    q: Queue, manager: Client
) -> None:
    (dead,) = make_dead(q, A, 1)
    fill(q, B, 1)
    q.set_max_depth(B, 1)
    url = f"{JOBS}default/{dead}/run-again/"
    messages = texts(manager, manager.post(url, {"lane": B, "confirmed": "yes"}))
    assert len(messages) == 1
    assert "full" in messages[0].lower()
    assert q.depth(B) == 1
    gone_url = f"{JOBS}default/JOB0000000000000000000000/run-again/"
    gone = texts(manager, manager.post(gone_url, {"next": JOBS}))
    assert gone == ["Job JOB0000000000000000000000 no longer exists."]
