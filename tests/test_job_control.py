"""Job control through Django's task API and a real worker process: cancel a
job that has not started (it reads back as failed, cancelled), ask a running
task to stop (it sees the flag and stops), and read the progress it reported."""

from __future__ import annotations

import subprocess
import time
from datetime import timedelta

import pytest
import redis
from django.tasks import TaskResultStatus
from django.tasks.exceptions import TaskResultDoesNotExist
from django.utils import timezone

from django_emq import cancel, enqueue_for, lane, progress
from django_emq.exceptions import InvalidJobState

from . import tasks
from .helpers import lane as lane_of
from .test_worker import burst, processes, runs, worker_process

__all__ = ["processes"]  # the fixture, imported for the tests below

pytestmark = pytest.mark.django_db
A = lane_of(7)


def test_a_cancelled_job_reads_back_as_failed_with_a_clear_error(emq: redis.Redis) -> None:
    with lane(A):
        kept = tasks.record.enqueue("kept")
        dropped = tasks.record.enqueue("dropped")
    assert cancel(dropped.id) == "cancelled"
    burst()
    assert runs(emq) == ["kept"]
    result = tasks.record.get_result(dropped.id)
    assert result.status == TaskResultStatus.FAILED
    assert result.finished_at is not None
    assert [e.exception_class_path for e in result.errors] == ["django_emq.exceptions.JobCancelled"]
    assert "cancelled before it ran" in result.errors[0].traceback
    assert tasks.record.get_result(kept.id).status == TaskResultStatus.SUCCESSFUL


def test_a_scheduled_job_can_be_cancelled(emq: redis.Redis) -> None:
    later = tasks.record.using(run_after=timezone.now() + timedelta(hours=1))
    result = enqueue_for(A, later, "later")
    assert cancel(result.id) == "cancelled"
    assert tasks.record.get_result(result.id).status == TaskResultStatus.FAILED


def test_cancel_refuses_unknown_and_finished_jobs(emq: redis.Redis) -> None:
    """As docs/django.md says: an unknown id raises TaskResultDoesNotExist, an
    ended job (done, or cancelled already) InvalidJobState; neither writes."""
    before = emq.dbsize()
    with pytest.raises(TaskResultDoesNotExist):
        cancel("JOB0000000000000000000000")
    with pytest.raises(TaskResultDoesNotExist):
        cancel("not an id")
    assert emq.dbsize() == before
    result = enqueue_for(A, tasks.record, "x")
    burst()
    with pytest.raises(InvalidJobState):
        cancel(result.id)
    gone = enqueue_for(A, tasks.record, "y")
    assert cancel(gone.id) == "cancelled"
    row = emq.hgetall(f"emq:{{default}}:job:{gone.id}")
    assert row, "the cancelled job keeps its row"
    with pytest.raises(InvalidJobState):
        cancel(gone.id)
    assert emq.hgetall(f"emq:{{default}}:job:{gone.id}") == row


def _wait_for(check: object, what: str) -> None:
    give_up = time.monotonic() + 30
    while not check():  # type: ignore[operator]
        assert time.monotonic() < give_up, f"gave up waiting for {what}"
        time.sleep(0.02)


def test_a_running_task_sees_the_cancel_request_and_reports_progress(
    emq: redis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    result = enqueue_for(A, tasks.cooperative)
    processes.append(worker_process("--lease", "30"))
    _wait_for(lambda: "start:cooperative" in runs(emq), "the task to start")
    shown = progress(result)
    assert shown is not None
    assert (shown.done, shown.note) == (0.5, "halfway")
    assert cancel(result.id) == "requested"

    def finished() -> bool:
        return tasks.cooperative.get_result(result.id).status == TaskResultStatus.SUCCESSFUL

    _wait_for(finished, "the task to stop")
    assert tasks.cooperative.get_result(result.id).return_value == "stopped"


def test_a_sync_task_that_raises_job_cancelled_ends_failed_at_once(
    emq: redis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    """The way to end cancelled from a sync task: raise ``JobCancelled``; the
    job ends failed with it at once and is never retried."""
    result = enqueue_for(A, tasks.cooperative_raises)
    processes.append(worker_process("--lease", "30"))
    _wait_for(lambda: "start:cooperative_raises" in runs(emq), "the task to start")
    assert cancel(result.id) == "requested"

    def failed() -> bool:
        return tasks.cooperative_raises.get_result(result.id).status == TaskResultStatus.FAILED

    _wait_for(failed, "the task to stop")
    stopped = tasks.cooperative_raises.get_result(result.id)
    assert [e.exception_class_path for e in stopped.errors] == [
        "django_emq.exceptions.JobCancelled"
    ]
    assert stopped.attempts == 1, "never retried"


def test_the_async_hook_cancels_a_coroutine_task_once_asked(
    emq: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import contextlib

    from django.tasks import TaskContext

    from django_emq import get_queue, jobs

    monkeypatch.setattr(jobs, "CANCEL_POLL", 0.01)
    result = enqueue_for(A, tasks.async_add, 1, 2)
    claim = get_queue().claim(60_000)
    assert claim is not None
    context = TaskContext(task_result=tasks.async_add.get_result(result.id))

    async def run() -> bool:
        running = asyncio.ensure_future(asyncio.sleep(30))
        watcher = asyncio.ensure_future(jobs.stop_when_cancelled(context, running))
        await asyncio.sleep(0.05)
        assert not running.done(), "no cancel asked yet"
        assert await asyncio.to_thread(cancel, result.id) == "requested"
        await asyncio.wait_for(watcher, 10)
        with contextlib.suppress(asyncio.CancelledError):
            await running
        return running.cancelled()

    assert asyncio.run(run())


def test_the_worker_stops_a_coroutine_task_when_a_cancel_is_asked(
    emq: redis.Redis, processes: list[subprocess.Popen[bytes]]
) -> None:
    result = enqueue_for(A, tasks.async_cooperative)
    processes.append(worker_process("--lease", "30"))
    _wait_for(lambda: "start:async_cooperative" in runs(emq), "the task to start")
    assert cancel(result.id) == "requested"

    def failed() -> bool:
        return tasks.async_cooperative.get_result(result.id).status == TaskResultStatus.FAILED

    _wait_for(failed, "the worker to stop it")
    stopped = tasks.async_cooperative.get_result(result.id)
    assert [e.exception_class_path for e in stopped.errors] == [
        "django_emq.exceptions.JobCancelled"
    ], "ended at once, never retried"
    assert stopped.attempts == 1
