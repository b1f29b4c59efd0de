"""Whole-keyspace consistency check of one queue (test code: it reads freely).

:func:`check_invariants` asserts that the keyspace doctor
(:mod:`django_emq.engine.doctor`, what ``manage.py emq_doctor`` runs) finds
nothing wrong: the ring holds exactly the serviceable lanes, once each, and
mirrors its set; the tenants' in-flight counts, the depth index and the
pending total agree with the lanes (a lane's in-flight count is its active
set's size: the inflight hash holds tenants' entries only); each lane's
active and dead sets mirror the queue-wide ones; every job id sits in
exactly the places its row's state names; every key is one the engine
writes, of its type. It then reads the whole keyspace into a
:class:`Snapshot` and asserts what only a test checks: the scores
(mint places, claim times, due times, times of death), the settings' values,
the counters on the rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django_emq.engine.doctor import Doctor
from django_emq.engine.ids import validate_lane
from django_emq.engine.keys import QueueKeys
from django_emq.engine.keyspace import FIXED_KEY_TYPES, PLACE_OF_STATE, expected_type
from django_emq.engine.payload import text
from django_emq.engine.queue import Queue
from django_emq.engine.rows import Outcome, Row, attempt_history

__all__ = ["FIXED_KEY_TYPES", "PLACE_OF_STATE", "Snapshot", "check_invariants", "text"]


@dataclass
class Snapshot:
    """What :func:`check_invariants` read, for tests that want to look further."""

    ring: list[str] = field(default_factory=list)
    lanes: dict[str, list[str]] = field(default_factory=dict)
    jobs: dict[str, dict[str, str]] = field(default_factory=dict)
    active: dict[str, int] = field(default_factory=dict)
    schedule: dict[str, int] = field(default_factory=dict)
    dead: dict[str, int] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    ceilings: dict[str, int] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    inflight: dict[str, int] = field(default_factory=dict)
    lane_active: dict[str, dict[str, int]] = field(default_factory=dict)
    lane_dead: dict[str, dict[str, int]] = field(default_factory=dict)
    max_depths: dict[str, int] = field(default_factory=dict)
    unique: dict[str, str] = field(default_factory=dict)
    rates: dict[str, str] = field(default_factory=dict)
    throttled: dict[str, int] = field(default_factory=dict)
    starts: dict[str, list[int]] = field(default_factory=dict)
    #: lane -> its tenant; tenant -> its ring
    tenants: dict[str, str] = field(default_factory=dict)
    tenant_rings: dict[str, list[str]] = field(default_factory=dict)

    def state(self, job_id: str) -> str | None:
        """The job's row state, or ``None`` when it has no row."""
        row = self.jobs.get(job_id)
        return None if row is None else row["state"]


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _zset(r: Any, key: str) -> dict[str, int]:
    return {text(m): int(score) for m, score in r.zrange(key, 0, -1, withscores=True)}


def _hash_ints(r: Any, key: str) -> dict[str, int]:
    return {text(f): int(v) for f, v in r.hgetall(key).items()}


