"""Outcomes on their way to Valkey.

Successes wait in :class:`Outcomes` (oldest first) until a claim takes them
along (one ``complete_claim`` script: the worker's hot path is one script per
round trip) or, once the oldest has waited :data:`FLUSH_AFTER`, the flusher
sends them. Failures are recorded at once (:meth:`Outcomes.fail`). Every
write is fenced by the job's token, so sending an outcome twice (its reply
was lost) is refused the second time, never applied twice.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from ..engine.records import MAX_BATCH
from ..exceptions import UNAVAILABLE, JobError
from .execute import Failed
from .glitches import Glitches
from .jobs import Job
from .shard import Outcome, Shard

logger = logging.getLogger("django_emq.worker")

#: Longest a success waits for a claim to ride along with before it is sent alone.
FLUSH_AFTER = 0.02
#: How long a worker keeps trying to record an outcome while the server is away.
PERSIST_PATIENCE = 60.0
#: What a call may raise that the worker rides out: a lost server, or a refusal
#: (OOM, READONLY, a script error).
CALL_ERRORS: tuple[type[Exception], ...] = (*UNAVAILABLE, redis.ResponseError)
#: What passes: a lost server, or one that takes no writes for now (over its
#: ``maxmemory`` under ``noeviction``, or a replica a failover has not moved
#: the clients off yet). An outcome refused so is kept and sent again, as while
#: the server is away: the job's work is done, dropping its record would run it
#: a second time once its lease ran out.
PASSING: tuple[type[Exception], ...] = (
    *UNAVAILABLE,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ReadOnlyError,
)

#: Told when outcomes are settled: ``(jobs, refusals)``, one refusal (or
#: ``None``: recorded) per job.
Settle = Callable[[list["Success"], list[Exception | None]], None]


@dataclass(slots=True)
class Success:
    """A job that ran to success, its outcome not recorded yet (its lease is held)."""

    job: Job
    encoded: bytes
    value: Any
    at: float = field(default_factory=time.monotonic)

    @property
    def outcome(self) -> Outcome:
        return (self.job.claim.job_id, self.job.claim.token, self.encoded)


async def persist[T](record: Callable[[], Awaitable[T]], patience: float = PERSIST_PATIENCE) -> T:
    """Run ``record``, riding out a lost server for up to ``patience`` seconds
    (waits grow, with jitter, to at most 2 s): the work is done, losing its
    record would run it again. Safe to repeat: the write is fenced."""
    give_up = time.monotonic() + patience
    attempt = 0
    while True:
        attempt += 1
        try:
            return await record()
        except PASSING as exc:
            if time.monotonic() >= give_up:
                raise
            delay = min(2.0, 0.05 * 2**attempt)
            logger.warning("%s while recording an outcome; retrying", away(exc))
            await asyncio.sleep(random.uniform(delay / 2, delay))


def away(exc: BaseException) -> str:
    """How a passing error reads in the log: refused writes, or no server."""
    if isinstance(exc, redis.ResponseError):
        return f"Valkey takes no writes for now ({exc})"
    return f"Valkey unreachable ({exc})"


class Outcomes:
    """The successes waiting to be recorded, and the recording itself."""

    def __init__(self, settle: Settle, lease_ms: int, worker_id: str) -> None:
        self._settle = settle
        self._lease_ms = lease_ms
        self._worker = worker_id
        self._waiting: list[Success] = []
        self._arrived = asyncio.Event()
        #: Monotonic time before which the flusher does not try again (the server was away).
        self._hold = 0.0
        #: Outcomes taken off the list and not yet settled or put back.
        self.sending = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, success: Success) -> None:
        if not self._waiting:
            self._arrived.set()
        self._waiting.append(success)

    def take(self, shard: Shard | None = None) -> list[Success]:
        """Up to ``MAX_BATCH`` waiting successes, oldest first (of ``shard`` only,
        when given)."""
        if shard is None:
            batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
        else:
            batch = [s for s in self._waiting if s.job.shard is shard][:MAX_BATCH]
            taken = {id(s) for s in batch}
            self._waiting = [s for s in self._waiting if id(s) not in taken]
        self.sending += len(batch)
        return batch

    def put_back(self, batch: list[Success]) -> None:
        """Outcomes the server could not take now: first in line again."""
        self.sending -= len(batch)
        self._waiting[:0] = batch
        if batch:
            self._arrived.set()

    def settled(self, batch: list[Success], refusals: list[Exception | None]) -> None:
        self.sending -= len(batch)
        if batch:
            self._settle(batch, refusals)

    async def record(self, batch: list[Success], patient: bool) -> bool:
        """Record ``batch`` (taken with :meth:`take`), one script per shard.
        ``patient`` rides out a lost server (see :func:`persist`); else what a
        server cannot take now is put back and the answer is False."""
        groups: dict[int, list[Success]] = {}
        for s in batch:
            groups.setdefault(id(s.job.shard), []).append(s)
        ok = True
        for items in groups.values():
            shard = items[0].job.shard
            outcomes = [s.outcome for s in items]

            async def send(shard: Shard = shard, outcomes: list[Outcome] = outcomes) -> Any:
                return await shard.claim(0, self._lease_ms, self._worker, outcomes)

            refusals: list[Exception | None]
            try:
                _, refused = await (persist(send) if patient else send())
                refusals = list(refused)
            except PASSING as exc:
                if not patient:
                    self.put_back(items)
                    logger.warning("%s while recording outcomes; kept", away(exc))
                    ok = False
                    continue
                refusals = [exc] * len(items)
            except redis.ResponseError as exc:  # refused outright (OOM, READONLY, ...)
                refusals = [exc] * len(items)
            except BaseException:  # unknown whether they landed: sent again later (fenced)
                self.put_back(items)
                raise
            self.settled(items, refusals)
        return ok

    async def flush_all(self) -> None:
        """Record everything waiting, patiently (the worker is winding down, or a
        job that may kill it is about to start)."""
        while self._waiting:
            await self.record(self.take(), patient=True)

    async def run(self, beat_s: float) -> None:
        """The flusher: send the successes no claim took within ``FLUSH_AFTER``.
        One try each time, so a lost server never holds the worker up: what it
        cannot take is tried again a moment later (or goes with a claim)."""
        glitches = Glitches("recording outcomes")
        while True:
            if not self._waiting:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            now = time.monotonic()
            wait = max(FLUSH_AFTER - (now - self._waiting[0].at), self._hold - now)
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            ok = False
            with glitches:
                ok = await self.record(self.take(), patient=False)
            if not ok:
                self._hold = time.monotonic() + min(1.0, beat_s)

    async def fail(self, job: Job, failed: Failed) -> str:
        """Record a failure at once: ``retry`` (pending again, or scheduled after
        its back-off), ``dead`` (out of attempts, or it can never run) or
        ``stale`` (the lease moved on: refused)."""
        c = job.claim
        try:
            if failed.delay_ms is None:
                await persist(lambda: job.shard.fail(c.job_id, c.token, failed.error))
                state = "dead"
            else:
                state = await persist(
                    lambda: job.shard.retry(c.job_id, c.token, failed.error, failed.delay_ms or 0)
                )
            if state == "dead":  # its line at ERROR carries the traceback (see .logs)
                job.error = failed.error
                return "dead"
            return "retry"
        except JobError:
            return "stale"
