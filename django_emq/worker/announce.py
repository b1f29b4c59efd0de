"""``task_finished`` for the recorded jobs: the ``TaskResult`` each carries,
sorted by how it is sent (see :mod:`.signals`): sync tasks' from a worker
thread, coroutine tasks' in one hand-off on the loop."""

from __future__ import annotations

import functools
import logging
from datetime import UTC, datetime
from typing import Any

from django.tasks import TaskResult, TaskResultStatus
from django.tasks.signals import task_finished

from .execute import Policy, is_async, result_of
from .jobs import Job
from .signals import listening, send_all, send_batch
from .spawned import Spawned
from .threads import Threads

logger = logging.getLogger("django_emq.worker")

#: A TaskResult per job, split as sent: ``(sync tasks', coroutine tasks')``.
type Split = tuple[list[TaskResult[Any, Any]], list[TaskResult[Any, Any]]]


def announce(
    items: list[tuple[Job, TaskResultStatus, Any]], policy: Policy, threads: Threads, tasks: Spawned
) -> None:
    """``task_finished`` for each recorded ``(job, status, value)``, when anything
    listens: sync tasks' from a worker thread (after the jobs handed to it
    before), coroutine tasks' in one hand-off on the loop."""
    sync, coros = finished_results(items, policy)
    if sync:
        threads.call(functools.partial(send_all, task_finished, sync))
    if coros:
        tasks.spawn(send_batch(task_finished, coros))


def finished_results(items: list[tuple[Job, TaskResultStatus, Any]], policy: Policy) -> Split:
    """The final ``TaskResult`` of each ``(job, status, value)``, or none at all
    when nothing listens to ``task_finished`` at the level its lines would have."""
    if not items:
        return [], []
    failures = any(status == TaskResultStatus.FAILED for _, status, _ in items)
    if not listening(task_finished, logging.ERROR if failures else logging.INFO):
        return [], []
    sync: list[TaskResult[Any, Any]] = []
    coros: list[TaskResult[Any, Any]] = []
    for job, status, value in items:
        if job.result is None:
            try:
                job.result = result_of(job, policy)
            except Exception:
                logger.exception("job %s: could not build its TaskResult", job.job_id)
                continue
        result = finished_result(job.result, status, value)
        (coros if job.task is not None and is_async(job.task) else sync).append(result)
    return sync, coros


def finished_result(
    result: TaskResult[Any, Any], status: TaskResultStatus, value: Any
) -> TaskResult[Any, Any]:
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", datetime.now(UTC))
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", value)
    return result
