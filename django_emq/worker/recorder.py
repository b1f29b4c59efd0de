"""The recorder: sends the queue history the worker's claims and completions
gathered (each shard's :class:`~django_emq.engine.tally.Tally`) every
:data:`~django_emq.engine.tally.RECORD_EVERY` seconds and once more when the
worker stops, one ``record_history`` script per shard: the claim and complete
scripts write no history, so the server pays for it per batch, not per job."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from ..engine.tally import RECORD_EVERY
from .glitches import Glitches
from .outcomes import CALL_ERRORS
from .shard import Shard

logger = logging.getLogger("django_emq.worker")


class Recorder:
    """Sends ``shards``' tallies, off the hot path."""

    def __init__(self, shards: Sequence[Shard]) -> None:
        self.shards = list(shards)

    async def record(self) -> bool:
        """Send every shard's tally now; False when a server could not take one
        (what it could not take is kept for the next try, and logged)."""
        ok = True
        for shard in self.shards:
            try:
                await shard.record_history()
            except CALL_ERRORS as exc:
                logger.warning("queue %r: history not recorded yet (%s)", shard.name, exc)
                ok = False
        return ok

    async def run(self) -> None:
        """Every ``every`` seconds, send what was gathered (a server that is
        away is tried again the next time)."""
        glitches = Glitches("recording history")
        while True:
            await asyncio.sleep(RECORD_EVERY)
            with glitches:
                await self.record()