def check_invariants(queue: Queue, *, hollow_ok: bool = False) -> Snapshot:
    """Assert that the doctor finds ``queue``'s keyspace sound, and what only a test
    checks; return what was read.

    The doctor lets the ring hold a lane left empty by a cancel (the next claim
    that lands on it drops it). Only with ``hollow_ok`` does a test allow that:
    no other script may leave an empty lane on the ring."""
    report = Doctor(queue).audit()
    assert report.clean, f"the doctor found {report.problems} problem(s):\n" + "\n".join(
        map(str, report.findings)
    )
    r = queue.connection
    k: QueueKeys = queue.keys
    prefix = k.prefix

    snap = Snapshot()
    lane_keys: dict[str, str] = {}
    lane_active_keys: dict[str, str] = {}
    lane_dead_keys: dict[str, str] = {}
    job_keys: dict[str, str] = {}
    for raw in r.scan_iter(match=_glob_escape(prefix) + "*", count=1000):
        key = text(raw)
        rest = key[len(prefix) :]
        assert expected_type(k, key) is not None, f"unknown key {key!r} in {queue.name!r}"
        if rest.startswith("g:") and rest.endswith(":starts"):
            lane = rest[2 : -len(":starts")]
            snap.starts[lane] = [int(x) for x in r.lrange(key, 0, -1)]  # [] if it expired
        elif rest.startswith("g:"):
            lane, _, kind = rest[2:].rpartition(":")
            {"pending": lane_keys, "active": lane_active_keys, "dead": lane_dead_keys}[kind][
                lane
            ] = key
        elif rest.startswith("job:"):
            job_keys[rest[4:]] = key

    # -- read everything --------------------------------------------------
    snap.ring = [text(x) for x in r.lrange(k.ring, 0, -1)]
    snap.paused = {text(x) for x in r.smembers(k.paused)}
    snap.ceilings = _hash_ints(r, k.ceilings)
    snap.weights = _hash_ints(r, k.weights)
    snap.inflight = _hash_ints(r, k.inflight)
    snap.max_depths = _hash_ints(r, k.max_depths)
    snap.unique = {text(f): text(v) for f, v in r.hgetall(k.unique).items()}
    snap.rates = {text(f): text(v) for f, v in r.hgetall(k.rates).items()}
    snap.throttled = _zset(r, k.throttled)
    snap.active = _zset(r, k.active)
    snap.schedule = _zset(r, k.schedule)
    snap.dead = _zset(r, k.dead)
    lane_scores = {lane: _zset(r, key) for lane, key in lane_keys.items()}
    snap.lane_active = {lane: _zset(r, key) for lane, key in lane_active_keys.items()}
    snap.lane_dead = {lane: _zset(r, key) for lane, key in lane_dead_keys.items()}
    snap.lanes = {
        lane: [m for m, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]))]
        for lane, scores in lane_scores.items()
    }
    snap.jobs = {
        job_id: {text(f): text(v) for f, v in r.hgetall(key).items()}
        for job_id, key in job_keys.items()
    }
    snap.jobs = {job_id: row for job_id, row in snap.jobs.items() if row}  # expired meanwhile

    _check_tenants(queue, snap)
    if not hollow_ok:
        riding = [lane for lane in snap.ring if not lane.startswith("@")]
        riding += [lane for lanes in snap.tenant_rings.values() for lane in lanes]
        hollow = [lane for lane in riding if lane not in snap.lanes]
        assert not hollow, f"empty lanes on the ring: {hollow}"

    # -- settings are well-formed -----------------------------------------
    assert all(c >= 1 for c in snap.ceilings.values()), f"bad ceilings {snap.ceilings}"
    assert all(d >= 1 for d in snap.max_depths.values()), f"bad max depths {snap.max_depths}"
    assert not set(snap.throttled) & set(snap.ring), "a throttled lane is on the ring"
    _check_rates(snap)
    _check_timeshare({text(f): text(v) for f, v in r.hgetall(k.timeshare).items()}, snap)
    assert all(w >= 2 for w in snap.weights.values()), (
        f"weights must be >= 2 (weight 1 is stored as absence): {snap.weights}"
    )
    turn = {text(f): text(v) for f, v in r.hgetall(k.turn).items()}
    if turn:  # the rest of a weighted turn
        assert set(turn) == {"lane", "credit"}, f"a saved turn is {turn}"
        name = turn["lane"]  # a lane, or a tenant's entry
        validate_lane(name[1:] if name.startswith("@") else name)
        assert int(turn["credit"]) >= 1, f"a saved turn holds no credit: {turn}"
    assert all(n > 0 for n in snap.inflight.values()), (
        f"in-flight fields must be positive (absent = 0): {snap.inflight}"
    )
    assert all(name.startswith("@") for name in snap.inflight), (
        f"the inflight hash counts tenants only (a lane's: its active set): {snap.inflight}"
    )
    assert r.llen(k.wake) <= 64, "the wake list is capped at 64 tokens"

    # -- the scores: mint places, claim times, due times, times of death ------
    for lane, scores in snap.lane_active.items():
        for job_id, score in scores.items():
            assert score == int(snap.jobs[job_id]["claimed"]), (
                f"active job {job_id} of lane {lane}: score {score} is not its claim time"
            )
    for lane, scores in snap.lane_dead.items():
        for job_id, score in scores.items():
            assert score == snap.dead[job_id], (
                f"dead job {job_id} of lane {lane}: score {score} is not its time of death"
            )
    for job_id, row in snap.jobs.items():
        state = row.get("state", "")
        if PLACE_OF_STATE[state] == "lane":
            assert lane_scores[row["group"]][job_id] == int(row["seq"]), (
                f"pending job {job_id} lost its mint place"
            )
        attempts = int(row.get("attempts", "0"))
        assert attempts >= 0
        assert int(row.get("fails", "0")) <= attempts, f"job {job_id} failed more than it ran"
        if state == "active":
            assert attempts >= 1, f"active job {job_id} has attempts {attempts}"
        _check_tries(job_id, row, attempts)
        if state == "scheduled":
            assert snap.schedule[job_id] == int(row["due"]), f"job {job_id}: due != score"

    _check_unique(snap)
    return snap


def _check_tries(job_id: str, row: dict[str, str], attempts: int) -> None:
    """A row's attempt times (``tries``): one readable entry per claim it keeps,
    no more than its claims; a running job's last one is open and started at
    its claim."""
    if not row.get(Row.TRIES):
        return
    entries = row[Row.TRIES].split(",")
    assert len(entries) <= attempts, f"job {job_id}: {len(entries)} tries, {attempts} claims"
    kept = attempt_history(row).kept
    assert all(a.outcome != Outcome.UNKNOWN for a in kept[-len(entries) :]), (
        f"job {job_id}: unreadable tries {row[Row.TRIES]!r}"
    )
    if row.get("state") == "active":
        assert kept[-1].outcome == Outcome.RUNNING, f"job {job_id} runs, its try ended"
        assert kept[-1].start_ms == int(row["claimed"]), f"job {job_id}: try != claim time"


