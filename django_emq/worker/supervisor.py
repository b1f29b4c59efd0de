"""The supervisor: one :class:`Worker` per process. It builds the parts, runs
them on one event loop (the claimer, the outcome flusher, the beat, the
history recorder, the jobs), takes the signals, and winds down: no new
claims, jobs claimed ahead handed back at once, running jobs given the grace
period, then the rest released to the head of their lanes and the last
history sent."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import redis
from django.conf import settings

from ..backend import FairLanesBackend
from ..conf import emq_settings
from ..connection import unsupported_reason, version_from_info
from ..engine.exceptions import unreachable
from ..engine.runner import AsyncRunner
from ..exceptions import UNAVAILABLE, ConfigurationError
from ..schedules import tick
from .beat import Beat
from .claimer import Claimer
from .client import AsyncClient, async_client
from .core import Core
from .execute import Policy
from .glitches import Glitches
from .options import WorkerOptions, plan
from .outcomes import CALL_ERRORS
from .recorder import Recorder
from .self_stop import SelfStop
from .shard import Shard, Shards, rotation
from .stopping import LEFT_BEHIND_AFTER, last_calls, run_bounded, wind_down
from .watchdog import HARD_MARGIN, LoopWatch

logger = logging.getLogger("django_emq.worker")

#: Seconds between the summary lines.
SUMMARY_EVERY = 60.0


class Worker:
    """One worker process over the backend's queues (``options.queues``, or all)."""

    def __init__(self, backend: FairLanesBackend, options: WorkerOptions) -> None:
        self.backend = backend
        self.options = options
        self.plan = plan(options, backend.alias)
        names = list(dict.fromkeys(options.queues)) or backend.served_queues()
        unknown = sorted(set(names) - backend.queues) if backend.queues else []
        if unknown:
            raise ValueError(f"queue(s) {', '.join(unknown)} not in the backend's QUEUES")
        self.queues = [backend.engine(name) for name in names]
        #: ``QUEUES: []`` and no ``--queue``: every beat re-reads the registry and
        #: serves the queues it gained.
        self.discovering = backend.serves_any_queue and not options.queues
        self.worker_id = self.plan.worker_id
        self.policy = Policy(
            backend.alias, self.plan.retry_backoff, self.plan.retry_backoff_max,
            self.plan.max_payload, bool(settings.USE_TZ), self.plan.lease_ms,
        )  # fmt: skip
        self.counts: dict[str, int] = {}
        self._signals_wanted = False
        self._signals = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = False
        self._core: Core | None = None
        self._watch: LoopWatch | None = None
        #: Notes a stop signal a job sent its own worker (see :mod:`.self_stop`).
        self._self_stop = SelfStop()

    # -- lifecycle ---------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        """First SIGTERM/SIGINT: stop claiming and wind down; second: exit now.
        Installed on the loop when :meth:`run` starts, in the main thread only
        (under ``--reload`` the autoreloader owns the signals)."""
        self._signals_wanted = True

    def stop(self) -> None:
        """Wind down, as on SIGTERM (from any thread)."""
        self._stop_requested = True
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # closed: the worker is done
                loop.call_soon_threadsafe(self._stop)

    def run(self) -> int:
        """Work until stopped (or, with ``burst``, until nothing is pending or due)."""
        run_bounded(self._main(), LEFT_BEHIND_AFTER)
        return 0

    def _stop(self) -> None:
        self._stop_requested = True
        core = self._core
        if core is not None and not core.stopping:
            core.stopping = True
            core.changed.set()

    def _on_signal(self, signum: int, frame: Any = None) -> None:
        """The signal handler, run between two bytecodes of the main thread even
        while a coroutine blocks the loop: the first signal arms the watchdog's
        deadline and asks the loop to wind down; a second one exits now."""
        self._signals += 1
        if self._signals > 1:
            logger.warning("second signal: exiting now; unfinished leases will be reaped")
            os._exit(1)
        if self._watch is not None:
            self._watch.stop_by(time.monotonic() + self.plan.grace_s + HARD_MARGIN)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._signalled, signum)

    def _signalled(self, signum: int) -> None:
        if self._self_stop.sent:
            by = self._self_stop.sent_by
            logger.warning(
                "signal %s sent by this worker's own code (thread %s, %s): no new claims; "
                "finishing running jobs; %s still running after the grace %s counted "
                "as an expiry, not released", signum, self._self_stop.sent_from,
                f"job {by}" if by else "no job's", f"job {by} if" if by else "those",
                "is" if by else "are",
            )  # fmt: skip
        else:
            logger.info("signal %s: no new claims; finishing running jobs", signum)
        self._stop()

    # -- the run ----------------------------------------------------------------

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        installed: dict[signal.Signals, Any] = {}
        if self._signals_wanted and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                installed[signum] = signal.signal(signum, self._on_signal)
        p = self.plan
        client = async_client(p.enqueue_timeout, p.enqueue_timeout)
        # Parking blocks longer than the other calls' timeout: a client of its own,
        # whose reads are still bounded (a park lasts at most one beat), so a silent
        # connection (server frozen, peer gone without a reset) cannot block forever.
        parking = async_client(p.beat_s + p.enqueue_timeout, p.enqueue_timeout)
        runner = AsyncRunner(client)
        turns = rotation(
            [_member([Shard(q, runner) for q in queue.shards]) for queue in self.queues]
        )
        core = self._core = Core(p, self.policy)
        if self._stop_requested:
            core.stopping = True
        try:
            with self._self_stop:
                if await self._wait_for_server(client, core):
                    await self._work(core, turns, parking, runner)
        finally:
            self.counts = dict(core.counts)
            for signum, previous in installed.items():
                signal.signal(signum, previous)
            for valkey in (client, parking):
                await valkey.aclose()
        self._summary(core)

    async def _wait_for_server(self, client: AsyncClient, core: Core) -> bool:
        """Check the server's version, backing off while it cannot be reached (a
        worker started during an outage waits for it). False if stopped first."""
        attempt = 0
        while not core.stopping:
            try:
                info: dict[str, Any] = await client.info("server")
            except UNAVAILABLE as exc:
                attempt += 1
                delay = min(self.plan.beat_s, 0.1 * 2**attempt)
                logger.warning("%s; retrying in %.2fs", unreachable(exc), delay)
                await core.wait(delay)
                continue
            except redis.RedisError as exc:  # it answered, and not as Valkey does
                raise ConfigurationError(
                    f"the server did not answer as Valkey does ({exc}): does the URL "
                    "(EMQ['URL'] / EMQ_URL) name a Valkey server's host and port?"
                ) from None
            reason = unsupported_reason(*version_from_info(info))
            if reason is not None:
                raise ConfigurationError(reason)
            return True
        return False

    async def _work(
        self, core: Core, turns: Shards, parking: AsyncClient, runner: AsyncRunner
    ) -> None:
        p = self.plan
        shards = turns.leaves()
        started_ms = int(time.time() * 1000)
        beat = Beat(
            shards, p.worker_id, p.lease_ms, p.beat_s, p.health_file,
            lambda: (core.counts["done"], core.executing),
            ticker=lambda: tick(self.queues, emq_settings().schedules),
            about=lambda: {
                "queues": tuple(q.name for q in self.queues),
                "concurrency": p.concurrency,
                "failed": core.counts["retry"] + core.counts["dead"],
                "started_ms": started_ms,
            },
            stop=self._stop,
            claiming=lambda: not claimer.failing,
        )  # fmt: skip
        claimer = Claimer(core, turns, parking)
        recorder = Recorder(shards)
        grow = (
            partial(self._grow, turns, runner, beat, claimer, recorder)
            if self.discovering
            else None
        )
        served = ", ".join(q.name for q in self.queues)
        if self.discovering:  # QUEUES: []: the registry's queues, and those it gains
            served = f"every queue enqueued to ({served or 'none yet'})"
        logger.info(
            "worker %s on %s, concurrency %d (%d threads for sync tasks), lease %.1fs",
            p.worker_id, served, p.concurrency, p.threads, p.lease_s,
        )  # fmt: skip
        core.threads.start(asyncio.get_running_loop())
        self._watch = watch = LoopWatch(asyncio.get_running_loop(), core)
        watch.start()
        if p.burst:
            await beat(core.held.values())
        duties = [
            asyncio.create_task(self._guard(claimer.run(), core)),
            asyncio.create_task(self._guard(core.outcomes.run(p.beat_s), core)),
            asyncio.create_task(self._guard(self._beats(beat, core, grow), core)),
            asyncio.create_task(self._guard(recorder.run(), core)),
        ]
        self._crash: BaseException | None = None
        try:
            while not self._over(core, claimer):
                await core.wait()
        finally:
            core.stopping = True
            duties[0].cancel()
            margin_end = await wind_down(
                core,
                p.grace_s,
                crashed=self._crash is not None,
                by_a_job=self._self_stop.sent,
                culprit=self._self_stop.sent_by,
                claiming=duties[0],
            )
            for task in duties[1:]:
                task.cancel()
            await asyncio.gather(*duties, return_exceptions=True)
            # the history of the last jobs, and the heartbeat's last record
            await last_calls([recorder.record(), beat.forget()], margin_end)
            await asyncio.to_thread(core.threads.stop)  # off the loop: the watchdog watches it
            watch.close()
            self._watch = None
        if self._crash is not None:
            raise self._crash

    def _over(self, core: Core, claimer: Claimer) -> bool:
        if core.stopping or claimer.drained or self._crash is not None:
            return True
        cap = self.plan.max_jobs
        return cap is not None and core.claimed >= cap and not core.held

    async def _guard(self, coro: Any, core: Core) -> None:
        """Run one of the worker's duties; a bug in it stops the worker (the error
        is raised by :meth:`run` once the worker has wound down)."""
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            logger.exception("worker duty failed; stopping")
            self._crash = exc
            core.stopping = True
            core.changed.set()

    async def _beats(
        self, beat: Beat, core: Core, grow: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        last_summary = time.monotonic()
        glitches = Glitches("beat")
        while True:
            started = time.monotonic()
            with glitches:
                await beat(list(core.held.values()))
                if grow is not None:  # after the beat: the leases are extended first
                    await grow()
            if time.monotonic() - last_summary >= SUMMARY_EVERY:
                last_summary = time.monotonic()
                self._summary(core)
            await asyncio.sleep(max(0.0, self.plan.beat_s - (time.monotonic() - started)))

    def _summary(self, core: Core) -> None:
        logger.info(
            "worker %s: %s, running %d",
            self.worker_id,
            ", ".join(f"{k} {core.counts[k]}" for k in ("done", "retry", "dead", "stale")),
            core.executing,
        )

    async def _grow(
        self, turns: Shards, runner: AsyncRunner, beat: Beat, claimer: Claimer, recorder: Recorder
    ) -> None:
        """Serve the queues the registry gained since the last read (a backend
        with ``QUEUES: []``): each joins the rotation, the claimer's parking,
        the beat and the history recorder."""
        served = {q.name for q in self.queues}
        try:
            names = await asyncio.to_thread(self.backend.served_queues)
        except CALL_ERRORS as exc:  # never fatal, and never the beat's: next beat
            logger.warning("cannot read the queue registry (%s); will retry", exc)
            return
        for name in names:
            if name in served:
                continue
            queue = self.backend.engine(name)
            leaves = [Shard(q, runner) for q in queue.shards]
            turns.add(_member(leaves))
            self.queues.append(queue)
            beat.shards.extend(leaves)
            recorder.shards.extend(leaves)
            claimer.add_shards(leaves)
            logger.info("worker %s: now serving queue %s", self.worker_id, name)


def _member(shards: list[Shard]) -> Shard | Shards:
    """A queue's place in the claim rotation: its one shard, or its shards' own
    rotation."""
    return shards[0] if len(shards) == 1 else rotation(shards)
