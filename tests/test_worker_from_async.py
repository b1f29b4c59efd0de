"""A worker started from async code, as Django's own async task tests and any
async test suite or ASGI hook start one: ``await
sync_to_async(call_command)("run_emq_worker", "--burst")``, with a logging
handler on ``django.tasks`` (so Django's task-signal log receivers are sent
to). Its signals go through a thread of its own, never its caller's executor
(whose thread waits for the worker): every job completes, sync and coroutine."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User
from django.core.management import call_command
from django.tasks import TaskResultStatus

from django_emq import enqueue_for
from tests import tasks

pytestmark = pytest.mark.django_db(transaction=True)


class Lines(logging.Handler):
    """Keeps the messages of the records it is given."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def django_tasks_lines() -> Iterator[Lines]:
    logger = logging.getLogger("django.tasks")
    handler, level = Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.mark.parametrize("task", [tasks.add, tasks.async_add], ids=["sync", "coroutine"])
def test_a_worker_started_from_async_code_completes_every_job(
    emq: redis.Redis, django_tasks_lines: Lines, task: Any
) -> None:
    user = User.objects.create_user("ada")
    results = [enqueue_for(user, task, n, 1) for n in range(3)]

    async def an_async_test() -> None:
        await sync_to_async(call_command)("run_emq_worker", "--burst", verbosity=0)

    # An async test run as Django's test runner runs one (async_to_sync), on a
    # thread of its own so that a deadlock fails the test instead of hanging it.
    runner = threading.Thread(target=async_to_sync(an_async_test), daemon=True)
    runner.start()
    runner.join(timeout=60)  # a safety limit only
    assert not runner.is_alive(), "the worker deadlocked"
    for result in results:
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
    assert [r.return_value for r in results] == [1, 2, 3]
    for result in results:
        assert any(result.id in line and "RUNNING" in line for line in django_tasks_lines.lines)
        assert any(result.id in line and "SUCCESSFUL" in line for line in django_tasks_lines.lines)
