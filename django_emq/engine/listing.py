"""Queue-wide listings of jobs by state, for operators: the next jobs to run
(across the ring's next lanes), the scheduled jobs by due time, the jobs in
flight by lease deadline, the dead jobs and the recently finished ones
(newest first), and a search of task paths within those bounded windows.

Every call costs a fixed number of round trips per shard (two or three),
whatever the number of lanes or jobs: a page is read by rank from one sorted
set, never by scanning.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from .browse import ROW_FIELDS, JobRow, job_row, server_ms
from .ids import entry_tenant, is_job_id
from .payload import text
from .queue import Queue
from .records import lenient_int
from .rows import Row
from .shards import AnyQueue

State = Literal["pending", "scheduled", "inflight", "dead", "finished"]
STATES: tuple[State, ...] = ("pending", "scheduled", "inflight", "dead", "finished")
#: Most rows one page or search may read.
MAX_PAGE = 500
#: Most jobs of each state a task-path search looks at: the whole finished
#: window, the newest dead jobs, the soonest scheduled, the jobs in flight.
SEARCH_WINDOW: dict[State, int] = {
    "finished": 10_000,
    "dead": 1_000,
    "scheduled": 1_000,
    "inflight": 1_000,
}


@dataclass(frozen=True, slots=True)
class ListedJob:
    """One job of a listing, with the score it is listed by (due time, lease
    deadline, time of death or of finishing, in ms; the mint order for pending
    jobs) and the queue (shard) that holds it."""

    row: JobRow
    score: int
    shard: str


@dataclass(frozen=True, slots=True)
class Listing:
    """A page of one state's jobs, how many there are in all, and the server clock."""

    jobs: list[ListedJob]
    total: int
    server_ms: int


def _rows(queue: Queue, scored: Sequence[tuple[str, int]]) -> list[ListedJob]:
    """The rows of ``(id, score)`` pairs in one round trip; ids whose row is gone
    (an expired result) are left out, and so is a member that is no job id (a
    hand edit: it names no row)."""
    scored = [(job_id, score) for job_id, score in scored if is_job_id(job_id)]
    if not scored:
        return []
    pipe = queue.connection.pipeline(transaction=False)
    for job_id, _ in scored:
        pipe.hmget(queue.keys.job(job_id), ROW_FIELDS)
    listed = []
    for (job_id, score), raw in zip(scored, pipe.execute(), strict=True):
        if raw[0] is not None:
            row = job_row(job_id, raw)
            if score and row.state == "active":
                row = replace(row, deadline_ms=score)
            listed.append(ListedJob(row, score, queue.name))
    return listed


def _key(queue: Queue, state: State) -> str:
    k = queue.keys
    return {"scheduled": k.schedule, "inflight": k.active, "dead": k.dead, "finished": k.finished}[
        state
    ]


def _newest_first(state: State) -> bool:
    return state in ("dead", "finished")


def jobs_in_state(queue: AnyQueue, state: State, offset: int = 0, limit: int = 50) -> Listing:
    """Page ``offset``.. of the queue's jobs in ``state``.

    ``pending``: the next jobs to run, turn by turn across the ring's next
    ``limit`` lanes (``offset`` must be 0: the run order beyond one page depends
    on claims not made yet; each lane's page lists its own in full). The others
    by score: ``scheduled`` by due time, ``inflight`` by lease deadline,
    ``dead`` and ``finished`` newest first. A sharded queue's shards are read
    ``offset + limit`` deep each and merged."""
    if not 1 <= limit <= MAX_PAGE or offset < 0:
        raise ValueError(f"bad page: offset {offset}, limit {limit}")
    if state == "pending":
        return _next_to_run(queue, limit)
    if state not in STATES:
        raise ValueError(f"unknown state {state!r}")
    parts: list[list[tuple[str, int, Queue]]] = []
    total, now = 0, 0
    single = len(queue.shards) == 1
    for shard in queue.shards:
        key = _key(shard, state)
        start, stop = (offset, offset + limit - 1) if single else (0, offset + limit - 1)
        pipe = shard.connection.pipeline(transaction=False)
        pipe.zrange(key, start, stop, desc=_newest_first(state), withscores=True)
        pipe.zcard(key)
        pipe.execute_command("TIME")
        ranked, count, clock = pipe.execute()
        total += int(count)
        now = max(now, server_ms(clock))
        parts.append([(text(m), lenient_int(s), shard) for m, s in ranked])
    merged = heapq.merge(*parts, key=lambda p: p[1], reverse=_newest_first(state))
    page = list(merged) if single else list(itertools.islice(merged, offset, offset + limit))
    jobs: list[ListedJob] = []
    for shard in queue.shards:
        mine = [(job_id, score) for job_id, score, owner in page if owner is shard]
        jobs += _rows(shard, mine)
    order = {job_id: i for i, (job_id, _, _) in enumerate(page)}
    jobs.sort(key=lambda j: order[j.row.job_id])
    return Listing(jobs, total, now)


