"""The admin's lane view through the Django test client, on the real server:
every page, every permission, every action; nothing changes on GET; a page
costs as many round trips with 5,000 lanes as with 10."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis
from django.contrib.auth.models import Permission, User
from django.tasks import task_backends
from django.test import Client
from django.urls import reverse

from django_emq import admin as emq_admin
from django_emq import connection
from django_emq.backend import FairLanesBackend
from django_emq.engine import browse
from django_emq.engine.queue import Queue
from django_emq.lanes import lane_for

from . import factories
from .helpers import (
    LONG_LEASE,
    claim_one,
    counting_client,
    dump,
    fill,
    lane,
    server_ms,
    sleep_past,
)
from .invariants import check_invariants

LIST = "/admin/django_emq/lane/"
A, B, C = lane(101), lane(102), lane(103)
TRACEBACK = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: boom'
ERROR = '{"exception_class_path": "builtins.ValueError", "traceback": %s}' % (
    '"' + TRACEBACK.replace("\n", "\\n").replace('"', '\\"') + '"'
)

pytestmark = pytest.mark.django_db


def detail(lane_id: str, queue: str = "default") -> str:
    return f"{LIST}{queue}/{lane_id}/"


def action(lane_id: str, name: str, queue: str = "default") -> str:
    return f"{LIST}{queue}/{lane_id}/{name}/"


@pytest.fixture
def q(emq: redis.Redis) -> Queue:
    """The ``default`` queue, as the admin sees it."""
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    return backend.queue("default")


UserFactory = Callable[..., User]


@pytest.fixture
def make_user(db: None) -> UserFactory:
    def make(name: str, *perms: str, staff: bool = True) -> User:
        return factories.make_user(name, staff=staff, perms=perms)

    return make


def logged_in(user: User, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


@pytest.fixture
def viewer(make_user: UserFactory) -> Client:
    return logged_in(make_user("viewer", "view_lanes"))


@pytest.fixture
def manager(make_user: UserFactory) -> Client:
    return logged_in(make_user("manager", "manage_lanes"))


def texts(client: Client, response: Any) -> list[str]:
    """The messages an action left, read (and so consumed) on the page it redirected to."""
    assert response.status_code == 302, response.status_code
    page = client.get(response["Location"])
    return [str(m) for m in page.context["messages"]]


def html(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def lane_rows(page: str) -> list[tuple[str, int, int, int, bool]]:
    """(lane, depth, bar value, bar max, paused) of every row of the lane list."""
    rows = []
    for match in re.finditer(r'<tr class="emq-lane" data-lane="(\w+)">(.*?)</tr>', page, re.S):
        body = match.group(2)
        depth = re.search(r'emq-depth">(\d+)<', body)
        bar = re.search(r'<meter class="emq-bar" min="0" max="(\d+)" value="(\d+)"', body)
        assert depth, body
        assert bar, body
        rows.append(
            (
                match.group(1),
                int(depth.group(1)),
                int(bar.group(2)),
                int(bar.group(1)),
                "emq-status-paused" in body,
            )
        )
    return rows


def make_dead(q: Queue, lane_id: str, n: int = 1, error: str = ERROR) -> list[str]:
    """``n`` dead jobs on ``lane_id`` (the lane must hold nothing else claimable first)."""
    ids = fill(q, lane_id, n)
    for _ in ids:
        c = claim_one(q)
        assert c.job_id in ids
        q.fail(c.job_id, c.token, error)
    return ids


# -- the admin index and permissions ------------------------------------------------------


def test_index_lists_lanes_under_the_app_for_a_viewer(viewer: Client) -> None:
    for index in ("/admin/", "/admin/django_emq/"):
        page = html(viewer.get(index))
        assert "Fair lanes (EMQ)" in page
        assert f'href="{LIST}"' in page
        assert "/add/" not in page[page.index('id="content-main"') :], "lanes are not added here"


def test_index_hides_lanes_from_staff_without_the_permission(make_user: UserFactory) -> None:
    client = logged_in(make_user("staff"))
    page = html(client.get("/admin/"))
    assert f'href="{LIST}"' not in page


def test_the_permissions_are_view_and_manage_only() -> None:
    codenames = set(
        Permission.objects.filter(content_type__app_label="django_emq").values_list(
            "codename", flat=True
        )
    )
    assert codenames == {"view_lanes", "manage_lanes"}


def urls() -> list[tuple[str, str]]:
    return [
        ("get", LIST),
        ("get", detail(A)),
        ("get", action(A, "drain")),
        ("post", action(A, "pause")),
        ("post", action(A, "drain")),
    ]


@pytest.mark.parametrize(("method", "url"), urls())
def test_anonymous_visitors_are_sent_to_the_login_page(
    q: Queue, client: Client, method: str, url: str
) -> None:
    fill(q, A, 2)
    before = dump(q.connection)
    response = getattr(client, method)(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=")
    assert dump(q.connection) == before


@pytest.mark.parametrize(("method", "url"), urls())
def test_non_staff_users_are_sent_to_the_login_page(
    q: Queue, make_user: UserFactory, method: str, url: str
) -> None:
    client = logged_in(make_user("member", "view_lanes", "manage_lanes", staff=False))
    response = getattr(client, method)(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


@pytest.mark.parametrize(("method", "url"), urls())
def test_staff_without_the_permissions_are_refused(
    q: Queue, make_user: UserFactory, method: str, url: str
) -> None:
    fill(q, A, 2)
    before = dump(q.connection)
    client = logged_in(make_user("staff"))
    assert getattr(client, method)(url).status_code == 403
    assert dump(q.connection) == before


ACTION_POSTS: list[tuple[str, dict[str, Any]]] = [
    ("pause", {}),
    ("resume", {}),
    ("ceiling", {"ceiling": "2"}),
    ("weight", {"weight": "3"}),
    ("drain", {"confirmed": "yes"}),
    ("retry-dead", {"scope": "all"}),
    ("delete-dead", {"scope": "all", "confirmed": "yes"}),
]


@pytest.mark.parametrize(("name", "data"), ACTION_POSTS)
def test_a_viewer_sees_but_cannot_act(
    q: Queue, viewer: Client, name: str, data: dict[str, Any]
) -> None:
    make_dead(q, A)
    fill(q, A, 3)
    q.pause(B)
    before = dump(q.connection)
    assert viewer.post(action(A, name), data).status_code == 403
    assert viewer.post(action(B, name), data).status_code == 403
    assert dump(q.connection) == before


def test_a_viewer_gets_no_forms(q: Queue, viewer: Client) -> None:
    make_dead(q, A)
    fill(q, A, 3)
    for page in (html(viewer.get(LIST)), html(viewer.get(detail(A)))):
        assert 'method="post"' not in page[page.index('id="content-main"') :]
        assert A in page
    assert 'name="job"' not in html(viewer.get(detail(A)))


def test_manage_permission_alone_lets_a_user_see_and_act(q: Queue, manager: Client) -> None:
    fill(q, A, 1)
    assert A in html(manager.get(LIST))
    assert manager.post(action(A, "pause")).status_code == 302
    assert q.lane(A).paused


def test_a_superuser_can_act(q: Queue, django_user_model: type[User]) -> None:
    admin = django_user_model.objects.create_superuser("root", "root@example.com", None)
    fill(q, A, 1)
    client = logged_in(admin)
    assert client.post(action(A, "pause")).status_code == 302
    assert q.lane(A).paused


# -- the lane list --------------------------------------------------------------------


def test_the_list_shows_the_deepest_lanes_with_depths_and_bars(q: Queue, viewer: Client) -> None:
    fill(q, A, 2)
    fill(q, B, 7)
    fill(q, C, 4)
    q.pause(C)
    q.set_limit(A, 3)
    q.set_weight(B, 2)
    page = html(viewer.get(LIST))
    assert lane_rows(page) == [
        (B, 7, 7, 7, False),
        (C, 4, 4, 7, True),
        (A, 2, 2, 7, False),
    ]
    row_a = page[page.index(f'data-lane="{A}"') :]
    assert re.search(r'emq-num">3</td>\s*<td class="emq-num">1</td>', row_a), "ceiling 3, weight 1"


def test_the_list_shows_totals_per_queue(q: Queue, viewer: Client) -> None:
    other = task_backends["default"]
    assert isinstance(other, FairLanesBackend)
    fill(other.queue("other"), A, 4)
    make_dead(q, C)
    fill(q, A, 4)
    fill(q, B, 2)
    claim_one(q)  # from A
    page = html(viewer.get(LIST))
    queues = page[page.index('id="emq-queues"') : page.index('class="emq-overview"')]
    cells = re.findall(r'<td class="emq-num">(?:<a href="[^"]+"[^>]*>)?(\d+)(?:</a>)?</td>', queues)
    # pending, in flight, scheduled, dead, lanes with jobs, lanes in rotation
    assert cells[:6] == ["5", "1", "0", "1", "2", "2"]
    assert cells[6:] == ["4", "0", "0", "0", "1", "1"]


def test_the_list_names_the_next_lanes_in_rotation(
    q: Queue, viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(emq_admin.LaneAdmin, "ring_preview", 2)
    for lane_id in (A, B, C):
        fill(q, lane_id, 1)
    claim_one(q)  # A is served and leaves: B then C are next
    fill(q, A, 1)  # A rejoins at the tail
    page = html(viewer.get(LIST))
    ring = page[page.index('id="emq-ring"') : page.index('id="emq-workers"')]
    assert re.findall(r">(USR\w+)</a>", ring) == [B, C]
    assert "and 1 more lane" in ring


def beat(q: Queue, worker: str, ms: int, done: int = 5, running: int = 1) -> None:
    record = (
        f'{{"host": "box-{worker}", "pid": 42, "done": {done}, "beat": {ms}, "running": {running}}}'
    )
    q.connection.hset(q.keys.workers, worker, record)


def test_the_list_shows_workers_seen_recently(q: Queue, viewer: Client, settings: Any) -> None:
    settings.TIME_ZONE = "Asia/Tokyo"
    now = browse.overview(q).server_ms
    beat(q, "w:fresh", now - 2_000, done=17)
    beat(q, "w:gone", now - 3_600_000)
    q.connection.hset(q.keys.workers, "w:garbled", "not json")
    page = html(viewer.get(LIST))
    workers = page[page.index('id="emq-workers"') : page.index('id="changelist"')]
    assert "w:fresh" in workers
    assert "box-w:fresh" in workers
    assert ">17<" in workers
    shown = datetime.fromtimestamp((now - 2_000) / 1000, tz=UTC).astimezone(ZoneInfo("Asia/Tokyo"))
    assert shown.strftime("%H:%M:%S") in workers, "times are shown in the site's time zone"
    assert "w:gone" not in workers
    assert "2 more workers have not reported" in workers


def test_the_list_shows_the_user_of_each_lane_and_its_oldest_job(
    q: Queue, viewer: Client, make_user: UserFactory
) -> None:
    alice = make_user("alice")
    fill(q, lane_for(alice), 2)
    page = html(viewer.get(LIST))
    row = page[page.index(f'data-lane="{lane_for(alice)}"') :]
    assert "<td>alice</td>" in row
    assert re.search(r"<td>\d+ s</td>", row), "the age of the oldest pending job"


def test_the_list_pages_through_the_lanes(
    q: Queue, viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(emq_admin.LaneAdmin, "lanes_per_page", 2)
    for depth, lane_id in enumerate((A, B, C, lane(104), lane(105)), start=1):
        fill(q, lane_id, depth)
    first = html(viewer.get(LIST))
    assert [r[0] for r in lane_rows(first)] == [lane(105), lane(104)]
    assert "Page 1 of 3" in first
    second = html(viewer.get(LIST + "?page=2"))
    assert [r[:4] for r in lane_rows(second)] == [(C, 3, 3, 5), (B, 2, 2, 5)]
    assert 'rel="prev"' in second
    assert 'rel="next"' in second
    last = html(viewer.get(LIST + "?page=99"))
    assert [r[0] for r in lane_rows(last)] == [A]
    assert [r[0] for r in lane_rows(html(viewer.get(LIST + "?page=x")))] == [lane(105), lane(104)]


def test_the_list_shows_another_queue(q: Queue, viewer: Client) -> None:
    other = task_backends["default"]
    assert isinstance(other, FairLanesBackend)
    fill(other.queue("other"), B, 2)
    fill(q, A, 1)
    page = html(viewer.get(LIST + "?queue=other"))
    assert [r[0] for r in lane_rows(page)] == [B]
    assert f'href="{detail(B, "other")}"' in page


def test_an_unknown_queue_is_not_found(q: Queue, viewer: Client) -> None:
    assert viewer.get(LIST + "?queue=nope").status_code == 404
    assert viewer.get(detail(A, "nope")).status_code == 404


def test_the_list_refreshes_itself_until_switched_off(q: Queue, viewer: Client) -> None:
    page = html(viewer.get(LIST))
    assert '<meta http-equiv="refresh" content="5">' in page
    toggle = re.search(r'href="([^"]*)" id="emq-refresh-toggle"', page)
    assert toggle is not None
    assert "refresh=0" in toggle.group(1)
    off = html(viewer.get(LIST + toggle.group(1).replace("&amp;", "&")))
    assert 'http-equiv="refresh"' not in off
    assert "Refresh every few seconds" in off
    assert 'name="refresh" value="0"' in off, "a search keeps it off"
    back = re.search(r'href="([^"]*)" id="emq-refresh-toggle"', off)
    assert back is not None
    assert "refresh" not in back.group(1)


# -- orders -----------------------------------------------------------------------------


def three_lanes(q: Queue) -> None:
    """C: 2 running, 1 waiting since first; A: 1 running, 3 waiting; B: 5
    waiting since last. By depth B A C, by running C A, by oldest wait C A B.
    Each lane is filled on a later millisecond of the server clock than the one
    before, so the oldest-wait order has no ties (enqueue times are in ms)."""
    fill(q, C, 3)
    claim_one(q)
    claim_one(q)
    sleep_past(q.connection, server_ms(q.connection))
    fill(q, A, 4)
    q.pause(C)  # the next claim is A's
    claim_one(q)
    q.resume(C)
    sleep_past(q.connection, server_ms(q.connection))
    fill(q, B, 5)


def test_the_lane_list_sorts_by_depth_by_running_and_by_oldest_wait(
    q: Queue, viewer: Client
) -> None:
    three_lanes(q)
    by_depth = html(viewer.get(LIST))
    assert [row[0] for row in lane_rows(by_depth)] == [B, A, C]
    assert 'id="emq-sort-depth" aria-sort="descending"' in by_depth
    by_running = html(viewer.get(LIST, {"sort": "running"}))
    assert [row[0] for row in lane_rows(by_running)] == [C, A], "B runs nothing"
    assert "Lanes with running jobs, the most first" in by_running
    by_oldest = html(viewer.get(LIST, {"sort": "oldest"}))
    assert [row[0] for row in lane_rows(by_oldest)] == [C, A, B]
    assert "this page by its oldest job waiting" in by_oldest
    assert viewer.get(LIST, {"sort": "nonsense"}).status_code == 200, "read as by depth"


def test_the_running_order_pages_and_keeps_its_order_across_pages(
    q: Queue, viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(emq_admin.LaneAdmin, "lanes_per_page", 1)
    three_lanes(q)
    first = html(viewer.get(LIST, {"sort": "running"}))
    assert [row[0] for row in lane_rows(first)] == [C]
    assert "Page 1 of 2 · 2 lanes" in first
    next_url = re.search(r'<a href="([^"]*)" rel="next">', first)
    assert next_url
    assert "sort=running" in next_url.group(1)
    second = html(viewer.get(LIST + next_url.group(1).replace("&amp;", "&")))
    assert [row[0] for row in lane_rows(second)] == [A]


def test_a_search_or_a_tenant_shows_no_sort_links(q: Queue, viewer: Client) -> None:
    three_lanes(q)
    assert 'href="?sort=running"' in html(viewer.get(LIST))
    assert "sort=" not in html(viewer.get(LIST, {"q": A}))


# -- search ---------------------------------------------------------------------------


def test_search_finds_a_lane_by_its_id(q: Queue, viewer: Client) -> None:
    fill(q, A, 2)
    fill(q, B, 5)
    assert [r[:2] for r in lane_rows(html(viewer.get(LIST, {"q": A})))] == [(A, 2)]


def test_search_finds_an_empty_lane_too(q: Queue, viewer: Client) -> None:
    q.pause(C)
    assert lane_rows(html(viewer.get(LIST, {"q": C}))) == [(C, 0, 0, 1, True)]


@pytest.mark.parametrize("query", ["alice", "ALICE", "alice@example.com", " Alice@Example.com "])
def test_search_finds_a_users_lane_by_username_or_email(
    q: Queue, viewer: Client, make_user: UserFactory, query: str
) -> None:
    alice = make_user("alice")
    make_user("bob")
    fill(q, lane_for(alice), 3)
    page = html(viewer.get(LIST, {"q": query}))
    assert [r[:2] for r in lane_rows(page)] == [(lane_for(alice), 3)]
    assert "Lanes matching" in page
    assert 'http-equiv="refresh"' not in page, "a search result does not refresh away"


def test_search_that_finds_nothing_says_so(q: Queue, viewer: Client) -> None:
    fill(q, A, 1)
    page = html(viewer.get(LIST, {"q": "nobody<script>"}))
    assert lane_rows(page) == []
    assert "No lane or user matches." in page
    assert "<script>" not in page.split('id="searchbar"')[1][:200]


# -- one lane -------------------------------------------------------------------------


def test_the_detail_lists_pending_jobs_in_run_order_page_by_page(
    q: Queue, viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(emq_admin.LaneAdmin, "jobs_per_page", 2)
    ids = fill(q, A, 5)
    c = claim_one(q)
    assert c.job_id == ids[0]
    q.retry(c.job_id, c.token, "again")  # back at the head of the lane
    first = html(viewer.get(detail(A)))
    pending = first[first.index('id="emq-pending"') : first.index('id="emq-inflight"')]
    assert re.findall(r'emq-id"><a href="[^"]+">(JOB\w+)<', pending) == ids[:2]
    assert "5 pending jobs" in pending
    second = html(viewer.get(detail(A) + "?pending=3"))
    pending = second[second.index('id="emq-pending"') : second.index('id="emq-inflight"')]
    assert re.findall(r'emq-id"><a href="[^"]+">(JOB\w+)<', pending) == ids[4:]
    assert re.search(r'<td class="emq-num">5</td>\s*<td class="emq-id">', pending)


def test_the_detail_lists_in_flight_jobs_with_lease_left_and_attempt(
    q: Queue, viewer: Client
) -> None:
    ids = fill(q, A, 2)
    c = claim_one(q, LONG_LEASE)
    q.release(c.job_id, c.token)
    c = claim_one(q, LONG_LEASE)
    assert (c.job_id, c.token) == (ids[0], 2)
    page = html(viewer.get(detail(A)))
    inflight = page[page.index('id="emq-inflight"') : page.index('id="emq-dead"')]
    assert "1 job running" in inflight
    assert c.job_id in inflight
    assert re.search(r'emq-num">2</td>', inflight), "the attempt"
    left = re.search(r"<td>(\d+) s</td>\s*</tr>", inflight)
    assert left is not None, "the lease left"
    assert 0 < int(left.group(1)) <= LONG_LEASE // 1000


def test_the_detail_lists_scheduled_jobs_deferred_and_retrying_by_due_time(
    q: Queue, viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deferred (``run_after``) and backing off before a retry, soonest due
    first, the first page of them; another lane's are not shown."""
    monkeypatch.setattr(emq_admin.LaneAdmin, "jobs_per_page", 2)
    now = datetime.now(UTC)
    late = q.enqueue(A, "tests.tasks.noop", run_after=now + timedelta(hours=2)).job_id
    q.enqueue(B, "tests.tasks.noop", run_after=now + timedelta(minutes=1))
    (retrying,) = fill(q, A, 1)
    c = claim_one(q)
    assert q.retry(c.job_id, c.token, ERROR, 600_000) == "scheduled"  # due in 10 min
    page = html(viewer.get(detail(A)))
    scheduled = page[page.index('id="emq-scheduled"') : page.index('id="emq-inflight"')]
    assert re.findall(r'emq-id"><a href="[^"]+">(JOB\w+)<', scheduled) == [retrying, late]
    assert "The first 2 scheduled jobs, by due time" in scheduled
    assert "<td>9 min" in scheduled or "<td>10 min" in scheduled, "due in"
    monkeypatch.setattr(emq_admin.LaneAdmin, "jobs_per_page", 5)
    page = html(viewer.get(detail(A)))
    assert "2 scheduled jobs, by due time" in page
    assert "The first" not in page
    empty = html(viewer.get(detail(C)))
    assert "No job of this lane is scheduled." in empty


