"""Django's task signals, sent in batches: a worker starts and finishes jobs
many at a time, and a signal's sync receivers (Django's own logging ones are
always connected) must not run on the event loop, where a receiver that
touches the ORM would fail. So each batch is sent from one thread, in one
hand-off (``sync_to_async``, Django's thread for sync code: async receivers
still run on the loop), instead of one hand-off per job and signal."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.dispatch import Signal
from django.tasks import TaskResult

from ..backend import FairLanesBackend

logger = logging.getLogger("django_emq.worker")


def listening(signal: Signal) -> bool:
    """Whether anything would receive ``signal`` from the worker (cheap when nothing is)."""
    return bool(signal.receivers) and signal.has_listeners(FairLanesBackend)


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
    """:func:`send_all` off the event loop, one hand-off for the whole batch."""
    await sync_to_async(send_all, thread_sensitive=True)(signal, results)
