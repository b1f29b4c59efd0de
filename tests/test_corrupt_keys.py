"""Every operation against every structural key set to each wrong type.

Valkey runs a script atomically but does not roll it back when a command
inside fails: every write before the failing command stays. So each script
reads and checks first and writes last (``lua/includes/check.lua``). For
every operation x every key of a queue x every wrong type: the call either
succeeds (it does not touch that key) or raises ``CorruptKeyspace`` naming
the key, with nothing written (a claim may have rotated the ring); once the
key is restored the invariants hold, and every job is still found and runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from django_emq.engine.doctor import Doctor
from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Queue
from django_emq.exceptions import CorruptKeyspace, JobError

from .helpers import dump
from .invariants import check_invariants, text

A, B = lane_id("USR", 1), lane_id("USR", 2)
TA = lane_id("ORG", 1)  # lane A's tenant
TASK = "tests.tasks.noop"
LONG = 600_000

#: A value of each type, to put where a key of another type belongs.
WRONG: dict[str, Callable[[redis.Redis, str], Any]] = {
    "string": lambda r, key: r.set(key, "garbage"),
    "list": lambda r, key: r.rpush(key, "garbage"),
    "set": lambda r, key: r.sadd(key, "garbage"),
    "zset": lambda r, key: r.zadd(key, {"garbage": 1}),
    "hash": lambda r, key: r.hset(key, "garbage", "1"),
}


@dataclass
class World:
    """One lane (A, of tenant TA) with a job in every state, and a second lane (B)."""

    queue: Queue
    active: tuple[str, int] = ("", 0)  # (job id, token), lease of 10 minutes
    expired: str = ""  # active, its lease already over
    dead: str = ""
    scheduled: str = ""  # due at once
    pending: list[str] = field(default_factory=list)
    deleted_by: dict[str, set[str]] = field(default_factory=dict)

    def ids(self) -> set[str]:
        return {self.active[0], self.expired, self.dead, self.scheduled, *self.pending}


def claim_one(queue: Queue, lease_ms: int) -> tuple[str, int]:
    claims = queue.claim(lease_ms, worker_id="w:setup")
    assert claims is not None
    assert len(claims) == 1
    return claims[0].job_id, claims[0].token


def fairness_for(operation: str) -> str:
    """The world's queue for an operation: time-fair (its timeshare hash in use),
    but count-fair for the tenant operations (a time-fair queue has no tenants)."""
    return "count" if "tenant" in operation else "time"


def tenant_of(queue: Queue) -> str | None:
    """Lane A's tenant: TA, where the queue can have tenants."""
    return None if queue.fairness == "time" else TA


def build(queue: Queue) -> World:
    world = World(queue)
    # lane A carries every lane policy (none of them refuses or holds back a job here)
    queue.set_rate(A, 1000, 3600)
    queue.set_max_depth(A, 1000)
    for name in ("active", "expired", "dead", "scheduled"):
        queue.enqueue(A, TASK, job_id=f"{name}-1", unique_key=name, tenant=tenant_of(queue))
    world.active = claim_one(queue, LONG)
    world.expired = claim_one(queue, 1)[0]
    dead, token = claim_one(queue, LONG)
    queue.fail(dead, token, "boom")
    world.dead = dead
    scheduled, token = claim_one(queue, LONG)
    queue.retry(scheduled, token, "again", delay_ms=1)
    world.scheduled = scheduled
    world.pending = [queue.enqueue(A, TASK, job_id=f"pending-{i}").job_id for i in (1, 2)]
    world.pending.append(queue.enqueue(B, TASK, job_id="pending-b").job_id)
    # the tenant carries a ceiling and a weight (neither holds back a job here)
    queue.set_tenant_limit(TA, 100)
    queue.set_tenant_weight(TA, 2)
    check_invariants(queue)
    return world


def soon() -> datetime:
    return datetime.now(UTC) + timedelta(milliseconds=1)


