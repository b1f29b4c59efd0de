"""The worker: claims turns of the ring, runs django.tasks, reports outcomes.

Each job thread claims a few turns at once while jobs are short (prefetch),
runs them in order (everything around one job lives in :func:`run_job`), and
records the successes of every thread with its next claim, as one
``complete_many`` call in the same round trip; the main thread sends those
that waited ``FLUSH_AFTER`` and keeps the periodic duties (extend leases,
reap, promote, heartbeat) in :meth:`Worker.beat`. Failures are recorded at
once. Idle workers park on the queues' wake lists with a blocking pop
instead of polling.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import redis
from django.db import close_old_connections
from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils.json import normalize_json
from django.utils.module_loading import import_string
from redis.cluster import RedisCluster

from .backend import FairLanesBackend, moment, task_error
from .conf import MAX_PREFETCH, backend_settings, emq_settings
from .connection import new_connection, require_supported_server
from .engine.parking import park, wake_groups
from .engine.payload import encode_result
from .engine.queue import MAX_BATCH, Claim, Queue
from .engine.rows import heartbeat
from .engine.shards import Rotation, shards_of
from .exceptions import UNAVAILABLE, CorruptJob, JobError, StaleToken
from .schedules import tick

logger = logging.getLogger("django_emq.worker")

#: What a call to the server may raise that the worker rides out (claims, the
#: beat, releases): a lost server, or a refusal (OOM, READONLY, a script error).
CLAIM_ERRORS: tuple[type[Exception], ...] = (*UNAVAILABLE, redis.ResponseError)


@dataclass
class WorkerOptions:
    """Everything ``run_emq_worker`` can set; defaults come from ``EMQ``."""

    queues: list[str] = field(default_factory=list)
    concurrency: int = 1
    lease: float | None = None
    burst: bool = False
    max_jobs: int | None = None
    worker_id: str | None = None
    health_file: Path | None = None
    beat: float | None = None
    grace: float | None = None
    prefetch: int | None = None


@dataclass
class Running:
    """A job this worker holds: its queue and its claim (run by the job thread
    that claimed it).

    ``settled`` is set once its outcome is recorded (or refused): from then on
    the lease is not the worker's to extend. ``lost`` is set when an extension
    was refused: the lease moved on, so it is not extended again.
    """

    queue: Queue
    claim: Claim
    settled: threading.Event = field(default_factory=threading.Event)
    lost: bool = False
    #: When its job thread started it (monotonic); 0 while it waits, prefetched.
    started: float = 0.0


@dataclass
class Finished:
    """A job that ran to success whose outcome is not recorded yet: it rides
    along with the next claim (or is sent by the main thread after
    ``FLUSH_AFTER``). Until then its lease is held and extended."""

    job: Running
    #: The JSON result, as it will be recorded.
    encoded: str
    #: Sends ``task_finished`` once the outcome is recorded.
    announce: Callable[[], None]
    duration: float
    at: float = field(default_factory=time.monotonic)


#: Longest an outcome waits for a claim to ride along with before it is sent alone.
FLUSH_AFTER = 0.02
#: A job thread claims more at once while a whole claim runs in under half of
#: this, and fewer once it takes longer, so prefetching stays among short jobs.
BATCH_TARGET = 0.01


def _nothing() -> None:
    """Nothing to settle."""


def _outcomes(batch: list[Finished]) -> list[tuple[str, int, Any]]:
    """``complete_many``'s arguments for ``batch``."""
    return [(f.job.claim.job_id, f.job.claim.token, f.encoded) for f in batch]


def backoff_seconds(attempt: int, base: float, cap: float) -> float:
    """Exponential back-off with full jitter: uniform in [0, min(cap, base * 2**(n-1))]."""
    return random.uniform(0, min(cap, base * 2 ** max(0, attempt - 1)))


def _running_result(task: Task[Any, Any], claim: Claim, alias: str) -> TaskResult[Any, Any]:
    """The RUNNING ``TaskResult`` a claim stands for, built from the claim itself
    (its arguments are decoded once, by the claim)."""
    return TaskResult(
        task=task,
        id=claim.job_id,
        status=TaskResultStatus.RUNNING,
        enqueued_at=moment(claim.enqueued_ms),
        started_at=moment(claim.started_ms),
        last_attempted_at=moment(int(time.time() * 1000)),
        finished_at=None,
        args=claim.args,
        kwargs=claim.kwargs,
        backend=alias,
        errors=[],
        worker_ids=list(claim.worker_ids),
    )


