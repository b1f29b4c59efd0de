"""Where an idle worker waits: a blocking pop on the wake lists of its queues.

On one server a single ``BLPOP`` waits on every wake list at once. On a
Valkey Cluster one ``BLPOP`` may only name keys of one slot (else
``CROSSSLOT``), and the queues (and the shards of a sharded queue) live in
different slots, often on different nodes. So the wake lists are grouped by
slot and, when there is more than one group, the worker waits on each group
in turn for at most :data:`PARK_SLICE` seconds: a job enqueued anywhere wakes
it within about ``PARK_SLICE * (groups - 1)`` seconds, and an idle worker
sends at most ``1 / PARK_SLICE`` pops a second.

Written once for both runners: :func:`park` is handed the ``BLPOP`` to send
(:meth:`django_emq.engine.runner.Steps.park`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.crc import key_slot

from .exceptions import UNAVAILABLE

#: Longest wait on one slot's wake lists while other slots' lists wait their turn.
PARK_SLICE = 0.05
#: Shortest wait passed to ``BLPOP`` (0 would mean "forever").
MIN_WAIT = 0.01

#: Sends ``BLPOP keys timeout``; its reply.
Blpop = Callable[[list[str], float], Awaitable[Any]]


def wake_groups(keys: Sequence[str], clustered: bool) -> list[list[str]]:
    """``keys`` grouped so one ``BLPOP`` may wait on each group: all of them on
    one server, one group per slot on a cluster."""
    if not clustered:
        return [list(keys)]
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault(key_slot(key.encode()), []).append(key)
    return list(groups.values())


async def park(blpop: Blpop, groups: Sequence[Sequence[str]], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for a wake token on any of ``groups``' lists;
    True when one was popped (a job arrived), False when the time ran out.

    A group whose node cannot answer is passed over while the others are
    waited on; its error is raised when no group's node answers.
    """
    if len(groups) == 1:
        return await blpop(list(groups[0]), max(MIN_WAIT, timeout)) is not None
    deadline = time.monotonic() + timeout
    while True:
        failed: list[Exception] = []
        for group in groups:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            wait = max(MIN_WAIT, min(PARK_SLICE, left))
            try:
                if await blpop(list(group), wait) is not None:
                    return True
            except UNAVAILABLE as exc:
                failed.append(exc)
        if len(failed) == len(groups):
            raise failed[0]