def test_a_lanes_scheduled_jobs_are_looked_for_in_the_schedules_head_only(q: Queue) -> None:
    """Three round trips and ``SCHEDULE_LOOKED_AT`` entries at most: a lane's
    jobs due after that many others are not found, and the page says so."""
    later = datetime.now(UTC) + timedelta(hours=1)
    for i in range(3):
        q.enqueue(B, "tests.tasks.noop", run_after=later + timedelta(seconds=i))
    mine = q.enqueue(A, "tests.tasks.noop", run_after=later + timedelta(seconds=9)).job_id
    found = browse.scheduled_jobs(q, A, limit=5, look_at=3)
    assert (found.jobs, found.looked_at, found.queue_total) == ([], 3, 4)
    found = browse.scheduled_jobs(q, A, limit=5, look_at=4)
    assert [job.job_id for job, _ in found.jobs] == [mine]
    assert found.jobs[0][0].state == "scheduled"


def test_an_expired_lease_is_shown_as_expired(q: Queue, viewer: Client) -> None:
    fill(q, A, 1)
    c = claim_one(q, 1)
    sleep_past(q.connection, c.deadline_ms)
    page = html(viewer.get(detail(A)))
    assert "expired: back to the lane at the next reap" in page


def test_the_detail_lists_dead_jobs_with_error_and_traceback(q: Queue, viewer: Client) -> None:
    (structured,) = make_dead(q, A)
    (plain,) = make_dead(q, A, error="RuntimeError: raw text")
    page = html(viewer.get(detail(A)))
    dead = page[page.index('id="emq-dead"') :]
    found = re.findall(r'emq-id"><a href="[^"]+">(JOB\w+)<', dead)
    assert found == [plain, structured], "latest death first"
    assert "<strong>builtins.ValueError</strong>" in dead
    assert "ValueError: boom" in dead
    assert "File &quot;x.py&quot;, line 1" in dead, "the traceback, escaped"
    assert "RuntimeError: raw text" in dead
    assert "2 dead jobs" in dead


