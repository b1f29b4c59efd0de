"""The hot paths cost the same with 10 lanes as with 20,000: counted, not timed.

Each test runs the same operations on a queue with few lanes and on one with
many, resetting the server's command statistics (``CONFIG RESETSTAT``) just
before the measured phase and reading ``INFO commandstats`` after it. Commands
a Lua script calls are counted there too, so equal per-command call counts
mean the server did the same work, whatever the number of lanes. No hot path
may scan the ring: ``LREM`` and ``LPOS`` must never show up.

The hot paths are the scripts: the queues here (:class:`ScriptsOnly`) skip the
history call the API sends after a claim or a completion (a worker sends it
for many jobs at once); that call is counted on its own
(``test_recording_the_history_costs_the_same_with_20000_lanes``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from django_emq.engine import calls
from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Claim, Queue
from django_emq.engine.scripts import library

from .invariants import check_invariants

FEW, MANY = 10, 20_000
CYCLES = 200
LEASE_MS = 60_000
TASK = "tests.tasks.noop"
CHUNK = 2_000

#: Commands the hot paths may use: each O(1) or O(log n) on the keys they touch
#: (``LTRIM`` only trims the capped wake list; ``LINDEX`` reads only the ring's
#: head). Notably absent: LREM, LPOS, LRANGE, SCAN, KEYS, SMEMBERS, HGETALL.
HOT_PATH_COMMANDS = {
    "fcall",  # the engine's Function library (EVALSHA where a server has no Functions)
    "evalsha",
    "script|exists",
    "time",
    "incr",
    "lmove",
    "lindex",
    "lpop",
    "rpop",
    "rpush",
    "ltrim",
    "sadd",
    "srem",
    "sismember",
    "hget",
    "hlen",
    "hmget",
    "hset",
    "hsetnx",
    "hdel",
    "hincrby",
    "zadd",
    "zrem",
    "zcard",
    "zincrby",
    "zpopmin",
    "pexpire",
    "del",
    "type",  # the checks before a script's first write (lua/includes/check.lua)
    # whether a policy's key still holds anything, as the policy index follows a
    # write (lua/includes/check.lua, indexPolicy)
    "exists",
    # the finished window's trim, by rank: removes what passed the window, O(log n)
    # per member removed (lua/includes/history.lua)
    "zremrangebyrank",
    # lane policies (tests/test_policy_cost.py): a throttled lane's score, a
    # rate-limited lane's start log (its head, length, and the starts that left
    # the window), and the throttled lanes that are due (LIMIT: a bounded range)
    "zscore",
    "llen",
    "zrangebyscore",
    # tenant lanes (tests/test_policy_cost.py): whether a tenant has a ceiling
    "hexists",
    # the history call (lua/record_history-2.lua), when promoted jobs wait for
    # their first start: which of its first starts were deferred, one lookup for
    # them all, O(1) per id asked
    "zmscore",
}
#: The measuring itself, left out of the comparison.
MEASURING = {"config|resetstat", "info"}

Counts = dict[str, int]


class ScriptsOnly(Queue):
    """A queue that sends no history call after its claims and completions: what
    is counted is the scripts' own work."""

    def record_history(self, claims: Sequence[Claim] = (), finished: Sequence[str] = ()) -> None:
        return None


def lanes(n: int, start: int = 0) -> list[str]:
    return [lane_id("USR", i) for i in range(start, start + n)]


def fill(queue: Queue, names: list[str], per_lane: int, served: int | None = None) -> None:
    """One job on every lane (ring order = ``names`` order), and ``per_lane`` on the
    first ``served`` lanes: the only ones the measured claims reach (all by default)."""
    deep = names[: len(names) if served is None else served]
    jobs = [{"lane": lane, "task_path": TASK} for lane in names]
    jobs += [{"lane": lane, "task_path": TASK} for _ in range(per_lane - 1) for lane in deep]
    for i in range(0, len(jobs), CHUNK):
        queue.enqueue_many(jobs[i : i + CHUNK])


def pipelined(queue: Queue, built: Iterable[calls.Call]) -> None:
    """Run many lane-control calls in one round trip (setup only, never measured)."""
    for reply in queue.runner.replies(list(built)):
        assert not isinstance(reply, Exception), reply


def measure(r: redis.Redis, work: Callable[[], Any]) -> Counts:
    """Per-command call counts of ``work`` (commands run inside scripts included)."""
    r.config_resetstat()
    work()
    stats: dict[str, dict[str, Any]] = r.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(entry["calls"])
        for name, entry in stats.items()
        if name.removeprefix("cmdstat_") not in MEASURING
    }


