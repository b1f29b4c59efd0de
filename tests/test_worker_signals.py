"""Django's task signals from the worker: sent whenever a receiver could do
anything with them, skipped (with the ``TaskResult`` they would carry) when
Django's own log receivers are the only ones and their logger is quiet."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.core.management import call_command
from django.tasks.signals import task_finished, task_started

from django_emq import enqueue_for
from django_emq.worker.signals import listening
from tests import tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("django.tasks")
    level = logger.level
    yield logger
    logger.setLevel(level)


def test_django_log_receivers_alone_are_skipped_while_their_logger_is_quiet(
    tasks_logger: logging.Logger,
) -> None:
    tasks_logger.setLevel(logging.CRITICAL)
    assert not listening(task_started)
    assert not listening(task_finished)
    assert not listening(task_finished, logging.ERROR)


def test_django_log_receivers_are_sent_to_when_their_lines_would_show(
    tasks_logger: logging.Logger,
) -> None:
    tasks_logger.setLevel(logging.ERROR)
    assert not listening(task_finished)
    assert listening(task_finished, logging.ERROR)  # a failed job's line shows
    tasks_logger.setLevel(logging.INFO)
    assert listening(task_started)
    assert listening(task_finished)


def test_any_other_receiver_is_sent_to(tasks_logger: logging.Logger) -> None:
    tasks_logger.setLevel(logging.CRITICAL)

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        pass

    task_started.connect(receiver)
    try:
        assert listening(task_started)
        assert not listening(task_finished)
    finally:
        task_started.disconnect(receiver)


def test_coroutine_jobs_send_started_and_finished_with_their_results(emq: redis.Redis) -> None:
    seen: list[tuple[str, str, Any]] = []

    def started(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(("started", task_result.status, task_result.args))

    def finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(("finished", task_result.status, task_result.return_value))

    task_started.connect(started)
    task_finished.connect(finished)
    try:
        enqueue_for(User.objects.create_user("ada"), tasks.async_add, 2, 3)
        call_command("run_emq_worker", "--burst", "--concurrency", "4", verbosity=0)
    finally:
        task_started.disconnect(started)
        task_finished.disconnect(finished)
    assert seen == [("started", "RUNNING", [2, 3]), ("finished", "SUCCESSFUL", 5)]


@pytest.mark.parametrize("task", [tasks.add, tasks.async_add], ids=["sync", "coroutine"])
def test_a_task_started_receiver_that_raises_does_not_fail_the_job(
    emq: redis.Redis, task: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """As in Django's own backends (``ImmediateBackend`` sends ``task_started``
    before its ``try``): a receiver's error is not the task's. The worker logs
    it and runs the job, sync and coroutine tasks alike."""

    def raises(sender: Any, task_result: Any, **kwargs: Any) -> None:
        raise RuntimeError("a receiver's own bug")

    task_started.connect(raises)
    try:
        result = enqueue_for(User.objects.create_user("ada"), task, 2, 3)
        call_command("run_emq_worker", "--burst", "--concurrency", "2", verbosity=0)
    finally:
        task_started.disconnect(raises)
    result.refresh()
    assert (result.status, result.return_value, result.errors) == ("SUCCESSFUL", 5, [])
    failures = [r for r in caplog.records if "a task signal receiver failed" in r.getMessage()]
    assert len(failures) == 1
    assert failures[0].exc_info is not None
    assert str(failures[0].exc_info[1]) == "a receiver's own bug"