def test_the_detail_shows_settings_and_status(q: Queue, viewer: Client) -> None:
    fill(q, A, 3)
    q.set_limit(A, 1)
    q.set_weight(A, 4)
    claim_one(q)
    page = html(viewer.get(detail(A)))
    summary = page[page.index('id="emq-lane-summary"') : page.index('id="emq-pending"')]
    assert "At its ceiling" in summary
    assert "<td>4</td>" in summary
    q.pause(A)
    assert "Paused" in html(viewer.get(detail(A)))


def test_a_bad_lane_is_not_found(q: Queue, viewer: Client, manager: Client) -> None:
    assert viewer.get(detail("nolane")).status_code == 404
    assert manager.post(action("USR!", "pause")).status_code == 404
    assert manager.post(action(A, "explode")).status_code == 404


# -- actions ---------------------------------------------------------------------------


def test_pause_and_resume(q: Queue, manager: Client) -> None:
    fill(q, A, 2)
    response = manager.post(action(A, "pause"))
    assert response.status_code == 302
    assert response["Location"] == detail(A)
    assert texts(manager, response) == [f"Lane {A} paused."]
    assert q.lane(A).paused
    assert texts(manager, manager.post(action(A, "pause"))) == [f"Lane {A} was paused already."]
    assert texts(manager, manager.post(action(A, "resume"))) == [f"Lane {A} resumed."]
    assert not q.lane(A).paused
    check_invariants(q)


