"""Max lane depth (``docs/max-depth.md``): backpressure on enqueue. A lane
holding its max depth of pending jobs refuses the next enqueue
(``LaneFull``); the check runs in the enqueue script
(``lua/includes/lane_full.lua``). Here: the operator's write, one script on
the lane's home queue.
"""

from __future__ import annotations

from .. import ops
from ..ids import validate_lane
from ..records import MAX_DEPTH_LIMIT, positive_int
from .base import Policy, QueueOption, Routed

POLICY = Policy(
    name="max_depth",
    doc="max-depth.md",
    lua=("includes/policies.lua", "includes/lane_full.lua", "set_max_depth-1.lua"),
    keys={"max_depths": "hash"},
    probe={"max_depths": "d"},
    per_lane=("max_depths",),
    names_lanes=("max_depths",),
    settings=("MAX_DEPTH",),
    options=(QueueOption("max_depth", "MAX_DEPTH"),),
)


class Calls(Routed):
    """``set_max_depth``, for ``Queue`` and ``ShardedQueue``."""

    def set_max_depth(self, lane: str, max_depth: int | None) -> None:
        """Refuse enqueues (``LaneFull``) while the lane holds ``max_depth`` pending
        jobs; ``None`` removes the lane's own limit (the queue's default applies
        again, if it has one). Jobs already pending stay."""
        if max_depth is not None:
            positive_int("max_depth", max_depth, MAX_DEPTH_LIMIT)
        home = self.shard_for_lane(validate_lane(lane))
        home.runner.run(ops.set_max_depth(home, lane, max_depth))
