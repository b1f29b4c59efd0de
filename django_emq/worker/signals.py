"""Django's task signals, sent in batches: a worker starts and finishes jobs
many at a time, and a signal's sync receivers (Django's own logging ones are
always connected) must not run on the event loop, where a receiver that
touches the ORM would fail. So each batch is sent from one thread, in one
hand-off (``sync_to_async``, Django's thread for sync code: async receivers
still run on the loop), instead of one hand-off per job and signal.

A signal whose only receiver is Django's own log receiver, while the
``django.tasks`` logger would drop its line (``run_emq_worker`` at its default
verbosity), is not sent at all: sending it could change nothing, and skipping
it spares the job its ``TaskResult`` (see :func:`listening`)."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.dispatch import Signal
from django.tasks import TaskResult
from django.tasks import signals as django_signals

from ..backend import FairLanesBackend

logger = logging.getLogger("django_emq.worker")


#: Django's own receivers that only log a line to ``django.tasks`` (at INFO,
#: ERROR for a failed job).
LOG_RECEIVERS = frozenset(
    getattr(django_signals, name)
    for name in ("log_task_started", "log_task_finished")
    if hasattr(django_signals, name)
)
tasks_logger = logging.getLogger("django.tasks")


def listening(signal: Signal, level: int = logging.INFO) -> bool:
    """Whether sending ``signal`` from the worker could do anything: some receiver
    is connected that is not one of Django's log receivers, or the
    ``django.tasks`` logger would write their lines at ``level`` (ERROR when a
    batch holds a failed job). Cheap when nothing is connected; one look at the
    receivers otherwise (once per batch of jobs)."""
    if not signal.receivers:
        return False
    sync, asynchronous = signal._live_receivers(FairLanesBackend)
    if asynchronous:
        return True
    return any(r not in LOG_RECEIVERS or tasks_logger.isEnabledFor(level) for r in sync)


def send_all(signal: Signal, results: list[TaskResult[Any, Any]]) -> None:
    """On a thread: ``signal`` for each result; a receiver that fails is logged,
    the others still run. Connections the receivers opened are closed after,
    as around a job."""
    try:
        for result in results:
            try:
                signal.send(FairLanesBackend, task_result=result)
            except Exception:
                logger.exception("job %s: a task signal receiver failed", result.id)
    finally:
        close_old_connections()


async def send_batch(signal: Signal, results: list[TaskResult[Any, Any]]) -> None:
    """:func:`send_all` off the event loop, one hand-off for the whole batch (on
    the worker's own thread for sync code, see :func:`.stopping.apart`). A
    hand-off that fails is logged: the jobs go on (they run, or are recorded)."""
    try:
        await sync_to_async(send_all, thread_sensitive=True)(signal, results)
    except Exception:
        logger.exception("could not send a task signal for %d job(s)", len(results))
