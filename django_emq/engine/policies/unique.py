"""Unique jobs (``docs/unique-jobs.md``): an enqueue with a ``unique_key``
that an unfinished job of the lane holds answers that job instead of adding
one. The enqueue script holds the key (``lua/includes/hold_unique.lua``), a
job's end releases it (``lua/includes/release_unique.lua``). No calls of its
own: ``enqueue``'s ``unique_key`` argument turns it on.
"""

from __future__ import annotations

from .base import Policy, Routed

POLICY = Policy(
    name="unique",
    doc="unique-jobs.md",
    lua=("includes/policies.lua", "includes/hold_unique.lua", "includes/release_unique.lua"),
    keys={"unique": "hash"},
    probe={"unique": "u"},
)


class Calls(Routed):
    """No calls: ``enqueue(..., unique_key=...)``."""
