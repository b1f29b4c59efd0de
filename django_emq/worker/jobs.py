"""A job the worker holds, from its claim until its outcome is recorded."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine import ops
from ..engine.exceptions import JobError
from ..engine.ops import Op
from ..engine.records import Claim
from .shard import Shard

if TYPE_CHECKING:
    from django.tasks import Task, TaskResult


@dataclass(eq=False, slots=True)
class Job:
    """One claimed job. The event loop owns every field but ``started``,
    ``started_at``, ``ended`` and ``result``, which the thread that runs a sync
    job sets (plain stores, before it hands the job back).
    """

    shard: Shard
    claim: Claim
    #: Monotonic time before which the lease is surely this worker's: when the
    #: claim (or the last extension) was sent, plus the lease.
    lease_until: float
    task: Task[Any, Any] | None = None
    result: TaskResult[Any, Any] | None = None
    #: When it started (monotonic); 0 while it waits (prefetched).
    started: float = 0.0
    #: When it started (epoch seconds), for its ``TaskResult``.
    started_at: float = 0.0
    #: When it finished running (monotonic); 0 until then.
    ended: float = 0.0
    #: An extension was refused: the lease moved on (reaped, deleted), so it is
    #: not extended again and, if it has not started, never starts.
    lost: bool = False
    #: Its outcome is recorded (or refused): the lease is not the worker's to extend.
    settled: bool = False
    #: Ended: counted, its line written, out of ``held`` (``Core.ended``). An id
    #: can come back while its last attempt still settles here (a retry with no
    #: back-off, or a release, claimed again by this worker before the answer is
    #: handled), so ``held`` drops only this attempt, never a newer one: dropped,
    #: that one ran unrecorded, its lease unextended, and a stopping worker
    #: waited its grace for it.
    over: bool = False
    #: The failure recorded when it went dead (``task_error`` JSON): its
    #: traceback goes under the job's ERROR line. ``None`` otherwise.
    error: str | None = None

    @property
    def job_id(self) -> str:
        return self.claim.job_id

    def may_start(self, margin: float) -> bool:
        """Whether the lease is still surely this worker's for at least ``margin``
        seconds, by the worker's own clock: a job prefetched before the worker
        froze (or lost the server) must not start on a lease another worker may
        hold by now."""
        return not self.lost and time.monotonic() + margin < self.lease_until

    @property
    def duration(self) -> float:
        """Seconds it ran: from its start to its end, or to now while it still
        runs (a job released at shutdown past the grace ran until then)."""
        if not self.started:
            return 0.0
        return max(0.0, (self.ended or time.monotonic()) - self.started)


class Coroutines(dict["Job", "asyncio.Task[Any]"]):
    """The coroutine jobs running, with the asyncio task running each."""

    def job_of(self, task: asyncio.Task[Any]) -> Job | None:
        """The job ``task`` runs, if any: the job's own task, or the one it awaits
        (a task that takes its context runs in a task of its own, see
        ``execute._cancellable``). Safe from another thread: the watchdog asks
        while the loop is blocked."""
        for job, running in list(self.items()):
            if running is task or getattr(running, "_fut_waiter", None) is task:
                return job
        return None

    def cut(self) -> list[tuple[Job, asyncio.Task[Any]]]:
        """Every one, cancelled and forgotten; each task named for its job (a
        warning may name it, if it ignores the cancel)."""
        cut = list(self.items())
        self.clear()
        for job, task in cut:
            task.set_name(f"job {job.job_id} ({job.claim.task_path})")
            task.cancel()
        return cut


def extensions(jobs: list[Job], lease_ms: int) -> list[Op[int]]:
    """One extend operation per held job, each fenced by its claim's token (the
    beat's and the loop watchdog's alike)."""
    return [ops.extend(j.shard.queue, j.job_id, j.claim.token, lease_ms) for j in jobs]


def extended(
    jobs: list[Job], answers: list[Any], sent: float, lease_ms: int
) -> tuple[list[Job], Exception | None]:
    """Apply the answers to :func:`extensions` sent at ``sent`` (monotonic): a
    granted lease runs ``lease_ms`` from then; a refused one (the lease moved on:
    expired and reaped, or the row is gone) marks its job lost, so it is not
    extended again and, waiting, never starts. Returns the jobs newly lost (not
    those that finished meanwhile: nothing is lost there) and the first other
    error, for the caller to handle."""
    lost: list[Job] = []
    error: Exception | None = None
    for job, answer in zip(jobs, answers, strict=True):
        if isinstance(answer, JobError):
            if not job.settled:
                job.lost = True
                lost.append(job)
        elif isinstance(answer, Exception):
            error = error or answer
        else:
            job.lease_until = sent + lease_ms / 1000
    return lost, error
