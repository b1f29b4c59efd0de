"""The queue's history as the scripts keep it (``lua/includes/history.lua``,
written by the enqueue, retry, reap and cancel scripts and, for waits and
finished jobs, by ``lua/record_history-2.lua`` from what :mod:`.tally`
gathers): per-minute counters and wait histograms, the lanes' hourly wait
histograms, read back as series for charts and figures for metrics.

A wait runs from when a job could first run (its enqueue, or its due time
when it was deferred) to its first start. Bucket ``b`` of a wait histogram
holds waits ``w`` (ms) with ``2 ** (b / 2) <= w < 2 ** ((b + 1) / 2)``
(:func:`~.tally.wait_bucket`): log-spaced, so a percentile read from it is
within a factor of 1.42 of the true one, and a histogram has at most
:data:`BUCKETS` fields whatever the waits. Each read is one round trip per
shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .payload import text
from .shards import AnyQueue
from .tally import BUCKETS, HOUR_MS, MINUTE_MS, bucket_upper_ms

#: Counters a minute keeps besides its histogram.
COUNTERS = ("enq", "done", "dead", "cancel", "retry")


def percentile(histogram: Mapping[int, int], fraction: float) -> float | None:
    """The wait (ms, a bucket's upper bound) below which ``fraction`` of the
    histogram's jobs fall; ``None`` for an empty histogram."""
    total = sum(histogram.values())
    if total == 0:
        return None
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= fraction * total:
            return bucket_upper_ms(bucket)
    return bucket_upper_ms(max(histogram))


@dataclass
class Interval:
    """One interval of a series: when it starts (epoch ms), its counters, its
    wait histogram."""

    start_ms: int
    counts: dict[str, int] = field(default_factory=dict)
    waits: dict[int, int] = field(default_factory=dict)

    def add(self, raw: Mapping[str, int]) -> None:
        for name, value in raw.items():
            if name.startswith("w") and name[1:].isdigit():
                self.waits[int(name[1:])] = self.waits.get(int(name[1:]), 0) + value
            else:
                self.counts[name] = self.counts.get(name, 0) + value

    def count(self, name: str) -> int:
        return self.counts.get(name, 0)

    def wait_ms(self, fraction: float) -> float | None:
        return percentile(self.waits, fraction)


def _server_ms(queue: AnyQueue) -> int:
    seconds, micros = queue.shards[0].connection.time()
    return int(seconds) * 1000 + int(micros) // 1000


def series(
    queue: AnyQueue, *, step_minutes: int, count: int, now_ms: int | None = None
) -> list[Interval]:
    """The last ``count`` intervals of ``step_minutes`` minutes each, oldest
    first, the last one holding the current minute (one round trip per shard,
    plus one for the clock when ``now_ms`` is not given)."""
    now_ms = _server_ms(queue) if now_ms is None else now_ms
    last = now_ms // MINUTE_MS
    first = last - step_minutes * count + 1
    intervals = [Interval((first + i * step_minutes) * MINUTE_MS) for i in range(count)]
    for shard in queue.shards:
        pipe = shard.connection.pipeline(transaction=False)
        for minute in range(first, last + 1):
            pipe.hgetall(shard.keys.minute(minute))
        for offset, raw in enumerate(pipe.execute()):
            if raw:
                values = {text(k): int(v) for k, v in raw.items()}
                intervals[offset // step_minutes].add(values)
    return intervals


def lane_waits(
    queue: AnyQueue, lanes: Sequence[str], now_ms: int | None = None
) -> dict[str, dict[int, int]]:
    """Each lane's wait histogram over this hour and the last (one round trip
    per shard holding one of them)."""
    now_ms = _server_ms(queue) if now_ms is None else now_ms
    hour = now_ms // HOUR_MS
    found: dict[str, dict[int, int]] = {lane: {} for lane in lanes}
    for shard in queue.shards:
        mine = [lane for lane in lanes if queue.shard_for_lane(lane) is shard]
        if not mine:
            continue
        fields = [f"{lane}:{b}" for lane in mine for b in range(BUCKETS)]
        pipe = shard.connection.pipeline(transaction=False)
        for h in (hour - 1, hour):
            pipe.hmget(shard.keys.lane_waits(h), fields)
        for values in pipe.execute():
            for name, value in zip(fields, values, strict=True):
                if value is not None:
                    lane, _, b = name.rpartition(":")
                    found[lane][int(b)] = found[lane].get(int(b), 0) + int(value)
    return found


def merged(histograms: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """Histograms added up."""
    total: dict[int, int] = {}
    for histogram in histograms:
        for bucket, n in histogram.items():
            total[bucket] = total.get(bucket, 0) + n
    return total