def _next_to_run(queue: AnyQueue, limit: int) -> Listing:
    """The next ``limit`` jobs in run order: the ring's next lanes, turn by turn
    (one job per lane per turn; weights are not looked at). A tenant's entry
    stands for the lane at the head of its ring (one more round trip, only
    when the ring holds entries)."""
    jobs: list[ListedJob] = []
    total, now = 0, 0
    for shard in queue.shards:
        k = shard.keys
        pipe = shard.connection.pipeline(transaction=False)
        pipe.lrange(k.ring, 0, limit - 1)
        pipe.hget(k.stats, "pending")
        pipe.execute_command("TIME")
        head, pending, clock = pipe.execute()
        total += int(pending or 0)
        now = max(now, server_ms(clock))
        lanes = _entries_as_lanes(shard, [text(lane) for lane in head])
        if not lanes:
            continue
        per_lane = -(-limit // len(lanes))
        pipe = shard.connection.pipeline(transaction=False)
        for lane in lanes:
            pipe.zrange(k.pending(lane), 0, per_lane - 1, withscores=True)
        heads = pipe.execute()
        turns = itertools.zip_longest(*heads)
        order = [(text(m), int(s)) for turn in turns for pair in turn if pair for m, s in [pair]]
        jobs += _rows(shard, order[:limit])
    return Listing(jobs[:limit], total, now)


def _entries_as_lanes(shard: Queue, names: list[str]) -> list[str]:
    """The ring's names with each tenant entry replaced by its ring's head lane."""
    tenants = [entry_tenant(name) for name in names]
    if not any(tenants):
        return names
    pipe = shard.connection.pipeline(transaction=False)
    for tenant in tenants:
        if tenant:
            pipe.lindex(shard.keys.tenant_ring(tenant), 0)
    heads = iter(pipe.execute())
    lanes = []
    for name, tenant in zip(names, tenants, strict=True):
        lane = text(next(heads) or b"") if tenant else name
        if lane:
            lanes.append(lane)
    return lanes


def find_by_task(queue: AnyQueue, part: str, limit: int = 50) -> list[ListedJob]:
    """Jobs whose task path holds ``part`` anywhere, in any case (``resize``
    finds ``app.images.Resize_all``), newest first, looked for among the jobs
    :data:`SEARCH_WINDOW` names (three round trips per shard). Anywhere rather
    than at the start: an operator often knows a task's name, not its module."""
    needle = part.casefold()
    found: list[ListedJob] = []
    for shard in queue.shards:
        pipe = shard.connection.pipeline(transaction=False)
        for state, depth in SEARCH_WINDOW.items():
            key = _key(shard, state)
            pipe.zrange(key, 0, depth - 1, desc=_newest_first(state), withscores=True)
        candidates = [(text(m), lenient_int(s)) for ranked in pipe.execute() for m, s in ranked]
        candidates = [c for c in dict.fromkeys(candidates) if is_job_id(c[0])]
        pipe = shard.connection.pipeline(transaction=False)
        for job_id, _ in candidates:
            pipe.hget(shard.keys.job(job_id), Row.TASK)
        tasks = pipe.execute() if candidates else []
        hits = [
            c
            for c, task in zip(candidates, tasks, strict=True)
            if task and needle in text(task).casefold()
        ]
        found += _rows(shard, hits[:limit])
    found.sort(key=lambda j: -(j.row.finished_ms or j.row.claimed_ms or j.row.enqueued_ms or 0))
    return found[:limit]
