"""Operations on many jobs at once, for operators: cancel jobs in bulk (named
ones, every job of a lane, every job of a task), send back every dead job of
a task, and run a finished or dead job again as a new job.

Every operation works in bounded batches: it reads :data:`BATCH` ids (and
their rows' task and lane) per round trip and cancels or retries
:data:`BATCH` jobs per round trip, each job by its own script (``cancel``,
``retry_dead``), so no script ever runs long. A walk looks at most
:data:`MOST` jobs per call; a :class:`Bulk` answer says whether it got
through them all (``complete``), and calling again goes on where the jobs
that are left are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from . import ops
from .exceptions import InvalidJobState, JobError, JobNotFound
from .ids import validate_job_id, validate_lane, validate_task_path
from .payload import decode, text
from .policies.cancel import CANCELLED_ERROR
from .queue import Queue
from .records import JobSpec
from .rows import Row
from .shards import AnyQueue, home_of

#: Ids read, or jobs cancelled or retried, per round trip.
BATCH = 500
#: Most jobs one call looks at.
MOST = 100_000
#: States ``run_again`` copies a job from.
ENDED = ("done", "dead", "cancelled")


@dataclass(frozen=True, slots=True)
class Bulk:
    """What a bulk cancel did: jobs ``cancelled`` (they never run), running jobs
    ``requested`` to stop, ids ``skipped`` (finished, or gone, meanwhile), and
    whether the walk looked at every job it was to look at (``complete``;
    False: it stopped at :data:`MOST`, call again for the rest)."""

    cancelled: int = 0
    requested: int = 0
    skipped: int = 0
    complete: bool = True

    def __add__(self, other: Bulk) -> Bulk:
        return Bulk(
            self.cancelled + other.cancelled,
            self.requested + other.requested,
            self.skipped + other.skipped,
            self.complete and other.complete,
        )


def cancel_jobs(queue: AnyQueue, job_ids: Iterable[str]) -> Bulk:
    """Cancel each of ``job_ids`` as ``Queue.cancel`` does (a pending or
    scheduled job never runs, a running one is asked to stop), :data:`BATCH`
    per round trip. Ids of finished or unknown jobs are skipped; a malformed
    id raises ``ValueError`` before anything is sent."""
    by_shard: dict[int, tuple[Queue, list[str]]] = {}
    for job_id in dict.fromkeys(job_ids):
        shard = queue.shard_for_job(validate_job_id(job_id))
        by_shard.setdefault(id(shard), (shard, []))[1].append(job_id)
    done = Bulk()
    for shard, ids in by_shard.values():
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]
            answers = shard.runner.run_many(
                [ops.cancel(shard, job_id, CANCELLED_ERROR) for job_id in batch]
            )
            done += _tally(answers)
    return done


def _tally(answers: Sequence[object]) -> Bulk:
    cancelled = requested = skipped = 0
    for answer in answers:
        if answer == "cancelled":
            cancelled += 1
        elif answer == "requested":
            requested += 1
        elif isinstance(answer, InvalidJobState | JobNotFound):
            skipped += 1
        elif isinstance(answer, BaseException):
            raise answer
        else:
            skipped += 1
    return Bulk(cancelled, requested, skipped)


def _walk(shard: Queue, key: str, budget: list[int]) -> Iterator[tuple[str, str, str]]:
    """``(id, task, lane)`` of each job of sorted set ``key``, by rank,
    :data:`BATCH` per round trip; ``budget[0]`` is how many more jobs the
    caller may look at (it shrinks as they are read; the walk stops at 0)."""
    start = 0
    while budget[0] > 0:
        size = min(BATCH, budget[0])
        ids = [text(m) for m in shard.connection.zrange(key, start, start + size - 1)]
        if not ids:
            return
        budget[0] -= len(ids)
        start += len(ids)
        pipe = shard.connection.pipeline(transaction=False)
        for job_id in ids:
            pipe.hmget(shard.keys.job(job_id), [Row.TASK, Row.LANE])
        for job_id, (task, lane) in zip(ids, pipe.execute(), strict=True):
            if task is not None:
                yield job_id, text(task), text(lane or b"")
        if len(ids) < size:
            return


def _lanes(shard: Queue, budget: list[int]) -> Iterator[str]:
    """Every lane with pending jobs on ``shard``, :data:`BATCH` per round trip."""
    start = 0
    while budget[0] > 0:
        lanes = [
            text(m) for m in shard.connection.zrange(shard.keys.depths, start, start + BATCH - 1)
        ]
        yield from lanes
        if len(lanes) < BATCH:
            return
        start += BATCH


def cancel_lane(queue: AnyQueue, lane: str) -> Bulk:
    """Cancel every job of ``lane``: its pending jobs and its scheduled ones
    never run (their rows stay, read back as cancelled, unlike ``drain``), its
    running ones are asked to stop. The queue's schedule is walked for the
    lane's scheduled jobs (at most :data:`MOST` of it)."""
    shard = home_of(queue, validate_lane(lane))
    budget = [MOST]
    ids = [job_id for job_id, _, of in _walk(shard, shard.keys.pending(lane), budget)]
    ids += [job_id for job_id, _, _ in _walk(shard, shard.keys.lane_active(lane), budget)]
    ids += [job_id for job_id, _, of in _walk(shard, shard.keys.schedule, budget) if of == lane]
    return _with_end(cancel_jobs(shard, ids), budget)


