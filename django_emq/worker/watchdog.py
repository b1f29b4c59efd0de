"""The loop watchdog: a thread that notices when the worker's event loop is
blocked (a coroutine task that calls ``time.sleep``, blocking I/O, a task
module whose import hangs) and keeps what the worker holds safe meanwhile.

The loop marks itself alive every :data:`TICK` seconds. When it has not for a
while, the loop is stalled:

* after :data:`STALL_AFTER` seconds the watchdog logs it, once per stall,
  naming the job blocking the loop (the coroutine job running on it, or the
  job whose task module it is importing) or else the asyncio task, and its
  stack;
* after half a beat, and every half beat while the stall lasts, it extends
  the leases of every job the worker holds, from its own thread and
  connection, as the beat would: the jobs that finished and wait only to be
  recorded (and the ones still running) keep their leases, so no other worker
  runs them again; they are recorded when the loop runs again;
* once the loop has been blocked for a whole lease by one job, that job is
  *charged*: its lease ends at once and is reaped, counted as an expiry, as a
  frozen worker's would be (dead after ``MAX_EXPIRIES``), and it is not
  extended again; the other jobs keep theirs.

It also bounds a stop: once a signal asked the worker to stop, a worker still
running ``grace + HARD_MARGIN - GIVE_UP_WITHIN`` seconds later (its loop
blocked, so its wind-down never ran, or its wind-down still waiting on a
server that does not answer) charges the job blocking the loop, if any,
releases every other job it holds (one pipeline per queue) and exits the
process (status 1), all by ``grace + HARD_MARGIN``.
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
from ..engine.exceptions import JobError
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
#: How long past its grace a worker asked to stop by a signal may take, at most:
#: by then the watchdog has released its jobs and ended the process.
HARD_MARGIN = 10.0
#: How long before that bound the watchdog gives up on the worker: the time its
#: last calls (the releases) get, whatever the server does.
GIVE_UP_WITHIN = 2.0
#: How long a worker that ends waits for its watchdog's thread.
CLOSE_WAIT = 0.5


class LoopWatch:
    """Watches ``loop`` (the running loop; created on its thread) for ``core``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, core: Core) -> None:
        self.loop = loop
        self.core = core
        plan = core.plan
        self.extend_every = max(TICK, plan.beat_s / 2)
        self.lease_s = plan.lease_s
        self._loop_thread = threading.get_ident()
        self._alive_at = time.monotonic()
        self._handle: asyncio.TimerHandle | None = None
        self._done = threading.Event()
        self._stop_by: float | None = None
        self._giving_up = False
        self._thread = threading.Thread(target=self._watch, name="emq-watchdog", daemon=True)

    def start(self) -> None:
        self._tick()
        self._thread.start()

    def close(self) -> None:
        self._done.set()
        if self._handle is not None:
            self._handle.cancel()
        # Giving up, the watchdog ends the process (within GIVE_UP_WITHIN): the
        # worker must not exit 0 under it, its releases half sent. Else it may be
        # in a call to a server that does not answer: not waited for (it does
        # nothing more once that returns).
        self._thread.join(timeout=None if self._giving_up else CLOSE_WAIT)

    def stop_by(self, deadline: float) -> None:
        """The worker was asked to stop (from a signal handler): it must have
        ended by ``deadline`` (monotonic), else the watchdog ends it then."""
        if self._stop_by is None:
            self._stop_by = deadline

    def _tick(self) -> None:
        self._alive_at = time.monotonic()
        self._handle = self.loop.call_later(TICK, self._tick)

    def _watch(self) -> None:
        reported = charged = False
        extended = 0.0
        while not self._done.wait(TICK):
            now = time.monotonic()
            if self._stop_by is not None and now >= self._stop_by - GIVE_UP_WITHIN:
                self._give_up(self._stop_by)
            stalled_since = self._alive_at
            lag = now - stalled_since
            if lag < self.extend_every:
                reported = charged = False
                continue
            if lag >= self.lease_s and not charged:
                culprit = self._culprit()
                if culprit is not None and not culprit.lost and self._alive_at == stalled_since:
                    charged = True
                    self._charge(culprit, lag)
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
            "beat wait meanwhile (the watchdog extends its leases, for a lease at most "
            "for the job blocking it). Where it is:\n%s",
            lag, self._running(), stack.rstrip(),
        )  # fmt: skip

    def _culprit(self) -> Job | None:
        """The job blocking the loop now, if a job is: the one whose task module
        is being imported on it, or the coroutine job running on it."""
        loading = self.core.loading
        if loading is not None:
            return loading
        task = asyncio.current_task(self.loop)
        return None if task is None else self.core.coroutines.job_of(task)

    def _running(self) -> str:
        """The job (or the asyncio task) running on the loop now."""
        job = self._culprit()
        if job is not None:
            doing = "importing task" if job is self.core.loading else "task"
            return f"job {job.job_id} ({doing} {job.claim.task_path}, lane {job.claim.lane})"
        task = asyncio.current_task(self.loop)
        if task is None:
            return "a callback, not a task"
        return f"task {task.get_name()!r}"

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

    def _charge(self, job: Job, lag: float) -> None:
        """``job`` has blocked the loop for a whole lease: it is not extended again,
        and its lease ends now, reaped and counted as an expiry (as a frozen
        worker's lease would be), so a job that always blocks ends dead after
        ``MAX_EXPIRIES``. If the loop runs again, its outcome is refused."""
        job.lost = True
        logger.error(
            "job %s (task %s, lane %s) has blocked the event loop for %.1fs, a whole lease: "
            "its lease ends now, counted as an expiry (dead after MAX_EXPIRIES); the "
            "worker's other jobs keep theirs",
            job.job_id, job.claim.task_path, job.claim.lane, lag,
        )  # fmt: skip
        queue = job.shard.queue
        try:
            queue.runner.run(ops.extend(queue, job.job_id, job.claim.token, 0))
            queue.runner.run_all(ops.reap(queue))
        except JobError:  # the lease moved on, or the row is gone: nothing to charge
            pass
        except Exception as exc:  # the server away: the lease runs out, a beat reaps it
            logger.warning("job %s: could not end its lease (%r); it will expire", job.job_id, exc)

    def _give_up(self, bound: float) -> None:
        """The worker outlived its stop deadline: charge the job blocking its loop
        (if one does), release the others, and exit by ``bound`` (monotonic),
        whatever the server does."""
        self._giving_up = True
        blocked = time.monotonic() - self._alive_at >= STALL_AFTER
        culprit = self._culprit() if blocked else None
        why = (
            f"its event loop blocked by {self._running()}"
            if blocked
            else "its wind-down still waiting on the server"
        )
        logger.error(
            "the worker was asked to stop and is still running past its grace and %.0fs "
            "(%s): releasing its jobs and exiting",
            HARD_MARGIN - GIVE_UP_WITHIN, why,
        )  # fmt: skip
        held = self._held()
        last = threading.Thread(
            target=self._hand_back, args=(held, culprit), name="emq-give-up", daemon=True
        )
        last.start()
        last.join(max(0.0, bound - time.monotonic()))
        if last.is_alive():
            logger.warning("the server did not answer in time: the leases left will expire")
        logging.shutdown()
        os._exit(1)

    def _hand_back(self, held: list[Job], culprit: Job | None) -> None:
        """Release ``held`` (one pipeline per queue), all but ``culprit``, which is
        charged (see :meth:`_charge`)."""
        if culprit is not None and culprit in held:
            held.remove(culprit)
            self._charge(culprit, time.monotonic() - self._alive_at)
        for runner, jobs in _by_queue(held):
            try:
                answers = runner.run_many(
                    [ops.release(j.shard.queue, j.job_id, j.claim.token) for j in jobs]
                )
            except Exception as exc:  # the server away: their leases will expire
                logger.warning("could not release %d job(s) (%r)", len(jobs), exc)
                continue
            for job, answer in zip(jobs, answers, strict=True):
                if isinstance(answer, Exception) and not isinstance(answer, JobError):
                    logger.warning("job %s: could not release (%r)", job.job_id, answer)


def _by_queue(jobs: list[Job]) -> list[tuple[SyncRunner, list[Job]]]:
    """``jobs`` grouped by their shard's queue (one pipeline each), with its sync runner."""
    groups: dict[int, tuple[SyncRunner, list[Job]]] = {}
    for job in jobs:
        queue = job.shard.queue
        groups.setdefault(id(queue), (queue.runner, []))[1].append(job)
    return list(groups.values())
