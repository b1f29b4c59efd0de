"""Job control from Django code and from tasks: cancel a job by its result id,
let a running task see that a cancel was asked and report its progress.

A task that takes the context (``@task(takes_context=True)``) calls::

    from django_emq import cancel_requested, report_progress

    @task(takes_context=True)
    def resize(context, image_id):
        for i, size in enumerate(SIZES):
            if cancel_requested(context):
                return "cancelled"  # stop at a point of the task's own choosing
            report_progress(context, i / len(SIZES), f"resizing to {size}")
            ...

``report_progress`` writes at most once per ``PROGRESS_INTERVAL``
seconds per job (a final ``1.0`` always goes through): a task may call it in
a tight loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from django.tasks import TaskContext, TaskResult, task_backends
from django.tasks.exceptions import TaskResultDoesNotExist

from .backend import FairLanesBackend
from .engine.ids import validate_job_id
from .engine.policies.progress import Progress, parse_progress
from .engine.rows import Row
from .engine.shards import AnyQueue
from .exceptions import JobNotFound

#: Least seconds between two progress writes of one job.
PROGRESS_INTERVAL = 1.0
#: Seconds between two looks at the cancel flag by ``stop_when_cancelled``.
CANCEL_POLL = 1.0

_last_write: dict[str, float] = {}
_lock = threading.Lock()


def _queue_of(result: TaskResult[Any, Any]) -> AnyQueue:
    backend = task_backends[result.backend]
    if not isinstance(backend, FairLanesBackend):
        raise TypeError(f"backend {result.backend!r} is not a FairLanesBackend")
    return backend.engine(result.task.queue_name)


def cancel(result_id: str, backend: str = "default") -> str:
    """Cancel the job behind ``result_id`` (see ``Queue.cancel``): ``"cancelled"``
    for a job that had not started, ``"requested"`` for a running one.
    ``TaskResultDoesNotExist`` when no queue of the backend holds it;
    ``InvalidJobState`` when it has finished."""
    found = task_backends[backend]
    if not isinstance(found, FairLanesBackend):
        raise TypeError(f"backend {backend!r} is not a FairLanesBackend")
    try:
        validate_job_id(result_id)
    except ValueError:
        raise TaskResultDoesNotExist(result_id) from None
    for name in found.served_queues():
        try:
            return found.engine(name).cancel(result_id)
        except JobNotFound:
            continue
    raise TaskResultDoesNotExist(result_id)


def cancel_requested(context: TaskContext[Any, Any]) -> bool:
    """Whether an operator (or ``cancel``) asked the running task to stop.
    One read of the job's row."""
    result = context.task_result
    return _queue_of(result).cancel_requested(result.id)


def report_progress(context: TaskContext[Any, Any], done: float, note: str = "") -> bool:
    """Keep how far the running task has got (``done`` from 0 to 1, a short note)
    on its job, shown on the admin's job page and read by ``progress``.
    Skipped (answers False) when the job wrote less than
    ``PROGRESS_INTERVAL`` seconds ago, unless ``done`` is 1."""
    job_id = context.task_result.id
    now = time.monotonic()
    with _lock:
        last = _last_write.get(job_id)
        if done < 1 and last is not None and now - last < PROGRESS_INTERVAL:
            return False
        if len(_last_write) > 10_000:  # jobs long finished: forget them
            _last_write.clear()
        _last_write[job_id] = now
    return _queue_of(context.task_result).report_progress(job_id, done, note)


def progress(result: TaskResult[Any, Any]) -> Progress | None:
    """The progress the job last reported, or ``None`` (one read)."""
    queue = _queue_of(result).shard_for_job(result.id)
    return parse_progress(queue.connection.hget(queue.keys.job(result.id), Row.PROGRESS))


async def stop_when_cancelled(context: TaskContext[Any, Any], running: asyncio.Future[Any]) -> bool:
    """The worker's hook for coroutine tasks: look at the cancel flag every
    ``CANCEL_POLL`` seconds and cancel ``running`` (the task's asyncio
    task) at its next ``await`` once a cancel is asked. Ends when ``running``
    does; answers whether it cancelled it. The worker runs it beside each
    coroutine task that takes the context (``django_emq.worker.execute``)."""
    while not running.done():
        await asyncio.sleep(CANCEL_POLL)
        if running.done():
            return False
        if await asyncio.to_thread(cancel_requested, context):
            running.cancel()
            return True
    return False
