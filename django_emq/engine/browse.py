"""Bounded reads for operators (the admin): one lane's jobs page by page (its
scheduled ones from the head of the queue's schedule), one job with the
heartbeats of its workers, the head of the ring, each lane's oldest job, the
workers' heartbeats.

Every call costs a fixed number of round trips (at most two; three for a
lane's scheduled jobs) whatever the number of lanes: lanes are read from
their own keys (``g:<lane>:pending``, ``:active``, ``:dead``), never by
scanning a queue-wide set. The schedule is the one queue-wide set a lane's
page reads, and only its head (:data:`SCHEDULE_LOOKED_AT` entries).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import calls
from .ids import id_list, validate_lane
from .payload import text
from .queue import Queue
from .rows import LISTED_FIELDS, Row, WorkerBeat, filled, parse_heartbeat
from .shards import AnyQueue

ROW_FIELDS = LISTED_FIELDS


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job as a listing shows it. Times are epoch ms (``None`` when unset);
    ``deadline_ms`` is the lease deadline of an in-flight job."""

    job_id: str
    lane: str
    state: str
    task_path: str
    args: str
    kwargs: str
    attempts: int
    fails: int
    enqueued_ms: int | None
    claimed_ms: int | None
    worker: str
    finished_ms: int | None
    error: str
    deadline_ms: int | None = None


@dataclass(frozen=True, slots=True)
class JobPage:
    """A page of one lane's jobs, the lane's count of them, and the server clock."""

    jobs: list[JobRow]
    total: int
    server_ms: int


def _ms(value: Any) -> int | None:
    """A number kept on a row; ``None`` when it is missing or no whole number
    (a row edited by hand still lists)."""
    if value is None or value == b"" or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        return None


def job_row(job_id: str, raw: Sequence[Any], *, lane: str = "", deadline: Any = None) -> JobRow:
    """A :class:`JobRow` from the values of ``ROW_FIELDS`` (one ``HMGET``);
    ``lane`` stands in for a row that lost its own, ``deadline`` is the lease
    deadline of an in-flight job (its score in the active set)."""
    return JobRow(
        job_id=job_id,
        lane=text(raw[1] or lane),
        state=text(raw[0] or ""),
        task_path=text(raw[2] or ""),
        args=text(raw[3] or ""),
        kwargs=text(raw[4] or ""),
        attempts=_ms(raw[5]) or 0,
        fails=_ms(raw[6]) or 0,
        enqueued_ms=_ms(raw[7]),
        claimed_ms=_ms(raw[8]),
        worker=text(raw[9] or ""),
        finished_ms=_ms(raw[10]),
        error=text(raw[11] or ""),
        deadline_ms=None if deadline is None else int(deadline),
    )


def server_ms(reply: Sequence[Any]) -> int:
    """Epoch ms of a ``TIME`` reply."""
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def _page(queue: Queue, key: str, lane: str, offset: int, limit: int, newest: bool) -> JobPage:
    """Ids ``offset``.. of sorted set ``key`` (a lane's), then their rows."""
    validate_lane(lane)
    if offset < 0 or limit < 1:
        raise ValueError(f"bad page: offset {offset}, limit {limit}")
    pipe = queue.connection.pipeline(transaction=False)
    pipe.zrange(key, offset, offset + limit - 1, desc=newest)
    pipe.zcard(key)
    pipe.execute_command("TIME")  # not pipe.time(): a cluster pipeline refuses that
    raw_ids, total, now = pipe.execute()
    ids = [text(i) for i in raw_ids]
    rows, deadlines = _rows(queue, ids, with_deadlines=key == queue.keys.lane_active(lane))
    jobs = [
        job_row(job_id, row, lane=lane, deadline=deadline)
        for job_id, row, deadline in zip(ids, rows, deadlines, strict=True)
    ]
    return JobPage(jobs, int(total), server_ms(now))


@dataclass(frozen=True, slots=True)
class JobView:
    """One job's whole row (text), the server clock, the heartbeats of the
    workers its row keeps that still have one (by worker id), and its lease
    deadline (``None`` when it holds no lease)."""

    row: dict[str, str]
    server_ms: int
    beats: dict[str, WorkerBeat]
    deadline_ms: int | None = None