#: Each operation, run against the world; returns the ids it deletes when it succeeds.
OPERATIONS: dict[str, Callable[[World], object]] = {
    "enqueue": lambda w: w.queue.enqueue(A, TASK, job_id="new-1"),
    "enqueue_deferred": lambda w: w.queue.enqueue(A, TASK, job_id="new-2", run_after=soon()),
    "enqueue_many": lambda w: w.queue.enqueue_many([{"lane": A, "task_path": TASK}]),
    "enqueue_unique": lambda w: w.queue.enqueue(A, TASK, job_id="new-3", unique_key="new"),
    "set_max_depth": lambda w: w.queue.set_max_depth(A, 500),
    "set_rate": lambda w: w.queue.set_rate(A, 999, 3600),
    "clear_rate": lambda w: w.queue.clear_rate(A),
    "claim": lambda w: w.queue.claim(LONG, turns=2, worker_id="w:1"),
    "complete": lambda w: w.queue.complete(*w.active),
    "complete_then_claim": lambda w: w.queue.complete_then_claim(*w.active, None, LONG),
    "retry": lambda w: w.queue.retry(*w.active, "oops"),
    "retry_later": lambda w: w.queue.retry(*w.active, "oops", delay_ms=1),
    "fail": lambda w: w.queue.fail(*w.active, "oops"),
    "extend": lambda w: w.queue.extend(*w.active, LONG),
    "release": lambda w: w.queue.release(*w.active),
    "reap": lambda w: w.queue.reap(),
    "promote": lambda w: w.queue.promote(),
    "pause": lambda w: w.queue.pause(A),
    "set_limit": lambda w: w.queue.set_limit(A, 1),
    "set_weight": lambda w: w.queue.set_weight(A, 2),
    "set_tenant_weight": lambda w: w.queue.set_tenant_weight(TA, 3),
    "set_tenant_limit": lambda w: w.queue.set_tenant_limit(TA, 1),
    "enqueue_tenant": lambda w: w.queue.enqueue(B, TASK, job_id="new-4", tenant=TA),
    "drain": lambda w: w.queue.drain(A),
    "move": lambda w: w.queue.move(w.pending[0], B),
    "retry_dead": lambda w: w.queue.retry_dead(lane=A),
    "delete_dead": lambda w: w.queue.delete_dead(lane=A),
}


def structural_keys(world: World) -> dict[str, tuple[str, str]]:
    """Every key a script may touch: name -> (key, its type)."""
    k = world.queue.keys
    fixed = {
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
        "max_depths": "hash",
        "unique": "hash",
        "rates": "hash",
        "throttled": "zset",
        "turn": "hash",
        "timeshare": "hash",
        "tenants": "hash",
        "tenant_turns": "hash",
        "policies": "hash",  # the policy index (lua/includes/check.lua)
    }
    keys = {name: (str(getattr(k, name)), kind) for name, kind in fixed.items()}
    keys["lane starts"] = (k.starts(A), "list")
    keys["tenant ring"] = (k.tenant_ring(TA), "list")
    keys["lane pending"] = (k.pending(A), "zset")
    keys["lane active"] = (k.lane_active(A), "zset")
    keys["lane dead"] = (k.lane_dead(A), "zset")
    keys["active job row"] = (k.job(world.active[0]), "hash")
    keys["pending job row"] = (k.job(world.pending[0]), "hash")
    keys["dead job row"] = (k.job(world.dead), "hash")
    return keys


def corruptions(world: World) -> list[tuple[str, str, str]]:
    """(name, key, wrong type) for every key and every type but its own."""
    return [
        (name, key, wrong)
        for name, (key, kind) in structural_keys(world).items()
        for wrong in WRONG
        if wrong != kind
    ]


def without_ring_order(state: dict[str, Any], queue: Queue) -> dict[str, Any]:
    """The state with the rings' order left out (a claim rotates the top ring and
    the tenant's ring before it finds a broken key)."""
    for ring in (queue.keys.ring, queue.keys.tenant_ring(TA)):
        if ring in state and state[ring][0] == "list":
            kind, members, ttl = state[ring]
            state = {**state, ring: (kind, sorted(members), ttl)}
    return state


