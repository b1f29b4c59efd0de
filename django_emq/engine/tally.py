"""The queue's history as its callers gather it: each first start's wait and
each finished job, added up off the hot path and sent in one call
(``lua/record_history-2.lua``).

The claim and complete scripts write no history: measured, it was 13 % of the
server's time per job, and adding it up per call inside Lua saves almost
nothing (a call's jobs are of distinct lanes). Their replies say what the
history needs instead: a claim answers each job's attempt number (``1``: its
first start), its enqueue time and its start (both server ms), a complete
answers which jobs it recorded. A :class:`Tally` adds those up (the waits
bucketed here, not on the server) and :func:`record_calls` turns it into as
few calls as its size allows. A worker sends its tally every
:data:`RECORD_EVERY` seconds and when it stops; the Python API
(:class:`~django_emq.engine.queue.Queue`) sends one after each of its claims
and completions, so what the console shows is the same either way.

A job deferred with ``run_after`` waits from when it became due, not from its
enqueue: the promote script keeps a never-started job's due time
(``QueueKeys.due_at``) and the record call moves such a job's wait to the
bucket of ``start - due`` (the tally cannot know which jobs were deferred).

Waits are bucketed in :data:`BUCKETS` log-spaced buckets: bucket ``b`` holds
waits ``w`` (ms) with ``2 ** (b / 2) <= w < 2 ** ((b + 1) / 2)``, waits under
1 ms in bucket 0 (the same as ``lua/includes/wait_bucket.lua``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .calls import Call
from .keys import QueueKeys
from .records import Claim

#: Buckets of a wait histogram (the scripts' MAX_BUCKET + 1).
BUCKETS = 64
MINUTE_MS = 60_000
HOUR_MS = 3_600_000
#: Seconds between a worker's record calls (each sends what it gathered).
RECORD_EVERY = 0.25
#: Most entries of one kind (finished ids, first starts, counts) in one call:
#: the script spreads them with ``unpack``, which takes a bounded number.
MOST_PER_CALL = 1_000


def wait_bucket(wait_ms: int) -> int:
    """The bucket of a wait of ``wait_ms`` ms."""
    if wait_ms < 1:
        return 0
    return min(BUCKETS - 1, math.floor(2 * math.log(wait_ms) / math.log(2)))


def bucket_upper_ms(bucket: int) -> float:
    """The upper bound (ms) of wait bucket ``bucket``."""
    return float(2.0 ** ((bucket + 1) / 2))


#: One first start, as the record call reads it: job id, lane, start (server
#: ms), the bucket of its wait from its enqueue.
FirstStart = tuple[str, str, int, int]


@dataclass
class Tally:
    """Waits and finished jobs gathered for one queue, not sent yet (added up
    by :func:`record_calls` when they are sent)."""

    #: Jobs recorded done, oldest first.
    finished: list[str] = field(default_factory=list)
    #: First starts, oldest first.
    firsts: list[FirstStart] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.finished or self.firsts)

    def claimed(self, claims: Iterable[Claim]) -> None:
        """Note the jobs among ``claims`` that start for the first time (attempt
        1: the attempts counter never goes back, not on a release, a reaped
        lease or a dead job retried) with the bucket of their wait."""
        for claim in claims:
            if claim.token != 1 or claim.started_ms <= 0:
                continue
            start = claim.started_ms
            bucket = wait_bucket(start - (claim.enqueued_ms or start))
            self.firsts.append((claim.job_id, claim.lane, start, bucket))

    def completed(self, job_ids: Iterable[str]) -> None:
        """Note jobs a complete call recorded as done."""
        self.finished.extend(job_ids)

    def take(self) -> Tally:
        """What was gathered, leaving this tally empty."""
        taken = Tally(self.finished, self.firsts)
        self.finished, self.firsts = [], []
        return taken

    def put_back(self, taken: Tally) -> None:
        """What a record call could not send (the server was away), to send later."""
        self.finished[:0] = taken.finished
        self.firsts[:0] = taken.firsts


def recorded(job_ids: Sequence[object], refusals: Sequence[object]) -> list[str]:
    """The ids of the outcomes a complete call recorded: those it refused nothing."""
    return [str(j) for j, refusal in zip(job_ids, refusals, strict=True) if refusal is None]


def record_calls(keys: QueueKeys, tally: Tally) -> list[Call]:
    """The record calls that send ``tally``, its waits added up per minute and
    bucket and per hour, lane and bucket: one call, unless it holds more than
    :data:`MOST_PER_CALL` finished jobs or first starts (none when it is empty).
    A first start goes in the call that carries its counts (the call moves a
    deferred one's)."""
    built = []
    finished, firsts = tally.finished, tally.firsts
    for i in range(0, max(len(finished), len(firsts)), MOST_PER_CALL):
        part = firsts[i : i + MOST_PER_CALL]
        waits = Counter((start // MINUTE_MS, bucket) for _, _, start, bucket in part)
        lanes = Counter((start // HOUR_MS, f"{lane}:{bucket}") for _, lane, start, bucket in part)
        built.append(
            record_history(
                keys,
                finished[i : i + MOST_PER_CALL],
                sorted(waits.items()),
                sorted(lanes.items()),
                part,
            )
        )
    return built


def record_history(
    k: QueueKeys,
    finished: Sequence[str],
    waits: Sequence[tuple[tuple[int, int], int]],
    lane_waits: Sequence[tuple[tuple[int, str], int]],
    firsts: Sequence[tuple[str, str, int, int]],
) -> Call:
    """Add to the queue's history (``lua/record_history-2.lua``): ``finished``
    job ids (done now), ``((minute, bucket), count)`` waits, ``((hour,
    "<lane>:<bucket>"), count)`` lane waits, and the ``(id, lane, start_ms,
    bucket)`` first starts they count. Built here rather than in :mod:`.calls`
    (which builds the other scripts' calls) beside the tally it sends."""
    args: list[str | int | bytes] = [k.prefix, len(finished), *finished, len(waits)]
    for (minute, bucket), n in waits:
        args += (minute, bucket, n)
    hours: dict[int, list[tuple[str, int]]] = {}
    for (hour, name), n in lane_waits:
        hours.setdefault(hour, []).append((name, n))
    args.append(len(hours))
    for hour, counts in hours.items():
        # the fields counted more than once first, then their counts: a field
        # counted once (most) is one argument
        counts.sort(key=lambda count: count[1] == 1)
        more = [n for _, n in counts if n != 1]
        args += (hour, len(counts), len(more), *(name for name, _ in counts), *more)
    # one argument for all of them: the script reads them only when a queue
    # defers jobs, and one string costs the server less than one per job
    args += (len(firsts), ",".join(" ".join(map(str, first)) for first in firsts))
    return Call("record_history", [k.finished, k.due_at], args)
