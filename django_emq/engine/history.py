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
shard, except :func:`window_lanes`, which scans the lanes' hashes in up to
:data:`SCAN_STEPS` round trips per shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .ids import is_lane
from .payload import text
from .records import lenient_int
from .shards import AnyQueue
from .tally import BUCKETS, HOUR_MS, MINUTE_MS, bucket_upper_ms

#: Counters a minute keeps besides its histogram.
COUNTERS = ("enq", "done", "dead", "cancel", "retry")


def _bucket(digits: str) -> int | None:
    """The wait bucket ``digits`` names; ``None`` unless it is one."""
    if digits.isascii() and digits.isdigit() and int(digits) < BUCKETS:
        return int(digits)
    return None


def wait_field(name: str) -> int | None:
    """The bucket of a minute hash's wait field ``w<b>``; ``None`` for
    anything else."""
    return _bucket(name[1:]) if name.startswith("w") else None


def lane_field(name: str) -> tuple[str, int] | None:
    """``(lane, bucket)`` of a lane wait hash's field ``<lane>:<b>``; ``None``
    for a field no script writes (a hand edit, skipped)."""
    lane, _, digits = name.rpartition(":")
    bucket = _bucket(digits)
    if bucket is None or not is_lane(lane):
        return None
    return lane, bucket


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


def read_count(value: object) -> int:
    """A count read from the server (a history hash's field, a row's counter):
    0 when it is missing, unreadable or below zero (a hand edit), so one
    damaged field never fails a whole read."""
    return max(0, lenient_int(value))


@dataclass
class Interval:
    """One interval of a series: when it starts (epoch ms), its counters, its
    wait histogram."""

    start_ms: int
    counts: dict[str, int] = field(default_factory=dict)
    waits: dict[int, int] = field(default_factory=dict)

    def add(self, raw: Mapping[str, int]) -> None:
        """Add a minute's fields; a field no script writes (a hand edit) is
        skipped."""
        for name, value in raw.items():
            if name in COUNTERS:
                self.counts[name] = self.counts.get(name, 0) + value
            elif (bucket := wait_field(name)) is not None:
                self.waits[bucket] = self.waits.get(bucket, 0) + value

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
                values = {text(k): read_count(v) for k, v in raw.items()}
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
                    found[lane][int(b)] = found[lane].get(int(b), 0) + read_count(value)
    return found


#: Lanes :func:`window_lanes` picks by most jobs started in the window, and
#: by worst p95 wait (the two lists merged: at most 20 lanes).
HEAVIEST_LANES = 10
WORST_LANES = 10
#: Fields one ``HSCAN`` step of a lane wait hash asks for, and the most steps
#: per hash: at most about 20,000 ``<lane>:<bucket>`` fields are read per
#: hour, shard and view (a small hash, kept as a listpack, answers whole in
#: one step).
SCAN_COUNT = 10_000
SCAN_STEPS = 2


@dataclass
class LaneWait:
    """One lane over the window: jobs it started, their wait histogram."""

    lane: str
    started: int
    waits: dict[int, int]

    def p95_ms(self) -> float | None:
        return percentile(self.waits, 0.95)


@dataclass
class LaneWindow:
    """The lanes :func:`window_lanes` picked, worst p95 first, and how much of
    the window's lane wait hashes it read (``fields_read < fields_total``:
    the scan stopped at its bound, and lanes in the unread part were not
    considered)."""

    lanes: list[LaneWait]
    fields_read: int
    fields_total: int

    @property
    def partial(self) -> bool:
        return self.fields_read < self.fields_total


def _scan_window(queue: AnyQueue, now_ms: int) -> tuple[dict[str, dict[int, int]], int, int]:
    """Every lane's histogram over this hour and the last, read by ``HSCAN``
    steps (both hours' steps and, with the first, their sizes in one pipeline
    per shard: at most :data:`SCAN_STEPS` round trips per shard), and the
    fields read and held."""
    hour = now_ms // HOUR_MS
    found: dict[str, dict[int, int]] = {}
    read = total = 0
    for shard in queue.shards:
        keys = [shard.keys.lane_waits(h) for h in (hour - 1, hour)]
        cursors = dict.fromkeys(keys, 0)
        for step in range(SCAN_STEPS):
            pipe = shard.connection.pipeline(transaction=False)
            if step == 0:  # the sizes ride with the first step
                for key in keys:
                    pipe.hlen(key)
            for key, cursor in cursors.items():
                pipe.hscan(key, cursor, count=SCAN_COUNT)
            replies = pipe.execute()
            if step == 0:
                total += sum(int(n) for n in replies[: len(keys)])
                replies = replies[len(keys) :]
            for key, (cursor, fields) in zip(list(cursors), replies, strict=True):
                for name, value in fields.items():
                    parsed = lane_field(text(name))
                    if parsed is not None:  # a field no script writes is skipped
                        lane, bucket = parsed
                        histogram = found.setdefault(lane, {})
                        histogram[bucket] = histogram.get(bucket, 0) + read_count(value)
                read += len(fields)
                cursors[key] = int(cursor)
            cursors = {key: cursor for key, cursor in cursors.items() if cursor != 0}
            if not cursors:
                break
    return found, read, total


def chosen(
    histograms: Mapping[str, Mapping[int, int]],
    heaviest: int = HEAVIEST_LANES,
    worst: int = WORST_LANES,
) -> list[LaneWait]:
    """The ``heaviest`` lanes by jobs started and the ``worst`` by p95 wait
    (ties: more jobs, then the lane id), together, worst p95 first: a flood
    lane beside the light lanes that waited longest, whichever is deeper now."""
    lanes = [LaneWait(lane, sum(h.values()), dict(h)) for lane, h in histograms.items()]
    lanes = [lane for lane in lanes if lane.started > 0]
    by_load = sorted(lanes, key=lambda w: (-w.started, w.lane))[:heaviest]
    by_wait = sorted(lanes, key=lambda w: (-(w.p95_ms() or 0.0), -w.started, w.lane))[:worst]
    picked = {w.lane: w for w in by_load + by_wait}
    return sorted(picked.values(), key=lambda w: (-(w.p95_ms() or 0.0), -w.started, w.lane))


def window_lanes(queue: AnyQueue, now_ms: int | None = None) -> LaneWindow:
    """The lanes the fairness chart and ``emq_lane_wait_p95_seconds`` show:
    over this hour and the last (the lane wait hashes' window), :func:`chosen`
    from every lane that started a job, read in bounded work
    (:data:`SCAN_STEPS` steps of :data:`SCAN_COUNT` fields per hash and
    shard, one round trip per step and shard: usually one while each hash
    holds under :data:`SCAN_COUNT` fields)."""
    now_ms = _server_ms(queue) if now_ms is None else now_ms
    found, read, total = _scan_window(queue, now_ms)
    return LaneWindow(chosen(found), read, total)


def merged(histograms: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """Histograms added up."""
    total: dict[int, int] = {}
    for histogram in histograms:
        for bucket, n in histogram.items():
            total[bucket] = total.get(bucket, 0) + n
    return total
