"""Asking a worker to stop after its current jobs, from outside its process
(the admin's workers page).

The request is one field of the queue's ``stops`` hash: worker id -> when
it was asked (server ms). The worker reads its own field in the pipeline
that writes its heartbeat (no extra round trip), and winds down as on
SIGTERM: no new claims, running jobs given the grace period, the rest
released. Its last heartbeat record then says it stopped, and it removes
the request. A request for a worker that never reads it (killed meanwhile)
is removed by the next live worker's beat that prunes that worker's record.
"""

from __future__ import annotations

from .browse import server_ms
from .payload import text
from .rows import parse_heartbeat
from .shards import AnyQueue


def ask_to_stop(queue: AnyQueue, worker_id: str) -> bool:
    """Ask worker ``worker_id`` to stop after its current jobs. Written on every
    shard of ``queue`` whose workers hash holds a record of that worker that
    is not stopped; answers whether any did (False: no such live worker here,
    nothing is written). One round trip per shard, two where it writes."""
    asked = False
    for shard in queue.shards:
        pipe = shard.connection.pipeline(transaction=False)
        pipe.hget(shard.keys.workers, worker_id)
        pipe.execute_command("TIME")
        raw, clock = pipe.execute()
        if raw is None or parse_heartbeat(worker_id, raw).stopped_ms is not None:
            continue
        shard.connection.hsetnx(shard.keys.stops, worker_id, server_ms(clock))
        asked = True
    return asked


def stops_asked(queue: AnyQueue) -> dict[str, int]:
    """Every pending stop request of ``queue``: worker id -> when it was asked
    (ms). One round trip per shard."""
    asked: dict[str, int] = {}
    for shard in queue.shards:
        for worker, at in shard.connection.hgetall(shard.keys.stops).items():
            try:
                asked[text(worker)] = int(text(at))
            except ValueError:
                asked[text(worker)] = 0  # a value edited by hand: still a request
    return asked
