"""The worker's own background tasks on its loop (a job's failure record, a
release, a batch's ``task_started``, a coroutine job): kept so that a task's
failure is logged, not lost, and so that the wind-down can wait for the
records and releases under way (:func:`.stopping.wind_down`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

logger = logging.getLogger("django_emq.worker")


class Spawned:
    """The tasks the worker started and has not seen end."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a task on the running loop, kept until it ends."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def forget(self, task: asyncio.Task[Any]) -> None:
        """No longer wait for ``task`` (a coroutine job cut at the grace's end: it
        may swallow its cancel, or never end)."""
        self._tasks.discard(task)

    async def settle(self) -> None:
        """Wait for the tasks under way, and those they start, to end."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("a worker task failed", exc_info=task.exception())