#: How long a worker keeps trying to record an outcome while the server is away.
PERSIST_PATIENCE = 60.0


def _persist[T](record: Callable[[], T], patience: float = PERSIST_PATIENCE) -> T:
    """Record an outcome, riding out a loss of the server for up to ``patience``
    seconds: the work is done, so losing the record would make it run again.

    Retrying is safe: the write is fenced by the claim's token, so a retry of a
    write that did land (its reply was lost) is refused with ``StaleToken``
    instead of being applied twice. Waits grow (with jitter) to at most 2 s,
    so the outcome lands soon after the server is back.
    """
    give_up = time.monotonic() + patience
    attempt = 0
    while True:
        attempt += 1
        try:
            return record()
        except UNAVAILABLE as exc:
            if time.monotonic() >= give_up:
                raise
            delay = min(2.0, 0.05 * 2**attempt)
            logger.warning("Valkey unreachable while recording an outcome (%s); retrying", exc)
            time.sleep(random.uniform(delay / 2, delay))


def run_job(
    queue: Queue,
    claim: Claim,
    alias: str,
    settled: threading.Event | None = None,
    defer: Callable[[str, Callable[[], None]], None] | None = None,
) -> str:
    """Run one claimed job and record its outcome; returns ``done``, ``retry``,
    ``dead`` or ``stale`` (the lease moved on: the outcome was refused).
    ``settled`` is set once the outcome is recorded or refused.

    ``defer``, if given, takes a success instead of recording it: it is called
    with the JSON result and the callable that sends ``task_finished``, and the
    answer is ``deferred`` (the caller records the outcome, sets ``settled``
    and announces it). Failures are always recorded at once."""
    deferred = False

    def deferring(encoded: str, announce: Callable[[], None]) -> None:
        nonlocal deferred
        deferred = True
        assert defer is not None
        defer(encoded, announce)

    try:
        return _run_job(queue, claim, alias, None if defer is None else deferring)
    finally:
        # A deferred success is settled by whoever records it, even if something
        # raised after it was handed over.
        if settled is not None and not deferred:
            settled.set()


def _run_job(
    queue: Queue,
    claim: Claim,
    alias: str,
    defer: Callable[[str, Callable[[], None]], None] | None = None,
) -> str:
    s = backend_settings(alias)  # the backend's OPTIONS over EMQ
    close_old_connections()
    try:
        if claim.defect is not None:  # a corrupt row: it can never run, dead now
            error = task_error(CorruptJob(claim.job_id, claim.defect), claim.defect)
            _persist(lambda: queue.fail(claim.job_id, claim.token, error))
            logger.error("job %s: %s; it is dead", claim.job_id, claim.defect)
            return "dead"
        try:
            task = import_string(claim.task_path)
        except ImportError as exc:
            # Retried like a failure, not dead at once: during a rolling deploy an old
            # worker can meet a task only the new code has. Out of attempts: dead.
            error = task_error(exc, f"cannot load task {claim.task_path}: {exc!r}")
            delay = backoff_seconds(claim.token, s.retry_backoff, s.retry_backoff_max)
            state = _persist(
                lambda: queue.retry(claim.job_id, claim.token, error, int(delay * 1000))
            )
            return "dead" if state == "dead" else "retry"
        if not isinstance(task, Task):  # the job can never run: dead now, worker survives
            bad = TypeError(f"{claim.task_path} is not a django.tasks Task")
            error = task_error(bad, f"cannot load task {claim.task_path}: {bad!r}")
            _persist(lambda: queue.fail(claim.job_id, claim.token, error))
            return "dead"
        result = _running_result(task, claim, alias)
        task_started.send(FairLanesBackend, task_result=result)
        try:
            if task.takes_context:
                value = task.call(TaskContext(task_result=result), *claim.args, **claim.kwargs)
            else:
                value = task.call(*claim.args, **claim.kwargs)
            value = normalize_json(value)
            # Encoded here so what JSON cannot hold (NaN) fails the task; the text is
            # recorded as it is (encode_result passes its own output through).
            encoded = encode_result(value)
        except BaseException as exc:  # SystemExit and KeyboardInterrupt from a task fail it too
            delay = backoff_seconds(claim.token, s.retry_backoff, s.retry_backoff_max)
            text = "".join(traceback.format_exception(exc))
            error = task_error(exc, text)
            state = _persist(
                lambda: queue.retry(claim.job_id, claim.token, error, int(delay * 1000))
            )
            if state == "dead":
                object.__setattr__(result, "status", TaskResultStatus.FAILED)
                object.__setattr__(result, "finished_at", datetime.now(UTC))
                task_finished.send(FairLanesBackend, task_result=result)
                return "dead"
            return "retry"

        def announce() -> None:
            object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
            object.__setattr__(result, "finished_at", datetime.now(UTC))
            object.__setattr__(result, "_return_value", value)
            task_finished.send(FairLanesBackend, task_result=result)

        if defer is not None:
            defer(encoded, announce)
            return "deferred"
        _persist(lambda: queue.complete(claim.job_id, claim.token, encoded))
        announce()
        return "done"
    except StaleToken:
        logger.warning("job %s: lease lost to a newer attempt; outcome refused", claim.job_id)
        return "stale"
    finally:
        close_old_connections()