def claim_complete(queue: Queue, cycles: int, turns: int = 1) -> Callable[[], None]:
    def work() -> None:
        for _ in range(cycles):
            claims = queue.claim(LEASE_MS, turns=turns, worker_id="w:1")
            assert claims is not None
            for c in claims:
                queue.complete(c.job_id, c.token)

    return work


def record_index(queue: Queue) -> None:
    """The first call that writes on a new queue records its (empty) policy
    index (lua/includes/check.lua): once per queue, not the hot path's cost.
    One job of a lane of its own, claimed and completed (the ring is as before)."""
    spare = lane_id("USR", 999_999)
    queue.enqueue(spare, TASK)
    claims = queue.claim(LEASE_MS, worker_id="w:0")
    assert claims is not None
    assert [c.lane for c in claims] == [spare]
    queue.complete(claims[0].job_id, claims[0].token)


def load_scripts(r: redis.Redis) -> None:
    """Load the engine's Function library (every script) up front: a first call's
    load is not the engine's cost. The engine runs its scripts with ``FCALL``."""
    r.function_load(library().source, replace=True)


def assert_same_work(few: Counts, many: Counts) -> None:
    assert few == many, "\n".join(
        f"{name}: {few.get(name, 0)} with {FEW} lanes, {many.get(name, 0)} with {MANY}"
        for name in sorted(set(few) | set(many))
        if few.get(name, 0) != many.get(name, 0)
    )
    assert "lrem" not in many, "a hot path scanned the ring with LREM"
    assert "lpos" not in many, "a hot path scanned the ring with LPOS"
    assert set(many) <= HOT_PATH_COMMANDS, f"unexpected commands {set(many) - HOT_PATH_COMMANDS}"


def run_both(
    r: redis.Redis,
    scenario: Callable[[Queue, int], Callable[[], None]],
    kind: type[Queue] = ScriptsOnly,
) -> Counts:
    """Build the scenario with FEW and with MANY lanes, measure both, compare."""
    results = []
    for n in (FEW, MANY):
        r.flushall()
        queue = kind("q", connection=r)
        work = scenario(queue, n)
        load_scripts(r)
        results.append(measure(r, work))
        if n == FEW:  # reading 20,000 lanes key by key would dominate the suite
            check_invariants(queue)
    assert_same_work(*results)
    return results[1]


@pytest.mark.parametrize("turns", [1, 3])
def test_claim_and_complete_cost_the_same_with_20000_lanes(r: redis.Redis, turns: int) -> None:
    """Deep lanes (none empties while measured): rotate, pop, lease, finish."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        fill(queue, lanes(n), max(2, CYCLES * turns // n + 2), served=CYCLES * turns)
        return claim_complete(queue, CYCLES, turns)

    counts = run_both(r, scenario)
    assert counts["fcall"] == CYCLES + CYCLES * turns
    assert counts["lmove"] == CYCLES * turns
    assert "rpop" not in counts  # no lane left the ring


def test_a_lane_leaving_the_ring_costs_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """Every claim empties its lane, which leaves the ring from the tail (RPOP)."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        fill(queue, lanes(n), 1)
        return claim_complete(queue, FEW)

    counts = run_both(r, scenario)
    assert counts["rpop"] == FEW
    assert counts["lmove"] == FEW


