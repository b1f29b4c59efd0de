"""What keys a queue holds and of which type (the doctor's and the invariant
checker's table): the core's fixed keys, the per-lane and per-job families,
the history's keys, and every lane policy's keys as its module declares them
(read from the registry, :data:`.policies.POLICIES`)."""

from __future__ import annotations

from .ids import is_lane, validate_job_id
from .keys import QueueKeys
from .policies import POLICIES

#: Redis type of each fixed key of the core (``QueueKeys`` attribute -> type).
CORE_KEY_TYPES: dict[str, str] = {
    "ring": "list",
    "on_ring": "set",
    "active": "zset",
    "schedule": "zset",
    "dead": "zset",
    "paused": "set",
    "inflight": "hash",
    "depths": "zset",
    "stats": "hash",
    "seq": "string",
    "wake": "list",
    "workers": "hash",
    "stops": "hash",  # stop requests for workers (engine/worker_control.py)
    "finished": "zset",
    "due_at": "zset",
    "policies": "hash",  # the policy index (lua/includes/check.lua)
}
#: Redis type of each fixed key of a queue: the core's and every policy's.
FIXED_KEY_TYPES: dict[str, str] = CORE_KEY_TYPES | {
    attr: kind for policy in POLICIES for attr, kind in policy.keys.items()
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
#: A lane's other keys, by key suffix: their type (the policies' per-lane keys,
#: such as a rate-limited lane's start log).
LANE_LOGS: dict[str, str] = {
    suffix: kind for policy in POLICIES for suffix, kind in policy.lane_keys.items()
}
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
    for policy in POLICIES:
        for family in policy.families:
            if family.matches(rest):
                return family.kind  # a policy's family (a tenant's ring)
    if rest.startswith("job:"):
        try:
            validate_job_id(rest[4:])
        except ValueError:
            return None
        return "hash"
    return None


__all__ = [
    "CORE_KEY_TYPES",
    "FIXED_KEY_TYPES",
    "LANE_LOGS",
    "LANE_SETS",
    "PLACE_OF_STATE",
    "QUEUE_SETS",
    "expected_type",
]