#: Most distinct worker ids of one row whose heartbeats :func:`read_job` looks up.
MOST_WORKERS = 1_000


def read_job(queue: Queue, job_id: str) -> JobView | None:
    """Job ``job_id`` on this shard (``None``: no such job), in one round trip
    (one read-only script, ``read_job-3.lua``)."""
    raw, clock, beats, deadline = queue.runner.script(
        calls.read_job(queue.keys, job_id, MOST_WORKERS)
    )
    if not raw:
        return None
    pairs = iter(raw)
    row = filled({text(field): text(value) for field, value in zip(pairs, pairs, strict=True)})
    found = iter(beats)
    return JobView(
        row,
        server_ms(clock),
        {text(w): parse_heartbeat(text(w), rec) for w, rec in zip(found, found, strict=True)},
        _ms(deadline),
    )


def _rows(queue: Queue, ids: list[str], with_deadlines: bool) -> tuple[list[Any], list[Any]]:
    if not ids:
        return [], []
    pipe = queue.connection.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(queue.keys.job(job_id), ROW_FIELDS)
    if with_deadlines:
        pipe.zmscore(queue.keys.active, ids)
    replies = pipe.execute()
    deadlines = replies.pop() if with_deadlines else [None] * len(ids)
    return replies, deadlines


def pending_jobs(queue: Queue, lane: str, offset: int = 0, limit: int = 50) -> JobPage:
    """The lane's pending jobs in the order they will run (two round trips)."""
    return _page(queue, queue.keys.pending(lane), lane, offset, limit, newest=False)


def inflight_jobs(queue: Queue, lane: str, offset: int = 0, limit: int = 50) -> JobPage:
    """The lane's claimed jobs, earliest claim first, with lease deadlines (two round trips)."""
    return _page(queue, queue.keys.lane_active(lane), lane, offset, limit, newest=False)


def dead_jobs(queue: Queue, lane: str, offset: int = 0, limit: int = 50) -> JobPage:
    """The lane's dead jobs, latest death first (two round trips)."""
    return _page(queue, queue.keys.lane_dead(lane), lane, offset, limit, newest=True)


#: Most entries of the queue's schedule :func:`scheduled_jobs` looks through
#: (the schedule is queue-wide: a lane keeps none of its own).
SCHEDULE_LOOKED_AT = 1_000


@dataclass(frozen=True, slots=True)
class ScheduledPage:
    """A lane's scheduled jobs with their due times (epoch ms), soonest first;
    how many of the queue's scheduled jobs were looked through, and how many
    the queue has (``looked_at < queue_total``: the lane may have more, due
    later than those looked through)."""

    jobs: list[tuple[JobRow, int]]
    looked_at: int
    queue_total: int


def scheduled_jobs(
    queue: Queue, lane: str, limit: int = 50, look_at: int = SCHEDULE_LOOKED_AT
) -> ScheduledPage:
    """The lane's first ``limit`` scheduled jobs (deferred by ``run_after``, or
    backing off before a retry), soonest due first, found among the first
    ``look_at`` of the queue's schedule. At most three round trips, whatever
    the number of lanes or of scheduled jobs: the schedule's head, each of its
    jobs' lane, the rows of the lane's."""
    validate_lane(lane)
    if limit < 1 or look_at < 1:
        raise ValueError(f"bad page: limit {limit}, look_at {look_at}")
    pipe = queue.connection.pipeline(transaction=False)
    pipe.zrange(queue.keys.schedule, 0, look_at - 1, withscores=True)
    pipe.zcard(queue.keys.schedule)
    head, total = pipe.execute()
    due = [(text(job_id), int(score)) for job_id, score in head]
    if not due:
        return ScheduledPage([], 0, int(total))
    pipe = queue.connection.pipeline(transaction=False)
    for job_id, _ in due:
        pipe.hget(queue.keys.job(job_id), Row.LANE)
    lanes = pipe.execute()
    mine = [
        (job_id, at)
        for (job_id, at), of in zip(due, lanes, strict=True)
        if of is not None and text(of) == lane
    ]
    mine = mine[:limit]
    rows, _ = _rows(queue, [job_id for job_id, _ in mine], with_deadlines=False)
    jobs = [
        (job_row(job_id, row, lane=lane), at) for (job_id, at), row in zip(mine, rows, strict=True)
    ]
    return ScheduledPage(jobs, len(due), int(total))


