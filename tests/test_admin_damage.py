"""The admin on a hand-edited keyspace: a clear message, never a 500."""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from django_emq.engine.queue import Queue

from .helpers import lane
from .test_admin import LIST, detail, make_user, q, viewer

__all__ = ["make_user", "q", "viewer"]  # fixtures used below

pytestmark = pytest.mark.django_db
A = lane(101)


def test_a_ring_entry_that_is_no_lane_is_named_not_a_500(
    emq: redis.Redis, q: Queue, viewer: Client
) -> None:
    q.enqueue(A, "tests.tasks.noop")
    emq.rpush(q.keys.ring, "USR/../x")
    page = viewer.get(LIST)
    assert page.status_code == 200
    body = page.content.decode()
    assert "not lane ids: USR/../x" in body
    assert "emq_doctor --repair" in body
    assert f'href="{detail(A)}"' in body


def test_a_depth_index_entry_that_is_no_lane_is_named_not_a_500(
    emq: redis.Redis, q: Queue, viewer: Client
) -> None:
    q.enqueue(A, "tests.tasks.noop")
    emq.zadd(q.keys.depths, {"x/y": 99})
    page = viewer.get(LIST)
    assert page.status_code == 200
    assert "not lane ids: x/y" in page.content.decode()


@pytest.mark.parametrize("key", ["stats", "depths", "ring", "paused"])
def test_a_key_of_the_wrong_type_gets_a_page_that_says_so(
    emq: redis.Redis, q: Queue, viewer: Client, key: str
) -> None:
    q.enqueue(A, "tests.tasks.noop")
    name = getattr(q.keys, key)
    emq.delete(name)
    emq.set(name, "garbage")
    page = viewer.get(LIST)
    assert page.status_code == 503
    body = page.content.decode()
    assert "holds a value of the wrong type" in body
    assert "emq_doctor" in body
    # the lane's page reads what it can: it works, or says the same
    assert viewer.get(detail(A)).status_code in (200, 503)
