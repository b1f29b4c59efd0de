"""Weights and ceilings (``docs/concepts.md``): a lane with weight w is served
up to w jobs per turn of the ring; a lane at its concurrency ceiling leaves
the ring until one of its jobs finishes. The claim's turn
(``lua/includes/claim_turns.lua``) reads both; ``lua/includes/serviceable.lua``
decides whether a lane may be on the ring. Here: the operator's writes, each
one script on the lane's home queue.
"""

from __future__ import annotations

from .. import ops
from ..ids import validate_lane
from ..records import MAX_CEILING, MAX_WEIGHT, positive_int
from .base import Policy, Routed

POLICY = Policy(
    name="weights",
    doc="concepts.md#weights",
    lua=("includes/serviceable.lua", "set_weight-1.lua", "set_limit-7.lua"),
    keys={"weights": "hash", "ceilings": "hash", "turn": "hash"},
    probe={"weights": "w", "ceilings": "c", "turn": "n"},
    per_lane=("weights", "ceilings"),
    names_lanes=("ceilings", "weights"),
)


class Calls(Routed):
    """``set_limit`` and ``set_weight``, for ``Queue`` and ``ShardedQueue``."""

    def set_limit(self, lane: str, ceiling: int | None) -> None:
        """Set the lane's concurrency ceiling (``None`` removes it)."""
        if ceiling is not None:
            positive_int("ceiling", ceiling, MAX_CEILING)
        home = self.shard_for_lane(validate_lane(lane))
        home.runner.run(ops.set_limit(home, lane, ceiling))

    def set_weight(self, lane: str, weight: int) -> None:
        """Serve up to ``weight`` of the lane's jobs per turn (1 is the default)."""
        positive_int("weight", weight, MAX_WEIGHT)
        home = self.shard_for_lane(validate_lane(lane))
        home.runner.run(ops.set_weight(home, lane, weight))
