"""Lane policies keep the hot paths flat: the same commands with 10 lanes as
with 20,000 (counted with ``INFO commandstats``, as in tests/test_cost.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import redis

from bench.server_cost import configure_policies
from django_emq.engine import calls
from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Queue

from .test_cost import (
    CHUNK,
    CYCLES,
    FEW,
    LEASE_MS,
    TASK,
    Counts,
    ScriptsOnly,
    claim_complete,
    fill,
    lanes,
    load_scripts,
    measure,
    pipelined,
    record_index,
    run_both,
)


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
    assert counts["fcall"] == CYCLES


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
    assert counts["fcall"] == 2 * CYCLES
    assert counts["hdel"] >= CYCLES  # the keys were freed


def test_rate_limited_claims_cost_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """Every lane limited (never reached while measured): each claim logs a start."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        pipelined(queue, (calls.set_rate(queue.keys, lane, (1000, 3_600_000)) for lane in names))
        fill(queue, names, max(2, CYCLES // n + 2), served=CYCLES)
        return claim_complete(queue, CYCLES)

    counts = run_both(r, scenario)
    assert counts["fcall"] == 2 * CYCLES
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
    # a hand edit: the policy index says what the claims would have written
    # (lua/includes/check.lua; a queue without it reads the keys themselves)
    queue.connection.hset(queue.keys.policies, "*", "s")


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
    assert counts["fcall"] == CYCLES
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
    assert counts["fcall"] == FEW
    # each row's charge settled (a lane's in-flight count is its active set's size)
    assert counts["hdel"] == FEW


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
    assert counts["fcall"] == 2 * CYCLES
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
    assert counts["fcall"] == 2 * CYCLES


#: The keys of the lane policies (``QueueKeys`` names, and the per-lane and
#: per-tenant key families they own), and the policy index that stands for them
#: on the hot paths: a queue that sets none must not touch them but for the one
#: read of the index's ``*`` that asks for them all.
POLICY_KEYS = (
    *("weights", "ceilings", "rates", "throttled", "tenants", "tturns", "unique"),
    *("timeshare", "maxdepth", "turn", "ticks", "policies"),
)
POLICY_FAMILIES = (":starts", ":t:")


def watched(r: redis.Redis, work: Callable[[], object]) -> list[list[str]]:
    """The commands the server ran during ``work`` (scripts' inner commands
    included), from MONITOR, each as its words."""
    seen: list[list[str]] = []
    stop = "emq-test-monitor-stop"
    ready = threading.Event()

    def listen() -> None:
        with r.monitor() as monitor:  # type: ignore[no-untyped-call]
            ready.set()
            for entry in monitor.listen():
                words = str(entry["command"]).split()
                if words[-1:] == [stop]:
                    return
                seen.append(words)

    thread = threading.Thread(target=listen)
    thread.start()
    assert ready.wait(5)
    time.sleep(0.05)  # MONITOR is on once its reply came back: give it the round trip
    work()
    r.get(stop)
    thread.join(5)
    return [words for words in seen if words[0].upper() not in ("GET",)]


def policy_commands(commands: list[list[str]], queue: Queue) -> list[list[str]]:
    """The commands a script ran that touched a policy key (the FCALL that
    names a policy hash among its KEYS is not one)."""
    names = {getattr(queue.keys, name) for name in ("weights", "ceilings", "rates")}
    names |= {queue.keys.prefix + name for name in POLICY_KEYS}
    return [
        words
        for words in commands
        if words[0].upper() != "FCALL"
        and any(w in names or any(f in w for f in POLICY_FAMILIES) for w in words[1:])
    ]


def test_a_queue_without_policies_spends_no_command_on_them(r: redis.Redis) -> None:
    """A claim, and a complete-then-claim (the worker's hot path), at claims of
    1 and of 16, on a queue with no lane policy: one read of the policy index's
    ``*`` per call asks for every policy at once, and no other command touches
    a policy's key."""
    queue = ScriptsOnly("q", connection=r)
    load_scripts(r)
    record_index(queue)
    fill(queue, lanes(40), 3)

    def hot_path() -> None:
        one = queue.claim(LEASE_MS, worker_id="w:1")
        assert one is not None
        many = queue.claim(LEASE_MS, turns=16, worker_id="w:1")
        assert many is not None
        done = [(c.job_id, c.token, None) for c in (*one, *many)]
        claims, errors = queue.complete_many_then_claim(done[:1], LEASE_MS, worker_id="w:1")
        assert claims
        assert errors == [None]
        claims, errors = queue.complete_many_then_claim(done[1:], LEASE_MS, turns=16)
        assert len(claims) == 16
        assert errors == [None] * 16

    commands = watched(r, hot_path)
    scripts = [w for w in commands if w[0].upper() == "FCALL"]
    assert len(scripts) == 4
    touched = policy_commands(commands, queue)
    index = queue.keys.policies
    assert [[w.strip('"') for w in words] for words in touched] == [["HGET", index, "*"]] * 4
    # and what each call costs in all, in server calls (scripts' inner commands)
    counts = measure(r, hot_path)
    assert counts["hget"] == 4  # the index's `*`, once a call: no lane's setting
    assert "exists" not in counts
    assert "hlen" not in counts


#: What a lane without a policy of its own pays on a queue whose other lanes
#: carry every policy (lua/includes/check.lua): one read of its field of the
#: policy index per call that claims from it or completes on it, beside the
#: ``*`` read every call makes anyway. Nothing else.
INDEX_READS_PER_LANE_AND_CALL = 1


def every_policy_on_other_lanes(queue: Queue) -> None:
    """Weights, ceilings, rate limits, max depths, tenants with a weight and a
    ceiling, and pending jobs holding unique keys: on lanes no claim reaches
    (they are paused); bench/server_cost.py's policies cell, smaller."""
    configure_policies(queue, n_lanes=6, start=1000, n_tenants=2)


def test_a_lane_without_policies_pays_nothing_for_other_lanes_policies(
    r: redis.Redis,
) -> None:
    """Claims of 1 and of 16 and complete-then-claims on two plain lanes: with
    every policy on other lanes, the only command more than on a queue with no
    policy is each call's read of each plain lane's field of the policy index."""
    plain = lanes(2)

    def hot_path(queue: Queue) -> Callable[[], None]:
        def work() -> None:
            one = queue.claim(LEASE_MS, worker_id="w:1")  # plain[0]
            assert one is not None
            got, errors = queue.complete_many_then_claim(
                [(one[0].job_id, one[0].token, None)], LEASE_MS, worker_id="w:1"
            )  # plain[0] completed, plain[1] claimed
            assert len(got) == 1
            assert errors == [None]
            many = queue.claim(LEASE_MS, turns=16, worker_id="w:1")  # both, to the end
            assert many is not None
            assert len(many) == 6
            done = [(c.job_id, c.token, None) for c in (*got, *many)]
            got, errors = queue.complete_many_then_claim(done, LEASE_MS, turns=16)
            assert got == []  # nothing left to claim: the ring is empty
            assert errors == [None] * 7

        return work

    counted: list[Counts] = []
    for policies in (False, True):
        r.flushall()
        load_scripts(r)
        queue = ScriptsOnly("q", connection=r)
        record_index(queue)
        if policies:
            every_policy_on_other_lanes(queue)
        fill(queue, plain, 4)
        counted.append(measure(r, hot_path(queue)))
    without, with_policies = counted
    # the index's fields read: plain[0] (claim); plain[0], plain[1] (call 2);
    # both (claim of 16); both (completion); the emptied ring names no lane
    reads = 1 + 2 + 2 + 2
    assert with_policies == without | {
        "hget": without["hget"] + reads * INDEX_READS_PER_LANE_AND_CALL
    }

    # what they are: the index's `*` once a call, the plain lanes' fields
    r.flushall()
    load_scripts(r)
    queue = ScriptsOnly("q", connection=r)
    record_index(queue)
    every_policy_on_other_lanes(queue)
    fill(queue, plain, 4)
    touched = policy_commands(watched(r, hot_path(queue)), queue)
    index = queue.keys.policies
    asked = [[w.strip('"') for w in words] for words in touched]
    assert all(words[:2] == ["HGET", index] for words in asked), asked
    assert [words[2] for words in asked] == [
        *("*", plain[0]),
        *("*", plain[0], plain[1]),
        *("*", plain[0], plain[1]),
        *("*", plain[1], plain[0]),  # completed in the order of the jobs given
    ]