def test_an_action_returns_to_the_page_it_came_from(q: Queue, manager: Client) -> None:
    fill(q, A, 1)
    back = LIST + "?queue=default&page=1"
    assert manager.post(action(A, "pause"), {"next": back})["Location"] == back
    elsewhere = manager.post(action(A, "resume"), {"next": "https://evil.example/"})
    assert elsewhere["Location"] == detail(A)


def test_set_and_remove_a_ceiling(q: Queue, manager: Client) -> None:
    fill(q, A, 1)
    assert texts(manager, manager.post(action(A, "ceiling"), {"ceiling": "3"})) == [
        f"Ceiling of lane {A} set to 3."
    ]
    assert q.lane(A).ceiling == 3
    assert texts(manager, manager.post(action(A, "ceiling"), {"ceiling": ""})) == [
        f"Ceiling of lane {A} removed."
    ]
    assert q.lane(A).ceiling is None


def test_set_a_weight(q: Queue, manager: Client) -> None:
    fill(q, A, 1)
    assert texts(manager, manager.post(action(A, "weight"), {"weight": "5"})) == [
        f"Weight of lane {A} set to 5."
    ]
    assert q.lane(A).weight == 5


BAD_INPUT = [
    ("ceiling", {"ceiling": "abc"}, "Ceiling: Enter a whole number."),
    ("ceiling", {"ceiling": "0"}, "Ceiling: Ensure this value is greater than or equal to 1."),
    ("ceiling", {"ceiling": "-3"}, "Ceiling: Ensure this value is greater than or equal to 1."),
    ("weight", {"weight": ""}, "Weight: This field is required."),
    ("weight", {"weight": "0"}, "Weight: Ensure this value is greater than or equal to 1."),
    ("weight", {"weight": "1001"}, "Weight: Ensure this value is less than or equal to 1000."),
    ("weight", {"weight": "2.5"}, "Weight: Enter a whole number."),
    ("retry-dead", {"scope": "selected"}, "Select at least one dead job."),
    ("retry-dead", {"scope": "some"}, "Select a valid choice."),
    ("retry-dead", {"scope": "selected", "job": ["bad id!"]}, "is not a job id."),
    ("delete-dead", {}, "This field is required."),
    ("delete-dead", {"scope": "selected", "job": ["{x}"], "confirmed": "yes"}, "not a job id"),
]