class Worker:
    """One worker process: ``concurrency`` threads over the backend's queues."""

    def __init__(self, backend: FairLanesBackend, options: WorkerOptions) -> None:
        s = backend_settings(backend.alias)  # the backend's OPTIONS over EMQ
        self.backend = backend
        self.options = options
        names = options.queues or sorted(backend.queues)
        unknown = sorted(set(names) - backend.queues)
        if unknown:
            raise ValueError(f"queue(s) {', '.join(unknown)} not in the backend's QUEUES")
        self.queues = [backend.engine(name) for name in names]
        #: Every plain queue served: the queues, a sharded one's shards in its place.
        self.shards = [shard for queue in self.queues for shard in shards_of(queue)]
        self.lease_ms = int((options.lease or s.lease) * 1000)
        self.beat_s = options.beat or min(s.beat, self.lease_ms / 3000)
        self.grace_s = s.shutdown_grace if options.grace is None else options.grace
        self.worker_id = options.worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.prefetch = s.prefetch if options.prefetch is None else options.prefetch
        if isinstance(self.prefetch, bool) or not 1 <= self.prefetch <= MAX_PREFETCH:
            raise ValueError(f"prefetch must be 1 to {MAX_PREFETCH}, not {self.prefetch!r}")
        self.running: dict[str, Running] = {}
        self.stopping = threading.Event()
        self.counts = {"done": 0, "retry": 0, "dead": 0, "stale": 0}
        self.claimed = 0
        self._rotation = Rotation(self.queues)
        #: The one plain queue served, off a cluster: its claims ride along with
        #: completions (a cluster pipeline would split them by slot anyway).
        self._solo: Queue | None = None
        only = self.shards[0] if len(self.queues) == 1 and self.shards == self.queues else None
        if only is not None and not isinstance(only.connection, RedisCluster):
            self._solo = only
        self._last_beat = 0.0
        #: When (monotonic) the next deferred job or throttled lane is due, if sooner than a beat.
        self._due_at: float | None = None
        self._last_summary = time.monotonic()
        self._signals = 0
        self._outage = 0
        self._previous_handlers: dict[int, Any] = {}
        #: Guards ``running``, ``counts``, ``claimed`` and the job threads' bookkeeping.
        self._lock = threading.Lock()
        #: Set when the main thread should look again: a job ended, a thread exited.
        self._poke = threading.Event()
        #: Idle job threads wait here while one of them (holding ``_parking``) parks.
        self._idle_cv = threading.Condition()
        self._parking = threading.Lock()
        self._alive = 0  # job threads still running
        self._reserved = 0  # jobs asked for by claims in flight (counted against ``max_jobs``)
        #: Successes run but not recorded yet, oldest first, from every job thread:
        #: the next claim of any of them carries them, or the main thread sends
        #: them once the oldest has waited ``FLUSH_AFTER``.
        self._unrecorded: list[Finished] = []
        #: The main thread's next try after the server refused or was away.
        self._record_hold = 0.0
        #: Outcomes taken off ``_unrecorded`` and not yet settled or put back.
        self._sending = 0
        #: Signalled (under ``_lock``) when outcomes settle.
        self._settled_some = threading.Condition(self._lock)
        self._drained = False  # burst: nothing pending or due, every thread ends
        self._closed = False  # wound down: a claim that lands now is released
        self._crash: BaseException | None = None  # what broke a job thread, raised by run
        # Parking blocks longer than the web-side socket timeout: its own client,
        # whose reads are still bounded (a park lasts at most one beat), so a
        # connection that went silent (server frozen, peer gone without a reset)
        # cannot block the worker forever.
        self._park = new_connection(socket_timeout=self.beat_s + s.enqueue_timeout)
        self._wake = wake_groups(self._park, [q.keys.wake for q in self.shards])

    # -- lifecycle -------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        """First SIGTERM/SIGINT: stop claiming and wind down; second: exit now.
        The previous handlers come back when :meth:`run` returns. Only the main
        thread can take signals: under ``--reload`` the autoreloader owns them."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous_handlers[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            logger.warning("second signal: exiting now; unfinished leases will be reaped")
            os._exit(1)
        logger.info("signal %s: no new claims; finishing running jobs", signum)
        self.stopping.set()
        self._poke.set()

    def run(self) -> int:
        """Work until stopped (or, with ``burst``, until nothing is pending or due)."""
        try:
            if not self._wait_for_server():
                return 0
            logger.info(
                "worker %s on %s, concurrency %d, lease %.1fs",
                self.worker_id,
                ", ".join(q.name for q in self.queues),
                self.options.concurrency,
                self.lease_ms / 1000,
            )
            try:
                self._loop()
            finally:
                self._wind_down()
                self._forget()
        finally:
            for signum, handler in self._previous_handlers.items():
                signal.signal(signum, handler)
        self._summary()
        return 0

    def _wait_for_server(self) -> bool:
        """Check the server's version, backing off while it cannot be reached
        (a worker started during an outage waits for it). False if stopped first."""
        while not self.stopping.is_set():
            try:
                require_supported_server(self.shards[0].connection)
            except UNAVAILABLE as exc:
                self._lost_server(exc)
                continue
            self._outage = 0
            return True
        return False

    def _loop(self) -> None:
        """Start the job threads, then keep the beat until they are all done
        (``burst``, ``max_jobs``) or the worker is told to stop."""
        if self.options.burst:
            self.beat()
        threads = [
            threading.Thread(target=self._job_thread, name=f"emq-job_{n}", daemon=True)
            for n in range(self.options.concurrency)
        ]
        with self._lock:
            self._alive = len(threads)
        for thread in threads:
            thread.start()
        while not self.stopping.is_set():
            self._poke.clear()
            with self._lock:
                if self._alive == 0:
                    break
            if time.monotonic() - self._last_beat >= self.beat_s:
                self.beat()
            timeout = max(0.0, self.beat_s - (time.monotonic() - self._last_beat))
            due = self._record_due()
            self._poke.wait(timeout if due is None else min(timeout, due))
        if self._crash is not None:
            raise self._crash

    def _job_thread(self) -> None:
        """One slot: claim, run what was claimed, again; park (or wait for a parked
        sibling) when there is nothing to claim. Successes are recorded with the
        next claim (in one round trip on a single plain queue). A claim takes up
        to ``prefetch`` jobs, as many as run in about ``BATCH_TARGET``: one at a
        time while jobs are long, more while they are short."""
        ahead: list[Running] = []  # claimed by this thread, not run yet
        size, asked, began = 1, 0, 0.0
        try:
            while True:
                if not ahead:
                    if asked:  # the last claim is run: how long did it take?
                        size = self._next_size(size, asked, time.monotonic() - began)
                    n = 0 if self.stopping.is_set() else self._reserve(size)
                    if not n:
                        self._record_all()
                        return
                    try:
                        claims, settle = self._record_then_claim(n)
                    except CLAIM_ERRORS as exc:
                        # a lost server, or a script error (a corrupt row?): go on
                        self._register([], n)
                        self._lost_server(exc)
                        continue
                    self._outage = 0
                    got = self._register(claims, n)
                    settle()  # after the new claims are registered: the beat extends them
                    if got is None:  # the worker shut down meanwhile
                        return
                    asked = 0
                    if not got:
                        if not self._nothing_to_do():
                            continue
                        return
                    with self._idle_cv:  # there was work: a waiting sibling may find more
                        self._idle_cv.notify()
                    ahead = got
                    asked, began = (n if len(got) == n else 0), time.monotonic()
                if self.stopping.is_set():  # claimed ahead, not started: hand back
                    self._give_back(ahead)
                    ahead.clear()
                    asked = 0
                    continue
                job = ahead.pop(0)
                with self._lock:  # released by the wind-down meanwhile?
                    live = self.running.get(job.claim.job_id) is job
                    if live:  # from now on the wind-down lets it finish
                        job.started = time.monotonic()
                if live:
                    if job.claim.expiries:  # it may kill this worker: record what is done
                        self._settle_everything()
                    self._run(job)
        except BaseException as exc:  # a bug: stop the worker as the old loop did
            self._crash = exc
            self.stopping.set()
        finally:
            with self._lock:
                self._alive -= 1
            with self._idle_cv:
                self._idle_cv.notify_all()
            self._poke.set()

    def _settle_everything(self) -> None:
        """Record every waiting outcome and wait for those other threads are
        sending: nothing finished is left to run again if the worker dies now."""
        while True:
            self._record_all()
            with self._lock:
                if not self._unrecorded and not self._sending:
                    return
                self._settled_some.wait(0.05)

    def _next_size(self, size: int, asked: int, took: float) -> int:
        """How many jobs the next claim asks for, after a claim of ``asked`` jobs
        (all it asked for) ran in ``took`` seconds."""
        if took > BATCH_TARGET:
            return max(1, size // 2)
        if took < BATCH_TARGET / 2 and asked == size:
            return min(self.prefetch, size * 2)
        return size

    def _give_back(self, jobs: list[Running]) -> None:
        """Release claimed jobs that never started (the worker is stopping)."""
        for job in jobs:
            with self._lock:
                mine = self.running.pop(job.claim.job_id, None) is job
            if mine:
                self._release(job.queue, job.claim)
        self._poke.set()

    def _reserve(self, n: int) -> int:
        """Count a claim of up to ``n`` jobs about to be sent against ``max_jobs``;
        how many it may ask for, 0 when none (the cap is reached, a burst run
        drained, the worker stopping)."""
        with self._lock:
            if self._drained or self._closed or self.stopping.is_set():
                return 0
            cap = self.options.max_jobs
            if cap is not None:
                n = min(n, cap - self.claimed - self._reserved)
            if n <= 0:
                return 0
            self._reserved += n
            return n

    def _register(self, claims: list[tuple[Queue, Claim]], reserved: int) -> list[Running] | None:
        """The claim reserved for ``reserved`` jobs came back with ``claims``: they
        are running now (the beat extends their leases). ``None`` if the worker
        wound down meanwhile: they are released at once."""
        with self._lock:
            self._reserved -= reserved
            closed = self._closed
            jobs = [] if closed else [Running(queue, claim) for queue, claim in claims]
            for job in jobs:
                self.running[job.claim.job_id] = job
            self.claimed += len(jobs)
        if closed:
            for queue, claim in claims:
                self._release(queue, claim)
            return None
        return jobs

    def _nothing_to_do(self) -> bool:
        """Nothing was claimed: wait for work; True when this thread should end
        (a burst run found nothing pending or due)."""
        if self.options.burst:
            try:
                drained = not self.running and not self._reserved and self._nothing_due()
            except CLAIM_ERRORS as exc:  # the server went away: not drained, try again
                self._lost_server(exc)
                return False
            if drained:
                with self._lock:
                    self._drained = True
                return True
            self.stopping.wait(0.1)
        else:
            self._idle()
        return False

    # -- outcomes ----------------------------------------------------------------

    def _run(self, job: Running) -> None:
        deferred = False

        def defer(encoded: str, announce: Callable[[], None]) -> None:
            nonlocal deferred
            deferred = True
            finished = Finished(job, encoded, announce, time.monotonic() - job.started)
            with self._lock:
                first = not self._unrecorded
                self._unrecorded.append(finished)
            if first:  # the main thread times its flush from the oldest outcome
                self._poke.set()

        try:
            outcome = run_job(job.queue, job.claim, self.backend.alias, job.settled, defer)
        except Exception:
            logger.exception("job %s: the worker failed to record its outcome", job.claim.job_id)
            outcome = "stale"
        if not deferred:  # a deferred one ends when it is recorded
            self._ended(job, outcome, time.monotonic() - job.started)

    def _take_unrecorded(self) -> list[Finished]:
        with self._lock:
            batch = self._unrecorded[:MAX_BATCH]
            del self._unrecorded[:MAX_BATCH]
            self._sending += len(batch)
        return batch

    def _record_then_claim(self, n: int) -> tuple[list[tuple[Queue, Claim]], Callable[[], None]]:
        """Record the successes waiting, and claim up to ``n`` jobs: in one round
        trip on a single plain queue, else one after the other. Answers the
        claims, and what settles the recorded jobs (sends ``task_finished``):
        the caller registers the claims first, so their leases are looked after
        while the signal's receivers run."""
        batch = self._take_unrecorded()
        queue = self._solo
        if not batch or queue is None:
            self._record(batch)
            return self._claim(n), _nothing
        try:
            claims, refusals = queue.complete_many_then_claim(
                _outcomes(batch),
                self.lease_ms,
                turns=n,
                worker_id=self.worker_id,
                max_jobs=n,
            )
        except UNAVAILABLE:
            # Whether they landed is unknown: record them again, alone (fenced, so a
            # second write of a landed outcome is refused, not applied twice).
            self._record(batch)
            raise
        except Exception as exc:  # refused outright: settle them as not recorded
            self._settle(batch, [exc] * len(batch))
            raise
        # A connection lost after the claim came back (while a flushed script
        # was loaded again): those outcomes are recorded again, patiently.
        lost = [isinstance(e, UNAVAILABLE) for e in refusals]

        def settle() -> None:
            self._settle(
                [f for f, x in zip(batch, lost, strict=True) if not x],
                [e for e, x in zip(refusals, lost, strict=True) if not x],
            )
            self._record([f for f, x in zip(batch, lost, strict=True) if x])

        return [(queue, c) for c in claims], settle

    def _record(self, batch: list[Finished], patient: bool = True) -> bool:
        """Record ``batch`` (one ``complete_many`` per queue). ``patient`` rides
        out a lost server for up to ``PERSIST_PATIENCE``; else what a server
        cannot take now goes back to the front of the list, for a later try,
        and the answer is True."""
        put_back = False
        groups: dict[int, list[Finished]] = {}
        for f in batch:
            groups.setdefault(id(f.job.queue), []).append(f)
        for items in groups.values():
            queue = items[0].job.queue
            outcomes = _outcomes(items)
            refusals: list[Exception | None]
            try:
                if patient:
                    refusals = list(_persist(functools.partial(queue.complete_many, outcomes)))
                else:
                    refusals = list(queue.complete_many(outcomes))
            except UNAVAILABLE as exc:
                if patient:
                    refusals = [exc] * len(items)
                else:
                    with self._lock:
                        self._unrecorded[:0] = items
                        self._sending -= len(items)
                    logger.warning("Valkey unreachable while recording outcomes (%s)", exc)
                    put_back = True
                    continue
            except Exception as exc:
                refusals = [exc] * len(items)
            self._settle(items, refusals)
        return put_back

    def _record_all(self) -> None:
        while batch := self._take_unrecorded():
            self._record(batch)

    def _record_due(self) -> float | None:
        """The main thread's part: send the waiting successes once the oldest has
        waited ``FLUSH_AFTER``; else answer how long until it has (``None``: none
        wait). One try each time, so the beat is never held up: outcomes the
        server cannot take now are tried again a beat later (or go with a claim)."""
        now = time.monotonic()
        with self._lock:
            if not self._unrecorded:
                return None
            wait = max(FLUSH_AFTER - (now - self._unrecorded[0].at), self._record_hold - now)
        if wait > 0:
            return wait
        while batch := self._take_unrecorded():
            if self._record(batch, patient=False):  # some went back: later
                self._record_hold = time.monotonic() + min(1.0, self.beat_s)
                return self._record_hold - time.monotonic()
        return None

    def _settle(self, batch: list[Finished], refusals: list[Exception | None]) -> None:
        """The outcomes of ``batch`` were recorded, or refused by ``refusals``.

        Every job is marked settled first (the beat stops extending them), then
        each recorded one is announced with ``task_finished``: from the thread
        that recorded it, which may not be the one that ran it (database
        connections the receivers open are closed afterwards, as after a job).
        """
        for f in batch:
            f.job.settled.set()
        with self._lock:
            self._sending -= len(batch)
            self._settled_some.notify_all()
        announced = any(error is None for error in refusals)
        try:
            for f, error in zip(batch, refusals, strict=True):
                c = f.job.claim
                outcome = "done"
                if error is None:
                    try:
                        f.announce()
                    except Exception:
                        logger.exception("job %s: a task_finished receiver failed", c.job_id)
                else:
                    outcome = "stale"
                    if isinstance(error, StaleToken):
                        logger.warning(
                            "job %s: lease lost to a newer attempt; outcome refused", c.job_id
                        )
                    elif isinstance(error, JobError):
                        logger.warning("job %s: outcome refused (%s)", c.job_id, error)
                    else:
                        logger.error(
                            "job %s: the worker failed to record its outcome (%r)", c.job_id, error
                        )
                self._ended(f.job, outcome, f.duration)
        finally:
            if announced:  # connections the receivers opened, as after a job
                close_old_connections()

    def _ended(self, job: Running, outcome: str, duration: float) -> None:
        with self._lock:
            self.running.pop(job.claim.job_id, None)
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
        if self._closed or self.stopping.is_set():
            self._poke.set()
        if logger.isEnabledFor(logging.INFO):
            c = job.claim
            logger.info(
                "lane=%s job=%s task=%s attempt=%d duration=%.3fs outcome=%s",
                c.lane,
                c.job_id,
                c.task_path,
                c.token,
                duration,
                outcome,
            )

    def _idle(self) -> None:
        """Nothing to claim: one idle thread parks on the wake lists, the others
        wait for it (or for a sibling that found work) at most one beat."""
        if self._parking.acquire(blocking=False):
            try:
                self._park_until_woken()
            finally:
                self._parking.release()
            return
        with self._idle_cv:
            if not self.stopping.is_set():
                self._idle_cv.wait(self.beat_s)

    def _lost_server(self, exc: Exception) -> None:
        """Back off (exponentially, with jitter) and try again. The wait never
        exceeds one beat: the beat extends the running jobs' leases, so once the
        server is back they must be extended before they run out."""
        self._outage += 1
        delay = backoff_seconds(self._outage, 0.1, min(5.0, self.beat_s)) + 0.05
        if isinstance(exc, redis.ResponseError):
            logger.error("the server refused a claim (%s); retrying in %.2fs", exc, delay)
        else:
            logger.warning("Valkey unreachable (%s); retrying in %.2fs", exc, delay)
        self.stopping.wait(delay)

    def _claim(self, free: int) -> list[tuple[Queue, Claim]]:
        """Claim up to ``free`` jobs, trying the queues in turn from where we left off
        (a sharded queue takes its shards in turn within its own turn); a queue
        whose server cannot answer is passed over while the others are served."""
        found = self._rotation.claim(
            self.lease_ms, turns=free, worker_id=self.worker_id, max_jobs=free
        )
        if found is None:
            return []
        queue, claims = found
        return [(queue, c) for c in claims]

    def _nothing_due(self) -> bool:
        for queue in self.shards:
            queue.reap()
            promoted, next_due = queue.promote()
            if promoted or (next_due is not None and next_due <= time.time() * 1000):
                return False
            totals = queue.totals()
            if totals.ring or totals.throttled:  # a rate-limited lane's jobs are pending
                return False
        return True

    def _park_until_woken(self) -> None:
        """Block on every queue's wake list until a job arrives or the beat is due
        (on a cluster: on each slot's lists in turn, see :mod:`django_emq.engine.parking`)."""
        timeout = max(0.01, self.beat_s - (time.monotonic() - self._last_beat))
        if self._due_at is not None:  # a throttled lane's slot, or a deferred job, comes first
            timeout = max(0.01, min(timeout, self._due_at - time.monotonic()))
            self._due_at = None  # once: the claim after this park puts due lanes back
        try:
            park(self._park, self._wake, timeout)
        except UNAVAILABLE as exc:
            logger.warning("lost Valkey while parked (%s); retrying", exc)
            self.stopping.wait(min(timeout, 1.0))

    # -- periodic duties -------------------------------------------------------

    def beat(self) -> None:
        """Extend running leases, reap expired ones, promote due jobs, report in.

        A call whose server cannot answer is skipped, not the rest: on a
        cluster, the jobs and queues of the nodes that answer get their beat
        while another node fails over."""
        self._last_beat = time.monotonic()
        self._due_at = None
        missed: list[Exception] = []
        with self._lock:
            running = list(self.running.values())
        for job in running:
            if job.settled.is_set() or job.lost:
                continue
            try:
                job.queue.extend(job.claim.job_id, job.claim.token, self.lease_ms)
            except JobError:  # stale token, or the row is gone (drained, deleted)
                if not job.settled.is_set():  # else it just finished: nothing lost
                    job.lost = True
                    logger.warning(
                        "job %s: lease expired before it could be extended; another "
                        "worker may run it, and this run's outcome will be refused",
                        job.claim.job_id,
                    )
            except CLAIM_ERRORS as exc:
                missed.append(exc)
        for queue in self.shards:
            try:
                queue.reap()
                _, next_due = queue.promote()
                if next_due is not None:
                    due_at = time.monotonic() + (next_due / 1000 - time.time())
                    self._due_at = due_at if self._due_at is None else min(self._due_at, due_at)
                queue.connection.hset(
                    queue.keys.workers,
                    self.worker_id,
                    heartbeat(
                        host=socket.gethostname(),
                        pid=os.getpid(),
                        done=self.counts["done"],
                        running=len(self.running),
                        beat_ms=int(time.time() * 1000),
                    ),
                )
            except CLAIM_ERRORS as exc:
                missed.append(exc)
        try:  # periodic schedules: their due ticks, each enqueued by one worker only
            tick(self.queues, emq_settings().schedules)
        except CLAIM_ERRORS as exc:
            missed.append(exc)
        if missed:
            # Never fatal: a refused call (OOM, READONLY, a script error) is retried
            # at the next beat like an unreachable server.
            logger.warning("beat: %s; will retry", missed[0])
        if self.options.health_file is not None:
            self.options.health_file.touch()
        if time.monotonic() - self._last_summary >= 60:
            self._summary()

    def _summary(self) -> None:
        self._last_summary = time.monotonic()
        logger.info(
            "worker %s: %s, running %d",
            self.worker_id,
            ", ".join(f"{k} {v}" for k, v in self.counts.items()),
            len(self.running),
        )

    def _wind_down(self) -> None:
        """Release the prefetched jobs that have not started, let running jobs
        finish within the grace period, then release the rest."""
        with self._idle_cv:  # idle threads: look at ``stopping`` now
            self._idle_cv.notify_all()
        with self._lock:  # a job thread starts a job only while it is in ``running``
            waiting = [job for job in self.running.values() if not job.started]
            for job in waiting:
                del self.running[job.claim.job_id]
        for job in waiting:
            self._release(job.queue, job.claim)
        deadline = time.monotonic() + self.grace_s
        while self.running and time.monotonic() < deadline:
            self._poke.clear()
            self._record_all()
            if not self.running:
                break
            self._poke.wait(min(self.beat_s, max(0.0, deadline - time.monotonic())))
            if time.monotonic() - self._last_beat >= self.beat_s:
                self.beat()
        self._record_all()
        with self._lock:
            self._closed = True
            left = list(self.running.values())
            self.running.clear()
        for job in left:
            self._release(job.queue, job.claim)

    def _release(self, queue: Queue, claim: Claim) -> None:
        try:
            queue.release(claim.job_id, claim.token)
            logger.info("job %s released back to the head of lane %s", claim.job_id, claim.lane)
        except JobError:  # the lease moved on, or the row is gone: nothing to hand back
            pass
        except CLAIM_ERRORS as exc:
            logger.warning(
                "job %s: could not release (%s); its lease will expire", claim.job_id, exc
            )

    def _forget(self) -> None:
        try:
            for queue in self.shards:
                queue.connection.hdel(queue.keys.workers, self.worker_id)
        except UNAVAILABLE:
            pass
