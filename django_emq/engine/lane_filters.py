"""The lanes held back from the ring, for the operator's lane list: the paused
lanes, the throttled ones (rate-limited, waiting for their next start), and
the capped ones (at their concurrency ceiling).

Each is read from its own index, never by visiting every lane: the paused
set, the throttled sorted set, the ceilings hash (with the running counts of
the lanes found there). An index of at most :data:`MOST` lanes is read
whole; a larger one by one scan step of :data:`MOST` entries: at most three
round trips per shard whatever the number of lanes; :class:`Filtered` says whether the
index held more than were read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from .ids import is_lane
from .payload import text
from .queue import Queue
from .records import lenient_int
from .shards import AnyQueue

Which = Literal["paused", "throttled", "capped"]
FILTERS: tuple[Which, ...] = ("paused", "throttled", "capped")
#: Most lanes one filter reads per shard.
MOST = 1_000


@dataclass(frozen=True, slots=True)
class Filtered:
    """The lanes found (paused and capped by name, throttled by their next
    allowed start), how many entries the index holds, and whether it held
    more than were read (``sampled``: the list is the first :data:`MOST`)."""

    lanes: list[str]
    held: int
    sampled: bool


def filtered_lanes(queue: AnyQueue, which: Which) -> Filtered:
    """The lanes of ``queue`` that are ``which``: ``paused``, ``throttled`` or
    ``capped`` (running as many jobs as their ceiling allows)."""
    if which not in FILTERS:
        raise ValueError(f"unknown lane filter {which!r}")
    lanes: list[str] = []
    held, sampled = 0, False
    for shard in queue.shards:
        found = {"paused": _paused, "throttled": _throttled, "capped": _capped}[which](shard)
        lanes += found.lanes
        held += found.held
        sampled = sampled or found.sampled
    if which != "throttled" or len(queue.shards) > 1:
        lanes.sort()
    return Filtered([lane for lane in lanes if is_lane(lane)], held, sampled)


def _paused(shard: Queue) -> Filtered:
    """The whole paused set when it holds at most :data:`MOST` lanes, else one
    SSCAN step of :data:`MOST`: two round trips (its size, then the read)."""
    key = shard.keys.paused
    held = int(shard.connection.scard(key))
    if held <= MOST:
        return Filtered(sorted(text(m) for m in shard.connection.smembers(key)), held, False)
    names = sorted({text(m) for m in shard.connection.sscan(key, 0, count=MOST)[1]})
    return Filtered(names, held, len(names) < held)


def _throttled(shard: Queue) -> Filtered:
    key = shard.keys.throttled
    pipe = shard.connection.pipeline(transaction=False)
    pipe.zrange(key, 0, MOST - 1)
    pipe.zcard(key)
    names, held = pipe.execute()
    return Filtered([text(m) for m in names], int(held), int(held) > len(names))


def _capped(shard: Queue) -> Filtered:
    """The ceilings (the whole hash when it holds at most :data:`MOST` lanes,
    else one HSCAN step of :data:`MOST`), then the running counts of the lanes
    read (a lane's running count is the size of its active set, one ZCARD each,
    pipelined): three round trips."""
    k = shard.keys
    held = int(shard.connection.hlen(k.ceilings))
    batch: Mapping[Any, Any] = (
        shard.connection.hgetall(k.ceilings)
        if held <= MOST
        else cast("Mapping[Any, Any]", shard.connection.hscan(k.ceilings, 0, count=MOST)[1])
    )
    ceilings = {text(lane): lenient_int(ceiling) for lane, ceiling in batch.items()}
    names = [lane for lane, ceiling in ceilings.items() if ceiling > 0]
    pipe = shard.connection.pipeline(transaction=False)
    for lane in names:
        pipe.zcard(k.lane_active(lane))
    running = pipe.execute() if names else []
    capped = [
        lane
        for lane, count in zip(names, running, strict=True)
        if lenient_int(count) >= ceilings[lane]
    ]
    return Filtered(capped, held, len(batch) < held)