@pytest.mark.parametrize(("name", "data", "error"), BAD_INPUT)
def test_bad_input_is_refused_clearly_and_changes_nothing(
    q: Queue, manager: Client, name: str, data: dict[str, Any], error: str
) -> None:
    make_dead(q, A, 2)
    fill(q, A, 2)
    q.set_limit(A, 4)
    before = dump(q.connection)
    response = manager.post(action(A, name), data)
    assert response.status_code == 302
    assert response["Location"] == detail(A)
    (message,) = texts(manager, response)
    assert error in message
    assert message.endswith("Nothing was changed.")
    assert dump(q.connection) == before


def test_drain_asks_first_then_drains(q: Queue, manager: Client) -> None:
    fill(q, A, 4)
    fill(q, B, 1)
    claim_one(q)
    before = dump(q.connection)
    page = html(manager.post(action(A, "drain")))
    assert f"Drain lane {A} of queue default? Its 3 pending jobs will be deleted." in page
    assert 'name="confirmed" value="yes"' in page
    assert dump(q.connection) == before
    response = manager.post(action(A, "drain"), {"confirmed": "yes"})
    assert texts(manager, response) == [f"Drained 3 pending jobs from lane {A}."]
    assert q.depth(A) == 0
    assert q.depth(B) == 1
    assert q.lane(A).inflight == 1
    check_invariants(q)