def cancel_task(queue: AnyQueue, task_path: str) -> Bulk:
    """Cancel every job of task ``task_path`` (its exact dotted path): pending
    in any lane, scheduled, running (asked to stop). Walks the schedule, the
    running jobs and every lane with pending jobs, at most :data:`MOST` jobs
    in all per shard."""
    validate_task_path(task_path)
    done = Bulk()
    for shard in queue.shards:
        budget = [MOST]
        ids = [j for j, task, _ in _walk(shard, shard.keys.schedule, budget) if task == task_path]
        ids += [j for j, task, _ in _walk(shard, shard.keys.active, budget) if task == task_path]
        for lane in list(_lanes(shard, budget)):
            pending = _walk(shard, shard.keys.pending(lane), budget)
            ids += [j for j, task, _ in pending if task == task_path]
        done += _with_end(cancel_jobs(shard, ids), budget)
    return done


def _with_end(done: Bulk, budget: list[int]) -> Bulk:
    """``done``, not ``complete`` when the walk used up its budget."""
    return done if budget[0] > 0 else Bulk(done.cancelled, done.requested, done.skipped, False)


def retry_dead_of_task(queue: AnyQueue, task_path: str) -> tuple[int, bool]:
    """Send every dead job of task ``task_path`` back to its lane (failures
    reset, as ``retry_dead``); how many, and whether the walk of the dead jobs
    got through them all (at most :data:`MOST` per shard)."""
    validate_task_path(task_path)
    total, complete = 0, True
    for shard in queue.shards:
        budget = [MOST]
        ids = [j for j, task, _ in _walk(shard, shard.keys.dead, budget) if task == task_path]
        for start in range(0, len(ids), BATCH):
            total += shard.retry_dead(ids[start : start + BATCH])
        complete = complete and budget[0] > 0
    return total, complete


def run_again(queue: AnyQueue, job_id: str, lane: str | None = None) -> str:
    """Enqueue a new job with the task, arguments, max attempts and meta of the
    finished (done, cancelled) or dead job ``job_id``, in its lane or in
    ``lane``; the new job's id. The old job is left as it is.
    ``JobNotFound`` for no such job, ``InvalidJobState`` for one not ended."""
    row = queue.job(validate_job_id(job_id))
    if row is None:
        raise JobNotFound(job_id, "no such job")
    if row.get(Row.STATE) not in ENDED:
        raise InvalidJobState(
            job_id, f"only an ended job runs again, not a {row.get(Row.STATE)} one"
        )
    try:
        args, kwargs = decode(row.get(Row.ARGS)) or [], decode(row.get(Row.KWARGS)) or {}
        kept = decode(row.get(Row.META)) or {}
        # it runs now: a deferral the old job had (run_after) is not copied
        meta = {key: value for key, value in dict(kept).items() if key != "run_after"}
        attempts = int(row[Row.MAX_ATTEMPTS]) if row.get(Row.MAX_ATTEMPTS) else None
        spec = JobSpec(
            lane=validate_lane(lane or row.get(Row.LANE, "")),
            task_path=row.get(Row.TASK, ""),
            args=list(args),
            kwargs=dict(kwargs),
            max_attempts=attempts,
            meta=meta or None,
        )
    except (ValueError, TypeError) as exc:
        raise JobError(job_id, f"its row cannot be read to run it again: {exc}") from None
    return queue.enqueue_spec(spec).job_id