def run_everything(world: World) -> set[str]:
    """Settle the world: every job that still exists runs; returns the ids that ran."""
    queue = world.queue
    for job_id in [text(m) for m in queue.connection.zrange(queue.keys.active, 0, -1)]:
        row = queue.job(job_id)
        if row is not None:  # claimed by the setup or the operation: hand it back
            queue.release(job_id, int(row["attempts"]))
    queue.resume(A)
    queue.retry_dead(lane=A)
    queue.reap()
    ran: set[str] = set()
    for _ in range(100):
        queue.promote()
        claims = queue.claim(LONG, turns=10, worker_id="w:drain")
        if claims is None:
            if queue.totals().scheduled == 0:
                break
            continue
        for c in claims:
            queue.complete(c.job_id, c.token)
            ran.add(c.job_id)
    return ran


def one_case(r: redis.Redis, operation: str, name: str, key: str, wrong: str) -> str | None:
    """What went wrong with this corruption, or None."""
    r.flushall()
    queue = Queue("q", connection=r, fairness=fairness_for(operation))
    world = build(queue)
    ids = world.ids()
    saved = r.dump(key)
    r.delete(key)
    WRONG[wrong](r, key)
    before = without_ring_order(dump(r), queue)
    raised: Exception | None = None
    try:
        OPERATIONS[operation](world)
    except (CorruptKeyspace, JobError) as exc:
        raised = exc
    except Exception as exc:  # any other error is what the test reports
        return f"raised {type(exc).__name__}: {exc}"
    if isinstance(raised, CorruptKeyspace):
        if raised.key != key:
            return f"CorruptKeyspace names {raised.key!r}, not {key!r}: {raised}"
        if without_ring_order(dump(r), queue) != before:
            return "raised CorruptKeyspace after writing"
    elif isinstance(raised, JobError):
        return f"raised {type(raised).__name__}: {raised}"
    # restore the key (unless the operation deleted it, as drain deletes rows)
    if r.type(key) == wrong.encode():
        r.delete(key)
        if saved is not None:
            r.restore(key, 0, saved)
    try:
        check_invariants(queue)
    except AssertionError as exc:
        return f"invariants broken after restoring the key: {exc}"
    ran = run_everything(world)
    deleted = {"drain": set(world.pending[:2]), "delete_dead": {world.dead}}
    gone = deleted.get(operation, set()) if raised is None else set()
    for job_id in ids - gone:
        row = queue.job(job_id)
        if row is None or row.get("state") != "done":
            return f"job {job_id} never ran ({row and row.get('state')}); ran: {sorted(ran)}"
    try:
        check_invariants(queue)
    except AssertionError as exc:
        return f"invariants broken after running every job: {exc}"
    return None


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_key_of_the_wrong_type_is_reported_and_costs_no_job(
    r: redis.Redis, operation: str
) -> None:
    r.flushall()
    cases = corruptions(build(Queue("q", connection=r, fairness=fairness_for(operation))))
    problems = []
    for name, key, wrong in cases:
        problem = one_case(r, operation, name, key, wrong)
        if problem:
            problems.append(f"{name} as a {wrong}: {problem}")
    assert not problems, f"{operation}:\n" + "\n".join(problems)


def test_a_counter_holding_garbage_is_mended_not_fatal(r: redis.Redis, queue: Queue) -> None:
    queue.enqueue(A, TASK, job_id="one")
    r.hset(queue.keys.stats, "pending", "garbage")
    r.hset(queue.keys.inflight, A, "garbage")
    claims = queue.claim(LONG, worker_id="w:1")
    assert claims is not None
    queue.complete(claims[0].job_id, claims[0].token)
    assert queue.job("one") is not None
    assert queue.job("one")["state"] == "done"  # type: ignore[index]


def test_a_seq_that_is_no_number_refuses_enqueue_and_writes_nothing(
    r: redis.Redis, queue: Queue
) -> None:
    r.set(queue.keys.seq, "garbage")
    before = dump(r)
    with pytest.raises(CorruptKeyspace, match=r"emq:\{q\}:seq is a string"):
        queue.enqueue(A, TASK, job_id="one")
    assert dump(r) == before


