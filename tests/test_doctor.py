"""The keyspace doctor: a clean report on a healthy queue (its cost counted),
each kind of damage found and mended, after which the invariants hold and
every job runs exactly once; and ``manage.py emq_doctor``'s exit status.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.core.management import CommandError, call_command
from django.tasks import task_backends

from django_emq import lane as in_lane
from django_emq.backend import QUEUE_REGISTRY, FairLanesBackend
from django_emq.engine.doctor import Doctor
from django_emq.engine.doctor_registry import RegistryDoctor
from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Queue
from django_emq.engine.shards import shards_of
from django_emq.exceptions import JobError
from tests import tasks
from tests.any_queue_settings import ANYQ
from tests.test_worker import backend

from .invariants import check_invariants, text

TASK = "tests.tasks.noop"
LANES = [lane_id("USR", n) for n in range(1, 5)]
A, B = LANES[0], LANES[1]


def world(queue: Queue) -> dict[str, Any]:
    """Jobs in every state over four lanes; returns the claims held."""
    queue.enqueue_many([{"lane": lane, "task_path": TASK} for lane in LANES for _ in range(5)])
    claims = queue.claim(60_000, turns=4, worker_id="w:1")
    assert claims is not None
    queue.fail(claims[0].job_id, claims[0].token, "boom")
    queue.retry(claims[1].job_id, claims[1].token, "later", delay_ms=1)
    queue.set_limit(LANES[3], 1)
    check_invariants(queue)
    return {"held": claims[2:]}


def pending_of(r: redis.Redis, queue: Queue, lane: str) -> list[str]:
    return [text(m) for m in r.zrange(queue.keys.pending(lane), 0, -1)]


def run_all(queue: Queue, held: list[Any]) -> Counter[str]:
    """Settle the queue: every job runs; returns how often each one ran."""
    ran: Counter[str] = Counter()
    for c in held:
        # a claim the repair sent back to its lane (it had no lease) is refused
        with contextlib.suppress(JobError):
            queue.release(c.job_id, c.token)
    queue.retry_dead(lane=A)
    queue.set_limit(LANES[3], None)
    for _ in range(1000):
        queue.promote()
        claims = queue.claim(60_000, turns=10, worker_id="w:2")
        if claims is None:
            if queue.totals().scheduled == 0:
                break
            continue
        for c in claims:
            queue.complete(c.job_id, c.token)
            ran[c.job_id] += 1
    return ran


#: Each kind of damage: what it does, and the finding the doctor must report.
DAMAGE: dict[str, tuple[Callable[[redis.Redis, Queue], Any], str]] = {
    "a job missing from its lane": (
        lambda r, q: r.zrem(q.keys.pending(A), pending_of(r, q, A)[0]),
        "job-missing",
    ),
    "a claimed job with no lease": (
        lambda r, q: r.zrem(q.keys.active, text(r.zrange(q.keys.active, 0, 0)[0])),
        "job-missing",
    ),
    "a job in a second lane": (
        lambda r, q: r.zadd(q.keys.pending(B), {pending_of(r, q, A)[0]: 1}),
        "member-stray",
    ),
    "a member with no row": (
        lambda r, q: r.zadd(q.keys.pending(B), {"JOB0000000000000gone": 1}),
        "member-orphan",
    ),
    "a depth index off": (lambda r, q: r.zincrby(q.keys.depths, 5, A), "depth"),
    "an in-flight count off": (lambda r, q: r.hincrby(q.keys.inflight, B, 2), "inflight"),
    "a lane twice on the ring": (lambda r, q: r.rpush(q.keys.ring, A), "ring"),
    "a lane missing from the ring": (
        lambda r, q: (r.lrem(q.keys.ring, 1, B), r.srem(q.keys.on_ring, B)),
        "ring",
    ),
    "a pending total off": (lambda r, q: r.hset(q.keys.stats, "pending", 99), "total"),
    "the counters a string": (
        lambda r, q: (r.delete(q.keys.stats), r.set(q.keys.stats, "x")),
        "type",
    ),
    "the depth index a string": (
        lambda r, q: (r.delete(q.keys.depths), r.set(q.keys.depths, "x")),
        "type",
    ),
    "the ring a string": (
        lambda r, q: (r.delete(q.keys.ring), r.set(q.keys.ring, "x")),
        "type",
    ),
    "the active set a hash": (
        lambda r, q: (r.delete(q.keys.active), r.hset(q.keys.active, "x", "1")),
        "type",
    ),
    "a lane's pending set a string": (
        lambda r, q: (r.delete(q.keys.pending(A)), r.set(q.keys.pending(A), "x")),
        "type",
    ),
    "a lane's active set a list": (
        lambda r, q: (r.delete(q.keys.lane_active(B)), r.rpush(q.keys.lane_active(B), "x")),
        "type",
    ),
    "a name that is no lane in the index": (
        lambda r, q: r.zadd(q.keys.depths, {"x/y": 3}),
        "not-a-lane",
    ),
    "a name that is no lane on the ring": (
        lambda r, q: (r.rpush(q.keys.ring, "a/b"), r.sadd(q.keys.on_ring, "a/b")),
        "not-a-lane",
    ),
    # the policy index (lua/includes/check.lua): what the hot paths read instead
    # of the policies' hashes (the world gives LANES[3] a ceiling)
    "a lane's setting missing from the policy index": (
        lambda r, q: r.hset(q.keys.weights, A, 3),
        "policy-index",
    ),
    "a setting the lane lacks in the policy index": (
        lambda r, q: r.hset(q.keys.policies, B, "c"),
        "policy-index",
    ),
    "garbage in the policy index": (
        lambda r, q: r.hset(q.keys.policies, LANES[3], "?!"),
        "policy-index",
    ),
    "a policy in use missing from the policy index's flags": (
        lambda r, q: r.hset(q.keys.policies, "*", ""),
        "policy-index",
    ),
    "the policy index a string": (
        lambda r, q: (r.delete(q.keys.policies), r.set(q.keys.policies, "x")),
        "type",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_the_doctor_finds_and_mends_each_kind_of_damage(
    r: redis.Redis, queue: Queue, damage: str
) -> None:
    held = world(queue)["held"]
    jobs = {k.removeprefix(queue.keys.prefix + "job:") for k in map(text, r.keys("*job:*"))}
    do, kind = DAMAGE[damage]
    do(r, queue)
    found = Doctor(queue, batch=7).audit()
    assert kind in {f.what for f in found.findings}, found.findings
    mended, after = Doctor(queue, batch=7).repair()
    assert mended.mended > 0
    assert after.clean, after.findings
    check_invariants(queue)
    ran = run_all(queue, held)
    survivors = {j for j in jobs if queue.job(j) is not None}
    assert set(ran) == survivors
    assert set(ran.values()) == {1}, "a job ran twice"
    check_invariants(queue)


def test_the_policy_index_is_rebuilt_from_the_policies_hashes(r: redis.Redis, queue: Queue) -> None:
    """Deleted (an index written by no release yet, or lost), the index is rebuilt
    by a repair, and the policies it names apply again."""
    queue.set_weight(A, 2)
    queue.set_limit(B, 1)
    queue.enqueue(B, TASK, tenant=lane_id("ORG", 1))
    index = {text(f): text(v) for f, v in r.hgetall(queue.keys.policies).items()}
    assert index == {"*": "wct", A: "w", B: "ct"}  # letters in the registry's order
    r.delete(queue.keys.policies)
    found = Doctor(queue).audit()
    assert {f.subject for f in found.findings if f.what == "policy-index"} == {"*", A, B}
    _, after = Doctor(queue).repair()
    assert after.clean, after.findings
    assert {text(f): text(v) for f, v in r.hgetall(queue.keys.policies).items()} == index
    check_invariants(queue)


def test_a_queue_without_the_policy_index_keeps_its_policies_until_the_repair(
    r: redis.Redis, queue: Queue
) -> None:
    """A queue written by a release before the index (its policies' keys, no
    index): the claims and completions ask the keys themselves, so a weight, a
    ceiling and a tenant still apply; a new write keeps its lane's field (a
    repair running meanwhile does not miss it) but writes no ``*``: the index
    is not in force; the repair builds it, and the index is then read instead."""
    queue.set_weight(A, 2)
    queue.set_limit(B, 1)
    r.delete(queue.keys.policies)  # as an older release left it
    queue.set_max_depth(A, 100)  # a write now: its lane's field, no '*'
    assert r.hgetall(queue.keys.policies) == {A.encode(): b"d"}
    queue.enqueue_many([{"lane": lane, "task_path": TASK} for lane in (A, A, A, B, B)])
    claims = queue.claim(60_000, turns=2, worker_id="w:1")
    assert claims is not None
    # A's weight: two of its jobs in its turn; B's ceiling: one, then off the ring
    assert [c.lane for c in claims] == [A, A, B]
    assert r.sismember(queue.keys.on_ring, B) == 0
    queue.complete(claims[2].job_id, claims[2].token)  # B rejoins: its ceiling was read
    assert r.sismember(queue.keys.on_ring, B) == 1
    assert r.hget(queue.keys.policies, "*") is None
    found = Doctor(queue).audit()
    assert {f.subject for f in found.findings if f.what == "policy-index"} == {"*", A, B}
    _, after = Doctor(queue).repair()
    assert after.clean, after.findings
    assert r.hget(queue.keys.policies, "*") == b"wcd"
    assert r.hget(queue.keys.policies, A) == b"wd"
    check_invariants(queue)


def test_a_new_queue_records_its_empty_policy_index_with_its_first_call(
    r: redis.Redis, queue: Queue
) -> None:
    """No policy key holds anything: the index is in force, empty, and the first
    call that writes records its ``*``, so the next calls read one field."""
    queue.enqueue(A, TASK)
    assert not r.exists(queue.keys.policies)
    claims = queue.claim(60_000, worker_id="w:1")
    assert claims is not None
    assert r.hgetall(queue.keys.policies) == {b"*": b""}
    queue.complete(claims[0].job_id, claims[0].token)
    assert r.hgetall(queue.keys.policies) == {b"*": b""}
    assert Doctor(queue).audit().clean


def test_a_queue_without_the_index_whose_policies_name_no_lane_builds_it_itself(
    r: redis.Redis, queue: Queue
) -> None:
    """Unique keys held and no lane setting (as an older release left such a
    queue): the index is only ``*``, so the first call that writes builds it."""
    queue.enqueue(A, TASK, unique_key="k")
    queue.enqueue(B, TASK)
    r.delete(queue.keys.policies)
    claims = queue.claim(60_000, worker_id="w:1")
    assert claims is not None
    assert r.hgetall(queue.keys.policies) == {b"*": b"u"}
    assert queue.enqueue(A, TASK, unique_key="k").job_id == claims[0].job_id
    queue.complete(claims[0].job_id, claims[0].token)  # frees the key: the last one
    assert r.hgetall(queue.keys.policies) == {b"*": b""}
    assert Doctor(queue).audit().clean


def test_a_stale_flag_of_the_policy_index_is_no_damage(r: redis.Redis, queue: Queue) -> None:
    """A letter of ``*`` whose hash is empty costs a lookup, never a wrong
    answer: the audit is clean, and a repair drops it without counting it."""
    queue.set_limit(A, 1)
    r.hset(queue.keys.policies, "*", "wc")  # no lane has a weight
    assert Doctor(queue).audit().clean
    mended, after = Doctor(queue).repair()
    assert mended.mended == 0
    assert after.clean
    assert r.hget(queue.keys.policies, "*") == b"c"


def test_a_stray_key_is_reported_and_left_alone(r: redis.Redis, queue: Queue) -> None:
    world(queue)
    r.set(queue.keys.prefix + "mine", "1")
    _, after = Doctor(queue).repair()
    assert [f.what for f in after.findings] == ["stray-key"]
    assert r.get(queue.keys.prefix + "mine") == b"1"


def test_a_healthy_queue_of_100000_jobs_is_clean_at_a_bounded_cost(
    r: redis.Redis, queue: Queue
) -> None:
    lanes = [lane_id("USR", n) for n in range(1, 1001)]
    jobs = [{"lane": lane, "task_path": TASK} for _ in range(100) for lane in lanes]
    for i in range(0, len(jobs), 5000):
        queue.enqueue_many(jobs[i : i + 5000])
    claims = queue.claim(60_000, turns=500, worker_id="w:1")
    assert claims is not None
    for c in claims[:100]:
        queue.fail(c.job_id, c.token, "boom")
    r.config_resetstat()
    report = Doctor(queue, batch=500).audit()
    stats = r.info("commandstats")
    assert report.clean, report.findings
    assert report.jobs == 100_000
    calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
    # one script call per batch of rows, of lanes and of a set's members (a
    # lane's sets are small: one call each; 1,000 pending, 400 active, 100 dead)
    assert calls["fcall"] <= 3 * 100_000 // 500 + 1_500 + 50
    assert calls["scan"] <= 2 * 101_000 // 500 + 10
    # inside the scripts: a row's check is a few reads, a member's two
    assert sum(calls.values()) <= 16 * 100_000


def test_emq_doctor_exits_non_zero_on_damage_and_mends_with_repair(
    emq: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = backend().queue("default")
    world(queue)
    call_command("emq_doctor", verbosity=0)
    assert "0 problem(s)" in capsys.readouterr().out
    emq.zincrby(queue.keys.depths, 5, A)
    with pytest.raises(CommandError) as raised:
        call_command("emq_doctor", "--queue", "default")
    assert raised.value.returncode == 1
    assert f"depth: {A}" in capsys.readouterr().out
    call_command("emq_doctor", "--queue", "default", "--repair")
    out = capsys.readouterr().out
    assert "after the repair: 0 problem(s)" in out
    check_invariants(queue)


def test_emq_doctor_refuses_an_unknown_queue(emq: redis.Redis) -> None:
    with pytest.raises(CommandError, match="no such queue: nope"):
        call_command("emq_doctor", "--queue", "nope")


def test_emq_doctor_checks_a_sharded_queue_shard_by_shard(
    emq: redis.Redis, settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    settings.EMQ = {**settings.EMQ, "SHARDS": {"default": 2}}
    queue = backend().engine("default")
    for lane in LANES:
        queue.enqueue(lane, TASK)
    shard = queue.shards[1]
    emq.hset(shard.keys.stats, "pending", 99)
    with pytest.raises(CommandError):
        call_command("emq_doctor")
    out = capsys.readouterr().out
    assert f"total: {shard.keys.stats}" in out
    call_command("emq_doctor", "--repair")
    for part in queue.shards:
        check_invariants(part)


def _anyq(settings: Any) -> FairLanesBackend:
    settings.TASKS = {**settings.TASKS, "anyq": ANYQ}
    found = task_backends["anyq"]
    assert isinstance(found, FairLanesBackend)
    return found


def _registry(r: redis.Redis) -> set[str]:
    return {text(m) for m in r.smembers(QUEUE_REGISTRY)}


def test_emq_doctor_removes_registry_names_of_queues_holding_nothing(
    emq: redis.Redis, settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ghost`` holds no key, ``idle`` only a worker's heartbeat (a worker
    serving a queue writes one there), ``bad name!`` is no queue name: reported,
    and removed by ``--repair``; ``photos`` holds a job and stays."""
    anyq = _anyq(settings)
    with in_lane(A):
        job = tasks.add.using(backend="anyq", queue_name="photos").enqueue(1, 2)
    emq.sadd(QUEUE_REGISTRY, "ghost", "idle", "bad name!", b"\xff\xfe")  # the last: no UTF-8
    emq.hset(anyq.engine("idle").shards[0].keys.workers, "w:1", "{}")
    with pytest.raises(CommandError) as raised:
        call_command("emq_doctor")
    assert raised.value.returncode == 1
    out = capsys.readouterr().out
    assert "registry-empty: ghost (its queue holds no keys)" in out
    assert "registry-empty: idle" in out
    assert "registry-name: emq:queues (not a queue name: 'bad name!')" in out
    assert "registry-empty: photos" not in out
    assert len(emq.smembers(QUEUE_REGISTRY)) == 5  # the audit changed nothing

    call_command("emq_doctor", "--repair")
    out = capsys.readouterr().out
    assert "emq:queues: mended 4 thing(s)" in out
    assert "emq:queues: 1 names; after the repair: 0 problem(s)" in out
    assert _registry(emq) == {"photos"}
    assert anyq.get_result(job.id) == job
    call_command("emq_doctor")  # clean: no error