def test_retry_selected_dead_jobs(q: Queue, manager: Client) -> None:
    one, two = make_dead(q, A, 2)
    (other,) = make_dead(q, B)
    response = manager.post(action(A, "retry-dead"), {"scope": "selected", "job": [one, other]})
    assert texts(manager, response) == [f"Sent 1 dead job back to lane {A}."]
    assert browse.pending_jobs(q, A).jobs[0].job_id == one
    assert [j.job_id for j in browse.dead_jobs(q, A).jobs] == [two]
    assert [j.job_id for j in browse.dead_jobs(q, B).jobs] == [other], "another lane's job stays"
    check_invariants(q)


def test_retry_all_dead_jobs_of_a_lane(q: Queue, manager: Client) -> None:
    make_dead(q, A, 3)
    make_dead(q, B)
    assert texts(manager, manager.post(action(A, "retry-dead"), {"scope": "all"})) == [
        f"Sent 3 dead jobs back to lane {A}."
    ]
    assert q.depth(A) == 3
    assert q.totals().dead == 1
    assert texts(manager, manager.post(action(A, "retry-dead"), {"scope": "all"})) == [
        f"No dead job of lane {A} to retry."
    ]
    check_invariants(q)


def test_delete_selected_dead_jobs_asks_first(q: Queue, manager: Client) -> None:
    one, two = make_dead(q, A, 2)
    before = dump(q.connection)
    page = html(manager.post(action(A, "delete-dead"), {"scope": "selected", "job": [one]}))
    assert "Delete this dead job" in page
    assert f'<input type="hidden" name="job" value="{one}">' in page
    assert dump(q.connection) == before
    response = manager.post(
        action(A, "delete-dead"), {"scope": "selected", "job": [one], "confirmed": "yes"}
    )
    assert texts(manager, response) == [f"Deleted 1 dead job of lane {A}."]
    assert q.job(one) is None
    assert q.job(two) is not None
    check_invariants(q)


