"""Whole-keyspace consistency check of one queue (test code: it SCANs freely).

:func:`check_invariants` reads every key of a queue and asserts the
structural invariants every script must keep: the ring holds exactly the
serviceable lanes, once each; the on-ring set mirrors it; the in-flight
counts, the depth index and the pending total agree with the lanes and the
active set; each lane's active and dead sets mirror the queue-wide ones; and
every job id sits in exactly the one place its row's state says.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django_emq.engine.ids import validate_job_id, validate_lane
from django_emq.engine.keys import QueueKeys
from django_emq.engine.payload import text

__all__ = ["Snapshot", "check_invariants", "text"]
from django_emq.engine.queue import Queue

#: Where a job of each state must be: ``lane`` (its lane's pending set), one of
#: the queue-wide sorted sets, or nowhere (``None``).
PLACE_OF_STATE: dict[str, str | None] = {
    "pending": "lane",
    "active": "active",
    "scheduled": "schedule",
    "dead": "dead",
    "done": None,
}

#: Redis type of each fixed key that may exist.
FIXED_KEY_TYPES: dict[str, str] = {
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
    "workers": "hash",
    "max_depths": "hash",
    "unique": "hash",
    "rates": "hash",
    "throttled": "zset",
}


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


def check_invariants(queue: Queue) -> Snapshot:
    """Assert every structural invariant of ``queue``'s keyspace; return what was read."""
    r = queue.connection
    k: QueueKeys = queue.keys
    prefix = k.prefix
    fixed = {getattr(k, attr): attr for attr in FIXED_KEY_TYPES}

    snap = Snapshot()
    lane_keys: dict[str, str] = {}
    lane_active_keys: dict[str, str] = {}
    lane_dead_keys: dict[str, str] = {}
    job_keys: dict[str, str] = {}
    for raw in r.scan_iter(match=_glob_escape(prefix) + "*", count=1000):
        key = text(raw)
        rest = key[len(prefix) :]
        if key in fixed:
            kind = text(r.type(key))
            expected = FIXED_KEY_TYPES[fixed[key]]
            # "none": the key went between SCAN and TYPE, as the wake list does
            # when a parked worker that is still running pops its last token.
            assert kind in (expected, "none"), f"{key} is a {kind}, expected a {expected}"
        elif rest.startswith("g:") and rest.endswith(":pending"):
            lane = validate_lane(rest[2 : -len(":pending")])
            assert text(r.type(key)) == "zset", f"{key} is not a sorted set"
            lane_keys[lane] = key
        elif rest.startswith("g:") and rest.endswith(":starts"):
            lane = validate_lane(rest[2 : -len(":starts")])
            kind = text(r.type(key))
            assert kind in ("list", "none"), f"{key} is not a list"  # "none": it expired
            snap.starts[lane] = [int(x) for x in r.lrange(key, 0, -1)]
        elif rest.startswith("g:") and rest.endswith((":active", ":dead")):
            lane, _, kind = rest[2:].rpartition(":")
            validate_lane(lane)
            assert text(r.type(key)) == "zset", f"{key} is not a sorted set"
            (lane_active_keys if kind == "active" else lane_dead_keys)[lane] = key
        elif rest.startswith("job:"):
            job_id = validate_job_id(rest[4:])
            assert text(r.type(key)) == "hash", f"{key} is not a hash"
            job_keys[job_id] = key
        else:
            raise AssertionError(f"unknown key {key!r} in queue {queue.name!r}")

    # -- read everything --------------------------------------------------
    snap.ring = [text(x) for x in r.lrange(k.ring, 0, -1)]
    on_ring = {text(x) for x in r.smembers(k.on_ring)}
    snap.paused = {text(x) for x in r.smembers(k.paused)}
    snap.ceilings = _hash_ints(r, k.ceilings)
    snap.weights = _hash_ints(r, k.weights)
    snap.inflight = _hash_ints(r, k.inflight)
    depths = _zset(r, k.depths)
    snap.max_depths = _hash_ints(r, k.max_depths)
    snap.unique = {text(f): text(v) for f, v in r.hgetall(k.unique).items()}
    snap.rates = {text(f): text(v) for f, v in r.hgetall(k.rates).items()}
    snap.throttled = _zset(r, k.throttled)
    stats = _hash_ints(r, k.stats)
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

    # -- settings are well-formed -----------------------------------------
    for lane in snap.paused | set(snap.ceilings) | set(snap.weights) | set(snap.inflight):
        validate_lane(lane)
    assert all(c >= 1 for c in snap.ceilings.values()), f"bad ceilings {snap.ceilings}"
    for lane in snap.max_depths:
        validate_lane(lane)
    assert all(d >= 1 for d in snap.max_depths.values()), f"bad max depths {snap.max_depths}"
    _check_rates(snap)
    assert all(w >= 2 for w in snap.weights.values()), (
        f"weights must be >= 2 (weight 1 is stored as absence): {snap.weights}"
    )
    assert r.llen(k.wake) <= 64, "the wake list is capped at 64 tokens"

    # -- the ring ---------------------------------------------------------
    duplicates = [lane for lane, n in Counter(snap.ring).items() if n > 1]
    assert not duplicates, f"lanes on the ring more than once: {duplicates}"
    assert set(snap.ring) == on_ring, (
        f"onring {sorted(on_ring)} differs from the ring {sorted(snap.ring)}"
    )
    serviceable = {
        lane
        for lane in snap.lanes
        if lane not in snap.paused
        and (lane not in snap.ceilings or snap.inflight.get(lane, 0) < snap.ceilings[lane])
        and lane not in snap.throttled
    }
    assert set(snap.ring) == serviceable, (
        f"ring has {sorted(set(snap.ring) - serviceable)} not serviceable; "
        f"misses serviceable {sorted(serviceable - set(snap.ring))}"
    )

    # -- in-flight counts -------------------------------------------------
    assert all(n > 0 for n in snap.inflight.values()), (
        f"in-flight fields must be positive (absent = 0): {snap.inflight}"
    )
    active_per_lane = Counter(
        snap.jobs[job_id]["group"] for job_id in snap.active if job_id in snap.jobs
    )
    assert snap.inflight == dict(active_per_lane), (
        f"inflight {snap.inflight} differs from the active jobs per lane {dict(active_per_lane)}"
    )

    # -- each lane's active and dead sets mirror the queue-wide ones -------
    for name, per_lane, whole in (
        ("active", snap.lane_active, snap.active),
        ("dead", snap.lane_dead, snap.dead),
    ):
        by_lane: dict[str, set[str]] = {}
        for job_id in whole:
            if job_id in snap.jobs:
                by_lane.setdefault(snap.jobs[job_id]["group"], set()).add(job_id)
        held = {lane: set(scores) for lane, scores in per_lane.items()}
        assert held == by_lane, f"lanes' {name} sets {held} differ from {name} {by_lane}"
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

    # -- depth index and pending total ------------------------------------
    real_depths = {lane: len(members) for lane, members in snap.lanes.items()}
    assert all(n > 0 for n in real_depths.values())
    assert depths == real_depths, f"depth index {depths} differs from the lanes {real_depths}"
    assert stats.get("pending", 0) == sum(real_depths.values()), (
        f"stats pending {stats.get('pending', 0)} != sum of depths {sum(real_depths.values())}"
    )

    # -- every job in exactly one place, the one its state names ------------
    places: dict[str, list[tuple[str, str | None]]] = {}
    for lane, members in snap.lanes.items():
        for job_id in members:
            places.setdefault(job_id, []).append(("lane", lane))
    for name, zset in (("active", snap.active), ("schedule", snap.schedule), ("dead", snap.dead)):
        for job_id in zset:
            places.setdefault(job_id, []).append((name, None))

    for job_id, where in places.items():
        assert len(where) == 1, f"job {job_id} is in more than one place: {where}"
        assert job_id in snap.jobs, f"job {job_id} is in {where[0]} but has no row"

    for job_id, row in snap.jobs.items():
        state = row.get("state", "")
        assert state in PLACE_OF_STATE, f"job {job_id} has unknown state {state!r}"
        group = validate_lane(row.get("group"))
        place = PLACE_OF_STATE[state]
        where = places.get(job_id, [])
        if place is None:
            assert not where, f"{state} job {job_id} is still in {where}"
        elif place == "lane":
            assert where == [("lane", group)], (
                f"pending job {job_id} of lane {group} is in {where or 'no place'}"
            )
            assert lane_scores[group][job_id] == int(row["seq"]), (
                f"pending job {job_id} lost its mint place"
            )
        else:
            assert where == [(place, None)], (
                f"{state} job {job_id} should be in {place}, is in {where or 'no place'}"
            )
        attempts = int(row.get("attempts", "0"))
        assert attempts >= 0
        assert int(row.get("fails", "0")) <= attempts, f"job {job_id} failed more than it ran"
        if state == "active":
            assert attempts >= 1, f"active job {job_id} has attempts {attempts}"
        if state == "scheduled":
            assert snap.schedule[job_id] == int(row["due"]), f"job {job_id}: due != score"

    _check_unique(snap)
    return snap


def _check_rates(snap: Snapshot) -> None:
    """Rates are ``<count>:<per_ms>``; a lane's start log is sorted and never
    longer than its own limit's count."""
    for lane, spec in snap.rates.items():
        validate_lane(lane)
        count, _, per = spec.partition(":")
        assert count.isdigit(), f"lane {lane} has a bad rate {spec!r}"
        assert per.isdigit(), f"lane {lane} has a bad rate {spec!r}"
        assert int(count) >= 1, f"lane {lane} has a bad rate {spec!r}"
        assert int(per) >= 1, f"lane {lane} has a bad rate {spec!r}"
    for lane in snap.throttled:
        validate_lane(lane)
    for lane, stamps in snap.starts.items():
        assert stamps == sorted(stamps), f"lane {lane}'s start log is not in order: {stamps}"
        if lane in snap.rates:
            most = int(snap.rates[lane].partition(":")[0])
            assert len(stamps) <= most, f"lane {lane} logs {len(stamps)} starts > {most}"


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
