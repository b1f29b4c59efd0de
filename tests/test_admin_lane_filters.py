"""The lane list's filters through the Django test client, on the real
server: the paused lanes, the throttled ones, the ones at their ceiling,
each read from its own index (a bounded number of round trips)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from django_emq.engine import lane_filters
from django_emq.engine.queue import Queue

from .helpers import claim_one, fill, lane
from .test_admin import counted, html, make_user, q, viewer

__all__ = ["counted", "make_user", "q", "viewer"]  # fixtures used below

LANES = "/admin/django_emq/lane/"
PAUSED, CAPPED, THROTTLED, FREE = lane(501), lane(502), lane(503), lane(504)
pytestmark = pytest.mark.django_db


def held_back(q: Queue) -> None:
    """One lane of each kind, and one that is none of them."""
    fill(q, PAUSED, 2)
    q.pause(PAUSED)
    fill(q, CAPPED, 2)
    q.set_limit(CAPPED, 1)
    assert claim_one(q).job_id  # CAPPED's head: at its ceiling now
    fill(q, THROTTLED, 2)
    q.set_rate(THROTTLED, 1, 3600)
    assert claim_one(q).job_id  # THROTTLED's head: its next start is an hour away
    fill(q, FREE, 1)


def listed(page: str) -> list[str]:
    return re.findall(r'<tr class="emq-lane" data-lane="(\w+)">', page)


@pytest.mark.parametrize(
    ("which", "expected"), [("paused", PAUSED), ("capped", CAPPED), ("throttled", THROTTLED)]
)
def test_a_filter_lists_only_its_lanes(q: Queue, viewer: Client, which: str, expected: str) -> None:
    held_back(q)
    assert lane_filters.filtered_lanes(q, which).lanes == [expected]  # type: ignore[arg-type]
    page = html(viewer.get(f"{LANES}?queue=default&filter={which}"))
    assert listed(page) == [expected]


def test_the_list_offers_the_filters_and_says_when_none_matches(q: Queue, viewer: Client) -> None:
    fill(q, FREE, 1)
    page = html(viewer.get(f"{LANES}?queue=default"))
    for element in ("emq-filter-paused", "emq-filter-throttled", "emq-filter-capped"):
        assert f'id="{element}"' in page
    assert "No lane is paused." in html(viewer.get(f"{LANES}?queue=default&filter=paused"))


def test_an_unknown_filter_shows_every_lane(q: Queue, viewer: Client) -> None:
    held_back(q)
    page = html(viewer.get(f"{LANES}?queue=default&filter=nonsense"))
    assert set(listed(page)) == {PAUSED, CAPPED, THROTTLED, FREE}


def test_a_filter_costs_the_same_round_trips_with_10_and_1500_paused_lanes(
    q: Queue, viewer: Client, counted: Callable[[Callable[[], Any]], int]
) -> None:
    """10 lanes, 1,000 (the most read whole) and 1,500 (one scan step, and the
    caption says the list is partial): the same round trips."""
    done = 0

    def paused(n: int) -> tuple[int, str]:
        nonlocal done
        for i in range(done, n):
            q.pause(lane(600 + i))
        done = n
        url = f"{LANES}?queue=default&filter=paused"
        return counted(lambda: viewer.get(url)), html(viewer.get(url))

    few, page = paused(10)
    assert "from the first lanes read" not in page
    assert paused(1_000)[0] == few
    trips, page = paused(1_500)
    assert trips == few
    assert "from the first lanes read of 1500" in page