def test_delete_all_dead_jobs_of_a_lane_asks_first(q: Queue, manager: Client) -> None:
    make_dead(q, A, 3)
    (other,) = make_dead(q, B)
    before = dump(q.connection)
    assert "Delete all 3 dead jobs" in html(manager.get(action(A, "delete-dead") + "?scope=all"))
    assert "Delete all 3 dead jobs" in html(
        manager.post(action(A, "delete-dead"), {"scope": "all"})
    )
    assert dump(q.connection) == before
    response = manager.post(action(A, "delete-dead"), {"scope": "all", "confirmed": "yes"})
    assert texts(manager, response) == [f"Deleted 3 dead jobs of lane {A}."]
    assert q.totals().dead == 1
    assert q.job(other) is not None
    check_invariants(q)


@pytest.mark.parametrize("name", ["pause", "resume", "ceiling", "weight", "retry-dead"])
def test_actions_without_confirmation_refuse_get(q: Queue, manager: Client, name: str) -> None:
    make_dead(q, A)
    before = dump(q.connection)
    response = manager.get(action(A, name) + "?ceiling=1&weight=2&scope=all")
    assert response.status_code == 405
    assert dump(q.connection) == before


def test_nothing_changes_on_get(q: Queue, manager: Client, make_user: UserFactory) -> None:
    alice = make_user("alice")
    make_dead(q, A, 2)
    fill(q, A, 3)
    fill(q, lane_for(alice), 2)
    claim_one(q)
    beat(q, "w:1", browse.overview(q).server_ms)
    before = dump(q.connection)
    for url in (
        LIST,
        LIST + "?page=2&refresh=0",
        LIST + "?q=alice",
        LIST + "?queue=other",
        detail(A),
        detail(A) + "?pending=2&inflight=2&dead=2",
        action(A, "drain"),
        action(A, "drain") + "?confirmed=yes",
        action(A, "delete-dead") + "?scope=all&confirmed=yes",
    ):
        assert manager.get(url).status_code == 200, url
    assert dump(q.connection) == before