def test_ceiling_leave_and_rejoin_cost_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """Lanes at ceiling 1: each claim takes its lane off the ring, each complete puts
    it back at the tail."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        pipelined(queue, (calls.set_limit(queue.keys, lane, 1) for lane in names))
        fill(queue, names, max(2, CYCLES // n + 2), served=CYCLES)
        return claim_complete(queue, CYCLES)

    counts = run_both(r, scenario)
    assert counts["rpop"] == CYCLES  # left the ring at its ceiling
    assert counts["sadd"] == CYCLES  # and came back on complete


def test_weighted_claims_cost_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """Lanes of weight 3 serve three jobs per turn."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        pipelined(queue, (calls.set_weight(queue.keys, lane, 3) for lane in names))
        fill(queue, names, max(4, 3 * CYCLES // n + 2), served=CYCLES)
        return claim_complete(queue, CYCLES)

    counts = run_both(r, scenario)
    assert counts["zpopmin"] == CYCLES
    assert counts["fcall"] == CYCLES + 3 * CYCLES


def test_weighted_claims_of_one_job_cost_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """Lanes of weight 3 claimed one job at a time (a worker of slow jobs): each
    lane keeps its turn across three claims, whatever the number of lanes."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        names = lanes(n)
        pipelined(queue, (calls.set_weight(queue.keys, lane, 3) for lane in names))
        fill(queue, names, max(4, CYCLES // n + 2), served=CYCLES)

        def work() -> None:
            for _ in range(CYCLES):
                claims = queue.claim(LEASE_MS, worker_id="w:1", max_jobs=1)
                assert claims is not None
                queue.complete(claims[0].job_id, claims[0].token)

        return work

    counts = run_both(r, scenario)
    assert counts["zpopmin"] == CYCLES
    # every claim rotates the ring onto its lane; the two of three that cut the
    # lane's turn short move it back to the head, where it keeps its turn
    assert counts["lmove"] == CYCLES + (CYCLES - CYCLES // 3)
    assert "lrem" not in counts


def test_enqueue_costs_the_same_per_job_with_20000_lanes(r: redis.Redis) -> None:
    """Onto lanes already on the ring, onto new lanes, and deferred."""
    soon = datetime.now(UTC) + timedelta(hours=1)

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        fill(queue, lanes(n), 1)
        existing = lanes(FEW)
        fresh = lanes(CYCLES, start=MANY + 1)
        jobs: list[dict[str, Any]] = [
            {"lane": existing[i % FEW], "task_path": TASK} for i in range(CYCLES)
        ]
        jobs += [{"lane": lane, "task_path": TASK} for lane in fresh]
        jobs += [{"lane": lane, "task_path": TASK, "run_after": soon} for lane in existing]

        def work() -> None:
            queue.enqueue_many(jobs[: 2 * CYCLES])
            for job in jobs[2 * CYCLES :]:
                queue.enqueue(**job)

        return work

    counts = run_both(r, scenario)
    assert counts["fcall"] == 2 * CYCLES + FEW
    assert counts["rpush"] > 0  # new lanes joined the ring ...
    assert "lpos" not in counts  # ... without looking for themselves in it


def test_a_turn_without_weights_or_ceilings_costs_six_commands(r: redis.Redis) -> None:
    """The hot path's budget, counted: a claim of 16 turns over lanes that keep
    work reads each job's row once and writes it once, looks up no weight and
    no ceiling, and touches the queue-wide keys once per call, not per turn."""
    queue = ScriptsOnly("q", connection=r)
    load_scripts(r)
    record_index(queue)
    names = lanes(16)
    fill(queue, names, 3)

    def claim() -> None:
        claims = queue.claim(LEASE_MS, turns=16, worker_id="w:1")
        assert claims is not None
        assert len(claims) == 16

    counts = measure(r, claim)
    assert counts["hget"] == 1  # the policy index's `*` (below): no weight, no ceiling
    assert "zcard" not in counts
    # checked once per call, before the first write: the on-ring set, the active
    # set and the counters (the depth index is checked by its first touch, the
    # first turn's, guarded: lua/includes/take_turn.lua)
    assert counts["type"] == 3
    per_turn = {"lmove", "zpopmin", "hmget", "hset", "zincrby"}
    assert {name: counts[name] for name in per_turn} == dict.fromkeys(per_turn, 16)
    # the lane's active set (its size is the lane's in-flight count: no count of
    # its own), once per turn; the queue's active set and pending counter, once
    # per call; no job's wait (the caller records the history,
    # lua/record_history-2.lua)
    assert counts["zadd"] == 16 + 1
    assert counts["hincrby"] == 1
    assert "pexpire" not in counts
    assert "hlen" not in counts  # no policy's hash is probed on its own ...
    assert "exists" not in counts  # ... one read of the policy index asks for them all
    assert counts["time"] == 1
    # (+3: the checks before the first write, check.lua; +3: the active set's ZADD,
    # the pending counter and the clock; +1: the policy index's `*`, check.lua). The
    # attempt's start (the row's `tries`, lua/includes/tries.lua) rides the
    # row's one HMGET and HSET: no command of its own.
    assert sum(counts.values()) - counts["fcall"] == 16 * 6 + 3 + 3 + 1


def test_recording_the_history_costs_the_same_with_20000_lanes(r: redis.Redis) -> None:
    """The history call the API sends after each claim and completion (a worker
    sends one for many jobs): per call, a first start's wait in its minute's and
    its lane's hour's histograms (each TTL set once) and one count of the
    promoted jobs waiting for their first start (none here: no lookup);
    finished jobs in the window (added, trimmed), this minute's `done` and its
    TTL, and the clock."""

    def scenario(queue: Queue, n: int) -> Callable[[], None]:
        fill(queue, lanes(n), max(2, CYCLES // n + 2), served=CYCLES)
        return claim_complete(queue, CYCLES)

    counts = run_both(r, scenario, Queue)
    assert counts["fcall"] == 4 * CYCLES
    assert "zmscore" not in counts
    assert counts["zremrangebyrank"] == CYCLES