@pytest.mark.parametrize("held", ["0", "junk", None, "5"])
def test_a_completion_that_fails_on_a_lane_key_gives_the_completed_count_back_exactly(
    r: redis.Redis, queue: Queue, held: str | None
) -> None:
    """The count is the completion's first write (its guarded touch checks the
    stats hash's type); a lane's active set of the wrong type met after it
    fails the call, and the count goes back to what it held, garbage included
    (a "0" and an absent field read alike: either may stand for the other)."""
    queue.enqueue(A, TASK, job_id="one")
    queue.enqueue(lane_id("USR", 2), TASK, job_id="two")
    claims = queue.claim(LONG, turns=2, worker_id="w:1")
    assert claims is not None
    assert len(claims) == 2
    if held is None:
        r.hdel(queue.keys.stats, "completed")
    else:
        r.hset(queue.keys.stats, "completed", held)
    r.delete(queue.keys.lane_active(lane_id("USR", 2)))
    r.set(queue.keys.lane_active(lane_id("USR", 2)), "not a set")
    before = dump(r)
    with pytest.raises(CorruptKeyspace):
        queue.complete_many([(c.job_id, c.token, None) for c in claims])
    after = dump(r)
    if held == "0":  # taken back as a field the count made: read as 0 alike
        assert r.hget(queue.keys.stats, "completed") is None
        kind, fields, ttl = before.pop(queue.keys.stats)
        fields = {k: v for k, v in fields.items() if _name(k) != "completed"}
        assert after.pop(queue.keys.stats) == (kind, fields, ttl)
    assert after == before


def _name(field: Any) -> str:
    return field.decode() if isinstance(field, bytes) else str(field)


def test_a_weighted_claim_that_fails_on_the_depth_index_keeps_the_saved_turn(
    r: redis.Redis, queue: Queue
) -> None:
    """Nothing claimed, the claim fails naming the index; the rest of the lane's
    weighted turn that an earlier claim saved is still there for the next one."""
    queue.set_weight(A, 3)
    for n in range(3):
        queue.enqueue(A, TASK, job_id=f"j{n}")
    assert len(queue.claim(LONG, worker_id="w:1", max_jobs=1) or []) == 1  # turn saved
    assert r.hgetall(queue.keys.turn)
    r.delete(queue.keys.depths)
    r.set(queue.keys.depths, "not a zset")
    before = dump(r)
    with pytest.raises(CorruptKeyspace, match="depths"):
        queue.claim(LONG, turns=4, worker_id="w:1")
    assert dump(r) == before


@pytest.mark.parametrize("garbage", ["", "?!", "wcnhdrtus" * 3, b"\xff\xfe"], ids=repr)
def test_garbage_in_the_policy_index_fails_nothing_and_the_doctor_mends_it(
    r: redis.Redis, queue: Queue, garbage: str | bytes
) -> None:
    """The policy index holding what no script writes (a hand edit): the hot
    paths neither crash nor refuse (a letter too many costs a lookup, one too
    few leaves a setting unread until the repair), and the doctor reports and
    mends it."""
    queue.set_weight(A, 2)
    queue.set_limit(B, 1)
    queue.enqueue_many([{"lane": lane, "task_path": TASK} for lane in (A, A, A, B, B)])
    r.hset(queue.keys.policies, mapping={"*": garbage, A: garbage, B: garbage})
    claims = queue.claim(LONG, turns=4, worker_id="w:1")
    assert claims
    got, errors = queue.complete_many_then_claim(
        [(c.job_id, c.token, None) for c in claims], LONG, turns=4
    )
    assert errors == [None] * len(claims)
    found = Doctor(queue).audit()
    assert "policy-index" in {f.what for f in found.findings}
    _, after = Doctor(queue).repair()
    assert after.clean, after.findings
    for c in got:
        queue.complete(c.job_id, c.token)
    check_invariants(queue)