def test_a_post_without_the_csrf_token_is_refused(q: Queue, make_user: UserFactory) -> None:
    client = logged_in(make_user("manager", "manage_lanes"), enforce_csrf_checks=True)
    fill(q, A, 2)
    before = dump(q.connection)
    assert client.post(action(A, "pause")).status_code == 403
    assert client.post(action(A, "drain"), {"confirmed": "yes"}).status_code == 403
    assert dump(q.connection) == before


def test_the_forms_carry_the_csrf_token(q: Queue, manager: Client) -> None:
    make_dead(q, A)
    fill(q, A, 1)
    for page in (html(manager.get(LIST)), html(manager.get(detail(A)))):
        forms = page.count('method="post"')  # the log-out form too
        assert forms > 0
        assert page.count('name="csrfmiddlewaretoken"') >= forms


def test_the_reverse_names_of_the_views() -> None:
    assert reverse("admin:django_emq_lane_changelist") == LIST
    assert reverse("admin:django_emq_lane_detail", args=["default", A]) == detail(A)
    assert reverse("admin:django_emq_lane_action", args=["default", A, "drain"]) == action(
        A, "drain"
    )


# -- round trips ------------------------------------------------------------------------

PAGES: dict[str, Callable[[Client], Any]] = {
    "lane list": lambda c: c.get(LIST),
    "lane list, page 2": lambda c: c.get(LIST + "?page=2"),
    "lane list by running jobs, page 2": lambda c: c.get(LIST + "?sort=running&page=2"),
    "lane list by oldest wait, page 2": lambda c: c.get(LIST + "?sort=oldest&page=2"),
    "search by lane": lambda c: c.get(LIST, {"q": A}),
    "search by user": lambda c: c.get(LIST, {"q": "alice"}),
    "lane detail": lambda c: c.get(detail(A)),
    "lane detail, later pages": lambda c: c.get(detail(A) + "?pending=2&dead=2"),
    "drain confirmation": lambda c: c.post(action(A, "drain")),
    "delete confirmation": lambda c: c.post(action(A, "delete-dead"), {"scope": "all"}),
}


@pytest.fixture
def counted(
    emq: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[Callable[[], Any]], int]]:
    """Runs a request with the process's connection swapped for a counting one;
    answers the round trips it made."""
    with counting_client(emq) as (client, counter):
        monkeypatch.setattr(connection, "_client", client)
        monkeypatch.setattr(connection, "_pid", os.getpid())

        client.ping()  # connect first: the handshake is not the page's cost

        def count(work: Callable[[], Any]) -> int:
            counter.sent = 0
            response = work()
            assert response.status_code == 200
            return counter.sent

        yield count


def populate(q: Queue, lanes: int) -> None:
    """``lanes`` lanes besides A, and A with pending, in-flight and dead jobs."""
    make_dead(q, A, 30)
    fill(q, A, 60)
    for _ in range(3):
        claim_one(q)
    q.set_limit(A, 3)
    jobs = [{"lane": lane(1_000 + i), "task_path": "tests.tasks.noop"} for i in range(lanes)]
    for i in range(0, len(jobs), 2_000):
        q.enqueue_many(jobs[i : i + 2_000])
    for i in range(5):
        beat(q, f"w:{i}", browse.overview(q).server_ms)
    later = datetime.now(UTC) + timedelta(hours=1)
    q.enqueue(A, "tests.tasks.noop", run_after=later)
    for i in range(min(lanes, 1_100)):  # a schedule longer than the lane page looks through
        q.enqueue(lane(1_000 + i), "tests.tasks.noop", run_after=later + timedelta(seconds=1))


def test_every_page_costs_the_same_round_trips_with_10_and_5000_lanes(
    q: Queue,
    manager: Client,
    make_user: UserFactory,
    counted: Callable[[Callable[[], Any]], int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(emq_admin.LaneAdmin, "lanes_per_page", 5)
    make_user("alice")
    measured: dict[int, dict[str, int]] = {}
    for lanes in (10, 5_000):
        q.connection.flushall()
        populate(q, lanes)
        measured[lanes] = {name: counted(partial(page, manager)) for name, page in PAGES.items()}
    print("round trips per page:", json.dumps(measured[5_000]))
    assert measured[10] == measured[5_000]
    assert max(measured[5_000].values()) <= 12, measured[5_000]


def test_an_unreachable_server_answers_503_with_a_clear_page(
    emq: redis.Redis, viewer: Client, settings: Any
) -> None:
    settings.EMQ = {**settings.EMQ, "URL": "redis://127.0.0.1:1/0", "ENQUEUE_TIMEOUT": 0.5}
    response = viewer.get(LIST)
    assert response.status_code == 503
    assert "Valkey server does not answer" in response.content.decode()
