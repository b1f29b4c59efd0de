"""Periodic schedules (``docs/schedules.md``): the beat enqueues each
schedule's tick once, however many workers run it; the enqueue script takes
the tick (``lua/includes/take_tick.lua``) in the ``ticks`` hash. The
schedules themselves are the Django layer's (``django_emq/schedules.py``);
no calls of their own on a queue.
"""

from __future__ import annotations

from .base import Policy, Routed

POLICY = Policy(
    name="schedules",
    doc="schedules.md",
    lua=("includes/policies.lua", "includes/take_tick.lua", "includes/last_tick.lua"),
    keys={"ticks": "hash"},
    settings=("SCHEDULES",),
)


class Calls(Routed):
    """No calls: the beat enqueues a schedule's ticks (``JobSpec.tick``)."""
