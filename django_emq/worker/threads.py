"""The threads sync tasks run on: a fixed number of them take chunks of jobs
(one job, or several very short ones) from one queue in order, run each
chunk's jobs in turn, and hand outcomes back to the event loop in batches (one
wake-up of the loop for all the outcomes that came in meanwhile), so a stream
of short sync jobs does not pay two thread hand-offs per job.

A chunk is a deque the loop can still reach: jobs of a chunk that have not
started when the worker stops are taken back (:meth:`Threads.take_back`),
even while the job before them runs."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .jobs import Job

#: One job's outcome, handed back: ``(job, outcome)``, the outcome ``None`` for
#: a job that may not start (the worker is stopping, or its lease is not safe).
Finished = Callable[[Job, Any], None]
#: What a thread does with a chunk: take its jobs from the left one at a time,
#: run each and tell ``Finished`` its outcome.
Runner = Callable[["deque[Job]", Finished], None]
#: Where outcomes go, on the loop: ``[(job, outcome or None), ...]``.
Deliver = Callable[[list[tuple[Job, Any]]], None]


class Threads:
    """``size`` daemon threads running :data:`Runner` on submitted chunks."""

    def __init__(self, size: int, run: Runner, deliver: Deliver) -> None:
        self.size = size
        self._run = run
        self._deliver = deliver
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: queue.SimpleQueue[deque[Job] | Callable[[], None] | None] = queue.SimpleQueue()
        #: Every chunk submitted and not finished, by id (queued or running).
        self._chunks: dict[int, deque[Job]] = {}
        self._done: deque[tuple[Job, Any]] = deque()
        self._poked = False
        self._threads: list[threading.Thread] = []

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        for n in range(self.size):
            thread = threading.Thread(target=self._work, name=f"emq-sync_{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def submit(self, jobs: list[Job]) -> None:
        """``jobs``: one chunk, run in turn on one thread."""
        chunk = deque(jobs)
        self._chunks[id(chunk)] = chunk
        self._queue.put(chunk)

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on a thread, after the jobs submitted before it."""
        self._queue.put(fn)

    def waiting(self) -> int:
        """Submitted chunks (and calls) no thread has taken yet."""
        return self._queue.qsize()

    def take_back(self) -> list[Job]:
        """The submitted jobs no thread has started (they will not start)."""
        jobs: list[Job] = []
        for chunk in list(self._chunks.values()):
            while True:
                try:
                    jobs.append(chunk.popleft())
                except IndexError:
                    break
        return jobs

    def stop(self, timeout: float = 2.0) -> None:
        """Let the threads finish what was handed to them (``task_finished``
        receivers queued last among them), then end; wait up to ``timeout``
        seconds for them, so a worker's run returns after its signals are sent
        (a job still running past the grace period is not waited for)."""
        for _ in self._threads:
            self._queue.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if not isinstance(item, deque):
                item()
                continue
            try:
                self._run(item, self._finished)
            finally:
                self._chunks.pop(id(item), None)

    def _finished(self, job: Job, outcome: Any) -> None:
        self._done.append((job, outcome))
        if not self._poked:
            self._poked = True
            assert self._loop is not None
            with contextlib.suppress(RuntimeError):  # the loop is closed: the worker is gone
                self._loop.call_soon_threadsafe(self._hand_over)

    def _hand_over(self) -> None:
        self._poked = False
        done = []
        while self._done:
            done.append(self._done.popleft())
        if done:
            self._deliver(done)
