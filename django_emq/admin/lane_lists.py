"""Which lanes the lane list shows, a page at a time: the deepest (the depth
index), those with the most running jobs (counted from the running jobs), or
those a filter picks (paused, throttled, at their ceiling: each from its own
index, :mod:`~django_emq.engine.lane_filters`), or those a search names. A
part of the lanes view."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..engine import listing
from ..engine.ids import is_lane
from ..engine.lane_filters import Filtered, Which, filtered_lanes
from ..engine.queue import LaneInfo
from ..engine.shards import AnyQueue
from .display import Pager
from .lookup import lanes_named_by

#: The orders of the lane list: by depth (the depth index: every lane), by
#: running jobs (every lane that has one, counted from the running jobs
#: themselves, up to ``listing.MAX_PAGE`` of them), by the oldest job waiting
#: (the lanes of the page shown: no index orders every lane by it).
SORTS = ("depth", "running", "oldest")


@dataclass(frozen=True, slots=True)
class Picked:
    """A page of lanes, its pager, whether the running order was counted from a
    sample of the running jobs, and what a filter found (``None``: no filter)."""

    infos: list[LaneInfo]
    pager: Pager
    sampled: bool = False
    filtered: Filtered | None = None


def running_lanes(queue: AnyQueue) -> tuple[list[str], bool]:
    """The lanes with running jobs, the most first (ties by name), counted
    from up to ``listing.MAX_PAGE`` running jobs; and whether there were more
    running jobs than that (the order then rests on those counted)."""
    held = listing.jobs_in_state(queue, "inflight", 0, listing.MAX_PAGE)
    counts = Counter(job.row.lane for job in held.jobs if is_lane(job.row.lane))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [lane for lane, _ in ranked], held.total > len(held.jobs)


def pick_lanes(
    queue: AnyQueue, page: str | None, sort: str, which: Which | None, per_page: int, lanes: int
) -> Picked:
    """Page ``page`` of the lanes: filtered by ``which``, else in ``sort`` order
    (``lanes``: how many lanes the depth index holds)."""
    if which:
        found = filtered_lanes(queue, which)
        pager = Pager.of(page, len(found.lanes), per_page)
        named = found.lanes[pager.offset : pager.offset + pager.per_page]
        return Picked(queue.lanes_named(named), pager, filtered=found)
    if sort == "running":
        running, sampled = running_lanes(queue)
        pager = Pager.of(page, len(running), per_page)
        named = running[pager.offset : pager.offset + pager.per_page]
        return Picked(queue.lanes_named(named), pager, sampled)
    pager = Pager.of(page, lanes, per_page)
    return Picked(queue.lanes(top=per_page, offset=pager.offset), pager)


def search_lanes(queue: AnyQueue, query: str, limit: int) -> list[LaneInfo]:
    """The lane ``query`` names, or the lanes of the users (at most ``limit``)
    whose username or email it is."""
    return queue.lanes_named(lanes_named_by(query, limit))
