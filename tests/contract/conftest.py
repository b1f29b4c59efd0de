"""The contract tests' plumbing: the backend configured as the reference suites
configure theirs, a lane around every enqueue, and a way to count round trips.

Nothing here changes what a test asserts: Django's tests run with a backend in
``TASKS`` and enqueue with ``task.enqueue()``; django-emq refuses work without a
lane, so every test runs inside ``django_emq.lane(...)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from django.core.management import call_command

from django_emq import lane, lane_id
from django_emq.connection import get_connection
from tests.helpers import CountingConnection

from . import settings as contract_settings

#: The lane every contract test enqueues on.
LANE = lane_id("USR", 1)


@pytest.fixture(autouse=True)
def contract(emq: redis.Redis, settings: Any) -> Iterator[redis.Redis]:
    """The contract's ``TASKS`` and ``EMQ`` on the test server, inside a lane."""
    settings.TASKS = contract_settings.TASKS
    settings.EMQ = {**settings.EMQ, "MAX_ATTEMPTS": 1}
    with lane(LANE):
        yield emq


def run_worker(*args: str, **options: Any) -> None:
    """Run the worker in this process until nothing is pending or due (the
    reference suites' ``run_worker``: a burst)."""
    options.setdefault("verbosity", 0)
    call_command("run_emq_worker", "--burst", "--lease", "5", *args, **options)


@contextmanager
def round_trips() -> Iterator[type[CountingConnection]]:
    """Count the requests the shared client sends inside the block (the
    ``assertNumQueries`` of a key-value store): its pool is emptied and
    refilled with counting connections."""
    client = get_connection()
    assert isinstance(client, redis.Redis)
    pool = client.connection_pool
    counter: type[CountingConnection] = type("Counter", (CountingConnection,), {"sent": 0})
    original = pool.connection_class
    pool.disconnect()
    pool.reset()  # drop the idle connections: new ones are made of ``counter``
    pool.connection_class = counter
    client.ping()  # the handshake of the new connection is not counted
    counter.sent = 0
    try:
        yield counter
    finally:
        pool.disconnect()
        pool.reset()
        pool.connection_class = original
