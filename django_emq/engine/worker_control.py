"""Asking a worker to stop after its current jobs, from outside its process
(the admin's workers page).

The request is one field of the queue's ``stops`` hash: worker id -> JSON
``{"at": when it was asked (server ms), "of": the worker's incarnation}``,
written by ``ask_stop.lua`` only for a live worker (a record not stopped,
a beat within :data:`ALIVE_MS`, the window the workers page uses), in the
same step as that check. The incarnation (:func:`incarnation`: the worker's
start time and pid) makes a request outlive nobody: a worker started later
with the same ``--worker-id`` ignores one meant for the worker before it.
The worker reads its own field in the pipeline that writes its heartbeat
(no extra round trip), and winds down as on SIGTERM: no new claims,
running jobs given the grace period, the rest released. Its last heartbeat
record then says it stopped, and it removes the request. A request for a
worker that never reads it (killed meanwhile) is removed by the next live
worker's beat that prunes that worker's record.

:func:`parse_stop` reads a field for both readers, the worker and the
workers page, so they always agree: a value this version did not write (a
hand edit, an older version's plain number) is a request for whichever
worker has that id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import ops
from .payload import text
from .shards import AnyQueue

#: A worker whose last beat is older than this (ms) is silent: the workers
#: page shows it as gone and it is not asked to stop.
ALIVE_MS = 60_000


@dataclass(frozen=True, slots=True)
class StopRequest:
    """A field of the ``stops`` hash read back: when it was asked (``at_ms``,
    None when unreadable) and of which incarnation (``of``; None: any)."""

    at_ms: int | None
    of: str | None

    def applies_to(self, incarnation_of: str) -> bool:
        """Whether the worker of incarnation ``incarnation_of`` is to stop."""
        return self.of is None or self.of == incarnation_of


def incarnation(started_ms: int | None, pid: int | None) -> str:
    """A worker process's incarnation as a stop request names it (what
    ``ask_stop.lua`` builds from its heartbeat record)."""
    return f"{'' if started_ms is None else started_ms}-{'' if pid is None else pid}"


def parse_stop(raw: Any) -> StopRequest:
    """A field of the ``stops`` hash; a value this version did not write is a
    request of any incarnation (a plain number: asked then)."""
    try:
        value = json.loads(text(raw))
    except ValueError:
        return StopRequest(None, None)
    if isinstance(value, int) and not isinstance(value, bool):
        return StopRequest(value, None)
    if isinstance(value, dict) and isinstance(value.get("of"), str):
        at = value.get("at")
        return StopRequest(at if isinstance(at, int) else None, value["of"])
    return StopRequest(None, None)


def ask_to_stop(queue: AnyQueue, worker_id: str) -> bool:
    """Ask worker ``worker_id`` to stop after its current jobs. Written on every
    shard of ``queue`` where a live worker of that id reports (its record not
    stopped, a beat within :data:`ALIVE_MS`), checked and written in one
    script; answers whether any did (False: no live worker of that id here,
    nothing is written). One round trip per shard."""
    asked = False
    for shard in queue.shards:
        asked = shard.runner.run(ops.ask_stop(shard, worker_id, ALIVE_MS)) or asked
    return asked


def stops_asked(queue: AnyQueue) -> dict[str, StopRequest]:
    """Every stop request of ``queue``: worker id -> the request (whether it
    applies to the worker that now has that id: :meth:`StopRequest.applies_to`).
    One round trip per shard."""
    asked: dict[str, StopRequest] = {}
    for shard in queue.shards:
        for worker, raw in shard.connection.hgetall(shard.keys.stops).items():
            asked[text(worker)] = parse_stop(raw)
    return asked
