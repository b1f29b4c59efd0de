"""The threads sync tasks run on (:mod:`django_emq.worker.threads`), on their own:
how many of them a line of jobs wakes. Short jobs run back to back on one
thread (the others stay asleep: each would only trade the GIL with it),
while a job that blocks still holds back no other job; longer jobs wake a
thread per job waiting."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from django_emq.worker import threads as worker_threads
from django_emq.worker.jobs import Job
from django_emq.worker.threads import Finished, Take, Threads
from tests.helpers import wait_for


def jobs(n: int) -> list[Job]:
    """``n`` jobs the line can hold (the threads only hand them to the runner)."""
    return [Job(cast(Any, None), cast(Any, None), 0.0) for _ in range(n)]


class Pool:
    """``size`` threads on a loop of their own, running each job's body
    (``bodies``, by job: nothing for a job not named), noting which thread ran it."""

    def __init__(self, size: int, short: bool) -> None:
        self.bodies: dict[int, Callable[[], object]] = {}
        self.ran_on: dict[int, str] = {}
        self.delivered = 0
        self.loop = asyncio.new_event_loop()
        self.threads = Threads(size, self._run, self._deliver, lambda: short)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def _run(self, take: Take, finished: Finished) -> None:
        while (job := take()) is not None:
            self.ran_on[id(job)] = threading.current_thread().name
            self.bodies.get(id(job), lambda: None)()
            finished(job, None)

    def _deliver(self, done: list[tuple[Job, Any]]) -> None:
        self.delivered += len(done)

    def start(self) -> None:
        self._thread.start()
        self.loop.call_soon_threadsafe(self.threads.start, self.loop)
        wait_for(lambda: self.threads._sleeping == self.threads.size, what="every thread asleep")

    def submit(self, batch: list[Job]) -> None:
        self.loop.call_soon_threadsafe(self.threads.submit, batch)

    def stop(self) -> None:
        self.threads.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


@pytest.fixture
def pools() -> Iterator[list[Pool]]:
    made: list[Pool] = []
    yield made
    for pool in made:
        pool.stop()


def test_short_jobs_run_back_to_back_on_one_thread(
    pools: list[Pool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of short jobs wakes one thread, which runs them all: it wakes no
    other (no look at the line comes here to add one)."""
    monkeypatch.setattr(worker_threads, "STALL_AFTER", 3600.0)
    pool = Pool(4, short=True)
    pools.append(pool)
    pool.start()
    batch = jobs(50)
    pool.submit(batch)
    wait_for(lambda: pool.delivered == 50, what="every job run")
    assert len({pool.ran_on[id(job)] for job in batch}) == 1


def test_a_short_job_that_blocks_holds_back_no_other_job(pools: list[Pool]) -> None:
    """Short jobs so far, then one that blocks: the jobs behind it are taken by
    another thread (woken by the next look at the line), while it still blocks."""
    pool = Pool(2, short=True)
    pools.append(pool)
    pool.start()
    gate = threading.Event()
    blocker, *behind = jobs(21)
    pool.bodies[id(blocker)] = lambda: gate.wait(30)
    try:
        pool.submit([blocker, *behind])
        wait_for(lambda: pool.delivered == 20, what="the jobs behind the blocking one run")
        assert not gate.is_set()
        assert {pool.ran_on[id(job)] for job in behind} != {pool.ran_on[id(blocker)]}
    finally:
        gate.set()
    wait_for(lambda: pool.delivered == 21, what="the blocking job ends")


def test_longer_jobs_wake_a_thread_per_job_waiting(
    pools: list[Pool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs that take a while: a thread that takes one while more wait wakes the
    next, so four jobs that can only end together (a barrier of four) all run
    at once, with no look at the line to add threads."""
    monkeypatch.setattr(worker_threads, "STALL_AFTER", 3600.0)
    pool = Pool(4, short=False)
    pools.append(pool)
    pool.start()
    barrier = threading.Barrier(4, timeout=30)
    batch = jobs(4)
    for job in batch:
        pool.bodies[id(job)] = barrier.wait
    pool.submit(batch)
    wait_for(lambda: pool.delivered == 4, what="the four jobs run together")
    assert len({pool.ran_on[id(job)] for job in batch}) == 4
