"""The observability reads of one queue: plain commands, pipelined, each call
one or two round trips whatever the number of lanes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .ids import id_list, is_lane, validate_lane
from .keys import QueueKeys
from .payload import text
from .records import LaneInfo, Totals, as_int, lenient_int, positive_int
from .rows import filled

if TYPE_CHECKING:
    from .client import Client


def _rate(raw: bytes | None) -> tuple[int, float] | None:
    """A rate kept as ``<count>:<per_ms>``, as ``(count, per_seconds)``; ``None``
    when there is none or it is unreadable (a hand edit: read as absent, so it
    never fails a page or a metrics scrape)."""
    count, _, per_ms = text(raw or b"").partition(":")
    if count.isdigit() and per_ms.isdigit():
        return int(count), int(per_ms) / 1000
    return None


def _setting(raw: bytes | None) -> int | None:
    """A lane's numeric setting (ceiling, weight, max depth); ``None`` when it
    has none or it is unreadable (a hand edit, read as absent)."""
    try:
        return None if raw is None else int(raw)
    except ValueError:
        return None


class QueueReads:
    """Depths, totals, the deepest lanes and job rows, for ``Queue``."""

    keys: QueueKeys
    connection: Client

    def depth(self, lane: str) -> int:
        """Pending jobs in ``lane``."""
        return int(self.connection.zcard(self.keys.pending(lane)))

    def totals(self) -> Totals:
        """Queue-wide counts in one round trip, each O(1)."""
        k = self.keys
        pipe = self.connection.pipeline(transaction=False)
        pipe.hget(k.stats, "pending")
        for key in (k.active, k.schedule, k.dead, k.depths):
            pipe.zcard(key)
        pipe.llen(k.ring)
        pipe.zcard(k.throttled)
        pending, active, scheduled, dead, lanes, ring, throttled = pipe.execute()
        return Totals(lenient_int(pending), active, scheduled, dead, lanes, ring, throttled)

    def lanes(self, top: int = 50, offset: int = 0) -> list[LaneInfo]:
        """The ``top`` deepest lanes from ``offset``, deepest first, read from the
        depth index (two round trips, whatever the number of lanes)."""
        positive_int("top", top, 10_000)
        positive_int("offset", offset, minimum=0)
        k = self.keys
        ranked: list[tuple[bytes, float]] = self.connection.zrevrange(  # type: ignore[assignment]
            k.depths, offset, offset + top - 1, withscores=True
        )
        return self._describe([(text(lane), int(depth)) for lane, depth in ranked])

    def lane(self, lane: str) -> LaneInfo:
        """One lane's depth, in-flight count and settings."""
        return self._describe([(validate_lane(lane), self.depth(lane))])[0]

    def lanes_named(self, names: Sequence[str]) -> list[LaneInfo]:
        """The named lanes in the order given, empty ones too (two round trips)."""
        names = [validate_lane(lane) for lane in id_list("names", names)]
        if not names:
            return []
        depths = self.connection.zmscore(self.keys.depths, names)
        return self._describe([(lane, as_int(d)) for lane, d in zip(names, depths, strict=True)])

    def _describe(self, ranked: list[tuple[str, int]]) -> list[LaneInfo]:
        if not ranked:
            return []
        k = self.keys
        names = [lane for lane, _ in ranked]
        pipe = self.connection.pipeline(transaction=False)
        for key in (k.ceilings, k.weights, k.max_depths, k.rates, k.timeshare):
            pipe.hmget(key, names)
        pipe.smismember(k.paused, names)
        pipe.zmscore(k.throttled, names)
        pipe.hmget(k.tenants, names)
        # a lane's in-flight count: its active set's size (a name in the depth
        # index that is no lane id, a damaged keyspace, has no active set: 0)
        counted = [lane for lane in names if is_lane(lane)]
        for lane in counted:
            pipe.zcard(k.lane_active(lane))
        results = pipe.execute()
        ceilings, weights, max_depths, rates, credits, paused, throttled, tenants = results[:8]
        running = dict(zip(counted, results[8:], strict=True))
        inflight = [running.get(lane) for lane in names]
        time_fair = getattr(self, "fairness", "count") == "time"
        return [
            LaneInfo(
                lane,
                depth,
                as_int(inflight[i]),
                _setting(ceilings[i]),
                _setting(weights[i]) or 1,
                bool(paused[i]),
                _setting(max_depths[i]),
                _rate(rates[i]),
                None if throttled[i] is None else int(throttled[i]),
                lenient_int(credits[i]) if time_fair else None,
                None if tenants[i] is None else text(tenants[i]),
            )
            for i, (lane, depth) in enumerate(ranked)
        ]

    def job(self, job_id: str) -> dict[str, str] | None:
        """The job's row as text fields, or ``None`` if there is none (a first
        attempt's unwritten fields filled in, ``rows.filled``)."""
        row = self.connection.hgetall(self.keys.job(job_id))
        return filled({text(f): text(v) for f, v in row.items()}) if row else None