def oldest_enqueued(queue: AnyQueue, lanes: Sequence[str]) -> dict[str, int | None]:
    """When each lane's oldest pending job was enqueued (epoch ms; ``None`` for an
    empty lane). Two round trips (per shard holding one of them), whatever the
    number of lanes given."""
    lanes = id_list("lanes", lanes)
    found: dict[str, int | None] = {}
    for shard in queue.shards:
        mine = [lane for lane in lanes if queue.shard_for_lane(lane) is shard]
        if mine:
            found.update(_oldest_on(shard, mine))
    return {lane: found[lane] for lane in lanes}


def _oldest_on(queue: Queue, lanes: Sequence[str]) -> dict[str, int | None]:
    """:func:`oldest_enqueued` on one shard, for lanes it holds."""
    pipe = queue.connection.pipeline(transaction=False)
    for lane in lanes:
        pipe.zrange(queue.keys.pending(lane), 0, 0)
    heads = [text(h[0]) if h else None for h in pipe.execute()]
    pipe = queue.connection.pipeline(transaction=False)
    for head in heads:
        if head is not None:
            pipe.hget(queue.keys.job(head), Row.ENQUEUED)
    enqueued = iter(pipe.execute() if any(heads) else [])
    return {
        lane: None if head is None else _ms(next(enqueued))
        for lane, head in zip(lanes, heads, strict=True)
    }


@dataclass(frozen=True, slots=True)
class Overview:
    """The head of the ring, the workers, the deepest lane's depth and the server clock."""

    ring_head: list[str]
    workers: list[WorkerBeat]
    deepest: int
    server_ms: int


def overview(queue: AnyQueue, ring_count: int = 10) -> Overview:
    """One round trip (per shard): the next ``ring_count`` lanes in rotation
    order (an ``LRANGE`` of the ring's head, never the whole ring), every
    worker's last heartbeat (latest first), the deepest lane's depth, the
    server clock.

    For a sharded queue the shards' ring heads are interleaved (workers take
    the shards in turn) and each worker is listed once, at its latest beat.
    """
    if ring_count < 1:
        raise ValueError(f"ring_count must be >= 1, not {ring_count}")
    parts = [_overview_of(shard, ring_count) for shard in queue.shards]
    return parts[0] if len(parts) == 1 else _merged(parts, ring_count)


def _overview_of(queue: Queue, ring_count: int) -> Overview:
    """:func:`overview` of one shard."""
    k = queue.keys
    pipe = queue.connection.pipeline(transaction=False)
    pipe.lrange(k.ring, 0, ring_count - 1)
    pipe.hgetall(k.workers)
    pipe.zrevrange(k.depths, 0, 0, withscores=True)
    pipe.execute_command("TIME")  # not pipe.time(): a cluster pipeline refuses that
    head, beats, deepest, now = pipe.execute()
    return Overview(
        [text(lane) for lane in head],
        sorted(
            (parse_heartbeat(text(w), raw) for w, raw in beats.items()),
            key=lambda b: (-(b.beat_ms or 0), b.worker_id),
        ),
        int(deepest[0][1]) if deepest else 0,
        server_ms(now),
    )


def _merged(parts: list[Overview], ring_count: int) -> Overview:
    """The overview of a sharded queue from its shards' overviews."""
    heads = [lane for turn in itertools.zip_longest(*(p.ring_head for p in parts)) for lane in turn]
    latest: dict[str, WorkerBeat] = {}
    for beat in (b for p in parts for b in p.workers):
        seen = latest.get(beat.worker_id)
        if seen is None or (beat.beat_ms or 0) > (seen.beat_ms or 0):
            latest[beat.worker_id] = beat
    return Overview(
        [lane for lane in heads if lane is not None][:ring_count],
        sorted(latest.values(), key=lambda b: (-(b.beat_ms or 0), b.worker_id)),
        max(p.deepest for p in parts),
        max(p.server_ms for p in parts),
    )
