"""How a worker stops: within its grace period plus :data:`STOP_MARGIN`,
whatever its jobs do.

:func:`wind_down` hands back the jobs claimed ahead, gives the running ones
the grace period, then cancels the coroutine jobs still running, records
every outcome and releases the rest; :func:`last_calls` bounds the worker's
last writes by the same margin, whatever the server does. :func:`run_bounded`
runs the worker's event loop (which no task may stop), cancels what still
runs on it at the end (a record or release past the margin), and closes it
without waiting for ever on a coroutine that ignores its cancel.

A worker that stops because one of its own duties failed (a bug, or a job
that broke the worker) gives no grace (its beat may be the duty that failed)
and releases nothing that was running: it expires those leases at once, so
each such stop counts against ``MAX_EXPIRIES`` as a worker's death does, and
a job that keeps breaking its workers ends dead instead of coming back for
ever. A worker stopped by a signal its own code sent (a job's
``os.kill(os.getpid(), SIGTERM)``, see :mod:`.self_stop`) gives the grace, but
expires, not releases, the jobs still running after it, for the same reason.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, cast

from asgiref.sync import ThreadSensitiveContext

from ..engine import ops
from ..engine.records import Claim
from ..exceptions import JobError
from .core import Core
from .jobs import Job
from .outcomes import CALL_ERRORS
from .shard import Shard

logger = logging.getLogger("django_emq.worker")

#: The most a stopping worker takes past its grace period: to record the outcomes
#: of the jobs that finished, release those still running, and end (a coroutine
#: that ignores its cancel is left behind).
STOP_MARGIN = 5.0
#: The least time the worker's last writes get after the wind-down (see
#: :func:`last_calls`), should its margin be spent.
LAST_CALLS_MIN = 0.5
#: How long the tasks still on the loop once the worker is done (a coroutine job
#: that ignored its cancel, cut a margin ago) get before they are left behind.
LEFT_BEHIND_AFTER = 1.0


async def wind_down(
    core: Core,
    grace_s: float,
    *,
    crashed: bool = False,
    by_a_job: bool = False,
    culprit: str | None = None,
    claiming: asyncio.Future[Any] | None = None,
) -> float:
    """Hand back the jobs claimed ahead, give running ones ``grace_s`` (the beat
    goes on extending them), then cancel the coroutine jobs still running, record
    every outcome and release the rest, all within :data:`STOP_MARGIN` seconds
    past the grace; the monotonic time that margin ends (the worker's last calls
    share it, see :func:`last_calls`). ``crashed`` (a duty failed: perhaps the
    beat, perhaps broken by a running job): no grace, and the jobs still running
    are expired, not released. ``by_a_job`` (the stop signal came from the
    worker's own code): the grace, then the job that sent it (``culprit``, when
    known; else every job) is expired if it still runs, not released.
    ``claiming``: the claimer, cancelled; a claim it had in flight is among the
    worker's tasks once it ends (its jobs released when its answer comes)."""
    if crashed:
        grace_s = 0.0
    deadline = time.monotonic() + grace_s
    waiting = core.take_back()
    for job in waiting:
        core.executing -= 1
        if job.claim.expiries:
            core.suspects -= 1
        core.tasks.spawn(core.release(job))  # under way during the grace, waited for after
    while core.executing > 0 and time.monotonic() < deadline:
        await core.wait(deadline - time.monotonic())
    core.cut_coroutines()
    margin_end = time.monotonic() + STOP_MARGIN
    try:
        async with asyncio.timeout(STOP_MARGIN):
            await core.outcomes.flush_all()
            if claiming is not None:
                await asyncio.wait([claiming])
            await core.tasks.settle()
            left = [job for job in core.held.values() if not job.settled]
            charged = [
                job for job in left if job.started and _at_fault(job, crashed, by_a_job, culprit)
            ]
            why = STOPPED_BY_A_JOB if by_a_job and not crashed else BROKEN
            await asyncio.gather(
                *(core.release(job) for job in left if job not in charged),
                *(expire(core, job, why) for job in charged),
            )
    except TimeoutError:
        logger.warning(
            "could not record every outcome and release every job within %.0fs past "
            "the grace; their leases will expire and be reaped", STOP_MARGIN,
        )  # fmt: skip
    return margin_end


def hand_back(core: Core, shard: Shard, claims: list[Claim], sent: float) -> None:
    """Claims whose answer came once the worker was stopping (the claim was in
    flight at the stop, see :meth:`.claimer.Claimer.run`): held, none started,
    each released at once, as the jobs claimed ahead are in :func:`wind_down`
    (which waits for these releases within its margin)."""
    for claim in claims:
        job = Job(shard, claim, sent + core.plan.lease_s)
        core.held[job.job_id] = job
        core.claimed += 1
        core.tasks.spawn(core.release(job))


