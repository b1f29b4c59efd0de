"""The worker: ``run_emq_worker`` in small parts, on one asyncio event loop.

- :mod:`.supervisor` — :class:`Worker`: builds the parts, takes the signals,
  winds down (no new claims, jobs claimed ahead handed back at once, running
  jobs given the grace period, the rest released to the head of their lanes).
- :mod:`.claimer` — claims exactly the free slots; successes ride along
  (one ``complete_claim`` script per round trip); parks when idle.
- :mod:`.core` — the execution core: holds each job from claim to recorded
  outcome; coroutine tasks run on the loop, sync tasks on :mod:`.threads`;
  a job whose lease is not surely the worker's any more never starts.
- :mod:`.execute` — runs one task and answers its outcome as a value.
- :mod:`.outcomes` — successes waiting to be recorded, the flusher, failures.
- :mod:`.beat` — lease extension (one pipelined round trip for all held
  leases), reaping, promotion, heartbeat and pruning, the health file.
- :mod:`.shard`, :mod:`.client` — the engine's scripts on ``redis.asyncio``.
"""

from .options import WorkerOptions
from .supervisor import Worker

__all__ = ["Worker", "WorkerOptions"]
