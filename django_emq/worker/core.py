"""The execution core: claims exactly the free slots, runs each job (coroutine
tasks on the event loop, sync tasks on the threads), and hands outcomes on.

A worker of ``concurrency`` N holds at most N + ``window`` jobs: the window
lets it claim short jobs ahead (up to ``prefetch`` - 1 of them, as many as
its N slots run in about 10 ms, see :mod:`.window`); for jobs that take that
long it is 0, so a claim asks for exactly the slots that are free. Every job is checked
just before it starts: one whose lease is not surely still this worker's
(lost, or its deadline close by the worker's own clock) is handed back
instead (:meth:`~django_emq.worker.jobs.Job.may_start`).

Sync jobs go to the threads a claim at a time: they wait in one line, a
thread that finishes a job takes the next without a hand-off, and outcomes
come back batched per wake-up of the loop (see :mod:`.threads`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from typing import Any

from django.tasks import Task, TaskResultStatus
from django.tasks.signals import task_finished, task_started

from ..engine.queue import Claim
from ..exceptions import JobError
from . import logs
from .announce import announce
from .execute import (
    Done,
    Failed,
    Outcome,
    Policy,
    aexecute,
    failed,
    is_async,
    load_task,
    result_of,
    run_jobs,
)
from .jobs import Coroutines, Job
from .logs import Lines, job_line
from .options import Plan
from .outcomes import CALL_ERRORS, Outcomes, Success
from .self_stop import running_job
from .shard import Shard
from .signals import listening, send_batch
from .spawned import Spawned
from .threads import Finished, Take, Threads
from .window import Window

logger = logging.getLogger("django_emq.worker")

#: How much of the lease must be left, by the worker's own clock, for a job to start.
START_MARGIN = 0.25


class Core:
    """One worker's jobs, from claim to settled outcome (see the module docstring)."""

    def __init__(self, plan: Plan, policy: Policy) -> None:
        self.plan = plan
        self.policy = policy
        self.margin = plan.lease_s * START_MARGIN
        #: Every job claimed and not settled yet, by id.
        self.held: dict[str, Job] = {}
        #: Claimed jobs that have not finished running (waiting or running).
        self.executing = 0
        #: Held jobs that expired before (their worker died or froze running them).
        self.suspects = 0
        self.claimed = 0
        self.counts: Counter[str] = Counter()
        #: How far to claim ahead, learnt from the jobs' run times.
        self.ahead = Window(plan.concurrency, plan.prefetch)
        self._running_async = 0
        self._waiting_async: deque[Job] = deque()
        self.coroutines = Coroutines()
        #: The job whose task module is being imported on the loop now (the
        #: watchdog names it, and charges it, should the import hang the loop).
        self.loading: Job | None = None
        self.stopping = False
        #: Something changed: a job ended, slots freed, the worker was told to stop.
        self.changed = asyncio.Event()
        self.outcomes = Outcomes(self._recorded, plan.lease_ms, plan.worker_id)
        self.threads = Threads(plan.threads, self._run_jobs, self._delivered)
        #: The worker's own tasks (failure records, releases, coroutine jobs).
        self.tasks = Spawned()

    async def wait(self, timeout: float | None = None) -> None:
        """Until something changes (a job ends, slots free, a stop), at most ``timeout``."""
        self.changed.clear()
        if timeout is None:
            await self.changed.wait()
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout)

    # -- claiming ----------------------------------------------------------------

    def want(self) -> int:
        """How many jobs a claim asks for now: the free slots (and window), none
        while stopping, at ``max_jobs``, or while a suspect is held."""
        if self.stopping or self.suspects:
            return 0
        capacity = self.plan.concurrency + self.ahead.size()
        free = capacity - self.executing
        if self.plan.max_jobs is not None:
            free = min(free, self.plan.max_jobs - self.claimed)
        if free <= 0:
            return 0
        waiting = len(self._waiting_async) + self.threads.waiting()
        if waiting and free < max(1, capacity // 2):  # enough queued: claim in bigger bites
            return 0
        return free

    def register(self, shard: Shard, claims: list[Claim], sent: float) -> None:
        """Claims that came back (``sent``: when the claim was sent, monotonic):
        held from now on (the beat extends them), dispatched in claim order."""
        lease = self.plan.lease_s
        sync: list[Job] = []
        jobs = [Job(shard, claim, sent + lease) for claim in claims]
        for job in jobs:  # all held before any import: one that hangs the loop leaves
            self.held[job.job_id] = job  # the others extended (and released) by the watchdog
            self.executing += 1
            self.claimed += 1
            if job.claim.expiries:
                self.suspects += 1
        for job in jobs:
            try:
                self._dispatch(job, sync)
            except BaseException as exc:  # a bug around loading it: this job fails, not the claim
                self._ran(job, failed(exc, job.claim.token, self.policy))
        if self._waiting_async:
            self._start_async()
        if sync:
            self.threads.submit(sync)

    def _dispatch(self, job: Job, sync: list[Job]) -> None:
        if job.claim.expiries:  # it may kill this worker, even by its import: not yet
            self.tasks.spawn(self._start_suspect(job))
            return
        loaded = self._load(job)
        if isinstance(loaded, Failed):  # it can never run here: recorded at once
            self._ran(job, loaded)
            return
        job.task = loaded
        if is_async(loaded):
            self._waiting_async.append(job)
        else:
            sync.append(job)

    async def _start_suspect(self, job: Job) -> None:
        """A job whose lease expired before (it may kill its worker, by its run or
        by its module's import: ``os._exit()``) is imported and started once every
        success waiting is recorded, so none dies with it (no claims while it is held)."""
        while len(self.outcomes) or self.outcomes.sending:
            await self.outcomes.flush_all()
            if self.outcomes.sending:  # a claim is carrying some: wait for its answer
                await self.wait(0.05)
        loaded = self._load(job)
        if isinstance(loaded, Failed):
            self._ran(job, loaded)
            return
        job.task = loaded
        if is_async(job.task):
            self._waiting_async.append(job)
            self._start_async()
        else:
            self.threads.submit([job])

    def _load(self, job: Job) -> Task[Any, Any] | Failed:
        """:func:`.execute.load_task` on the loop, ``job`` marked as the one loading."""
        self.loading = job
        try:
            return load_task(job.claim, self.policy)
        finally:
            self.loading = None

    # -- running -----------------------------------------------------------------

    def _start_async(self) -> None:
        """Start the coroutine jobs that have a slot: ``task_started`` for all of
        them in one hand-off when anything listens, then each on the loop."""
        batch = []
        while self._waiting_async and self._running_async < self.plan.concurrency:
            job = self._waiting_async.popleft()
            if self.stopping or not job.may_start(self.margin):
                self._not_started(job)
                continue
            assert job.task is not None
            self._running_async += 1
            job.started = time.monotonic()
            job.started_at = time.time()
            batch.append(job)
        if not batch:
            return
        signals = listening(task_started)
        for job in [j for j in batch if signals or j.task.takes_context]:  # type: ignore[union-attr]
            try:
                job.result = result_of(job, self.policy)
            except Exception as exc:  # a bug around the task: the job fails, not the worker
                self._running_async -= 1
                batch.remove(job)
                job.ended = job.started
                self._ran(job, failed(exc, job.claim.token, self.policy))
        if batch and signals:
            self.tasks.spawn(self._started_then_run(batch))
        else:
            for job in batch:
                self.coroutines[job] = self.tasks.spawn(self._run_async(job))

    async def _started_then_run(self, batch: list[Job]) -> None:
        await send_batch(task_started, [job.result for job in batch if job.result is not None])
        for job in batch:
            if not job.over:  # else released meanwhile (the worker stopped past its grace)
                self.coroutines[job] = self.tasks.spawn(self._run_async(job))

    async def _run_async(self, job: Job) -> None:
        assert job.task is not None
        running_job.set(job.job_id)  # this task's own context: gone with it
        outcome: Outcome
        try:
            outcome = await aexecute(job.task, job.claim, job.result, self.policy)
        except BaseException as exc:  # a bug around the task: the job fails, not the worker
            outcome = failed(exc, job.claim.token, self.policy)
        finally:
            self._running_async -= 1
            job.ended = time.monotonic()
        if self.coroutines.pop(job, None) is None:  # cut at the grace: released, not recorded
            return
        self._ran(job, outcome)
        self._start_async()

    def _run_jobs(self, take: Take, finished: Finished) -> None:
        """On a worker thread (see :func:`.execute.run_jobs`)."""
        run_jobs(take, finished, self.policy, self.margin, lambda: self.stopping)

    def _delivered(self, done: list[tuple[Job, Outcome | None]]) -> None:
        for job, outcome in done:
            if outcome is None:
                self._not_started(job)
            else:
                self._ran(job, outcome)

    def take_back(self) -> list[Job]:
        """The jobs claimed ahead that no slot has started (the worker is stopping)."""
        jobs = list(self._waiting_async) + self.threads.take_back()
        self._waiting_async.clear()
        return jobs

    # -- outcomes ----------------------------------------------------------------

    def _ran(self, job: Job, outcome: Outcome) -> None:
        """``job`` finished running (or could not run): its outcome goes on."""
        if job.over:  # released meanwhile (past the grace)
            return
        if job.started:
            self.ahead.learn(job.ended - job.started)
        if isinstance(outcome, Done):  # recorded later, with a claim: the slot is free now
            self._stopped_executing(job)
            self.outcomes.add(Success(job, outcome.encoded, outcome.value))
        else:  # recorded at once; the slot is free once it is
            self.tasks.spawn(self._record_failure(job, outcome))

    def _stopped_executing(self, job: Job) -> None:
        self.executing -= 1
        if job.claim.expiries:
            self.suspects -= 1
        self.changed.set()

    async def _record_failure(self, job: Job, failed: Failed) -> None:
        try:
            state = await self.outcomes.fail(job, failed)
        except CALL_ERRORS as exc:
            logger.error("job %s: the worker failed to record its failure (%r)", job.job_id, exc)
            state = "stale"
        finally:
            self._stopped_executing(job)
        job.settled = True
        self.ended(job, state, failed.reason)
        if state == "dead" and job.started:
            announce([(job, TaskResultStatus.FAILED, None)], self.policy, self.threads, self.tasks)

    def _recorded(self, batch: list[Success], refusals: list[Exception | None]) -> None:
        """Successes recorded (``None``) or refused: settled, announced (the
        announcements gathered only when something listens)."""
        finished: list[tuple[Job, TaskResultStatus, Any]] | None = (
            [] if listening(task_finished) else None
        )
        with logs.batch() as lines:
            for success, error in zip(batch, refusals, strict=True):
                job = success.job
                job.settled = True
                if error is None:
                    self.ended(job, "done", lines=lines)
                    if finished is not None:
                        finished.append((job, TaskResultStatus.SUCCESSFUL, success.value))
                elif isinstance(error, JobError):
                    reason = "lease lost to a newer attempt; outcome refused"
                    self.ended(job, "stale", reason, lines)
                else:
                    reason = f"the worker failed to record its outcome ({error!r})"
                    self.ended(job, "stale", reason, lines)
        if finished:
            announce(finished, self.policy, self.threads, self.tasks)

    def _not_started(self, job: Job) -> None:
        """``job`` will not start (stopping, or its lease is not safe): back to the
        head of its lane (refused, and so harmless, if the lease moved on)."""
        self._stopped_executing(job)
        outcome = "released" if self.stopping else "dropped"
        reason = None if self.stopping else "its lease may have run out; not started"
        self.tasks.spawn(self.release(job, outcome, reason))

    async def release(self, job: Job, outcome: str = "released", reason: str | None = None) -> None:
        try:
            await job.shard.release(job.job_id, job.claim.token)
        except JobError:  # the lease moved on, or the row is gone: nothing to hand back
            pass
        except CALL_ERRORS as exc:
            logger.warning("job %s: could not release (%s); its lease will expire", job.job_id, exc)
        job.settled = True
        self.ended(job, outcome, reason)

    def ended(
        self, job: Job, outcome: str, reason: str | None = None, lines: Lines | None = None
    ) -> None:
        """``job`` is over: counted, its line written (by ``lines``, in a batch),
        out of ``held`` (once; see ``Job.over``)."""
        if job.over:
            return
        job.over = True
        if self.held.get(job.job_id) is job:
            del self.held[job.job_id]
        self.counts[outcome] += 1
        if lines is None:
            job_line(job, outcome, reason)
        else:
            lines.write(job, outcome, reason)
        self.changed.set()

    def cut_coroutines(self) -> None:
        """Past the grace: cancel the coroutine jobs still running. Whatever they
        do with the cancel, their outcome is not recorded (they are released,
        see :func:`.stopping.wind_down`), and their tasks are no longer waited
        for (one may swallow the cancel, or never end)."""
        cut = self.coroutines.cut()
        for job, task in cut:
            self.tasks.forget(task)
            self._stopped_executing(job)
