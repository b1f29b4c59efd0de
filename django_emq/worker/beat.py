"""The worker's periodic duties, once a beat: extend the leases it holds (every
one of them in one pipelined round trip per server), reap expired leases of
dead workers, promote due scheduled jobs, report in (heartbeat), prune the
heartbeats of workers that stopped beating, touch the health file (only while
every call of the beat, and the worker's last claim, reached the server)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from redis.asyncio.cluster import RedisCluster

from ..engine.payload import text
from ..engine.rows import heartbeat, heartbeat_is_stale
from ..engine.runner import AsyncRunner
from ..engine.worker_control import incarnation, parse_stop
from .jobs import Job, extended, extensions
from .outcomes import CALL_ERRORS
from .shard import Shard

logger = logging.getLogger("django_emq.worker")

#: A heartbeat older than this many of its worker's beats is pruned.
PRUNE_AFTER_BEATS = 5


class Beat:
    """One worker's beat over its shards."""

    def __init__(
        self,
        shards: list[Shard],
        worker_id: str,
        lease_ms: int,
        beat_s: float,
        health_file: Path | None,
        counts: Callable[[], tuple[int, int]],
        ticker: Callable[[], object] | None = None,
        about: Callable[[], Mapping[str, Any]] | None = None,
        stop: Callable[[], None] | None = None,
        claiming: Callable[[], bool] = lambda: True,
    ) -> None:
        self.shards = shards
        #: What the heartbeat says of the worker besides its counts (queues,
        #: concurrency, failures, start time: the admin's workers page).
        self._about = about
        self.worker_id = worker_id
        self.lease_ms = lease_ms
        self.beat_s = beat_s
        self.health_file = health_file
        self._counts = counts  # (done, running)
        #: Enqueues the periodic schedules' due ticks (a blocking call, run in a thread).
        self._ticker = ticker
        #: Whether the worker can claim now (its last claim or park reached the server).
        self._claiming = claiming
        self._offset_ms = 0  # server clock minus ours, from the last beat
        self._host = socket.gethostname()
        #: Called once when an operator asked this worker to stop after its
        #: current jobs (its field of the ``stops`` hash, read with the beat).
        self._stop = stop
        self._stop_seen = False

    async def __call__(self, held: Iterable[Job]) -> None:
        """One beat. A call whose server cannot answer is skipped, not the rest:
        on a cluster the nodes that answer get their beat while another fails over."""
        jobs = [job for job in held if not job.settled and not job.lost]
        missed: list[Exception] = []
        for runner, shards in self._by_runner():
            try:
                await self._extend(runner, [j for j in jobs if j.shard in shards])
            except CALL_ERRORS as exc:
                missed.append(exc)
        for shard in self.shards:
            try:
                await shard.reap()
                await shard.promote()
                await self._report(shard)
            except CALL_ERRORS as exc:
                missed.append(exc)
        if self._ticker is not None:
            try:  # each due tick is enqueued by one worker only (django_emq.schedules)
                await asyncio.to_thread(self._ticker)
            except CALL_ERRORS as exc:
                missed.append(exc)
            except Exception:  # a schedule's fault is never the beat's: the rest goes on
                logger.exception("beat: the schedules' tick failed; tried again next beat")
        if missed:  # never fatal: tried again at the next beat
            logger.warning("beat: %s; will retry", missed[0])
        # The health file says the worker works: not while the server is away or
        # refuses it, so a liveness probe sees a worker that cannot claim as stale.
        if self.health_file is not None and not missed and self._claiming():
            self.health_file.touch()

    def _by_runner(self) -> list[tuple[AsyncRunner, list[Shard]]]:
        """Shards that one pipeline may serve: all of them on one server, one
        shard at a time on a cluster."""
        if not self.shards:  # serving any queue, and none registered yet
            return []
        runner = self.shards[0].runner
        if runner.clustered:
            return [(s.runner, [s]) for s in self.shards]
        return [(runner, self.shards)]

    async def _extend(self, runner: AsyncRunner, jobs: list[Job]) -> None:
        """Extend every lease in ``jobs`` in one round trip. A refused extension
        marks the job lost: its lease moved on (it expired and was reaped, or the
        row is gone), so it is not extended again and, waiting, never starts."""
        if not jobs:
            return
        sent = time.monotonic()
        answers = await runner.run_many(extensions(jobs, self.lease_ms))
        lost, error = extended(jobs, answers, sent, self.lease_ms)
        for job in lost:
            logger.warning(
                "job %s: lease expired before it could be extended; another worker "
                "may run it, and this run's outcome will be refused",
                job.job_id,
            )
        if error is not None:
            raise error

    def _incarnation(self) -> str:
        """This process as a stop request names it (its start time and pid)."""
        about = self._about() if self._about is not None else {}
        return incarnation(about.get("started_ms"), os.getpid())

    def _record(self, stopped_ms: int | None = None) -> str:
        done, running = self._counts()
        return heartbeat(
            host=self._host,
            pid=os.getpid(),
            done=done,
            running=running,
            beat_ms=int(time.time() * 1000) + self._offset_ms,
            every_ms=int(self.beat_s * 1000),
            stopped_ms=stopped_ms,
            **(self._about() if self._about is not None else {}),
        )

    async def _report(self, shard: Shard) -> None:
        """Write this worker's heartbeat, read whether it was asked to stop, and
        prune the records of workers that stopped beating (with their stop
        requests); one round trip, a second only when something is pruned."""
        every_ms = int(self.beat_s * 1000)
        client = shard.client
        clustered = isinstance(client, RedisCluster)
        pipe = client.pipeline(transaction=False)
        if not clustered:  # a cluster pipeline takes keyed commands only
            pipe.time()
        pipe.hset(shard.keys.workers, self.worker_id, self._record())
        pipe.hget(shard.keys.stops, self.worker_id)
        pipe.hgetall(shard.keys.workers)
        replies = await pipe.execute()
        seconds, micros = await client.time() if clustered else replies[0]
        asked, beats = replies[-2], replies[-1]
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        self._offset_ms = now_ms - int(time.time() * 1000)
        stale = _stale(beats, now_ms, every_ms)
        if stale:
            pipe = client.pipeline(transaction=False)
            pipe.hdel(shard.keys.workers, *stale)
            pipe.hdel(shard.keys.stops, *stale)
            await pipe.execute()
        if asked is not None and self._stop is not None and not self._stop_seen:
            if not parse_stop(asked).applies_to(self._incarnation()):
                return  # meant for an earlier worker with this id
            self._stop_seen = True
            logger.info("asked to stop from the console: no new claims; finishing running jobs")
            self._stop()

    async def forget(self) -> None:
        """The worker stops: leave a last record saying so (the workers page lists
        it as stopped for ``STOPPED_KEPT_MS``) and drop its stop request."""
        stopped_ms = int(time.time() * 1000) + self._offset_ms
        record = self._record(stopped_ms)
        for shard in self.shards:
            with contextlib.suppress(*CALL_ERRORS):
                pipe = shard.client.pipeline(transaction=False)
                pipe.hset(shard.keys.workers, self.worker_id, record)
                pipe.hdel(shard.keys.stops, self.worker_id)
                await pipe.execute()


def _stale(beats: Mapping[Any, Any], now_ms: int, every_ms: int) -> list[str]:
    return [
        text(w)
        for w, raw in beats.items()
        if heartbeat_is_stale(raw, now_ms, every_ms, PRUNE_AFTER_BEATS)
    ]