def _check_tenants(queue: Queue, snap: Snapshot) -> None:
    """Every lane on the on-ring set rides exactly one ring (its tenant's, or the
    top one); a tenant's entry is on the top ring exactly when a lane is on its
    ring and it is under its ceiling; its in-flight count sums its lanes'."""
    r, k = queue.connection, queue.keys
    snap.tenants = {text(f): text(v) for f, v in r.hgetall(k.tenants).items()}
    owners = set(snap.tenants.values())
    owners |= {name[1:] for name in snap.ring if name.startswith("@")}
    snap.tenant_rings = {t: [text(x) for x in r.lrange(k.tenant_ring(t), 0, -1)] for t in owners}
    on_ring = {text(x) for x in r.smembers(k.on_ring)}
    riding = [name for name in snap.ring if not name.startswith("@")]
    for tenant, lanes in snap.tenant_rings.items():
        for lane_id in lanes:
            assert snap.tenants.get(lane_id) == tenant, f"{lane_id} on {tenant}'s ring"
        riding += lanes
        entry = "@" + tenant
        mine = [n for n, t in snap.tenants.items() if t == tenant]
        total = sum(len(snap.lane_active.get(n, {})) for n in mine)
        assert snap.inflight.get(entry, 0) == total, f"{tenant} counts {snap.inflight.get(entry)}"
        ceiling = snap.ceilings.get(entry)
        open_ = bool(lanes) and (ceiling is None or total < ceiling)
        assert snap.ring.count(entry) == (1 if open_ else 0), f"{entry} on the ring: {snap.ring}"
    for lane_id in riding:
        if not lane_id.startswith("@"):
            assert lane_id not in snap.tenants or lane_id not in snap.ring, (
                f"tenanted {lane_id} on the top ring"
            )
    assert sorted(riding) == sorted(n for n in on_ring if not n.startswith("@")), (
        f"the rings {sorted(riding)} and the on-ring set {sorted(on_ring)} disagree"
    )
    assert len(riding) == len(set(riding)), f"a lane rides twice: {riding}"
    turns = {text(f): text(v) for f, v in r.hgetall(k.tenant_turns).items()}
    for tenant, turn in turns.items():
        lane_id, _, credit = turn.partition(" ")
        validate_lane(lane_id)
        assert int(credit) >= 1, f"{tenant}'s saved turn holds no credit: {turn}"


def _check_rates(snap: Snapshot) -> None:
    """Rates are ``<count>:<per_ms>``; a lane's start log is sorted and never
    longer than its own limit's count."""
    for lane, spec in snap.rates.items():
        count, _, per = spec.partition(":")
        assert count.isdigit(), f"lane {lane} has a bad rate {spec!r}"
        assert per.isdigit(), f"lane {lane} has a bad rate {spec!r}"
        assert int(count) >= 1, f"lane {lane} has a bad rate {spec!r}"
        assert int(per) >= 1, f"lane {lane} has a bad rate {spec!r}"
    for lane, stamps in snap.starts.items():
        assert stamps == sorted(stamps), f"lane {lane}'s start log is not in order: {stamps}"
        if lane in snap.rates:
            most = int(snap.rates[lane].partition(":")[0])
            assert len(stamps) <= most, f"lane {lane} logs {len(stamps)} starts > {most}"


def _check_timeshare(fields: dict[str, str], snap: Snapshot) -> None:
    """A time-fair queue's hash: ``quantum`` a number of ms, ``<lane>`` a whole
    credit of ms, ``<lane>:avg`` a whole average of at least 1 ms, ``head`` a
    lane; a row keeps
    the charge of its claim only while the attempt is active."""
    for name, value in fields.items():
        if name == "quantum":
            assert float(value) >= 0, f"the quantum is {value!r}"
            continue
        if name == "head":  # the lane whose turn a claim cut short
            validate_lane(value)
            continue
        lane, _, avg = name.partition(":")
        validate_lane(lane)
        assert avg in ("", "avg"), f"timeshare field {name!r}"
        assert value.lstrip("-").isdigit(), f"timeshare {name} = {value!r}"
        if avg:
            assert int(value) >= 1, f"lane {lane}'s average run time is {value}"
    for job_id, row in snap.jobs.items():
        if "charge" in row:
            assert row.get("state") == "active", f"job {job_id} keeps a charge while {row}"


def _check_unique(snap: Snapshot) -> None:
    """Each unique key is held by exactly the unfinished job whose row names it."""
    for held, job_id in snap.unique.items():
        lane, _, key = held.partition(":")
        row = snap.jobs.get(job_id)
        assert row is not None, f"unique key {held!r} is held by {job_id}, which has no row"
        assert row["state"] in ("pending", "scheduled", "active"), (
            f"unique key {held!r} is held by {row['state']} job {job_id}"
        )
        assert (row.get("group"), row.get("uniq")) == (lane, key), (
            f"unique key {held!r} is held by {job_id} of lane {row.get('group')} "
            f"with key {row.get('uniq')!r}"
        )
    for job_id, row in snap.jobs.items():
        if "uniq" in row:
            held = f"{row['group']}:{row['uniq']}"
            assert snap.unique.get(held) == job_id, (
                f"{row['state']} job {job_id} names unique key {held!r}, held by "
                f"{snap.unique.get(held)}"
            )
