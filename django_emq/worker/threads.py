"""The threads sync tasks run on: a fixed number of them take jobs, in claim
order, from one line the event loop fills a claim at a time, and hand outcomes
back to the loop in batches (one wake-up of the loop for all the outcomes that
came in meanwhile).

A thread that finishes a job takes the next one waiting without a hand-off;
only a thread that found the line empty sleeps. The loop wakes one sleeping
thread per batch it adds, and a thread that takes a job while more wait wakes
the next, so the wake-ups are made off the loop (their system calls would
hold up its claims) and no more are made than there are jobs. A job that
blocks holds back no other job: the other threads take them.

Jobs in the line that no thread has started when the worker stops are taken
back (:meth:`Threads.take_back`)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from .jobs import Job

#: One job's outcome, handed back: ``(job, outcome)``, the outcome ``None`` for
#: a job that may not start (the worker is stopping, or its lease is not safe).
Finished = Callable[[Job, Any], None]
#: The next job of the line, or ``None`` when the line is empty or a call is next.
Take = Callable[[], Job | None]
#: What a thread does while jobs are next in line: take them one at a time
#: (``Take``), run each and tell ``Finished`` its outcome.
Runner = Callable[[Take, Finished], None]
#: Where outcomes go, on the loop: ``[(job, outcome or None), ...]``.
Deliver = Callable[[list[tuple[Job, Any]]], None]
#: What waits in the line: a job, a call to make on a thread, or ``None`` (stop).
Item = Job | Callable[[], None] | None


class Threads:
    """``size`` daemon threads running :data:`Runner` on the jobs submitted."""

    def __init__(self, size: int, run: Runner, deliver: Deliver) -> None:
        self.size = size
        self._run = run
        self._deliver = deliver
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The line: jobs and calls in the order given, ``None`` once per thread to stop.
        self._line: deque[Item] = deque()
        #: Guards the line and ``_sleeping`` (taken as is where nothing waits: a
        #: plain lock is cheaper to take than its condition).
        self._lock = threading.Lock()
        #: Sleeping threads wait on it.
        self._ready = threading.Condition(self._lock)
        #: Threads asleep that nothing has woken yet (whoever wakes one counts it
        #: off, so no thread is woken twice and no wake-up is asked for in vain).
        self._sleeping = 0
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
        """``jobs`` to the end of the line, in order (one claim's, usually)."""
        self._put(jobs)

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on a thread, after the jobs submitted before it have started."""
        self._put([fn])

    def _put(self, items: Sequence[Item]) -> None:
        """Add ``items``; wake one sleeping thread, which wakes the next if more
        are waiting (:meth:`_take`), so the loop pays one wake-up per batch."""
        with self._lock:
            self._line.extend(items)
            self._wake_one()

    def waiting(self) -> int:
        """Jobs (and calls) in the line that no thread has taken yet."""
        return len(self._line)

    def take_back(self) -> list[Job]:
        """The submitted jobs no thread has started (they will not start); the
        calls in the line stay there."""
        with self._ready:
            jobs = [item for item in self._line if isinstance(item, Job)]
            kept = [item for item in self._line if not isinstance(item, Job)]
            self._line.clear()
            self._line.extend(kept)
        return jobs

    def stop(self, timeout: float = 2.0) -> None:
        """Let the threads finish what was handed to them (``task_finished``
        receivers queued last among them), then end; wait up to ``timeout``
        seconds for them, so a worker's run returns after its signals are sent
        (a job still running past the grace period is not waited for)."""
        self._put([None] * len(self._threads))
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _take(self) -> Job | None:
        """The next job, if a job is next in line (a call or a stop is left for
        :meth:`_next`); with more waiting, one sleeping thread is woken for them."""
        with self._lock:
            line = self._line
            if not line or not isinstance(line[0], Job):
                return None
            job: Job = line.popleft()  # type: ignore[assignment]
            if line:
                self._wake_one()
            return job

    def _wake_one(self) -> None:
        """Wake one sleeping thread, if one sleeps (the lock held)."""
        if self._sleeping:
            self._sleeping -= 1
            self._ready.notify()

    def _next(self) -> Item:
        """The next item in line, sleeping until there is one."""
        with self._ready:
            while not self._line:
                self._sleeping += 1  # counted off by whoever wakes it
                self._ready.wait()
            return self._line[0]

    def _work(self) -> None:
        while True:
            item = self._next()
            if isinstance(item, Job):
                self._run(self._take, self._finished)
                continue
            with self._ready:  # a call or a stop: take it, unless another thread did
                if not self._line or self._line[0] is not item:
                    continue
                self._line.popleft()
                if self._line:
                    self._wake_one()
            if item is None:
                return
            item()

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
