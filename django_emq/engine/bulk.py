"""Operations on many jobs at once, for operators: cancel jobs in bulk (named
ones, every job of a lane, every job of a task), send back every dead job of
a task, and run a finished or dead job again as a new job.

Every operation works in bounded batches: it reads :data:`BATCH` ids (and
their rows' task and lane) per round trip and cancels or retries
:data:`BATCH` jobs per round trip, each job by its own script (``cancel``,
``retry_dead``), so no script ever runs long. A walk pages each sorted set
by a (score, member) bound, so jobs leaving it meanwhile never make it skip
one, and acts on each page as it reads it. It looks at most :data:`MOST`
jobs per call; an answer says whether it got through them all
(``complete``), and else gives the ``cursor`` a next call goes on from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from . import ops
from .exceptions import InvalidJobState, JobError, JobNotFound
from .ids import id_list, validate_job_id, validate_lane, validate_task_path
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
    False: it stopped at :data:`MOST`, call again with ``cursor`` for the rest)."""

    cancelled: int = 0
    requested: int = 0
    skipped: int = 0
    complete: bool = True
    #: Where a call that stopped at :data:`MOST` goes on: pass it back as
    #: ``cursor`` ('' when ``complete``).
    cursor: str = ""

    def __add__(self, other: Bulk) -> Bulk:
        return Bulk(
            self.cancelled + other.cancelled,
            self.requested + other.requested,
            self.skipped + other.skipped,
            self.complete and other.complete,
            self.cursor or other.cursor,
        )


def cancel_jobs(queue: AnyQueue, job_ids: Iterable[str]) -> Bulk:
    """Cancel each of ``job_ids`` as ``Queue.cancel`` does (a pending or
    scheduled job never runs, a running one is asked to stop), :data:`BATCH`
    per round trip. Ids of finished or unknown jobs are skipped (on a sharded
    queue also an id that names no shard of it); a malformed id, or one
    ``str`` in place of a collection of ids, raises ``ValueError``
    (``InvalidArguments``) before anything is sent."""
    ids = [validate_job_id(job_id) for job_id in id_list("job_ids", job_ids)]
    by_shard: dict[int, tuple[Queue, list[str]]] = {}
    nowhere = 0
    for job_id in dict.fromkeys(ids):
        try:
            shard = queue.shard_for_job(job_id)
        except JobNotFound:  # never enqueued here: unknown, as on a plain queue
            nowhere += 1
            continue
        by_shard.setdefault(id(shard), (shard, []))[1].append(job_id)
    done = Bulk(skipped=nowhere)
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


#: The order of a walk's steps on one shard: a job moving on (scheduled ->
#: pending -> running) during a walk is met in its later state.
SCHEDULED, PENDING, RUNNING = 0, 1, 2

#: Where a walk is: (shard, step, lane of a pending step or '').
type Step = tuple[int, int, str]


class _Walk:
    """One call's walk over sorted sets, step after step (:data:`Step` order),
    each paged by an exclusive (score, member) bound (``page.lua``), so jobs
    leaving a set meanwhile never make it skip one: a job present in a set
    from the moment the walk starts it until it passes it is met. It looks at
    :data:`MOST` jobs at most; then :attr:`cursor` says where the next call
    (given that cursor) goes on, '' when it got through every step."""

    def __init__(self, target: str, cursor: str) -> None:
        self.target = target
        self.left = MOST
        self.resume = _parse_cursor(cursor, target)
        self.cursor = ""

    def rows(self, shard: Queue, step: Step, key: str) -> Iterator[list[tuple[str, str, str]]]:
        """``(id, task, lane)`` of the jobs of sorted set ``key`` (step ``step``
        of the walk), one page of at most :data:`BATCH` per round trip and one
        more for their rows; nothing once the walk stopped, or for a step the
        cursor it resumes from is past."""
        if self.cursor:
            return
        after: tuple[str, str] | None = None
        if self.resume is not None:
            at, bound = self.resume
            if step < at:
                return
            if step == at:
                after = bound
            self.resume = None
        while True:
            if self.left == 0:  # spent: stop here only if there is more to look at
                if shard.runner.run(ops.page(key, 1, after)):
                    self.cursor = _cursor(self.target, step, after)
                return
            size = min(BATCH, self.left)
            pairs = shard.runner.run(ops.page(key, size, after))
            if not pairs:
                return
            self.left -= len(pairs)
            member, score = pairs[-1]
            after = (score, member)
            pipe = shard.connection.pipeline(transaction=False)
            for job_id, _ in pairs:
                pipe.hmget(shard.keys.job(job_id), [Row.TASK, Row.LANE])
            yield [
                (job_id, text(task), text(lane or b""))
                for (job_id, _), (task, lane) in zip(pairs, pipe.execute(), strict=True)
                if task is not None
            ]
            if len(pairs) < size:
                return

    def lanes(self, shard: Queue) -> list[str]:
        """Every lane with pending jobs on ``shard``, by name (the order a
        cursor resumes in). Read by ZSCAN, about :data:`BATCH` per round trip:
        a lane's depth changes as jobs are claimed, so paging the depths by
        rank could skip one; a scan returns every lane present throughout."""
        found = shard.connection.zscan_iter(shard.keys.depths, count=BATCH)
        return sorted({text(lane) for lane, _ in found})