def _at_fault(job: Job, crashed: bool, by_a_job: bool, culprit: str | None) -> bool:
    """Whether ``job``, still running past the grace, is charged an expiry: every
    job when the worker failed; the job that signalled the stop (every job when
    the signal came from code that ran none)."""
    if crashed:
        return True
    return by_a_job and (culprit is None or job.job_id == culprit)


async def last_calls(calls: Sequence[Awaitable[Any]], by: float) -> None:
    """The stopping worker's last writes (its history's last tally, its heartbeat's
    last record), in turn, until ``by`` (monotonic; the wind-down's margin), and
    :data:`LAST_CALLS_MIN` seconds at least: a server that does not answer
    cannot hold the stop past its bound, each call waiting its own timeout."""
    try:
        async with asyncio.timeout(max(LAST_CALLS_MIN, by - time.monotonic())):
            for call in calls:
                await call
    except TimeoutError:
        logger.warning("the worker's last history and heartbeat were not written in time")
    finally:
        for call in calls:  # those not awaited: never started
            if asyncio.iscoroutine(call):
                call.close()


#: Why a job running at the end of a wind-down is expired: its worker failed...
BROKEN = "it was running when its worker failed; counted as an expiry"
#: ...or its worker's own code sent the stop signal.
STOPPED_BY_A_JOB = (
    "it was still running after the grace of a stop its worker's own code signalled; "
    "counted as an expiry"
)


async def expire(core: Core, job: Job, why: str = BROKEN) -> None:
    """End ``job``'s lease now and reap it (counted on its row, as when its
    worker dies): it was running when its worker failed or when its worker's
    own code stopped it, and may be the cause."""
    try:
        await job.shard.runner.run(ops.extend(job.shard.queue, job.job_id, job.claim.token, 0))
        await job.shard.reap()
    except JobError:  # the lease moved on, or the row is gone: nothing to hand back
        pass
    except CALL_ERRORS as exc:
        logger.warning("job %s: could not expire (%s); its lease will run out", job.job_id, exc)
    job.settled = True
    core.ended(job, "expired", why)


def run_bounded(main: Coroutine[Any, Any, None], margin: float) -> None:
    """``asyncio.run(main)``, except that the tasks still pending once ``main``
    returns get ``margin`` seconds to end on their cancel, and are then left
    behind, named in a warning: ``asyncio.run`` would wait for ever for a
    coroutine job that swallows ``CancelledError``.

    ``main`` runs in a context of its own (see :func:`apart`), whoever started
    the worker."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    refuse_stop_from_tasks(loop)
    try:
        loop.run_until_complete(loop.create_task(apart(main), context=contextvars.Context()))
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                _, stuck = loop.run_until_complete(asyncio.wait(pending, timeout=margin))
                for task in stuck:  # left behind on purpose: no "destroyed but pending" at exit
                    task._log_destroy_pending = False  # type: ignore[attr-defined]
                if stuck:
                    logger.warning(
                        "left behind, still running after their cancel: %s",
                        ", ".join(sorted(t.get_name() for t in stuck)),
                    )
            loop.run_until_complete(loop.shutdown_asyncgens())
            base = cast(asyncio.BaseEventLoop, loop)  # the abstract loop's stub has no timeout
            loop.run_until_complete(base.shutdown_default_executor(margin))
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def refuse_stop_from_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """``loop.stop()`` called from a task (a coroutine job calling
    ``asyncio.get_running_loop().stop()``) raises ``RuntimeError`` there, so that
    job fails (retried, then dead) and the worker's loop runs on; asyncio's own
    stop (from a callback, not a task, once the worker's run is over) stops it."""
    stop = loop.stop

    def guarded() -> None:
        if asyncio.current_task(loop) is not None:
            raise RuntimeError("a task must not stop the worker's event loop (loop.stop())")
        stop()

    loop.stop = guarded  # type: ignore[method-assign]


async def apart(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` with a thread for sync code of its own: ``sync_to_async``
    (the task signals' receivers) must not use an executor of whoever started
    the worker. A worker started from async code (``await
    sync_to_async(call_command)("run_emq_worker")``) inherits its caller's
    context, whose thread waits for the worker to end: handing work to it
    deadlocks. Called in a fresh context, so nothing of the caller's is seen."""
    async with ThreadSensitiveContext():
        await main
