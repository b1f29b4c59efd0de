"""Tenant lanes: workers rotate across tenants first, then across the lanes of
the chosen tenant (two-level fairness), with weights and ceilings at both
levels; untenanted lanes ride the top ring as before."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
import redis

from django_emq.engine.queue import Queue

from .helpers import LONG_LEASE, TASK, dump, lane, new_client, ring
from .invariants import check_invariants

T1, T2, T3 = lane(1, "ORG"), lane(2, "ORG"), lane(3, "ORG")


def enqueue(queue: Queue, lane_id: str, n: int, tenant: str | None = None) -> list[str]:
    jobs = queue.enqueue_many(
        {"lane": lane_id, "task_path": TASK, "args": [i], "tenant": tenant} for i in range(n)
    )
    return [e.job_id for e in jobs]


def claimed_lanes(queue: Queue, n: int, max_jobs: int = 1) -> list[str]:
    """The lanes of the next ``n`` claims of up to ``max_jobs`` jobs each."""
    out: list[str] = []
    for _ in range(n):
        claims = queue.claim(LONG_LEASE, max_jobs=max_jobs, turns=max_jobs)
        out += [c.lane for c in claims or []]
    return out


def test_a_tenant_of_one_user_gets_half_the_claims_against_a_tenant_of_fifty(
    queue: Queue,
) -> None:
    flooders = [lane(100 + i) for i in range(50)]
    for user in flooders:
        enqueue(queue, user, 20, tenant=T1)
    alone = lane(1)
    enqueue(queue, alone, 200, tenant=T2)
    served = claimed_lanes(queue, 200)
    assert Counter(s == alone for s in served) == {True: 100, False: 100}
    check_invariants(queue)


def test_each_user_inside_a_tenant_gets_a_fair_turn(queue: Queue) -> None:
    users = [lane(10 + i) for i in range(5)]
    for user in users:
        enqueue(queue, user, 10, tenant=T1)
    served = claimed_lanes(queue, 25)
    assert Counter(served) == {user: 5 for user in users}
    assert served[:5] == users  # one turn each, in arrival order
    check_invariants(queue)


def test_an_untenanted_lane_counts_as_one_tenant(queue: Queue) -> None:
    for i in range(10):
        enqueue(queue, lane(10 + i), 10, tenant=T1)
    enqueue(queue, lane(1), 50)
    served = claimed_lanes(queue, 40)
    assert served.count(lane(1)) == 20
    check_invariants(queue)


def test_a_batch_claim_serves_tenants_in_turn(queue: Queue) -> None:
    for i in range(4):
        enqueue(queue, lane(10 + i), 10, tenant=T1)
    enqueue(queue, lane(1), 10, tenant=T2)
    served = claimed_lanes(queue, 1, max_jobs=8)
    assert served.count(lane(1)) == 4
    check_invariants(queue)
