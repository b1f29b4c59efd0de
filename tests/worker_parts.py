"""A worker's parts outside a worker process, for tests that stage what its
loop does step by step (on real claims, a real server)."""

from __future__ import annotations

from django_emq.backend import FairLanesBackend
from django_emq.engine.runner import AsyncRunner
from django_emq.worker import WorkerOptions
from django_emq.worker.claimer import Claimer
from django_emq.worker.client import async_client
from django_emq.worker.core import Core
from django_emq.worker.execute import Policy
from django_emq.worker.options import plan
from django_emq.worker.shard import Shard, rotation


def worker_parts(backend: FairLanesBackend, options: WorkerOptions) -> tuple[Core, Claimer, Shard]:
    """A worker's core, claimer and shard (of the queue ``default``) on a fresh
    async client: call it inside the event loop that will use them."""
    client = async_client(1.0, 1.0)
    shard = Shard(backend.queue("default"), AsyncRunner(client))
    core = Core(plan(options, backend.alias), Policy(backend.alias, 0.0, 0.0, 1 << 20))
    return core, Claimer(core, rotation([shard]), client), shard
