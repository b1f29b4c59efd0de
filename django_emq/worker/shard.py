"""One plain queue as the worker's event loop sees it (:class:`Shard`): the
engine's operations (:mod:`django_emq.engine.ops`) on the worker's async
runner, so the worker and the API run one protocol the same way; only the
client differs (``redis.asyncio``). The order a worker takes its queues and
shards in is the engine's :class:`~django_emq.engine.rotation.Rotation`
(:func:`rotation`)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..engine import ops
from ..engine.ops import ClaimedWith
from ..engine.queue import Queue
from ..engine.records import MAX_WEIGHT, error_text
from ..engine.rotation import Rotation
from ..engine.runner import AsyncRunner
from ..engine.tally import Tally, recorded
from .client import AsyncClient

#: Seconds a queue that had nothing to serve is tried last (after the others).
EMPTY_HOLD = 0.05

#: ``(job_id, token, result JSON as UTF-8)``: one success to record.
Outcome = tuple[str, int, bytes]

#: A worker's queues in turn, each a shard or (sharded) the rotation of its shards.
type Shards = Rotation[Shard | Shards]


def rotation(members: Sequence[Shard | Shards]) -> Shards:
    """``members`` in turn; one that had nothing to serve is tried last for
    :data:`EMPTY_HOLD` seconds (a busy worker pays no script call per claim
    for a queue that is empty)."""
    return Rotation(members, empty_hold=EMPTY_HOLD)


class Shard:
    """Queue ``queue``'s operations on the worker's async ``runner``."""

    def __init__(self, queue: Queue, runner: AsyncRunner) -> None:
        self.queue = queue
        self.keys = queue.keys
        self.name = queue.name
        self.runner = runner
        self.client: AsyncClient = runner.client
        #: The waits and finished jobs of this shard's claims and completions, not
        #: sent yet (a :class:`~.recorder.Recorder` sends them, off the hot path).
        self.tally = Tally()

    def __repr__(self) -> str:
        return f"<Shard {self.name!r}>"

    async def claim(
        self, want: int, lease_ms: int, worker: str, outcomes: Sequence[Outcome] = ()
    ) -> ClaimedWith:
        """Record ``outcomes`` (if any) and claim up to ``want`` jobs (0: none), in
        one script call. Answers the claims and one refusal (or ``None``) per outcome."""
        turns = max(1, min(want, MAX_WEIGHT))
        if not outcomes:
            claims = await self.runner.run(ops.claim(self.queue, lease_ms, turns, worker, want))
            self.tally.claimed(claims)
            return claims, []
        op = ops.complete_claim(self.queue, outcomes, lease_ms, turns, worker, want)
        claims, refusals = await self.runner.run(op)
        self.tally.claimed(claims)
        self.tally.completed(recorded([o[0] for o in outcomes], refusals))
        return claims, refusals

    async def record_history(self) -> None:
        """Send the waits and finished jobs gathered since the last call, in one
        round trip (nothing when there are none). What the server could not take
        is kept for the next call, and the error raised."""
        if not self.tally:  # most rounds of an idle worker: nothing to build
            return
        taken = self.tally.take()
        record = ops.record_history(self.queue, taken)
        if not record:
            return
        try:
            answers = await self.runner.run_many(record)
        except BaseException:
            self.tally.put_back(taken)
            raise
        for answer in answers:
            if isinstance(answer, Exception):  # a script error: sending it again cannot help
                raise answer

    async def retry(self, job_id: str, token: int, error: str, delay_ms: int) -> str:
        return await self.runner.run(
            ops.retry(self.queue, job_id, token, error_text(error), delay_ms)
        )

    async def fail(self, job_id: str, token: int, error: str) -> None:
        await self.runner.run(ops.fail(self.queue, job_id, token, error_text(error)))

    async def release(self, job_id: str, token: int) -> None:
        await self.runner.run(ops.release(self.queue, job_id, token))

    async def reap(self) -> None:
        await self.runner.run_all(ops.reap(self.queue))

    async def promote(self) -> int | None:
        """Move due scheduled jobs into their lanes and put rate-limited lanes whose
        slot is due back on the ring; the next due time (ms) or ``None``."""
        return ops.promoted(await self.runner.run_all(ops.promote(self.queue)))[1]

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
