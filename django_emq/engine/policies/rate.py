"""Rate limits (``docs/rate-limits.md``): a lane starts at most ``count`` jobs
in any ``per_seconds``, a sliding window on the server clock. The check runs
inside the hot-path scripts (``lua/includes/rate.lua``); a lane whose window
is full leaves the ring for the ``throttled`` set until its next slot, and
``promote`` puts it back. Here: the operator's writes, each one script on the
lane's home queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from .. import ops
from ..ids import validate_lane
from ..records import rate_limit
from .base import Policy, QueueOption, Routed

POLICY = Policy(
    name="rate",
    doc="rate-limits.md",
    lua=("includes/rate.lua", "set_rate-10.lua"),
    keys={"rates": "hash", "throttled": "zset"},
    lane_keys={"starts": "list"},
    probe={"rates": "r", "throttled": "h"},
    per_lane=("rates",),
    names_lanes=("rates", "throttled"),
    settings=("RATE",),
    options=(QueueOption("rate", "RATE"),),
)


def parse_setting(value: object) -> tuple[int, float]:
    """One queue's ``RATE`` (``docs/settings.md``): ``(count, per_seconds)``, at
    most ``count`` jobs started per ``per_seconds``."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"must be a (count, per_seconds) pair, not {value!r}")
    count, per_ms = rate_limit(value[0], value[1])
    return count, per_ms / 1000


class Calls(Routed):
    """``set_rate`` and ``clear_rate``, for ``Queue`` and ``ShardedQueue``."""

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
