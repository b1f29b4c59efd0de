"""Run one claimed job and answer its outcome as a value: :class:`Done` (the
result, encoded and checked) or :class:`Failed` (the error to record, retried
after a delay or dead now). Nothing here talks to Valkey: recording is the
caller's, so whatever goes wrong with one job stays with that job.

:func:`execute` runs a sync task (on a worker thread, database connections
closed around it by the caller); :func:`aexecute` awaits a coroutine task on
the event loop. A job's ``TaskResult`` is built only when something needs it
(a signal receiver, or a task that takes its context): a no-op job then costs
the worker little more than its call.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from inspect import iscoroutinefunction
from typing import Any

from django.db import close_old_connections
from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus
from django.tasks.signals import task_started
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from ..backend import FairLanesBackend, task_error
from ..engine.payload import encode_result
from ..engine.records import Claim
from ..exceptions import CorruptJob, InvalidArguments, JobCancelled
from ..jobs import stop_when_cancelled
from .jobs import Job
from .self_stop import running_job
from .signals import listening

logger = logging.getLogger("django_emq.worker")


@dataclass(frozen=True, slots=True)
class Done:
    """The task returned: its result as it will be recorded (UTF-8 JSON)."""

    encoded: bytes
    value: Any


@dataclass(frozen=True, slots=True)
class Failed:
    """The task failed, or could not run: ``error`` (``task_error`` JSON) is
    recorded; retried after ``delay_ms``, or dead now when that is ``None``."""

    error: str
    delay_ms: int | None
    #: What went wrong, in one line (the exception's class and message).
    reason: str


Outcome = Done | Failed

#: A task that returned ``None`` (most do).
NULL = Done(b"null", None)


@dataclass(frozen=True, slots=True)
class Policy:
    """What running a job needs besides the job: the backend alias, the retry
    back-off and the largest result kept."""

    alias: str
    backoff: float
    backoff_max: float
    max_result: int
    #: ``settings.USE_TZ``, read once: the worker's datetimes are aware, or naive UTC.
    use_tz: bool = True
    #: The lease the worker claims with: a claim's server time is its deadline
    #: less this (0: unknown, the job's start by the worker's clock stands in).
    lease_ms: int = 0

    def delay_ms(self, attempt: int) -> int:
        """Exponential back-off with full jitter: uniform in [0, min(max, base * 2**(n-1))]."""
        cap = min(self.backoff_max, self.backoff * 2 ** max(0, attempt - 1))
        return int(random.uniform(0, cap) * 1000)


def load_task(claim: Claim, policy: Policy) -> Task[Any, Any] | Failed:
    """The claim's task, or why it cannot run: a corrupt row or a path that is not
    a task is dead now; a path that does not import is retried like a failure,
    whatever importing it raised (an ImportError: during a rolling deploy an old
    worker may meet a task only the new code has; anything else, a SyntaxError,
    ``ImproperlyConfigured``, a missing environment variable, even ``sys.exit()``
    or ``KeyboardInterrupt``: the next attempt may run where it imports), and
    dead after ``MAX_ATTEMPTS``. The worker goes on with its other jobs either way."""
    if claim.defect is not None:
        return Failed(task_error(CorruptJob(claim.job_id, claim.defect), claim.defect), None,
                      claim.defect)  # fmt: skip
    try:
        task = _import(claim.task_path)
    except BaseException as exc:  # whatever the module's import raised: never the worker's
        return _unloadable(claim, exc, policy)
    if not isinstance(task, Task):
        bad = TypeError(f"{claim.task_path} is not a django.tasks Task")
        reason = f"cannot load task {claim.task_path}: {bad!r}"
        return Failed(task_error(bad, reason), None, reason)
    return task


def _unloadable(claim: Claim, exc: BaseException, policy: Policy) -> Failed:
    """A task whose import raised ``exc``: the failure to record (retried after the
    back-off), naming the task path and the exception, with the import's
    traceback; the traceback is logged too (once per attempt)."""
    module = claim.task_path.rpartition(".")[0]
    reason = f"cannot load task {claim.task_path}: importing {module} raised {describe(exc)}"
    logger.error("job %s: %s", claim.job_id, reason, exc_info=exc)
    text = f"{reason}\n\n{''.join(traceback.format_exception(exc))}"
    return Failed(task_error(exc, text), policy.delay_ms(claim.token), reason)


@functools.lru_cache(maxsize=1024)
def _import(path: str) -> Any:
    """A task path imported once per worker (a path that fails is tried again)."""
    return import_string(path)


def is_async(task: Task[Any, Any]) -> bool:
    """Whether ``task`` is a coroutine task (looked up by its function, which
    hashes cheaply: a ``Task`` hashes all its fields)."""
    func = task.func
    found = _async.get(func)
    if found is None:
        found = _async[func] = iscoroutinefunction(func)
    return found


_async: dict[Any, bool] = {}


def running_result(
    task: Task[Any, Any],
    claim: Claim,
    alias: str,
    use_tz: bool = True,
    started: float | None = None,
) -> TaskResult[Any, Any]:
    """The RUNNING ``TaskResult`` a claim stands for (its arguments decoded once,
    by the claim); ``started``: when this attempt started (epoch seconds; now
    when not given)."""
    tz = UTC if use_tz else None
    attempted = datetime.now(tz) if started is None else _moment(round(started * 1000), tz)
    return TaskResult(
        task=task,
        id=claim.job_id,
        status=TaskResultStatus.RUNNING,
        enqueued_at=_moment(claim.enqueued_ms, tz),
        started_at=_moment(claim.started_ms, tz),
        last_attempted_at=attempted,
        finished_at=None,
        args=claim.args,
        kwargs=claim.kwargs,
        backend=alias,
        errors=[],
        worker_ids=list(claim.worker_ids),
    )


def result_of(job: Job, policy: Policy) -> TaskResult[Any, Any]:
    """The RUNNING ``TaskResult`` of a job that started. Its ``last_attempted_at``
    is the claim's time on the server (its lease's deadline less the lease), the
    time the row records as ``claimed``: the task sees what ``get_result`` reads
    back, whatever the worker's clock says."""
    assert job.task is not None
    started = job.started_at
    if policy.lease_ms and job.claim.deadline_ms > policy.lease_ms:
        started = (job.claim.deadline_ms - policy.lease_ms) / 1000
    return running_result(job.task, job.claim, policy.alias, policy.use_tz, started)


