"""The threads sync tasks run on: a fixed number of them take jobs from one
queue in order, and hand outcomes back to the event loop in batches (one
wake-up of the loop for all the outcomes that came in meanwhile), so a stream
of short sync jobs does not pay a thread hand-off per job."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .jobs import Job

#: What a thread does with a job: run it and answer its outcome, or ``None``
#: when it may not start (the worker is stopping, or its lease is not safe).
Runner = Callable[[Job], Any]
#: Where outcomes go, on the loop: ``[(job, outcome or None), ...]``.
Deliver = Callable[[list[tuple[Job, Any]]], None]


class Threads:
    """``size`` daemon threads running :data:`Runner` on submitted jobs."""

    def __init__(self, size: int, run: Runner, deliver: Deliver) -> None:
        self.size = size
        self._run = run
        self._deliver = deliver
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: queue.SimpleQueue[Job | Callable[[], None] | None] = queue.SimpleQueue()
        self._done: deque[tuple[Job, Any]] = deque()
        self._poked = False
        self._threads: list[threading.Thread] = []

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        for n in range(self.size):
            thread = threading.Thread(target=self._work, name=f"emq-sync_{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def submit(self, job: Job) -> None:
        self._queue.put(job)

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on a thread, after the jobs submitted before it."""
        self._queue.put(fn)

    def waiting(self) -> int:
        """Submitted items no thread has taken yet."""
        return self._queue.qsize()

    def take_back(self) -> list[Job]:
        """The submitted jobs no thread has taken (they will not start)."""
        jobs, calls = [], []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, Job):
                jobs.append(item)
            elif item is not None:
                calls.append(item)
        for fn in calls:  # not jobs: they still run
            self._queue.put(fn)
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
            if not isinstance(item, Job):
                item()
                continue
            outcome = self._run(item)
            self._done.append((item, outcome))
            if not self._poked:
                self._poked = True
                assert self._loop is not None
                try:
                    self._loop.call_soon_threadsafe(self._hand_over)
                except RuntimeError:  # the loop is closed: the worker is gone
                    return

    def _hand_over(self) -> None:
        self._poked = False
        done = []
        while self._done:
            done.append(self._done.popleft())
        if done:
            self._deliver(done)
