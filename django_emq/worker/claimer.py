"""The claimer: asks for exactly the free slots, whenever some are free. On a
worker serving one plain queue, the successes waiting ride along with the
claim (one ``complete_claim`` script per round trip). With nothing to claim,
it parks on the queues' wake lists (a blocking pop, at most one beat), or, in
a burst run, checks whether anything is pending or due at all."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from functools import partial

import redis

from ..engine.exceptions import unreachable
from ..engine.records import Claim
from ..engine.rotation import Rotation
from ..engine.runner import AsyncRunner
from ..exceptions import UNAVAILABLE
from .client import AsyncClient
from .core import Core
from .glitches import Glitches
from .outcomes import CALL_ERRORS, PASSING, Outcomes, away
from .shard import Shard, Shards
from .stopping import hand_back

logger = logging.getLogger("django_emq.worker")

#: Jobs a claim took: the shard, the claims, and when the claim was sent (monotonic).
Claimed = tuple[Shard, list[Claim], float]


class Claimer:
    def __init__(self, core: Core, rotation: Shards, park_client: AsyncClient) -> None:
        self.core = core
        self.plan = core.plan
        self.rotation = rotation
        self.shards: list[Shard] = rotation.leaves()
        self._parking = AsyncRunner(park_client)
        self._wake = self._parking.wake_groups([s.keys.wake for s in self.shards])
        self._outage = 0
        #: A burst run found nothing pending or due, with nothing held.
        self.drained = False
        #: The last claim (or park) failed: the server is away or refuses the
        #: worker. The health file is not touched meanwhile (see :class:`.beat.Beat`).
        self.failing = False

    def add_shards(self, shards: list[Shard]) -> None:
        """Serve ``shards`` too (already in the rotation): park on their wake lists."""
        self.shards = [*self.shards, *shards]
        self._wake = self._parking.wake_groups([s.keys.wake for s in self.shards])

    async def run(self) -> None:
        core = self.core
        glitches = Glitches("claim")
        while not core.stopping and not self.drained:
            want = core.want()
            if want == 0:
                await core.wait()
                continue
            got: bool | None = None
            with glitches:
                got = await self._claim(want)
            if glitches.in_a_row:
                await asyncio.sleep(min(1.0, 0.05 * glitches.in_a_row))
            if got is False:  # None: the server refused or was away (backed off)
                await self._nothing_to_claim()

    async def _claim(self, want: int) -> bool | None:
        """Claim up to ``want`` jobs (the successes waiting ride along): whether any
        came, ``None`` when the server refused or could not answer."""
        core, plan = self.core, self.plan
        try:
            found = await claim_in_turn(
                self.rotation, want, plan.lease_ms, plan.worker_id, core.outcomes, self._late
            )
        except CALL_ERRORS as exc:
            await self.lost_server(exc)
            return None
        self._outage = 0
        self.failing = False
        if found is None:
            return False
        core.register(*found)
        return True

    def _late(self, asked: asyncio.Future[Claimed | None]) -> None:
        """The worker stops while a claim is in flight: its answer is waited for
        among the worker's tasks (the wind-down waits for them, within its
        margin), and the jobs it took are released at once."""
        self.core.tasks.spawn(self._hand_back(asked))

    async def _hand_back(self, asked: asyncio.Future[Claimed | None]) -> None:
        try:
            found = await asked  # the outcomes riding along are settled by then
        except CALL_ERRORS:  # no answer: what it took is left to the leases
            return
        if found is not None:
            hand_back(self.core, *found)

    async def _nothing_to_claim(self) -> None:
        if not self.plan.burst:
            await self._park_until_woken()
            return
        core = self.core
        if core.held or len(core.outcomes) or core.outcomes.sending:
            await core.wait(0.1)
            return
        try:
            drained = all([await shard.drained() for shard in self.shards])
        except CALL_ERRORS as exc:  # the server went away: not drained, try again
            await self.lost_server(exc)
            return
        if drained:
            self.drained = True
            core.changed.set()
        else:
            await asyncio.sleep(0.1)

    async def _park_until_woken(self) -> None:
        if not self.shards:  # serving any queue, and none registered yet
            await asyncio.sleep(self.plan.beat_s)
            return
        try:
            await self._parking.park(self._wake, self.plan.beat_s)
        except UNAVAILABLE as exc:
            self.failing = True
            logger.warning("while parked: %s; retrying", unreachable(exc))
            await asyncio.sleep(min(self.plan.beat_s, 1.0))

    async def lost_server(self, exc: Exception) -> None:
        """Back off (exponentially, with jitter, never longer than a beat) before
        the next try."""
        self._outage += 1
        self.failing = True
        cap = min(5.0, self.plan.beat_s)
        delay = random.uniform(0, min(cap, 0.1 * 2 ** max(0, self._outage - 1))) + 0.05
        if isinstance(exc, PASSING) and isinstance(exc, redis.ResponseError):
            logger.warning("%s; retrying in %.2fs", away(exc), delay)
        elif isinstance(exc, redis.ResponseError):
            logger.error("the server refused a claim (%s); retrying in %.2fs", exc, delay)
        else:
            logger.warning("%s; retrying in %.2fs", unreachable(exc), delay)
        await asyncio.sleep(delay)


#: Handed a claim in flight when the claimer was cancelled (the worker stops):
#: its answer is awaited elsewhere, and the jobs it took handed back.
Late = Callable[["asyncio.Future[Claimed | None]"], None]


async def claim_in_turn(
    rotation: Shards,
    want: int,
    lease_ms: int,
    worker: str,
    outcomes: Outcomes | None = None,
    late: Late | None = None,
) -> Claimed | None:
    """The next queue (or shard) in turn's claims, with the shard they came from
    and when the claim that took them was sent; ``None`` when none has anything
    to serve. The successes waiting for a shard ride along with its claim
    (``outcomes``: they are settled here). Cancelled while a claim is in flight,
    the claim goes on, shielded, and is handed to ``late`` (without ``late``, it
    is cancelled too: whether it landed is unknown)."""
    ask = partial(
        _claim_from, want=want, lease_ms=lease_ms, worker=worker, outcomes=outcomes, late=late
    )
    return await rotation.turn(ask)


async def _claim_from(
    member: Shard | Shards,
    want: int,
    lease_ms: int,
    worker: str,
    outcomes: Outcomes | None,
    late: Late | None,
) -> Claimed | None:
    if isinstance(member, Rotation):
        return await claim_in_turn(member, want, lease_ms, worker, outcomes, late)
    asked = asyncio.ensure_future(_ask(member, want, lease_ms, worker, outcomes))
    try:
        return await asyncio.shield(asked)
    except asyncio.CancelledError:
        if late is None:
            asked.cancel()
        else:  # the server may have handed jobs out already: not abandoned
            late(asked)
        raise


async def _ask(
    member: Shard, want: int, lease_ms: int, worker: str, outcomes: Outcomes | None
) -> Claimed | None:
    batch = [] if outcomes is None else outcomes.take(member)
    sent = time.monotonic()  # the leases run from no earlier than this
    try:
        claims, refusals = await member.claim(want, lease_ms, worker, [s.outcome for s in batch])
    except PASSING:
        # Whether they landed is unknown (or the server took no writes for now):
        # sent again later (fenced: a second write of a landed outcome is
        # refused, never applied twice).
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
    return (member, claims, sent) if claims else None