def _moment(ms: int, tz: Any) -> datetime | None:
    """As :func:`~django_emq.backend.moment`, with ``USE_TZ`` read once."""
    if not ms:
        return None
    at = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return at if tz is not None else at.replace(tzinfo=None)


def execute(
    task: Task[Any, Any], claim: Claim, result: TaskResult[Any, Any] | None, policy: Policy
) -> Outcome:
    """Run a sync task (on a worker thread): ``task_started`` first when there is
    a ``result`` (something listens, or the task takes its context), then the
    call, the result checked. The caller closes database connections around it."""
    try:
        if result is None:
            value = task.func(*claim.args, **claim.kwargs)
        else:
            _started(result)
            if task.takes_context:
                value = task.func(TaskContext(task_result=result), *result.args, **result.kwargs)
            else:
                value = task.func(*result.args, **result.kwargs)
        return finish(value, claim.token, policy)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt from a task fail it too
        return failed(exc, claim.token, policy)


def _started(result: TaskResult[Any, Any]) -> None:
    """``task_started`` for a sync job: a receiver that raises is logged, not the
    task's failure (Django's own backends send it outside the task's ``try``),
    as for coroutine jobs (see :func:`.signals.send_all`)."""
    try:
        task_started.send(FairLanesBackend, task_result=result)
    except Exception:
        logger.exception("job %s: a task signal receiver failed", result.id)


