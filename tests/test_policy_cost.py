"""Lane policies keep the hot paths flat: the same commands with 10 lanes as
with 20,000 (counted with ``INFO commandstats``, as in tests/test_cost.py)."""

from __future__ import annotations

from collections.abc import Callable

import redis

from django_emq.engine import calls
from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Queue

from .test_cost import CHUNK, CYCLES, FEW, TASK, claim_complete, fill, lanes, pipelined, run_both


def test_enqueue_with_max_depths_and_unique_keys_costs_the_same_with_20000_lanes(
    r: redis.Redis,
) -> None:
    """Every lane has a max depth; half the enqueues carry unique keys, and half
    of those are duplicates."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        pipelined(queue, (calls.set_max_depth(queue.keys, lane, 1000) for lane in names))
        fill(queue, names, 1)
        existing = lanes(FEW)

        def work() -> None:
            for i in range(CYCLES):
                key = None if i % 2 else f"k{i % 8}"
                queue.enqueue(existing[i % FEW], TASK, unique_key=key)

        return work

    counts = run_both(r, scenario)
    assert counts["evalsha"] == CYCLES


def test_finishing_unique_jobs_costs_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """The served lanes' jobs all hold unique keys; completing frees them."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        jobs = [
            {"lane": lane, "task_path": TASK, "unique_key": f"u{k}"}
            for k in range(max(3, CYCLES // n + 2))
            for lane in names[:CYCLES]
        ]
        for i in range(0, len(jobs), CHUNK):
            queue.enqueue_many(jobs[i : i + CHUNK])
        fill(queue, names, 1)  # every lane has work; the served ones' oldest are unique
        return claim_complete(queue, CYCLES)

    counts = run_both(r, scenario)
    assert counts["evalsha"] == 2 * CYCLES
    assert counts["hdel"] >= CYCLES  # the keys were freed


def test_rate_limited_claims_cost_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """Every lane limited (never reached while measured): each claim logs a start."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        pipelined(queue, (calls.set_rate(queue.keys, lane, (1000, 3_600_000)) for lane in names))
        fill(queue, names, max(2, CYCLES // n + 2), served=CYCLES)
        return claim_complete(queue, CYCLES)

    counts = run_both(r, scenario)
    assert counts["evalsha"] == 2 * CYCLES
    assert "zadd" in counts
    assert counts["lmove"] == CYCLES


def test_throttling_lanes_costs_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """One start per hour: every claim throttles its lane (off the ring with an
    RPOP, into the throttled set); the completes do not put it back."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        pipelined(queue, (calls.set_rate(queue.keys, lane, (1, 3_600_000)) for lane in names))
        fill(queue, names, 2)
        return claim_complete(queue, FEW)

    counts = run_both(r, scenario)
    assert counts["rpop"] == FEW
    assert "sadd" not in counts  # no lane came back to the ring


def test_a_queue_default_rate_costs_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """The queue's default rate, no lane's own: the same work per claim."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        queue.rate = (1000, 3_600_000)
        fill(queue, lanes(n), max(2, CYCLES // n + 2), served=CYCLES)
        return claim_complete(queue, CYCLES)

    run_both(r, scenario)


# -- time-fair share (lua/includes/timeshare.lua) ---------------------------------------
# The settle of a job depends on how long it really took; the scenarios set the
# lanes' averages and credits so that what a claim does is the same however
# fast the test runs.


def time_fair(queue: Queue, names: list[str], credit: int, avg: int = 1000) -> None:
    """Every lane measured at ``avg`` ms a job and holding ``credit`` ms; the quantum ``avg``."""
    queue.fairness = "time"
    fields: dict[str, int] = {"quantum": avg}
    for lane in names:
        fields[lane], fields[f"{lane}:avg"] = credit, avg
    items = list(fields.items())
    for i in range(0, len(items), CHUNK):
        queue.connection.hset(queue.keys.timeshare, mapping=dict(items[i : i + CHUNK]))


def test_time_fair_claims_cost_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """Each claim lands on a lane without credit, adds its quantum, serves one
    job (its estimate uses the quantum up) and rotates on."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        fill(queue, names, max(2, CYCLES // n + 2), served=CYCLES)
        time_fair(queue, names, 0)

        def work() -> None:
            for _ in range(CYCLES):
                claims = queue.claim(60_000, max_jobs=1, worker_id="w:1")
                assert claims is not None

        return work

    counts = run_both(r, scenario)
    assert counts["evalsha"] == CYCLES
    assert counts["lmove"] == CYCLES


def test_time_fair_claims_skipping_lanes_in_debt_cost_the_same_with_20000_lanes(
    r: redis.Redis,
) -> None:
    """Every lane deep in debt: a claim skips 16 of them, then serves the 17th."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        fill(queue, names, 3)
        time_fair(queue, names, -8 * 1000)

        def work() -> None:
            for _ in range(2):
                claims = queue.claim(60_000, max_jobs=1, worker_id="w:1")
                assert claims is not None

        return work

    counts = run_both(r, scenario)
    assert counts["lmove"] == 2 * 17  # 16 skips and one served lane's rotation per claim


def test_settling_time_fair_jobs_costs_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """Completing time-fair jobs (one of each of FEW lanes) charges each one's
    run time to its lane."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        fill(queue, names, 2)
        time_fair(queue, names, 0)
        claimed = []
        for _ in range(FEW):  # one job a claim: a lane each
            got = queue.claim(60_000, max_jobs=1, worker_id="w:1")
            assert got is not None
            claimed += got

        def work() -> None:
            for c in claimed:
                queue.complete(c.job_id, c.token)

        return work

    counts = run_both(r, scenario)
    assert counts["evalsha"] == FEW
    assert counts["hdel"] == 2 * FEW  # each row's charge settled, each lane's in-flight count


def tenant_fill(
    queue: Queue, names: list[str], tenants: int, per_lane: int, served: int = CYCLES
) -> None:
    """Lane i of ``names`` belongs to tenant ``i % tenants``: the claims then
    reach the first lanes in order (one lane per tenant per pass), as fill()'s
    ``served`` says; the first ``served`` get ``per_lane`` jobs, the others one."""
    owners = [lane_id("ORG", i % tenants) for i in range(len(names))]
    jobs = [
        {"lane": lane, "task_path": TASK, "tenant": owner}
        for lane, owner in zip(names, owners, strict=True)
    ]
    deep = list(zip(names[:served], owners[:served], strict=True))
    jobs += [
        {"lane": lane, "task_path": TASK, "tenant": owner}
        for _ in range(per_lane - 1)
        for lane, owner in deep
    ]
    for i in range(0, len(jobs), CHUNK):
        queue.enqueue_many(jobs[i : i + CHUNK])


def test_tenanted_claims_cost_the_same_with_20000_lanes_in_2000_tenants(
    r: redis.Redis,
) -> None:
    """Ten lanes per tenant: one tenant at 10 lanes, 2,000 tenants at 20,000."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        tenant_fill(queue, lanes(n), max(1, n // 10), max(2, CYCLES // n + 2))
        return claim_complete(queue, CYCLES)

    counts = run_both(r, scenario)
    assert counts["evalsha"] == 2 * CYCLES
    assert counts["lmove"] == 2 * CYCLES  # the top ring, then the tenant's


def test_tenanted_claims_cost_the_same_with_20000_lanes_in_two_tenants(
    r: redis.Redis,
) -> None:
    """Two tenants of 5 or of 10,000 lanes each, with weights and ceilings at
    both levels (never reached while measured)."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        # the weighted tenant's lanes are served twice as often: deeper, and more of them
        tenant_fill(queue, names, 2, max(2, 2 * CYCLES // n + 2), served=2 * CYCLES)
        queue.set_tenant_weight(lane_id("ORG", 0), 2)
        queue.set_tenant_limit(lane_id("ORG", 1), 1000)
        pipelined(queue, (calls.set_limit(queue.keys, lane, 1000) for lane in names))
        return claim_complete(queue, CYCLES)

    counts = run_both(r, scenario)
    assert counts["evalsha"] == 2 * CYCLES
