"""One plain queue as the worker's event loop sees it (:class:`Shard`), and the
order a worker takes its queues and shards in (:class:`Rotation`).

Every call builds its script's arguments with :mod:`django_emq.calls` and reads
the reply with the engine's own parsers, so the worker and the engine speak
one protocol; only the client differs (``redis.asyncio``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import redis

from ..engine import calls
from ..engine.calls import COMPLETE_CLAIM_OUTCOMES
from ..engine.control import BATCH
from ..engine.payload import text
from ..engine.queue import Queue
from ..engine.records import (
    MAX_WEIGHT,
    Claim,
    error_text,
    fairness_arg,
    parse_claims,
    rate_arg,
    refusals,
)
from ..exceptions import UNAVAILABLE, JobError, check_code
from .client import AsyncClient, AsyncScripts

if TYPE_CHECKING:
    from .outcomes import Outcomes

#: Seconds a shard whose node did not answer is passed over by claims.
HOLD_OFF = 1.0
#: Seconds a queue that had nothing to serve is tried last (after the others).
EMPTY_HOLD = 0.05

#: ``(job_id, token, result JSON as UTF-8)``: one success to record.
Outcome = tuple[str, int, bytes]
#: Jobs a claim took: the shard, the claims, and when the claim was sent (monotonic).
Claimed = tuple["Shard", list[Claim], float]


class Shard:
    """Queue ``queue``'s scripts on the worker's async client."""

    def __init__(self, queue: Queue, scripts: AsyncScripts) -> None:
        self.queue = queue
        self.keys = queue.keys
        self.name = queue.name
        self.scripts = scripts
        self.client: AsyncClient = scripts.client

    def __repr__(self) -> str:
        return f"<Shard {self.name!r}>"

    async def claim(
        self, want: int, lease_ms: int, worker: str, outcomes: Sequence[Outcome] = ()
    ) -> tuple[list[Claim], list[JobError | None]]:
        """Record ``outcomes`` (if any) and claim up to ``want`` jobs (0: none), in
        one script call. Answers the claims and one refusal (or ``None``) per outcome."""
        turns = max(1, min(want, MAX_WEIGHT))
        if not outcomes:
            flat = await self.scripts(
                calls.claim(
                    self.keys,
                    lease_ms,
                    turns,
                    worker,
                    want,
                    self.queue.history,
                    rate_arg(self.queue.rate),
                    fairness_arg(self.queue.fairness),
                )
            )
            return parse_claims(flat), []
        call = calls.complete_claim(
            self.keys,
            outcomes,
            self.queue.result_ttl_ms,
            lease_ms,
            turns,
            worker,
            want,
            self.queue.history,
            rate_arg(self.queue.rate),
            fairness_arg(self.queue.fairness),
        )
        codes, flat = await self.scripts(call)
        return parse_claims(flat), refusals(call.args[COMPLETE_CLAIM_OUTCOMES::3], codes)

    async def retry(self, job_id: str, token: int, error: str, delay_ms: int) -> str:
        reply = await self.scripts(
            calls.retry(
                self.keys, job_id, token, error_text(error), delay_ms, False, self.queue.history
            )
        )
        check_code(reply, job_id)
        return text(reply[1])

    async def fail(self, job_id: str, token: int, error: str) -> None:
        reply = await self.scripts(
            calls.retry(self.keys, job_id, token, error_text(error), 0, True, self.queue.history)
        )
        check_code(reply, job_id)

    async def release(self, job_id: str, token: int) -> None:
        check_code(await self.scripts(calls.release(self.keys, job_id, token)), job_id)

    async def reap(self) -> None:
        call = calls.reap(self.keys, BATCH, self.queue.max_expiries, self.queue.history)
        while len(await self.scripts(call)) == BATCH:
            pass

    async def promote(self) -> int | None:
        """Move due scheduled jobs into their lanes and put rate-limited lanes whose
        slot is due back on the ring; the next due time (ms) or ``None``."""
        while True:
            count, next_due, lanes = await self.scripts(calls.promote(self.keys, BATCH))
            if int(count) < BATCH and int(lanes) < BATCH:
                return None if int(next_due) < 0 else int(next_due)

    async def drained(self) -> bool:
        """Nothing to serve now or soon: no lane on the ring, nothing due (a burst
        run's end check; reaps and promotes first)."""
        await self.reap()
        due = await self.promote()
        if due is not None and due <= time.time() * 1000:
            return False
        if int(await self.client.zcard(self.keys.throttled)):  # rate-limited lanes' jobs wait
            return False
        return int(await self.client.llen(self.keys.ring)) == 0


class Rotation:
    """Claims from several queues (or the shards of one) in turn, starting after
    the one that served last. One with nothing to serve is passed over at once,
    and for :data:`EMPTY_HOLD` seconds after while another has work (so a busy
    worker does not pay a script call per claim for a queue that is empty); one
    whose server cannot answer is passed over for :data:`HOLD_OFF` seconds: the
    others are served meanwhile, and its error is raised only when none could
    answer."""

    def __init__(self, members: Sequence[Shard | Rotation]) -> None:
        self.members = tuple(members)
        self._next = 0
        self._away: dict[int, tuple[float, Exception]] = {}
        #: index -> monotonic time until which it is taken for empty
        self._empty: dict[int, float] = {}

    def shards(self) -> list[Shard]:
        return [s for m in self.members for s in (m.shards() if isinstance(m, Rotation) else [m])]

    async def claim(
        self, want: int, lease_ms: int, worker: str, outcomes: Outcomes | None = None
    ) -> Claimed | None:
        """The next member in turn's claims, with the shard they came from and when
        the claim that took them was sent; ``None`` when none has anything to
        serve. The successes waiting for a shard ride along with its claim
        (``outcomes``: they are settled here)."""
        now = time.monotonic()
        order = [(self._next + step) % len(self.members) for step in range(len(self.members))]
        fresh = [i for i in order if self._empty.get(i, 0.0) <= now]
        held = [i for i in order if i not in fresh]
        answered = False
        for index in fresh + held:  # the ones taken for empty last, if nothing else serves
            away = self._away.get(index)
            if away is not None and away[0] > now:
                continue
            try:
                found = await self._claim_member(index, want, lease_ms, worker, outcomes)
            except UNAVAILABLE as exc:
                if len(self.members) == 1:
                    raise
                self._away[index] = (now + HOLD_OFF, exc)
                continue
            answered = True
            self._away.pop(index, None)
            if found is not None:
                self._empty.pop(index, None)
                self._next = (index + 1) % len(self.members)
                return found
            self._empty[index] = now + EMPTY_HOLD
        if not answered and self._away:
            raise max(self._away.values(), key=lambda away: away[0])[1]
        return None

    async def _claim_member(
        self, index: int, want: int, lease_ms: int, worker: str, outcomes: Outcomes | None
    ) -> Claimed | None:
        member = self.members[index]
        if isinstance(member, Rotation):
            return await member.claim(want, lease_ms, worker, outcomes)
        return await _claim_from(member, want, lease_ms, worker, outcomes)


async def _claim_from(
    shard: Shard, want: int, lease_ms: int, worker: str, outcomes: Outcomes | None
) -> Claimed | None:
    batch = [] if outcomes is None else outcomes.take(shard)
    sent = time.monotonic()  # the leases run from no earlier than this
    try:
        claims, refusals = await shard.claim(want, lease_ms, worker, [s.outcome for s in batch])
    except UNAVAILABLE:
        # Whether they landed is unknown: sent again later (fenced: a second write
        # of a landed outcome is refused, never applied twice).
        if outcomes is not None:
            outcomes.put_back(batch)
        raise
    except redis.ResponseError as exc:  # a script error: these outcomes are refused
        if outcomes is not None:
            outcomes.settled(batch, [exc] * len(batch))
        raise
    except BaseException:  # unknown whether they landed: sent again later (fenced)
        if outcomes is not None:
            outcomes.put_back(batch)
        raise
    if outcomes is not None:
        outcomes.settled(batch, list(refusals))
    return (shard, claims, sent) if claims else None
