"""The claimer: asks for exactly the free slots, whenever some are free. On a
worker serving one plain queue, the successes waiting ride along with the
claim (one ``complete_claim`` script per round trip). With nothing to claim,
it parks on the queues' wake lists (a blocking pop, at most one beat), or, in
a burst run, checks whether anything is pending or due at all."""

from __future__ import annotations

import asyncio
import logging
import random

import redis

from ..exceptions import UNAVAILABLE
from .client import AsyncClient, park, wake_groups
from .core import Core
from .glitches import Glitches
from .outcomes import CALL_ERRORS
from .shard import Rotation

logger = logging.getLogger("django_emq.worker")


class Claimer:
    def __init__(self, core: Core, rotation: Rotation, park_client: AsyncClient) -> None:
        self.core = core
        self.plan = core.plan
        self.rotation = rotation
        self.shards = rotation.shards()
        self._park = park_client
        self._wake = wake_groups(park_client, [s.keys.wake for s in self.shards])
        self._outage = 0
        #: A burst run found nothing pending or due, with nothing held.
        self.drained = False

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
            found = await self.rotation.claim(want, plan.lease_ms, plan.worker_id, core.outcomes)
        except CALL_ERRORS as exc:
            await self.lost_server(exc)
            return None
        self._outage = 0
        if found is None:
            return False
        core.register(*found)
        return True

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
        try:
            await park(self._park, self._wake, self.plan.beat_s)
        except UNAVAILABLE as exc:
            logger.warning("lost Valkey while parked (%s); retrying", exc)
            await asyncio.sleep(min(self.plan.beat_s, 1.0))

    async def lost_server(self, exc: Exception) -> None:
        """Back off (exponentially, with jitter, never longer than a beat) before
        the next try."""
        self._outage += 1
        cap = min(5.0, self.plan.beat_s)
        delay = random.uniform(0, min(cap, 0.1 * 2 ** max(0, self._outage - 1))) + 0.05
        if isinstance(exc, redis.ResponseError):
            logger.error("the server refused a claim (%s); retrying in %.2fs", exc, delay)
        else:
            logger.warning("Valkey unreachable (%s); retrying in %.2fs", exc, delay)
        await asyncio.sleep(delay)