def _cursor(target: str, step: Step, after: tuple[str, str] | None) -> str:
    score, member = after or ("", "")
    return json.dumps([target, *step, score, member], separators=(",", ":"))


def _parse_cursor(cursor: str, target: str) -> tuple[Step, tuple[str, str] | None] | None:
    """A cursor a walk of ``target`` answered, read back; ``ValueError`` for
    any other string."""
    if not cursor:
        return None
    try:
        of, shard, step, lane, score, member = json.loads(cursor)
        if not (isinstance(shard, int) and isinstance(step, int)):
            raise TypeError
        if not all(isinstance(x, str) for x in (of, lane, score, member)):
            raise TypeError
    except (ValueError, TypeError):
        raise ValueError(f"{cursor[:100]!r} is not a cursor a bulk call answered") from None
    if of != target:
        raise ValueError(f"that cursor goes on with {of!r}, not with {target!r}")
    return (shard, step, lane), ((score, member) if score else None)


def cancel_lane(queue: AnyQueue, lane: str, cursor: str = "") -> Bulk:
    """Cancel every job of ``lane``: its pending jobs and its scheduled ones
    never run (their rows stay, read back as cancelled, unlike ``drain``), its
    running ones are asked to stop. Walks the queue's schedule (for the
    lane's scheduled jobs), the lane's pending jobs, then its running ones,
    cancelling each page as it reads it; at most :data:`MOST` jobs per call,
    ``cursor`` (from the last answer) goes on where that call stopped."""
    shard = home_of(queue, validate_lane(lane))
    walk = _Walk(f"lane:{lane}", cursor)
    done = Bulk()
    for page in walk.rows(shard, (0, SCHEDULED, ""), shard.keys.schedule):
        done += cancel_jobs(shard, [job_id for job_id, _, of in page if of == lane])
    for page in walk.rows(shard, (0, PENDING, ""), shard.keys.pending(lane)):
        done += cancel_jobs(shard, [job_id for job_id, _, _ in page])
    for page in walk.rows(shard, (0, RUNNING, ""), shard.keys.lane_active(lane)):
        done += cancel_jobs(shard, [job_id for job_id, _, _ in page])
    return _with_end(done, walk)


def cancel_task(queue: AnyQueue, task_path: str, cursor: str = "") -> Bulk:
    """Cancel every job of task ``task_path`` (its exact dotted path): scheduled,
    pending in any lane, running (asked to stop). Walks each shard's schedule,
    every lane with pending jobs (by name), then the running jobs, cancelling
    each page as it reads it; at most :data:`MOST` jobs per call, ``cursor``
    (from the last answer) goes on where that call stopped."""
    validate_task_path(task_path)
    walk = _Walk(f"task:{task_path}", cursor)
    done = Bulk()
    for n, shard in enumerate(queue.shards):
        for page in walk.rows(shard, (n, SCHEDULED, ""), shard.keys.schedule):
            done += cancel_jobs(shard, [j for j, task, _ in page if task == task_path])
        for lane in walk.lanes(shard) if not walk.cursor else []:
            for page in walk.rows(shard, (n, PENDING, lane), shard.keys.pending(lane)):
                done += cancel_jobs(shard, [j for j, task, _ in page if task == task_path])
        for page in walk.rows(shard, (n, RUNNING, ""), shard.keys.active):
            done += cancel_jobs(shard, [j for j, task, _ in page if task == task_path])
    return _with_end(done, walk)


def _with_end(done: Bulk, walk: _Walk) -> Bulk:
    """``done`` with where its walk ended: ``complete``, or the cursor to go on."""
    return Bulk(done.cancelled, done.requested, done.skipped, not walk.cursor, walk.cursor)


@dataclass(frozen=True, slots=True)
class Retried:
    """What ``retry_dead_of_task`` did: dead jobs ``sent`` back, whether its
    walk got through every dead job (``complete``), and else the ``cursor``
    a next call goes on from."""

    sent: int
    complete: bool
    cursor: str = ""


def retry_dead_of_task(queue: AnyQueue, task_path: str, cursor: str = "") -> Retried:
    """Send every dead job of task ``task_path`` back to its lane (failures
    reset, as ``retry_dead``), each page as it is read; at most :data:`MOST`
    dead jobs looked at per call, ``cursor`` (from the last answer) goes on
    where that call stopped."""
    validate_task_path(task_path)
    walk = _Walk(f"dead:{task_path}", cursor)
    total = 0
    for n, shard in enumerate(queue.shards):
        for page in walk.rows(shard, (n, 0, ""), shard.keys.dead):
            ids = [j for j, task, _ in page if task == task_path]
            total += shard.retry_dead(ids) if ids else 0
    return Retried(total, not walk.cursor, walk.cursor)


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
