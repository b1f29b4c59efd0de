"""What keys a queue holds and of which type (the doctor's and the invariant
checker's table): the fixed keys, the per-lane and per-job families, the
history's and the tenants' keys."""

from __future__ import annotations

from .ids import is_lane, validate_job_id, validate_tenant
from .keys import QueueKeys

#: Redis type of each fixed key of a queue (``QueueKeys`` attribute -> type).
FIXED_KEY_TYPES: dict[str, str] = {
    "ring": "list",
    "on_ring": "set",
    "active": "zset",
    "schedule": "zset",
    "dead": "zset",
    "paused": "set",
    "ceilings": "hash",
    "weights": "hash",
    "inflight": "hash",
    "depths": "zset",
    "stats": "hash",
    "seq": "string",
    "wake": "list",
    "workers": "hash",
    "finished": "zset",
    "due_at": "zset",
    "turn": "hash",
    # lane policies (engine/policies.py)
    "max_depths": "hash",
    "unique": "hash",
    "rates": "hash",
    "throttled": "zset",
    "ticks": "hash",
    "timeshare": "hash",  # time-fair share (lua/includes/timeshare.lua)
    # tenant lanes (engine/tenants.py)
    "tenants": "hash",
    "tenant_turns": "hash",
}

#: Where a job of each state must be: ``lane`` (its lane's pending set), one of
#: the queue-wide sorted sets, or nowhere (``None``).
PLACE_OF_STATE: dict[str, str | None] = {
    "pending": "lane",
    "active": "active",
    "scheduled": "schedule",
    "dead": "dead",
    "done": None,
    "cancelled": None,
}

#: A lane's sets, by key suffix: the state their members' rows must have.
LANE_SETS: dict[str, str] = {"pending": "pending", "active": "active", "dead": "dead"}
#: A lane's other keys, by key suffix: their type (a rate-limited lane's start log).
LANE_LOGS: dict[str, str] = {"starts": "list"}
#: The queue-wide sets of job ids: the state their members' rows must have.
QUEUE_SETS: dict[str, str] = {"active": "active", "schedule": "scheduled", "dead": "dead"}


def expected_type(keys: QueueKeys, key: str) -> str | None:
    """The type ``key`` must have, or ``None`` when it is no key of the queue's."""
    fixed = {getattr(keys, attr): kind for attr, kind in FIXED_KEY_TYPES.items()}
    if key in fixed:
        return fixed[key]
    rest = key.removeprefix(keys.prefix)
    if rest == key:
        return None
    if rest.startswith("g:"):
        lane, _, suffix = rest[2:].rpartition(":")
        if not is_lane(lane):
            return None
        return "zset" if suffix in LANE_SETS else LANE_LOGS.get(suffix)
    if rest.startswith(("m:", "lw:")) and rest.partition(":")[2].isdigit():
        return "hash"  # the history's minutes and lanes' hours (lua/includes/history.lua)
    if rest.startswith("t:") and rest.endswith(":ring"):
        try:
            validate_tenant(rest[2 : -len(":ring")])
        except ValueError:
            return None
        return "list"  # a tenant's ring (lua/includes/tenants.lua)
    if rest.startswith("job:"):
        try:
            validate_job_id(rest[4:])
        except ValueError:
            return None
        return "hash"
    return None


__all__ = [
    "FIXED_KEY_TYPES",
    "LANE_LOGS",
    "LANE_SETS",
    "PLACE_OF_STATE",
    "QUEUE_SETS",
    "expected_type",
]
