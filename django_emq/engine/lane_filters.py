"""The lanes held back from the ring, for the operator's lane list: the paused
lanes, the throttled ones (rate-limited, waiting for their next start), and
the capped ones (at their concurrency ceiling).

Each is read from its own index, never by visiting every lane: the paused
set, the throttled sorted set, the ceilings hash (with the running counts of
the lanes found there). One scan step of :data:`MOST` entries is read per
shard (a set or hash that small is read whole), at most two round trips
whatever the number of lanes; :class:`Filtered` says whether the
index held more than were read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .ids import is_lane
from .payload import text
from .queue import Queue
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
    """One SSCAN step of :data:`MOST` (a set that small is read whole) and the
    set's size, in one round trip."""
    key = shard.keys.paused
    pipe = shard.connection.pipeline(transaction=False)
    pipe.sscan(key, 0, count=MOST)
    pipe.scard(key)
    (cursor, batch), held = pipe.execute()
    names = sorted({text(m) for m in batch})
    return Filtered(names, int(held), int(cursor) != 0)


def _throttled(shard: Queue) -> Filtered:
    key = shard.keys.throttled
    pipe = shard.connection.pipeline(transaction=False)
    pipe.zrange(key, 0, MOST - 1)
    pipe.zcard(key)
    names, held = pipe.execute()
    return Filtered([text(m) for m in names], int(held), int(held) > len(names))


def _capped(shard: Queue) -> Filtered:
    """One HSCAN step of :data:`MOST` over the ceilings and the hash's size,
    then the running counts of the lanes read: two round trips."""
    k = shard.keys
    pipe = shard.connection.pipeline(transaction=False)
    pipe.hscan(k.ceilings, 0, count=MOST)
    pipe.hlen(k.ceilings)
    (cursor, batch), held = pipe.execute()
    ceilings = {text(lane): _count(ceiling) for lane, ceiling in batch.items()}
    names = [lane for lane, ceiling in ceilings.items() if ceiling > 0]
    running = shard.connection.hmget(k.inflight, names) if names else []
    capped = [
        lane for lane, count in zip(names, running, strict=True) if _count(count) >= ceilings[lane]
    ]
    return Filtered(capped, int(held), int(cursor) != 0)


def _count(raw: object) -> int:
    """A count read from a hash (0 when absent or unreadable: a hand edit)."""
    try:
        return int(text(raw)) if raw is not None else 0
    except ValueError:
        return 0