def test_a_job_arriving_while_its_name_is_removed_puts_it_back(
    emq: redis.Redis, settings: Any
) -> None:
    """The repair removes an empty queue's name, then looks at the queue again:
    a job enqueued between the two looks (by a process that registered the name
    before, so sends no SADD) puts the name back."""
    anyq = _anyq(settings)
    emq.sadd(QUEUE_REGISTRY, "late")
    looks = []

    def shards(name: str) -> tuple[Queue, ...]:
        looks.append(name)
        if len(looks) == 2:  # the second look: after the SREM
            anyq.engine(name).enqueue(A, TASK)
        return shards_of(anyq.engine(name))

    found, after = RegistryDoctor(emq, QUEUE_REGISTRY, shards).repair()
    assert [str(f) for f in found.findings] == ["registry-empty: late (its queue holds no keys)"]
    assert found.mended == 0
    assert after.problems == 0
    assert _registry(emq) == {"late"}


def test_emq_doctor_rebuilds_a_registry_of_the_wrong_type(
    emq: redis.Redis, settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A registry that is not a set is reported (the audit of the other queues
    goes on); ``--repair`` deletes it and rebuilds it from the queues holding
    keys, but those a backend lists in its own ``QUEUES``."""
    _anyq(settings)
    with in_lane(A):
        tasks.add.using(backend="anyq", queue_name="photos").enqueue(1, 2)
        tasks.add.using(backend="anyq", queue_name="mail").enqueue(1, 2)
        tasks.add.enqueue(1, 2)  # the default backend's queue "default"
    emq.delete(QUEUE_REGISTRY)
    emq.set(QUEUE_REGISTRY, "not a set")
    with pytest.raises(CommandError):
        call_command("emq_doctor")
    out = capsys.readouterr().out
    assert "registry-type: emq:queues (a string, not a set)" in out
    assert "default: " in out  # the other queues were audited
    call_command("emq_doctor", "--repair")
    out = capsys.readouterr().out
    assert "rebuilt from the keyspace: 2 name(s)" in out
    assert _registry(emq) == {"photos", "mail"}