def run_jobs(
    take: Callable[[], Job | None],
    finished: Callable[[Job, Outcome | None], None],
    policy: Policy,
    margin: float,
    stopping: Callable[[], bool],
) -> None:
    """On a worker thread: run the jobs ``take`` gives, in turn, until it gives
    none (the line is empty), telling ``finished`` each one's outcome, or
    ``None`` for one that may not start (``stopping``, or its lease not surely
    the worker's for ``margin`` seconds). Whether a signal receiver listens is
    looked at once per run of jobs, not per job. Database connections are
    closed before the first job runs and after each one (what ends one job
    begins the next: nothing else runs on the thread between them)."""
    signals = listening(task_started)
    fresh = True
    while (job := take()) is not None:
        if stopping() or not job.may_start(margin):
            finished(job, None)
            continue
        finished(job, _run_sync(job, policy, signals, fresh))
        fresh = False


def _run_sync(job: Job, policy: Policy, signals: bool, fresh: bool) -> Outcome:
    task = job.task
    assert task is not None
    job.started = time.monotonic()
    job.started_at = time.time()
    running = running_job.set(job.job_id)
    try:
        try:
            if fresh:
                close_old_connections()
            if signals or task.takes_context:
                job.result = result_of(job, policy)
            return execute(task, job.claim, job.result, policy)
        finally:
            job.ended = time.monotonic()
            close_old_connections()
    except BaseException as exc:  # a bug around the task: the job fails, not the thread
        return failed(exc, job.claim.token, policy)
    finally:
        running_job.reset(running)


async def aexecute(
    task: Task[Any, Any], claim: Claim, result: TaskResult[Any, Any] | None, policy: Policy
) -> Outcome:
    """Await a coroutine task on the event loop (its ``task_started`` is the
    caller's: coroutine jobs start in batches, see :mod:`.signals`); ``result``
    is there when a signal or the task's context needs it."""
    try:
        if result is not None and task.takes_context:
            return await _cancellable(task, TaskContext(task_result=result), claim.token, policy)
        value = await task.func(*claim.args, **claim.kwargs)
        return finish(value, claim.token, policy)
    except BaseException as exc:  # CancelledError included: the worker is going away
        return failed(exc, claim.token, policy)


async def _cancellable(
    task: Task[Any, Any], context: TaskContext[Any, Any], attempt: int, policy: Policy
) -> Outcome:
    """The hook that honours cancels for coroutine tasks that take the context:
    ``stop_when_cancelled`` looks at the job's cancel flag (one read a second)
    and cancels the task at its next ``await`` once a cancel is asked. The job
    then ends dead at once with a ``JobCancelled`` error (never retried)."""
    result = context.task_result
    running = asyncio.ensure_future(task.func(context, *result.args, **result.kwargs))
    watcher = asyncio.ensure_future(stop_when_cancelled(context, running))
    try:
        value = await running
    except asyncio.CancelledError:
        if not (watcher.done() and not watcher.cancelled() and watcher.result()):
            raise  # the worker itself is going away
        reason = f"{task.module_path} stopped: a cancel was asked while it ran"
        return Failed(task_error(JobCancelled(result.id, reason), reason), None, reason)
    finally:
        watcher.cancel()
    return finish(value, attempt, policy)


def finish(value: Any, attempt: int, policy: Policy) -> Outcome:
    """A returned value as it will be recorded; what JSON or Valkey cannot hold
    (NaN, a lone surrogate, too deep, too big) fails the job here, alone."""
    if value is None:
        return NULL
    try:
        try:
            normalized = normalize_json(value)
        except RecursionError:
            raise InvalidArguments("a task's return value is nested too deeply for JSON") from None
        return Done(encode_result(normalized, policy.max_result).encode(), value)
    except (ValueError, TypeError) as exc:
        return failed(exc, attempt, policy)


def failed(exc: BaseException, attempt: int, policy: Policy) -> Failed:
    """A task's exception as the failure to record, retried after the back-off;
    a ``JobCancelled`` the task raised (it stopped when asked) ends the job at
    once, never retried, as the coroutine hook's stop does."""
    text = "".join(traceback.format_exception(exc))
    delay = None if isinstance(exc, JobCancelled) else policy.delay_ms(attempt)
    return Failed(task_error(exc, text), delay, describe(exc))


def describe(exc: BaseException) -> str:
    """``RuntimeError('boom')``: one line naming an exception, whatever its text
    holds (``repr`` escapes what a log stream could not write)."""
    try:
        return repr(exc)[:500]
    except Exception:
        return type(exc).__name__
