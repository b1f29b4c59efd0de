"""The worker: claims turns of the ring, runs django.tasks, reports outcomes.

The loop stays short; everything around a job lives in :func:`run_job`, and
the periodic duties (extend leases, reap, promote, heartbeat) in
:meth:`Worker.beat`. Idle workers park on the queues' wake lists with a
blocking pop instead of polling.
"""

from __future__ import annotations

import json
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
from .conf import emq_settings
from .connection import UNAVAILABLE, new_connection, require_supported_server
from .exceptions import CorruptJob, JobError, StaleToken
from .parking import park, wake_groups
from .payload import encode_result
from .queue import Claim, Queue
from .shards import Rotation, shards_of

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
    started: float = field(default_factory=time.monotonic)


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
    complete: Callable[[Any], None] | None = None,
) -> str:
    """Run one claimed job and record its outcome; returns ``done``, ``retry``,
    ``dead`` or ``stale`` (the lease moved on: the outcome was refused).
    ``settled`` is set once the outcome is recorded or refused. ``complete``,
    if given, records a success instead of ``queue.complete`` (the worker's
    sends its next claim along); it raises as ``queue.complete`` does and is
    retried the same way."""
    try:
        return _run_job(queue, claim, alias, complete)
    finally:
        if settled is not None:
            settled.set()


def _run_job(
    queue: Queue, claim: Claim, alias: str, complete: Callable[[Any], None] | None = None
) -> str:
    s = emq_settings()
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
        if complete is None:
            _persist(lambda: queue.complete(claim.job_id, claim.token, encoded))
        else:
            _persist(lambda: complete(encoded))
        object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
        object.__setattr__(result, "finished_at", datetime.now(UTC))
        object.__setattr__(result, "_return_value", value)
        task_finished.send(FairLanesBackend, task_result=result)
        return "done"
    except StaleToken:
        logger.warning("job %s: lease lost to a newer attempt; outcome refused", claim.job_id)
        return "stale"
    finally:
        close_old_connections()


class Worker:
    """One worker process: ``concurrency`` threads over the backend's queues."""

    def __init__(self, backend: FairLanesBackend, options: WorkerOptions) -> None:
        s = emq_settings()
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
        self._reserved = 0  # claims in flight (counted against ``max_jobs``)
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
            self._poke.wait(max(0.0, self.beat_s - (time.monotonic() - self._last_beat)))
        if self._crash is not None:
            raise self._crash

    def _job_thread(self) -> None:
        """One slot: claim a turn, run its job, record the outcome, again; park
        (or wait for a parked sibling) when there is nothing to claim. On a
        single plain queue the next claim rides along with each success."""
        ahead: list[Running] = []  # claimed by this thread, not run yet
        try:
            while True:
                if not ahead:
                    if self.stopping.is_set() or not self._reserve():
                        return
                    try:
                        claims = self._claim(1)
                    except CLAIM_ERRORS as exc:
                        # a lost server, or a script error (a corrupt row?): go on
                        self._register([])
                        self._lost_server(exc)
                        continue
                    self._outage = 0
                    got = self._register(claims)
                    if got is None:  # the worker shut down meanwhile
                        return
                    if not got:
                        if not self._nothing_to_do():
                            continue
                        return
                    with self._idle_cv:  # there was work: a waiting sibling may find more
                        self._idle_cv.notify()
                    ahead = got
                if self.stopping.is_set():  # claimed ahead, not started: hand back
                    self._give_back(ahead)
                    ahead.clear()
                    continue
                job = ahead.pop(0)
                with self._lock:  # released by the wind-down meanwhile?
                    live = self.running.get(job.claim.job_id) is job
                if live:
                    self._run(job, ahead)
        except BaseException as exc:  # a bug: stop the worker as the old loop did
            self._crash = exc
            self.stopping.set()
        finally:
            with self._lock:
                self._alive -= 1
            with self._idle_cv:
                self._idle_cv.notify_all()
            self._poke.set()

    def _give_back(self, jobs: list[Running]) -> None:
        """Release claimed jobs that never started (the worker is stopping)."""
        for job in jobs:
            with self._lock:
                mine = self.running.pop(job.claim.job_id, None) is job
            if mine:
                self._release(job.queue, job.claim)
        self._poke.set()

    def _reserve(self) -> bool:
        """Count a claim about to be sent against ``max_jobs``; False when none
        may be sent (the cap is reached, a burst run drained, the worker stopping)."""
        with self._lock:
            if self._drained or self._closed or self.stopping.is_set():
                return False
            cap = self.options.max_jobs
            if cap is not None and self.claimed + self._reserved >= cap:
                return False
            self._reserved += 1
            return True

    def _register(self, claims: list[tuple[Queue, Claim]]) -> list[Running] | None:
        """The reserved claim came back with ``claims``: they are running now (the
        beat extends their leases). ``None`` if the worker wound down meanwhile:
        they are released at once."""
        with self._lock:
            self._reserved -= 1
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
            if not self.running and not self._reserved and self._nothing_due():
                with self._lock:
                    self._drained = True
                return True
            self.stopping.wait(0.1)
        else:
            self._idle()
        return False

    def _completer(self, job: Running, ahead: list[Running]) -> Callable[[Any], None] | None:
        """How ``job``'s success is recorded: on a single plain queue, the first
        try sends this thread's next claim with it (into ``ahead``); a retry
        after a lost connection completes alone."""
        queue = self._solo
        if queue is None or job.queue is not queue:
            return None
        tries = 0

        def complete(value: Any) -> None:
            nonlocal tries
            tries += 1
            c = job.claim
            if tries > 1 or ahead or not self._reserve():
                queue.complete(c.job_id, c.token, value)
                return
            try:
                claims, error = queue.complete_then_claim(
                    c.job_id, c.token, value, self.lease_ms, worker_id=self.worker_id, max_jobs=1
                )
            except BaseException:
                self._register([])
                raise
            got = self._register([(queue, claim) for claim in claims])
            ahead.extend(got or ())
            if error is not None:
                raise error

        return complete

    def _run(self, job: Running, ahead: list[Running]) -> None:
        try:
            outcome = run_job(
                job.queue,
                job.claim,
                self.backend.alias,
                job.settled,
                self._completer(job, ahead),
            )
        except Exception:
            logger.exception("job %s: the worker failed to record its outcome", job.claim.job_id)
            outcome = "stale"
        duration = time.monotonic() - job.started
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
            if totals.ring:
                return False
        return True

    def _park_until_woken(self) -> None:
        """Block on every queue's wake list until a job arrives or the beat is due
        (on a cluster: on each slot's lists in turn, see :mod:`django_emq.parking`)."""
        timeout = max(0.01, self.beat_s - (time.monotonic() - self._last_beat))
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
                queue.promote()
                queue.connection.hset(
                    queue.keys.workers,
                    self.worker_id,
                    json.dumps(
                        {
                            "host": socket.gethostname(),
                            "pid": os.getpid(),
                            "done": self.counts["done"],
                            "beat": int(time.time() * 1000),
                            "running": len(self.running),
                        }
                    ),
                )
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
        """Let running jobs finish within the grace period, then release the rest."""
        with self._idle_cv:  # idle threads: look at ``stopping`` now
            self._idle_cv.notify_all()
        deadline = time.monotonic() + self.grace_s
        while self.running and time.monotonic() < deadline:
            self._poke.clear()
            if not self.running:
                break
            self._poke.wait(min(self.beat_s, max(0.0, deadline - time.monotonic())))
            if time.monotonic() - self._last_beat >= self.beat_s:
                self.beat()
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
