"""The loop watchdog: a thread that notices when the worker's event loop is
blocked (a coroutine task that calls ``time.sleep``, or blocking I/O) and
keeps what the worker holds safe meanwhile.

The loop marks itself alive every :data:`TICK` seconds. When it has not for a
while, the loop is stalled:

* after :data:`STALL_AFTER` seconds the watchdog logs it, once per stall,
  naming the coroutine job (or asyncio task) running on the loop, and its
  stack;
* after half a beat, and every half beat while the stall lasts, it extends
  the leases of every job the worker holds, from its own thread and
  connection, as the beat would: the jobs that finished and wait only to be
  recorded (and the ones still running) keep their leases, so no other worker
  runs them again; they are recorded when the loop runs again.

It also bounds a stop: once a signal asked the worker to stop, a worker still
running ``grace + HARD_MARGIN`` seconds later (its loop blocked, so its
wind-down never ran) releases every job it holds from the watchdog's thread
and exits the process (status 1).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING

from ..engine import ops
from ..engine.runner import SyncRunner
from .jobs import extended, extensions

if TYPE_CHECKING:
    from .core import Core
    from .jobs import Job

logger = logging.getLogger("django_emq.worker")

#: Seconds between the loop's marks that it is alive.
TICK = 0.1
#: Seconds without a mark after which the loop counts as stalled (or half a
#: beat, if shorter).
STALL_AFTER = 1.0
#: How long past its grace a worker asked to stop by a signal may take before
#: the watchdog releases its jobs and ends the process.
HARD_MARGIN = 10.0


class LoopWatch:
    """Watches ``loop`` (the running loop; created on its thread) for ``core``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, core: Core) -> None:
        self.loop = loop
        self.core = core
        plan = core.plan
        self.extend_every = max(TICK, plan.beat_s / 2)
        self._loop_thread = threading.get_ident()
        self._alive_at = time.monotonic()
        self._handle: asyncio.TimerHandle | None = None
        self._done = threading.Event()
        self._stop_by: float | None = None
        self._thread = threading.Thread(target=self._watch, name="emq-watchdog", daemon=True)

    def start(self) -> None:
        self._tick()
        self._thread.start()

    def close(self) -> None:
        self._done.set()
        if self._handle is not None:
            self._handle.cancel()
        self._thread.join(timeout=5)

    def stop_by(self, deadline: float) -> None:
        """The worker was asked to stop (from a signal handler): it must have
        ended by ``deadline`` (monotonic), else the watchdog ends it."""
        if self._stop_by is None:
            self._stop_by = deadline

    def _tick(self) -> None:
        self._alive_at = time.monotonic()
        self._handle = self.loop.call_later(TICK, self._tick)

    def _watch(self) -> None:
        reported = False
        extended = 0.0
        while not self._done.wait(TICK):
            now = time.monotonic()
            if self._stop_by is not None and now >= self._stop_by:
                self._give_up()
            lag = now - self._alive_at
            if lag < self.extend_every:
                reported = False
                continue
            if now - extended >= self.extend_every:
                extended = now
                self._extend()
            if lag >= STALL_AFTER and not reported:
                reported = True
                self._report(lag)

    def _report(self, lag: float) -> None:
        """One warning per stall: what runs on the loop, and where."""
        frame = sys._current_frames().get(self._loop_thread)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(unknown)\n"
        logger.warning(
            "the event loop has been blocked for %.1fs by %s: a coroutine task must not "
            "block (time.sleep, blocking I/O); the worker's other coroutine jobs and its "
            "beat wait meanwhile (the watchdog extends its leases). Where it is:\n%s",
            lag, self._running(), stack.rstrip(),
        )  # fmt: skip

    def _running(self) -> str:
        """The job (or the asyncio task) running on the loop now."""
        task = asyncio.current_task(self.loop)
        if task is None:
            return "a callback, not a task"
        job = self.core.coroutines.job_of(task)
        if job is None:
            return f"task {task.get_name()!r}"
        return f"job {job.job_id} (task {job.claim.task_path}, lane {job.claim.lane})"

    def _held(self) -> list[Job]:
        return [job for job in list(self.core.held.values()) if not job.settled and not job.lost]

    def _extend(self) -> None:
        """Extend the leases of every job held, as the beat does, from this thread
        (one pipeline per queue)."""
        lease_ms = self.core.plan.lease_ms
        for runner, jobs in _by_queue(self._held()):
            sent = time.monotonic()
            try:
                answers = runner.run_many(extensions(jobs, lease_ms))
            except Exception as exc:  # the server away: the leases may run out
                logger.warning("watchdog: could not extend the leases (%r)", exc)
                continue
            extended(jobs, answers, sent, lease_ms)  # another error: tried again next time

    def _give_up(self) -> None:
        """The worker outlived its stop deadline: release what it holds and exit."""
        logger.error(
            "the worker was asked to stop and is still running past its grace and %.0fs "
            "(its event loop blocked by %s): releasing its jobs and exiting",
            HARD_MARGIN, self._running(),
        )  # fmt: skip
        for job in self._held():
            try:
                job.shard.queue.runner.run(
                    ops.release(job.shard.queue, job.job_id, job.claim.token)
                )
            except Exception as exc:  # refused (the lease moved on) or the server away
                logger.warning("job %s: could not release (%r)", job.job_id, exc)
        logging.shutdown()
        os._exit(1)


def _by_queue(jobs: list[Job]) -> list[tuple[SyncRunner, list[Job]]]:
    """``jobs`` grouped by their shard's queue (one pipeline each), with its sync runner."""
    groups: dict[int, tuple[SyncRunner, list[Job]]] = {}
    for job in jobs:
        queue = job.shard.queue
        groups.setdefault(id(queue), (queue.runner, []))[1].append(job)
    return list(groups.values())
