"""Lane policies: a lane's max depth (backpressure on enqueue) and rate limit
(jobs started per period). The operator's
writes, each one script on the lane's home queue; the checks themselves run
inside the hot-path scripts (``lua/includes/policies.lua``).

Written once for a plain ``Queue`` and a
``ShardedQueue``: each call goes to ``shard_for_lane(lane)``.
"""

from __future__ import annotations

from datetime import timedelta

from . import ops
from .home import Home
from .ids import validate_lane
from .records import positive_int, rate_limit


class LanePolicies:
    """Max depth and rate limit per lane, for ``Queue`` and ``ShardedQueue``."""

    def shard_for_lane(self, lane: str) -> Home:
        raise NotImplementedError

    def set_max_depth(self, lane: str, max_depth: int | None) -> None:
        """Refuse enqueues (``LaneFull``) while the lane holds ``max_depth`` pending
        jobs; ``None`` removes the lane's own limit (the queue's default applies
        again, if it has one). Jobs already pending stay."""
        if max_depth is not None:
            positive_int("max_depth", max_depth)
        home = self.shard_for_lane(validate_lane(lane))
        home.runner.run(ops.set_max_depth(home, lane, max_depth))

    def set_rate(self, lane: str, count: int, per_seconds: float | timedelta) -> None:
        """Start at most ``count`` of the lane's jobs in any ``per_seconds`` (a
        sliding window on the server clock: no burst at a window's edge). A
        lane whose window is full leaves the ring until its next slot."""
        limit = rate_limit(count, per_seconds)
        home = self.shard_for_lane(validate_lane(lane))
        home.runner.run(ops.set_rate(home, lane, limit))

    def clear_rate(self, lane: str) -> None:
        """Remove the lane's own rate limit (the queue's default applies again,
        if it has one) and forget its recent starts."""
        home = self.shard_for_lane(validate_lane(lane))
        home.runner.run(ops.set_rate(home, lane, None))
