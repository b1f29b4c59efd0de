"""Max lane depth: an enqueue that would take a lane past it raises ``LaneFull``
and writes nothing; a view turns that into HTTP 429."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.http import HttpRequest, HttpResponse

from django_emq import enqueue_for, get_queue, lane_for
from django_emq.engine.queue import Queue
from django_emq.exceptions import EnqueueError, LaneFull
from tests import tasks

from .factories import make_user
from .helpers import LONG_LEASE, TASK, claim_one, dump, fill, lane, new_client
from .invariants import check_invariants

A, B = lane(1), lane(2)


def test_an_enqueue_past_the_max_depth_raises_lane_full_and_writes_nothing(
    r: redis.Redis, queue: Queue
) -> None:
    queue.set_max_depth(A, 3)
    fill(queue, A, 3)
    before = dump(r)
    with pytest.raises(LaneFull) as caught:
        queue.enqueue(A, TASK)
    assert isinstance(caught.value, EnqueueError)
    assert (caught.value.lane, caught.value.max_depth) == (A, 3)
    assert dump(r) == before
    check_invariants(queue)


def test_a_lane_takes_jobs_again_once_one_leaves(queue: Queue) -> None:
    queue.set_max_depth(A, 2)
    fill(queue, A, 2)
    claim_one(queue)
    assert not queue.enqueue(A, TASK).duplicate
    assert queue.depth(A) == 2


def test_the_max_depth_is_per_lane(queue: Queue) -> None:
    queue.set_max_depth(A, 1)
    fill(queue, A, 1)
    fill(queue, B, 5)
    with pytest.raises(LaneFull):
        queue.enqueue(A, TASK)
    assert queue.depth(B) == 5


def test_the_queue_default_applies_unless_the_lane_sets_its_own(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, max_depth=2)
    queue.set_max_depth(B, 4)
    fill(queue, A, 2)
    fill(queue, B, 4)
    with pytest.raises(LaneFull):
        queue.enqueue(A, TASK)
    with pytest.raises(LaneFull):
        queue.enqueue(B, TASK)
    queue.set_max_depth(B, None)  # back to the queue's default (2): still full
    with pytest.raises(LaneFull):
        queue.enqueue(B, TASK)
    assert queue.lane(B).max_depth is None


def test_a_deferred_enqueue_is_checked_against_the_pending_depth(queue: Queue) -> None:
    queue.set_max_depth(A, 1)
    fill(queue, A, 1)
    with pytest.raises(LaneFull):
        queue.enqueue(A, TASK, run_after=datetime.now(UTC) + timedelta(hours=1))


def test_lowering_the_max_depth_keeps_the_jobs_already_pending(queue: Queue) -> None:
    fill(queue, A, 5)
    queue.set_max_depth(A, 2)
    assert queue.depth(A) == 5
    with pytest.raises(LaneFull):
        queue.enqueue(A, TASK)
    check_invariants(queue)


def test_an_existing_job_id_answers_the_job_even_when_the_lane_is_full(queue: Queue) -> None:
    queue.set_max_depth(A, 1)
    (job_id,) = fill(queue, A, 1)
    again = queue.enqueue(A, TASK, job_id=job_id)
    assert again.duplicate
    assert again.job_id == job_id


def test_a_batch_admits_the_jobs_of_lanes_with_room(queue: Queue) -> None:
    queue.set_max_depth(A, 1)
    with pytest.raises(LaneFull):
        queue.enqueue_many([{"lane": A, "task_path": TASK}] * 2 + [{"lane": B, "task_path": TASK}])
    assert (queue.depth(A), queue.depth(B)) == (1, 1)
    check_invariants(queue)


def test_eight_threads_never_overfill_a_lane(r: redis.Redis, queue: Queue) -> None:
    queue.set_max_depth(A, 10)
    admitted: list[str] = []
    refused: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        q = Queue("q", connection=new_client(r))
        for _ in range(20):
            try:
                job_id = q.enqueue(A, TASK).job_id
            except LaneFull:
                with lock:
                    refused.append(1)
            else:
                with lock:
                    admitted.append(job_id)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 10
    assert len(refused) == 8 * 20 - 10
    assert queue.depth(A) == 10
    check_invariants(queue)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True])
def test_a_bad_max_depth_is_refused_and_changes_nothing(
    r: redis.Redis, queue: Queue, bad: Any
) -> None:
    with pytest.raises(ValueError, match="max_depth"):
        queue.set_max_depth(A, bad)
    with pytest.raises(ValueError, match="lane"):
        queue.set_max_depth("not a lane", 3)
    with pytest.raises(ValueError, match="max_depth"):
        Queue("q", connection=r, max_depth=bad)
    assert r.dbsize() == 0


def test_lane_info_shows_the_lanes_max_depth(queue: Queue) -> None:
    queue.set_max_depth(A, 7)
    fill(queue, A, 1)
    assert queue.lane(A).max_depth == 7
    assert queue.lanes()[0].max_depth == 7


# -- the Django layer -----------------------------------------------------------


@pytest.mark.parametrize("bad", [0, "10", {"default": 0}, {"no such queue!": 3}, {"default": None}])
def test_a_bad_max_depth_setting_is_reported(settings: Any, bad: Any) -> None:
    from django_emq.conf import problems

    settings.EMQ = {**settings.EMQ, "MAX_DEPTH": bad}
    assert any("MAX_DEPTH" in p for p in problems())


@pytest.mark.django_db
def test_the_settings_give_each_queue_its_default(emq: redis.Redis, settings: Any) -> None:
    settings.EMQ = {**settings.EMQ, "MAX_DEPTH": {"default": 2, "*": 5}}
    user = make_user()
    enqueue_for(user, tasks.add, 1, 2)
    enqueue_for(user, tasks.add, 1, 2)
    with pytest.raises(LaneFull):
        enqueue_for(user, tasks.add, 1, 2)
    assert get_queue("default").max_depth == 2  # type: ignore[union-attr]
    assert get_queue("other").max_depth == 5  # type: ignore[union-attr]


@pytest.mark.django_db
def test_a_view_answers_a_full_lane_with_429(emq: redis.Redis) -> None:
    user = make_user()
    get_queue().set_max_depth(lane_for(user), 1)

    def view(request: HttpRequest) -> HttpResponse:  # the pattern docs/max-depth.md shows
        try:
            enqueue_for(user, tasks.add, 1, 2)
        except LaneFull:
            return HttpResponse("Too many jobs waiting.", status=429)
        return HttpResponse(status=202)

    assert view(HttpRequest()).status_code == 202
    assert view(HttpRequest()).status_code == 429


def test_a_claim_is_unaffected_by_max_depth(queue: Queue) -> None:
    queue.set_max_depth(A, 1)
    fill(queue, A, 1)
    claimed = queue.claim(LONG_LEASE)
    assert claimed is not None
    assert len(claimed) == 1


# -- the admin ------------------------------------------------------------------


@pytest.mark.django_db
def test_the_admin_shows_and_sets_a_lanes_max_depth(emq: redis.Redis) -> None:
    from django.test import Client

    admin = make_user(staff=True, perms=["view_lanes", "manage_lanes"])
    client = Client()
    client.force_login(admin)
    queue = get_queue()
    fill(queue, A, 2)  # type: ignore[arg-type]
    url = f"/admin/django_emq/lane/default/{A}/"
    response = client.post(url + "max-depth/", {"max_depth": "5"})
    assert response.status_code == 302
    assert queue.lane(A).max_depth == 5
    assert "max 5" in client.get("/admin/django_emq/lane/").content.decode()
    assert 'id="emq-max-depth">5<' in client.get(url).content.decode()
    response = client.post(url + "max-depth/", {"max_depth": "0"})
    assert queue.lane(A).max_depth == 5  # refused: nothing changed
    client.post(url + "max-depth/", {"max_depth": ""})
    assert queue.lane(A).max_depth is None
