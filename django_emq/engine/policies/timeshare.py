"""Time-fair share (``docs/time-fair.md``): on a queue with ``FAIRNESS``
``"time"`` a lane's turn is worker time, not a number of jobs (deficit round
robin, ``lua/includes/timeshare.lua``). It has no calls of its own: the
queue's ``fairness`` option turns it on, and the claim and the ending scripts
keep each lane's credit in the ``timeshare`` hash.
"""

from __future__ import annotations

from ..records import fairness_mode
from .base import Policy, QueueOption, Routed

#: Fields of the timeshare hash that are the queue's own, not a lane's.
QUEUE_FIELDS = ("quantum", "head")


def lane_of(field: str) -> str | None:
    """The lane a field of the timeshare hash is about (``<lane>``,
    ``<lane>:avg``); ``None`` for the queue's own fields."""
    return None if field in QUEUE_FIELDS else field.removesuffix(":avg")


def parse_setting(value: object) -> str:
    """One queue's ``FAIRNESS`` (``docs/settings.md``): ``"count"`` (a lane's
    share is a number of jobs) or ``"time"`` (worker time)."""
    try:
        return fairness_mode(value)
    except ValueError:
        raise ValueError(f"must be 'count' or 'time', not {value!r}") from None


POLICY = Policy(
    name="timeshare",
    doc="time-fair.md",
    lua=("includes/timeshare.lua",),
    keys={"timeshare": "hash"},
    probe={"timeshare": "s"},
    names_lanes=("timeshare",),
    lane_of=lane_of,
    settings=("FAIRNESS",),
    options=(QueueOption("fairness", "FAIRNESS", "count"),),
)


class Calls(Routed):
    """No calls: time-fair share is the queue's ``fairness`` option."""
